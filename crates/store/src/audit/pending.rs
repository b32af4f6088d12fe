//! The row of a call in flight: made durable before the call is forwarded, completed with its outcome after.
//!
//! A forwarded call gets one audit row, not a "call" row and a "result" row: the row is journaled before the call
//! leaves toolgate (so a crash keeps it) and reaches the database once, with the outcome and duration, when the
//! call ends. The handle holds a reserved slot of the writer's queue, so completing never waits and never fails
//! for lack of room; dropped without an outcome (the call was abandoned), it queues the row as journaled.

use std::time::SystemTime;

use tokio::sync::mpsc;

use super::chain::PreparedRow;
use super::journal::JournalTicket;
use super::writer::{AuditWriter, Command};
use crate::time::format_rfc3339;

/// A call's audit row waiting for the call's outcome; see the module documentation.
#[derive(Debug)]
#[must_use = "a pending call row is written when finished or dropped; keep it until the call ends"]
pub struct PendingCall {
    state: State,
}

#[derive(Debug)]
enum State {
    /// In the journal; the database gets the completed row through the reserved slot.
    Journaled {
        permit: mpsc::OwnedPermit<Command>,
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
    pub(crate) fn journaled(permit: mpsc::OwnedPermit<Command>, row: Box<PreparedRow>, journal: JournalTicket) -> Self {
        PendingCall { state: State::Journaled { permit, row, journal } }
    }

    pub(crate) fn committed(writer: AuditWriter, row: Box<PreparedRow>) -> Self {
        PendingCall { state: State::Committed { writer, row } }
    }

    /// Records how the call ended (`ok`, `is_error`, `jsonrpc_error`, `cancelled`, ...) and how long it took.
    pub fn finish(mut self, outcome: &str, duration_us: u64) {
        let duration = i64::try_from(duration_us).unwrap_or(i64::MAX);
        match std::mem::replace(&mut self.state, State::Done) {
            State::Journaled { permit, mut row, journal } => {
                row.row.outcome = Some(outcome.to_owned());
                row.row.duration_us = Some(duration);
                permit.send(Command::Append { row, reply: None, journal: Some(journal) });
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

impl Drop for PendingCall {
    fn drop(&mut self) {
        if let State::Journaled { permit, row, journal } = std::mem::replace(&mut self.state, State::Done) {
            permit.send(Command::Append { row, reply: None, journal: Some(journal) });
        }
    }
}
