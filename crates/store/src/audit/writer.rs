//! The audit writer's handle: what the call path uses to queue rows, and the admission rule that keeps the rows
//! waiting for the disk bounded.
//!
//! The call path never waits on the disk except where it must: [`AuditWriter::try_record`] only queues (a full
//! queue is an error the caller sees, never a silent drop), [`AuditWriter::record_durable`] returns once the
//! transaction holding the row has committed, and [`AuditWriter::record_journaled`] — the row of a call about to
//! be forwarded — and [`AuditWriter::record_waiting`] — the row of a call put to a person — return once the row is
//! in the journal. A call in flight holds no place in the queue: its row
//! comes back, completed, through a channel of its own when the call ends, and only rows that wait for the writer
//! count against the queue's capacity. So calls stuck at a slow upstream never refuse calls to another one; only a
//! writer that falls behind or fails does, and the refusal says which. The writer itself runs in `batches`.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use serde::Serialize;
use tokio::sync::{mpsc, oneshot};

use super::batches::{self, WriterSetup};
use super::chain::PreparedRow;
use super::journal::Journal;
use super::pending::PendingCall;
use super::prepare::{RowStamp, prepare};
use super::queue::{Command, Counters};
use super::{AuditEntry, AuditReceipt};
use crate::error::{AuditQueueError, StoreError};

/// Counters of the writer, for `status` and metrics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct AuditStats {
    /// Rows waiting for the writer now: queued entries and completed calls not yet committed.
    pub queued: usize,
    /// Rows committed since the store was opened.
    pub written: u64,
    /// Entries that could not be written after retrying (each also logged at error level).
    pub failed: u64,
    /// Entries refused because the writer was behind or failing (the queue was full).
    pub rejected: u64,
    /// True while the writer's last attempt failed (it keeps retrying with backoff).
    pub failing: bool,
    /// Bytes of the database and its write-ahead log, as last measured (every few seconds).
    pub database_bytes: u64,
    /// Bytes free to unprivileged writers on the state directory's filesystem, as last measured.
    pub disk_free_bytes: Option<u64>,
    /// Rows removed by retention since the store was opened.
    pub pruned: u64,
}

/// A cloneable handle to the store's audit writer.
#[derive(Debug, Clone)]
pub struct AuditWriter {
    sender: mpsc::Sender<Command>,
    completions: mpsc::UnboundedSender<Command>,
    capacity: usize,
    stamp: RowStamp,
    counters: Arc<Counters>,
    journal: Option<Arc<Journal>>,
    queue_wait: Duration,
}

impl AuditWriter {
    /// Starts the writer on a thread of its own.
    pub(crate) fn spawn(setup: WriterSetup, stamp: RowStamp, queue_wait: Duration) -> AuditWriter {
        let capacity = setup.capacity.max(1);
        let (sender, receiver) = mpsc::channel(capacity);
        let (completions, completed) = mpsc::unbounded_channel();
        let counters = Arc::new(Counters::new());
        let journal = setup.journal.clone();
        batches::spawn(setup, receiver, completed, Arc::clone(&counters));
        AuditWriter { sender, completions, capacity, stamp, counters, journal, queue_wait }
    }

    /// Queues an entry without waiting. The row is committed shortly after, in a batch; use
    /// [`AuditWriter::record_durable`] when the caller must know it is on disk.
    pub fn try_record(&self, entry: AuditEntry) -> Result<(), AuditQueueError> {
        self.queue_row(Box::new(prepare(entry, &self.stamp)))
    }

    /// Queues a prepared row without waiting; a full queue is counted and reported.
    fn queue_row(&self, row: Box<PreparedRow>) -> Result<(), AuditQueueError> {
        match self.sender.try_send(Command::Append { row, reply: None, journal: None }) {
            Ok(()) => Ok(()),
            Err(mpsc::error::TrySendError::Full(_)) => {
                self.counters.rejected.fetch_add(1, Ordering::Relaxed);
                let failure = self.counters.failure();
                tracing::error!(capacity = self.capacity, failure, "audit record not written: the audit queue is full");
                Err(AuditQueueError::Full { capacity: self.capacity })
            }
            Err(mpsc::error::TrySendError::Closed(_)) => Err(AuditQueueError::Closed),
        }
    }

    /// Appends an entry and returns once its transaction has committed (waiting for queue space if needed).
    ///
    /// Concurrent durable entries share one commit. If the writer keeps failing, the caller gets the error after
    /// a few attempts and the row is not written later (the caller was told it was not).
    pub async fn record_durable(&self, entry: AuditEntry) -> Result<AuditReceipt, StoreError> {
        self.commit_prepared(Box::new(prepare(entry, &self.stamp))).await
    }

    /// Appends a prepared row and returns once its transaction has committed.
    async fn commit_prepared(&self, row: Box<PreparedRow>) -> Result<AuditReceipt, StoreError> {
        let (reply, receipt) = oneshot::channel();
        self.sender
            .send(Command::Append { row, reply: Some(reply), journal: None })
            .await
            .map_err(|_| StoreError::AuditWriterStopped)?;
        receipt.await.map_err(|_| StoreError::AuditWriterStopped)?
    }

