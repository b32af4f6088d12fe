//! The row of a call in flight: made durable before the call is forwarded (or put to a person), completed with its
//! outcome after.
//!
//! A call gets one audit row, not a "call" row and a "result" row: the row is journaled before the call leaves
//! toolgate (so a crash keeps it) and reaches the database once, with the outcome and duration, when the call ends.
//! A call that needs a person's approval is journaled as the person is asked ([`AuditWriter::record_waiting`]);
//! approved, the same row is journaled again as forwarded ([`PendingCall::forwarding`]), so the approved call
//! forwards with its one row; refused, lapsed or withdrawn, that row is completed with why. While the call runs it
//! holds no place in the writer's queue (a stuck upstream must not fill it for everyone); completing hands the row
//! to the writer's completion channel, which never waits and never refuses, and whose length the writer's admission
//! rule bounds. Dropped without an outcome (the call was abandoned: its task was dropped), the row is committed with
//! the outcome `abandoned`, or `unanswered` if the call was still waiting for a person. There is no journal-less
//! form: a store without a journal refuses to record a call ([`crate::StoreError::NoAuditJournal`]).
//!
//! [`AuditWriter::record_waiting`]: crate::AuditWriter::record_waiting

use std::sync::Arc;
use std::sync::atomic::Ordering;

use serde_json::Value;
use tokio::sync::mpsc;

use super::AuditEntry;
use super::chain::{PreparedRow, canonical};
use super::journal::{Journal, JournalTicket};
use super::prepare::{RowStamp, prepare};
use super::queue::{Command, Counters};
use crate::error::StoreError;

/// The outcome of a forwarded call whose handle was dropped before it finished.
pub const ABANDONED_OUTCOME: &str = "abandoned";

/// The outcome of a call that waited for a person and was lost before an answer reached it: its handle was dropped
/// (its task ended), or toolgate stopped or crashed while it waited (journal recovery). It was not forwarded.
pub const UNANSWERED_OUTCOME: &str = "unanswered";

/// A call's audit row waiting for the call's outcome; see the module documentation.
#[derive(Debug)]
#[must_use = "a pending call row is written when finished or dropped; keep it until the call ends"]
pub struct PendingCall {
    state: Option<Journaled>,
}

/// In the journal; the database gets the completed row through the completion channel.
#[derive(Debug)]
struct Journaled {
    completions: mpsc::UnboundedSender<Command>,
    counters: Arc<Counters>,
    journal: Arc<Journal>,
    stamp: RowStamp,
    row: Box<PreparedRow>,
    ticket: JournalTicket,
    /// The call waits for a person and has not been forwarded.
    waiting: bool,
}

impl PendingCall {
    pub(crate) fn journaled(
        completions: mpsc::UnboundedSender<Command>,
        counters: Arc<Counters>,
        journal: Arc<Journal>,
        stamp: RowStamp,
        row: Box<PreparedRow>,
        ticket: JournalTicket,
        waiting: bool,
    ) -> Self {
        PendingCall { state: Some(Journaled { completions, counters, journal, stamp, row, ticket, waiting }) }
    }

    /// Whether the call still waits for a person (journaled by `record_waiting`, not yet [`PendingCall::forwarding`]).
    pub fn is_waiting(&self) -> bool {
        self.state.as_ref().is_some_and(|state| state.waiting)
    }

    /// The waiting call was approved and is about to be forwarded: its row becomes `entry` (the decision with the
    /// person's approval, the tool as it is now; the time stays the row's own) and is journaled again, as forwarded,
    /// before this returns. On an error the row stays as it was, still waiting.
    pub fn forwarding(&mut self, entry: AuditEntry) -> Result<(), StoreError> {
        let Some(state) = &mut self.state else { return Ok(()) };
        let mut row = Box::new(prepare(entry, &state.stamp));
        // Recovery recognises a committed row by its time (with kind, session, tool and arguments): keep it.
        row.row.time.clone_from(&state.row.row.time);
        state.ticket = state.journal.append_again(&row, &state.ticket, false)?;
        state.row = row;
        state.waiting = false;
        Ok(())
    }

    /// Records how the call ended (`ok`, `is_error`, `jsonrpc_error`, `cancelled`, ...) and how long it took.
    pub fn finish(self, outcome: &str, duration_us: u64) {
        self.finish_with(outcome, duration_us, None);
    }

    /// As [`PendingCall::finish`], with a `detail` object saying more (why a waiting call was not approved).
    pub fn finish_with(mut self, outcome: &str, duration_us: u64, detail: Option<Value>) {
        let Some(mut state) = self.state.take() else { return };
        state.row.row.outcome = Some(outcome.to_owned());
        state.row.row.duration_us = Some(i64::try_from(duration_us).unwrap_or(i64::MAX));
        if let Some(detail) = detail {
            // A detail that cannot be put in canonical form is left out rather than the row lost.
            state.row.json.detail = canonical(Some(&detail)).unwrap_or_default();
        }
        complete(state);
    }
}

/// Hands a completed row to the writer. If the writer has stopped (the store was closed under a running call) the
/// row stays in the journal, which the next open recovers.
fn complete(state: Journaled) {
    let Journaled { completions, counters, row, ticket, .. } = state;
    counters.completions.fetch_add(1, Ordering::Relaxed);
    if completions.send(Command::Append { row, reply: None, journal: Some(ticket) }).is_err() {
        counters.completions.fetch_sub(1, Ordering::Relaxed);
        tracing::warn!("the audit writer has stopped; a call's row stays in the journal until the next start");
    }
}

impl Drop for PendingCall {
    fn drop(&mut self) {
        if let Some(mut state) = self.state.take() {
            let outcome = if state.waiting { UNANSWERED_OUTCOME } else { ABANDONED_OUTCOME };
            state.row.row.outcome = Some(outcome.to_owned());
            complete(state);
        }
    }
}
