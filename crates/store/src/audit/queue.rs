//! What the writer's handle, a call's pending row and the writer thread share: the commands on the writer's queues
//! and the counters every side reads and moves.
//!
//! Below all three (`writer` makes the queues, `pending` completes a call's row into one, `batches` drains them),
//! so none of them names another for these. Types only: nothing here sends, writes or waits.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, AtomicUsize};

use tokio::sync::{Notify, oneshot};

use super::AuditReceipt;
use super::chain::PreparedRow;
use super::journal::JournalTicket;
use crate::error::StoreError;

/// Where a row's commit, or why it failed, is answered to the caller waiting for it.
pub(crate) type Reply = oneshot::Sender<Result<AuditReceipt, StoreError>>;

/// What the writer's queues carry: a row to append (with whoever waits for it and where it is journaled), or a
/// flush to answer once everything before it is committed.
pub(crate) enum Command {
    Append { row: Box<PreparedRow>, reply: Option<Reply>, journal: Option<JournalTicket> },
    Flush(oneshot::Sender<()>),
}

impl std::fmt::Debug for Command {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Command::Append { row, reply, journal } => {
                write!(f, "Append({}, durable: {}, journaled: {})", row.row.kind, reply.is_some(), journal.is_some())
            }
            Command::Flush(_) => write!(f, "Flush"),
        }
    }
}

/// What the handle and the writer thread share.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub(crate) written: AtomicU64,
    pub(crate) failed: AtomicU64,
    pub(crate) rejected: AtomicU64,
    pub(crate) pruned: AtomicU64,
    /// Completed call rows handed to the writer and not yet committed.
    pub(crate) completions: AtomicUsize,
    /// Why the writer's last attempt failed, while it keeps failing.
    pub(crate) failure: Mutex<Option<String>>,
    /// Woken after every batch, so a call waiting for room looks again.
    pub(crate) room: Notify,
    pub(crate) database_bytes: AtomicU64,
    /// `u64::MAX` until measured.
    pub(crate) disk_free: AtomicU64,
}

impl Counters {
    pub(crate) fn new() -> Counters {
        Counters { disk_free: AtomicU64::new(u64::MAX), ..Counters::default() }
    }

    /// The writer's current failure, if it is failing.
    pub(crate) fn failure(&self) -> Option<String> {
        self.failure.lock().ok().and_then(|failure| failure.clone())
    }

    /// Records whether the last attempt failed; returns the failure it replaces.
    pub(crate) fn set_failure(&self, failure: Option<String>) -> Option<String> {
        match self.failure.lock() {
            Ok(mut current) => std::mem::replace(&mut *current, failure),
            Err(_) => None,
        }
    }
}