    /// Makes a call's row survive the death of the process before returning, without waiting for a database
    /// commit, and returns the handle that completes it with the call's outcome ([`PendingCall::finish`]).
    ///
    /// The row is admitted only while fewer than the queue's capacity of rows wait for the writer; otherwise the
    /// caller waits up to the configured time for room and then gets [`StoreError::AuditWriterFailing`] (the
    /// writer's last error) or [`StoreError::AuditQueueFull`] (the writer is behind), and nothing is journaled (a
    /// journaled row would claim a call that the caller then refuses to forward). Then the row is appended to the
    /// audit journal (one `write` into the page cache); a store opened after a crash appends journaled rows the
    /// database lacks. The call holds no place in the queue while it runs. A store opened without a journal
    /// refuses ([`StoreError::NoAuditJournal`]): committing the row first and its outcome as a second row would give
    /// a call two rows, and holding it until the end would forward a call whose row is nowhere durable.
    pub async fn record_journaled(&self, entry: AuditEntry) -> Result<PendingCall, StoreError> {
        self.journal_entry(entry, false).await
    }

    /// As [`AuditWriter::record_journaled`], for a call that waits for a person: the row is journaled as the person
    /// is asked, marked as not forwarded. Approved, the call forwards with it ([`PendingCall::forwarding`]);
    /// otherwise it is completed with why ([`PendingCall::finish_with`]). Recovered after a crash, it reads
    /// [`crate::UNANSWERED_OUTCOME`]: the call was not forwarded.
    pub async fn record_waiting(&self, entry: AuditEntry) -> Result<PendingCall, StoreError> {
        self.journal_entry(entry, true).await
    }

    async fn journal_entry(&self, entry: AuditEntry, waiting: bool) -> Result<PendingCall, StoreError> {
        let Some(journal) = &self.journal else { return Err(StoreError::NoAuditJournal) };
        self.admit().await?;
        let row = Box::new(prepare(entry, &self.stamp));
        let ticket = journal.append(&row, waiting)?;
        Ok(PendingCall::journaled(
            self.completions.clone(),
            Arc::clone(&self.counters),
            Arc::clone(journal),
            self.stamp.clone(),
            row,
            ticket,
            waiting,
        ))
    }

    /// Whether this writer keeps a journal (the gateway's store), so it can record calls.
    pub fn journaled(&self) -> bool {
        self.journal.is_some()
    }

    /// Waits (up to the configured time) until fewer rows than the queue's capacity wait for the writer.
    async fn admit(&self) -> Result<(), StoreError> {
        // With room, nothing waits: registering with `room` (one `Notify` for every call of the process, behind a
        // lock) is needed only to wait without missing the writer's wake-up, so it is done only when full.
        if self.sender.is_closed() {
            return Err(StoreError::AuditWriterStopped);
        }
        if self.waiting_rows() < self.capacity {
            return Ok(());
        }
        let deadline = tokio::time::Instant::now() + self.queue_wait;
        loop {
            let room = self.counters.room.notified();
            tokio::pin!(room);
            room.as_mut().enable();
            if self.sender.is_closed() {
                return Err(StoreError::AuditWriterStopped);
            }
            let waiting = self.waiting_rows();
            if waiting < self.capacity {
                return Ok(());
            }
            if tokio::time::timeout_at(deadline, room).await.is_err() {
                self.counters.rejected.fetch_add(1, Ordering::Relaxed);
                return Err(match self.counters.failure() {
                    Some(error) => StoreError::AuditWriterFailing { error, waiting },
                    None => StoreError::AuditQueueFull { capacity: self.capacity },
                });
            }
        }
    }

    /// Rows waiting for the writer: queued entries and completed calls not yet committed.
    fn waiting_rows(&self) -> usize {
        self.capacity.saturating_sub(self.sender.capacity()) + self.counters.completions.load(Ordering::Relaxed)
    }

    /// Why the writer is failing, while it is (it retries with backoff and recovers by itself).
    pub fn failure(&self) -> Option<String> {
        self.counters.failure()
    }

    /// Waits until every entry queued before this call, and every call row completed before it, has been
    /// committed (or has failed).
    pub async fn flush(&self) -> Result<(), StoreError> {
        let (done, flushed) = oneshot::channel();
        self.sender.send(Command::Flush(done)).await.map_err(|_| StoreError::AuditWriterStopped)?;
        flushed.await.map_err(|_| StoreError::AuditWriterStopped)
    }

    /// The writer's counters.
    pub fn stats(&self) -> AuditStats {
        let disk_free = self.counters.disk_free.load(Ordering::Relaxed);
        AuditStats {
            queued: self.waiting_rows(),
            written: self.counters.written.load(Ordering::Relaxed),
            failed: self.counters.failed.load(Ordering::Relaxed),
            rejected: self.counters.rejected.load(Ordering::Relaxed),
            failing: self.counters.failure().is_some(),
            database_bytes: self.counters.database_bytes.load(Ordering::Relaxed),
            disk_free_bytes: (disk_free != u64::MAX).then_some(disk_free),
            pruned: self.counters.pruned.load(Ordering::Relaxed),
        }
    }
}
