//! The upstream calls of 2026-07-28 requests held for their retries (`crate::bridge`), as data: what a legacy
//! upstream asked during a bridged call, the call running upstream, and the held calls by id with the key their
//! states are sealed with. It decides nothing and answers nothing; `bridge` does both.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::Value;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;
use toolgate_upstream::{Responder, UpstreamError};

use crate::guard::request_state::ConfirmationBinding;

/// One request a legacy upstream sent during a bridged call, waiting for its answer.
pub(crate) struct UpstreamAsk {
    pub(crate) method: String,
    /// As toolgate would relay it (labelled, sampling context limited, foreign `_meta` removed).
    pub(crate) params: Value,
    /// The input key the upstream named for this request in its `_meta` (`bridge::INPUT_KEY_META`), unchecked.
    pub(crate) key_hint: Option<String>,
    pub(crate) responder: Responder,
}

/// The bridged call running upstream: its requests for the client, its outcome, how to cancel it, and its held
/// mark (set while it waits for its client's retry; the session's bridge of the call shares it).
pub(crate) struct Running {
    pub(crate) asks: mpsc::UnboundedReceiver<UpstreamAsk>,
    pub(crate) outcome: oneshot::Receiver<Option<Result<Value, UpstreamError>>>,
    pub(crate) cancel: CancellationToken,
    pub(crate) held: Arc<AtomicBool>,
}

impl Running {
    /// Marks the call held for its client's retry (`true`) or running again (`false`).
    pub(crate) fn mark_held(&self, held: bool) {
        self.held.store(held, Ordering::Release);
    }
}

/// What a held call's expiry writes besides cancelling it upstream: its audit row (`crate::relay` makes it, so that
/// `bridge` writes none).
pub(crate) type OnExpiry = Box<dyn FnOnce() + Send>;

/// A call waiting for its retry: the upstream's unanswered requests by input key, and what its expiry writes.
pub(crate) struct HeldCall {
    pub(crate) binding: ConfirmationBinding,
    pub(crate) rounds: usize,
    pub(crate) asks: Vec<(String, UpstreamAsk)>,
    pub(crate) running: Running,
    pub(crate) upstream: String,
    pub(crate) on_expiry: OnExpiry,
}

/// The calls this process holds, by id, and the key their states are sealed with.
pub(crate) struct HeldCalls {
    calls: Mutex<HashMap<String, HeldCall>>,
    pub(crate) key: Vec<u8>,
}

impl Default for HeldCalls {
    fn default() -> Self {
        // Random, this process's alone: a held call cannot be resumed elsewhere.
        let key = [uuid::Uuid::new_v4(), uuid::Uuid::new_v4()].iter().flat_map(|id| id.into_bytes()).collect();
        HeldCalls { calls: Mutex::new(HashMap::new()), key }
    }
}

impl HeldCalls {
    /// How many calls are held now.
    pub(crate) fn len(&self) -> usize {
        self.calls.lock().map(|calls| calls.len()).unwrap_or(0)
    }

    /// Holds `call` under `id`.
    pub(crate) fn insert(&self, id: String, call: HeldCall) {
        if let Ok(mut calls) = self.calls.lock() {
            calls.insert(id, call);
        }
    }

    /// Takes the call held under `id` (once: a second take finds nothing).
    pub(crate) fn remove(&self, id: &str) -> Option<HeldCall> {
        self.calls.lock().ok().and_then(|mut calls| calls.remove(id))
    }

    /// Whether a call is held under `id`.
    pub(crate) fn contains(&self, id: &str) -> bool {
        self.calls.lock().map(|calls| calls.contains_key(id)).unwrap_or(false)
    }
}
