//! Server-Sent Events bodies: the stream answering one POSTed request (its related messages, then its response)
//! and the session's GET stream (unsolicited messages), both with keep-alive comments.
//!
//! Each JSON-RPC message is one `event: message` whose `data:` is the compact JSON (which never contains a raw
//! newline). Streams for protocol 2025-11-25 and later open with a priming event (an id and empty data) and give
//! every event a session-unique id. Resumption (`Last-Event-ID`) is not offered: events are not stored. Nothing
//! here decides routing; a stream dropped by its client simply stops being fed.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::time::Duration;

use axum::body::Body;
use axum::http::header::{CACHE_CONTROL, CONTENT_TYPE};
use axum::http::{HeaderValue, StatusCode};
use axum::response::Response;
use bytes::Bytes;
use serde_json::Value;
use tokio::time::{Interval, MissedTickBehavior};
use tokio_util::sync::CancellationToken;

use super::checks::unanswered;
use super::session_table::{InitGuard, Pending, RequestEvent, UnsolicitedStream};

/// How often an idle stream gets a comment line, so intermediaries and clients do not time it out.
const KEEP_ALIVE_PERIOD: Duration = Duration::from_secs(15);
const KEEP_ALIVE: &[u8] = b": keep-alive\n\n";

/// One SSE event carrying a JSON-RPC message.
fn event(id: Option<&str>, message: &Value) -> Bytes {
    let data = message.to_string();
    let text = match id {
        Some(id) => format!("id: {id}\nevent: message\ndata: {data}\n\n"),
        None => format!("event: message\ndata: {data}\n\n"),
    };
    Bytes::from(text)
}

fn keep_alive_interval() -> Interval {
    let mut interval = tokio::time::interval_at(tokio::time::Instant::now() + KEEP_ALIVE_PERIOD, KEEP_ALIVE_PERIOD);
    interval.set_missed_tick_behavior(MissedTickBehavior::Delay);
    interval
}

/// A `200 text/event-stream` response around `body`.
pub(super) fn response(body: Body) -> Response {
    let mut response = Response::new(body);
    *response.status_mut() = StatusCode::OK;
    response.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
    response.headers_mut().insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    response
}

/// The answer to one request, once a related message came before its response.
pub(super) struct RequestStream {
    pending: Pending,
    queued: VecDeque<Bytes>,
    finished: bool,
    with_ids: bool,
    request_id: Value,
    init: Option<InitGuard>,
    keep_alive: Interval,
    shutdown: CancellationToken,
}

enum Step {
    Event(RequestEvent),
    Ended,
    KeepAlive,
    Shutdown,
}

impl RequestStream {
    /// `first` is the related message already received; `priming` opens the stream with a priming event and
    /// numbers every event (protocol 2025-11-25 and later).
    pub(super) fn new(
        pending: Pending,
        request_id: Value,
        first: &Value,
        priming: bool,
        init: Option<InitGuard>,
        shutdown: CancellationToken,
    ) -> Self {
        let mut stream = RequestStream {
            pending,
            queued: VecDeque::new(),
            finished: false,
            with_ids: priming,
            request_id,
            init,
            keep_alive: keep_alive_interval(),
            shutdown,
        };
        if priming {
            let id = stream.pending.session().next_event_id();
            stream.queued.push_back(Bytes::from(format!("id: {id}\ndata:\n\n")));
        }
        let first = stream.frame(first);
        stream.queued.push_back(first);
        stream
    }

    /// A stream that carries only the response (for clients that prefer SSE); `init` is already settled.
    pub(super) fn answered(
        pending: Pending,
        request_id: Value,
        response: &Value,
        priming: bool,
        shutdown: CancellationToken,
    ) -> Self {
        let mut stream = Self::new(pending, request_id, response, priming, None, shutdown);
        stream.finished = true;
        stream
    }

    fn frame(&self, message: &Value) -> Bytes {
        let id = self.with_ids.then(|| self.pending.session().next_event_id());
        event(id.as_deref(), message)
    }

    /// The stream as a response body; it ends after the response (or an error standing in for it).
    pub(super) fn into_body(self) -> Body {
        Body::from_stream(futures::stream::unfold(self, |mut stream| async move {
            if let Some(bytes) = stream.queued.pop_front() {
                return Some((Ok::<_, Infallible>(bytes), stream));
            }
            if stream.finished {
                return None;
            }
            let step = tokio::select! {
                event = stream.pending.next() => event.map_or(Step::Ended, Step::Event),
                _ = stream.keep_alive.tick() => Step::KeepAlive,
                () = stream.shutdown.cancelled() => Step::Shutdown,
            };
            let bytes = match step {
                Step::Event(RequestEvent::Related(message)) => stream.frame(&message),
                Step::Event(RequestEvent::Response(message)) => {
                    stream.finished = true;
                    if let Some(init) = stream.init.as_mut() {
                        init.settle(&message);
                    }
                    stream.frame(&message)
                }
                Step::Ended => {
                    stream.finished = true;
                    stream.frame(&unanswered(&stream.request_id))
                }
                Step::KeepAlive => Bytes::from_static(KEEP_ALIVE),
                Step::Shutdown => return None,
            };
            Some((Ok(bytes), stream))
        }))
    }
}

/// The session's GET stream as a response body; it ends when the session closes or the server stops.
pub(super) fn unsolicited_body(stream: UnsolicitedStream, shutdown: CancellationToken) -> Body {
    let state = (stream, keep_alive_interval(), shutdown);
    Body::from_stream(futures::stream::unfold(state, |(mut stream, mut keep_alive, shutdown)| async move {
        let bytes = tokio::select! {
            message = stream.next() => event(None, &message?),
            _ = keep_alive.tick() => Bytes::from_static(KEEP_ALIVE),
            () = shutdown.cancelled() => return None,
        };
        Some((Ok::<_, Infallible>(bytes), (stream, keep_alive, shutdown)))
    }))
}
