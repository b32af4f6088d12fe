//! One session's queue toward its client, bounded in bytes as well as in messages: a client that does not read
//! while its upstream sends large messages must not grow toolgate without bound (issue 10: 1 MB log lines took a
//! gateway from 16 MB to 1.1 GB).
//!
//! Notifications (progress, log lines, unsolicited messages) are offered: over the budget they are dropped,
//! counted in `toolgate_client_messages_dropped_total`, and logged once per session. Responses and requests wait
//! for room, for [`STALL_TIMEOUT`] at most; a client that reads nothing for that long gets its session closed
//! (never another session blocked). One message larger than the whole budget still goes when the queue is empty,
//! so the budget never makes an answer undeliverable.
//!
//! The budget is one per session across every queue that holds bytes for the client: the transport counts what it
//! took from the channel and still holds (an HTTP request's stream, the GET stream, its backlog) in the session's
//! [`HeldBytes`], and room is judged on both. A client that stops reading therefore stops the flow at the budget
//! wherever its bytes wait, and a response that finds no room for [`STALL_TIMEOUT`] ends the session (counted in
//! `toolgate_client_sessions_stalled_total`).
//!
//! The bytes queued in the channel are known without the transport's help: messages leave the channel in the order they entered
//! it, so the sizes of the messages sent are kept in the same order, and those no longer in the channel (its
//! capacity says how many are) are the oldest. Nothing here reads or writes a socket; sizes are estimated from the
//! JSON value (string lengths and structure), not by serializing it.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use serde_json::Value;
use tokio::sync::mpsc;

use crate::session::{ClientBound, HeldBytes};

/// How long a response or request waits for the client to make room before the session is given up.
pub(crate) const STALL_TIMEOUT: Duration = Duration::from_secs(60);
/// How often a waiting response looks for room (only while the client is not reading).
const ROOM_POLL: Duration = Duration::from_millis(20);

/// Why a message could not be queued.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Undelivered {
    /// The client's side of the session is gone.
    Closed,
    /// The client read nothing for [`STALL_TIMEOUT`].
    Stalled,
}

/// The sending end of one session's queue toward its client.
pub(crate) struct Outbox {
    sender: mpsc::Sender<ClientBound>,
    max_messages: usize,
    max_bytes: usize,
    queued: Mutex<Queued>,
    dropped: metrics::Counter,
    /// Sessions given up because their client read nothing for [`STALL_TIMEOUT`].
    stalled: metrics::Counter,
    /// What the transport holds for this client beyond the channel (see the module's documentation).
    held: HeldBytes,
    warned: AtomicBool,
}

/// The sizes of the messages that may still be in the channel, oldest first, and their sum.
#[derive(Default)]
struct Queued {
    sizes: VecDeque<usize>,
    bytes: usize,
}

impl Outbox {
    /// A queue over `sender` (whose capacity is its message bound) holding at most `max_bytes` (estimated) with
    /// what the transport holds; `dropped` counts the notifications dropped, `stalled` the sessions given up.
    pub(crate) fn new(
        sender: mpsc::Sender<ClientBound>,
        max_bytes: usize,
        dropped: metrics::Counter,
        stalled: metrics::Counter,
    ) -> Outbox {
        let max_messages = sender.max_capacity();
        Outbox {
            sender,
            max_messages,
            max_bytes,
            queued: Mutex::new(Queued::default()),
            dropped,
            stalled,
            held: HeldBytes::default(),
            warned: false.into(),
        }
    }

    /// The count the transport adds what it holds for this client to.
    pub(crate) fn held(&self) -> HeldBytes {
        self.held.clone()
    }

    /// The bytes (estimated) queued for this client now: in the channel and held by the transport.
    pub(crate) fn queued_bytes(&self) -> usize {
        self.lock(0).bytes.saturating_add(self.held.get())
    }

