//! What every transport gives the connection: a sender for outgoing messages, a receiver of incoming ones, and
//! diagnostics about what the server did besides speaking JSON-RPC (stderr, non-JSON output).
//!
//! The contract below both transports: it names neither (their closers and HTTP's direct poster travel beside a
//! [`Transport`] in `started`, above them).

use std::collections::{HashMap, VecDeque};
use std::pin::Pin;
use std::sync::{Arc, Mutex, OnceLock};

use futures::Stream;
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use crate::error::UpstreamError;
use crate::token_exchange::OnBehalf;

/// Where a request's response (or its failure) goes.
pub(crate) type ResponseSender = oneshot::Sender<Result<Value, UpstreamError>>;

/// Requests waiting for their responses, by toolgate's id. Shared by the connection (which registers, cancels and
/// routes) and the HTTP transport, whose POST tasks complete a request straight from a plain JSON answer instead of
/// handing it to the router task: one task hop fewer per call. Taking an entry is the only way to answer it, so a
/// response arriving both ways, or after a cancel, is delivered at most once.
#[derive(Debug, Default)]
pub(crate) struct PendingResponses {
    map: Mutex<HashMap<u64, ResponseSender>>,
}

impl PendingResponses {
    pub(crate) fn insert(&self, id: u64, sender: ResponseSender) {
        if let Ok(mut map) = self.map.lock() {
            map.insert(id, sender);
        }
    }

    pub(crate) fn take(&self, id: u64) -> Option<ResponseSender> {
        self.map.lock().ok().and_then(|mut map| map.remove(&id))
    }

    pub(crate) fn take_all(&self) -> HashMap<u64, ResponseSender> {
        self.map.lock().map(|mut map| std::mem::take(&mut *map)).unwrap_or_default()
    }
}

/// The callers on whose behalf requests are about to be posted, by toolgate's id: set by the connection before it
/// hands a request to the transport, taken by the HTTP POST that carries it, which sends that caller's exchanged
/// token on it alone. Only a token exchange upstream's connection fills it. A message leaves the queue as plain
/// JSON (as every transport's does), so the caller travels beside it, by id, instead of in it.
#[derive(Debug, Default)]
pub(crate) struct Behalves {
    map: Mutex<HashMap<u64, OnBehalf>>,
}

impl Behalves {
    pub(crate) fn insert(&self, id: u64, caller: OnBehalf) {
        if let Ok(mut map) = self.map.lock() {
            map.insert(id, caller);
        }
    }

    pub(crate) fn take(&self, id: u64) -> Option<OnBehalf> {
        self.map.lock().ok().and_then(|mut map| map.remove(&id))
    }
}

/// Something that arrived from the server.
#[derive(Debug)]
pub(crate) enum Inbound {
    /// One JSON-RPC message (batches are split by the transport).
    Message {
        /// The message.
        message: Value,
        /// The id of toolgate's request whose HTTP response stream carried it, when the transport knows.
        related: Option<Value>,
    },
    /// One request failed in transport (HTTP status, connection refused); it gets no response.
    RequestFailed {
        /// The id of the request that failed.
        id: Value,
        /// Why.
        error: UpstreamError,
    },
    /// The transport ended or failed; nothing more will arrive.
    Ended(UpstreamError),
}

/// What arrives from the server, in order.
pub(crate) type InboundStream = Pin<Box<dyn Stream<Item = Inbound> + Send>>;

/// An inbound stream over a channel (for transports whose messages arrive on several tasks, like HTTP).
pub(crate) fn channel_stream(receiver: mpsc::Receiver<Inbound>) -> InboundStream {
    Box::pin(futures::stream::unfold(receiver, |mut receiver| async move {
        receiver.recv().await.map(|item| (item, receiver))
    }))
}

/// A started transport.
pub(crate) struct Transport {
    /// Messages to send, in order.
    pub(crate) outbound: mpsc::Sender<Value>,
    /// Messages received, read by the connection's router task itself (no hand-off between tasks per message).
    pub(crate) inbound: InboundStream,
    /// What the server did besides JSON-RPC.
    pub(crate) diagnostics: Arc<Diagnostics>,
    /// The protocol version agreed in `initialize`, for transports that send it in headers.
    pub(crate) negotiated_version: Arc<OnceLock<String>>,
    /// Fired to stop writing (stdio: closes stdin).
    pub(crate) shutdown: CancellationToken,
}

const STDERR_TAIL_LINES: usize = 20;
const SAMPLE_CHARS: usize = 160;

/// Evidence for error messages: the last stderr lines and output that was not JSON-RPC.
#[derive(Debug, Default)]
pub(crate) struct Diagnostics {
    inner: Mutex<DiagnosticsInner>,
}

#[derive(Debug, Default)]
struct DiagnosticsInner {
    stderr_tail: VecDeque<String>,
    non_json_lines: usize,
    first_non_json: Option<String>,
}

impl Diagnostics {
    pub(crate) fn record_stderr(&self, line: &str) {
        if let Ok(mut inner) = self.inner.lock() {
            if inner.stderr_tail.len() == STDERR_TAIL_LINES {
                inner.stderr_tail.pop_front();
            }
            inner.stderr_tail.push_back(truncate(line));
        }
    }

    pub(crate) fn record_non_json(&self, line: &str) {
        if let Ok(mut inner) = self.inner.lock() {
            inner.non_json_lines += 1;
            if inner.first_non_json.is_none() {
                inner.first_non_json = Some(truncate(line));
            }
        }
    }

    /// One line for an error message; empty when there is nothing to say.
    pub(crate) fn describe(&self) -> String {
        let Ok(inner) = self.inner.lock() else { return String::new() };
        let mut parts = Vec::new();
        if inner.non_json_lines > 0 {
            parts.push(format!(
                "the server wrote {} line(s) to stdout that are not JSON-RPC (first: {:?})",
                inner.non_json_lines,
                inner.first_non_json.as_deref().unwrap_or_default()
            ));
        }
        if !inner.stderr_tail.is_empty() {
            let tail: Vec<&str> = inner.stderr_tail.iter().rev().take(3).rev().map(String::as_str).collect();
            parts.push(format!("last stderr: {}", tail.join(" | ")));
        }
        parts.join("; ")
    }
}

fn truncate(line: &str) -> String {
    let mut text: String = line.chars().take(SAMPLE_CHARS).collect();
    if line.chars().nth(SAMPLE_CHARS).is_some() {
        text.push('…');
    }
    text
}

/// Splits what arrived into messages: an object is one message, an array (a 2025-03-26 batch) is several.
pub(crate) fn split_batch(value: Value) -> Vec<Value> {
    match value {
        Value::Array(items) => items,
        other => vec![other],
    }
}
