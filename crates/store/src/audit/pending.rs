//! The row of a call in flight: made durable before the call is forwarded, completed with its outcome after.
//!
//! A forwarded call gets one audit row, not a "call" row and a "result" row: the row is journaled before the call
//! leaves toolgate (so a crash keeps it) and reaches the database once, with the outcome and duration, when the
//! call ends. While the call runs it holds no place in the writer's queue (a stuck upstream must not fill it for
//! everyone); completing hands the row to the writer's completion channel, which never waits and never refuses,
//! and whose length the writer's admission rule bounds. Dropped without an outcome (the call was abandoned: its
//! task was dropped before the upstream answered), the row is committed with the outcome `abandoned`.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::SystemTime;

use tokio::sync::mpsc;

use super::chain::PreparedRow;
use super::journal::JournalTicket;
use super::writer::{AuditWriter, Command, Counters};
use crate::time::format_rfc3339;

/// The outcome of a call whose handle was dropped before it finished.
pub const ABANDONED_OUTCOME: &str = "abandoned";

/// A call's audit row waiting for the call's outcome; see the module documentation.
#[derive(Debug)]
#[must_use = "a pending call row is written when finished or dropped; keep it until the call ends"]
pub struct PendingCall {
    state: State,
}

#[derive(Debug)]
enum State {
    /// In the journal; the database gets the completed row through the completion channel.
    Journaled {
        completions: mpsc::UnboundedSender<Command>,
        counters: Arc<Counters>,
        row: Box<PreparedRow>,
        journal: JournalTicket,
    },
    /// Already committed (a store without a journal): the outcome becomes a "result" row of its own.
    Committed {
        writer: AuditWriter,
        row: Box<PreparedRow>,
    },
    Done,
}

impl PendingCall {
    pub(crate) fn journaled(
        completions: mpsc::UnboundedSender<Command>,
        counters: Arc<Counters>,
        row: Box<PreparedRow>,
        journal: JournalTicket,
    ) -> Self {
        PendingCall { state: State::Journaled { completions, counters, row, journal } }
    }

    pub(crate) fn committed(writer: AuditWriter, row: Box<PreparedRow>) -> Self {
        PendingCall { state: State::Committed { writer, row } }
    }

    /// Records how the call ended (`ok`, `is_error`, `jsonrpc_error`, `cancelled`, ...) and how long it took.
    pub fn finish(mut self, outcome: &str, duration_us: u64) {
        let duration = i64::try_from(duration_us).unwrap_or(i64::MAX);
        match std::mem::replace(&mut self.state, State::Done) {
            State::Journaled { completions, counters, mut row, journal } => {
                row.row.outcome = Some(outcome.to_owned());
                row.row.duration_us = Some(duration);
                complete(&completions, &counters, row, journal);
            }
            State::Committed { writer, mut row } => {
                row.row.kind = super::AuditKind::Result.as_str().to_owned();
                row.row.time = format_rfc3339(SystemTime::now());
                row.row.outcome = Some(outcome.to_owned());
                row.row.duration_us = Some(duration);
                row.row.args_digest = None;
                row.json.reasons = None;
                row.json.args = None;
                // A full queue is counted and logged by `queue_row`; the call row itself is already committed.
                let _ = writer.queue_row(row);
            }
            State::Done => {}
        }
    }
}

/// Hands a completed row to the writer. If the writer has stopped (the store was closed under a running call) the
/// row stays in the journal, which the next open recovers.
fn complete(
    completions: &mpsc::UnboundedSender<Command>,
    counters: &Counters,
    row: Box<PreparedRow>,
    journal: JournalTicket,
) {
    counters.completions.fetch_add(1, Ordering::Relaxed);
    if completions.send(Command::Append { row, reply: None, journal: Some(journal) }).is_err() {
        counters.completions.fetch_sub(1, Ordering::Relaxed);
        tracing::warn!("the audit writer has stopped; a call's row stays in the journal until the next start");
    }
}

impl Drop for PendingCall {
    fn drop(&mut self) {
        if let State::Journaled { completions, counters, mut row, journal } =
            std::mem::replace(&mut self.state, State::Done)
        {
            row.row.outcome = Some(ABANDONED_OUTCOME.to_owned());
            complete(&completions, &counters, row, journal);
        }
    }
}