    /// The queued sizes, brought up to date. `reserved` is how many channel slots the caller holds (a permit
    /// counts against the capacity before its message is in the channel).
    fn lock(&self, reserved: usize) -> MutexGuard<'_, Queued> {
        let mut queued = self.queued.lock().unwrap_or_else(PoisonError::into_inner);
        // What the client took is no longer in the channel: the oldest sizes. Another sender's permit, reserved
        // but not yet used, only makes this count high for a moment (the budget errs toward holding back).
        let in_channel = self.max_messages.saturating_sub(self.sender.capacity()).saturating_sub(reserved);
        while queued.sizes.len() > in_channel {
            let size = queued.sizes.pop_front().unwrap_or(0);
            queued.bytes = queued.bytes.saturating_sub(size);
        }
        queued
    }

    fn has_room(&self, queued: &Queued, size: usize) -> bool {
        let bytes = queued.bytes.saturating_add(self.held.get());
        bytes == 0 || bytes.saturating_add(size) <= self.max_bytes
    }

    /// Queues a notification without waiting; drops it (counted, logged once) when the client is not reading, and
    /// says whether it was queued.
    pub(crate) fn offer(&self, session: &str, bound: ClientBound) -> bool {
        let size = approximate_bytes(message_of(&bound));
        let mut queued = self.lock(0);
        if self.has_room(&queued, size) && self.sender.try_send(bound).is_ok() {
            queued.sizes.push_back(size);
            queued.bytes += size;
            return true;
        }
        drop(queued);
        self.dropped.increment(1);
        if !self.warned.swap(true, Ordering::Relaxed) {
            tracing::warn!(
                session,
                max_bytes = self.max_bytes,
                "the client is not reading: dropping notifications for it (counted in \
                 toolgate_client_messages_dropped_total; logged once per session)"
            );
        }
        false
    }

    /// Queues a response or request, waiting for room for [`STALL_TIMEOUT`] at most.
    pub(crate) async fn send(&self, bound: ClientBound) -> Result<(), Undelivered> {
        let size = approximate_bytes(message_of(&bound));
        let deadline = tokio::time::Instant::now() + STALL_TIMEOUT;
        loop {
            let permit = match tokio::time::timeout_at(deadline, self.sender.reserve()).await {
                Err(_) => return Err(self.stall()),
                Ok(Err(_)) => return Err(Undelivered::Closed),
                Ok(Ok(permit)) => permit,
            };
            {
                let mut queued = self.lock(1);
                if self.has_room(&queued, size) {
                    // Under the lock, so the sizes keep the channel's order.
                    permit.send(bound);
                    queued.sizes.push_back(size);
                    queued.bytes += size;
                    return Ok(());
                }
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(self.stall());
            }
            tokio::time::sleep(ROOM_POLL).await;
        }
    }
}

impl Outbox {
    fn stall(&self) -> Undelivered {
        self.stalled.increment(1);
        Undelivered::Stalled
    }
}

fn message_of(bound: &ClientBound) -> &Value {
    match bound {
        ClientBound::Response { message, .. } | ClientBound::Related { message, .. } => message,
        ClientBound::Unsolicited(message) => message,
    }
}

pub(crate) use toolgate_upstream::jsonrpc::approximate_bytes;

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn note(bytes: usize) -> ClientBound {
        ClientBound::Unsolicited(json!({"method": "notifications/message", "params": {"data": "x".repeat(bytes)}}))
    }

    #[tokio::test]
    async fn notifications_past_the_byte_budget_are_dropped_until_the_client_reads() {
        let (sender, mut receiver) = mpsc::channel(1024);
        let outbox = Outbox::new(sender, 10_000, metrics::Counter::noop(), metrics::Counter::noop());
        for _ in 0..5 {
            outbox.offer("s", note(4_000));
        }
        let mut taken = 0;
        while receiver.try_recv().is_ok() {
            taken += 1;
        }
        assert_eq!(taken, 2, "two 4 kB notes fit in 10 kB, a third does not");
        outbox.offer("s", note(4_000));
        assert!(receiver.try_recv().is_ok(), "reading made room");
        // One message larger than the budget still goes through an empty queue.
        assert_eq!(outbox.send(note(50_000)).await, Ok(()));
        assert!(receiver.try_recv().is_ok());
    }

    #[test]
    fn sizes_are_close_to_the_serialized_length() {
        let value = json!({"jsonrpc": "2.0", "id": 7, "result": {"content": [{"type": "text", "text": "hello"}]}});
        let exact = value.to_string().len();
        let estimate = approximate_bytes(&value);
        assert!(estimate >= exact / 2 && estimate <= exact * 2, "{estimate} vs {exact}");
    }
}
