//! The audit writer's thread: takes queued entries and completed call rows, appends them in batched transactions
//! (group commit), retries a failing batch with backoff until it is written, and between batches does the upkeep
//! (size measurements, low-disk warnings, retention).
//!
//! A failure is never the end of the writer: a full disk, an IO error or a lock held too long fails one attempt,
//! the connection that saw it is dropped (`append`), and the batch is tried again, 100 ms later doubling up to
//! 2 s, for as long as it takes. Callers waiting for a commit (`record_durable`) get the error after
//! [`WRITE_ATTEMPTS`] and their rows are given up (they were told); every other row — completed calls above all,
//! whose pre-forward rows the journal holds — waits in memory until it is written, while the handle's admission
//! rule refuses new calls, naming the writer's error, once the queue's capacity of rows is waiting. When the disk
//! has room again the next attempt succeeds, the failure is cleared and logged, and calls are admitted again, with
//! no restart. This thread never decides about calls; it only writes.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, SystemTime};

use tokio::sync::mpsc;

use super::AuditReceipt;
use super::append::append;
use super::chain::PreparedRow;
use super::journal::{Journal, JournalTicket};
use super::queue::{Command, Counters, Reply};
use super::retention::{self, Retention};
use crate::backend::Backend;
use crate::error::StoreError;

/// How long a batch nobody waits for gathers more rows before it is committed.
///
/// Each batch wakes the writer and its SQLite thread; on two cores a call that needs a CPU just then waits, so
/// the writer's wake-ups showed as the relay's p99 (5 ms: 200 batches a second, +340-430 us p99 over stdio at one
/// call in flight; 50 ms: +170-190 us, same runs, `toolgate-bench`). Rows reach the database up to 50 ms later;
/// the journal already holds every forwarded call's row, and a full batch is committed at once.
const GROUP_COMMIT_WINDOW: Duration = Duration::from_millis(50);

/// Attempts before callers waiting for a commit are told it failed.
pub(crate) const WRITE_ATTEMPTS: u32 = 3;

/// The first wait after a failed attempt, doubling up to [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_millis(100);

/// The longest wait between attempts: how long after the disk has room again the writer may take to notice.
const MAX_BACKOFF: Duration = Duration::from_secs(2);

/// Everything the writer thread needs.
#[derive(Debug)]
pub(crate) struct WriterSetup {
    pub(crate) backend: Backend,
    pub(crate) capacity: usize,
    pub(crate) batch_max: usize,
    pub(crate) journal: Option<Arc<Journal>>,
    /// The database file (its size and its filesystem's free space are measured).
    pub(crate) database: PathBuf,
    pub(crate) retention: Retention,
    /// How often the upkeep runs.
    pub(crate) upkeep_interval: Duration,
}

/// Starts the writer on a thread of its own, with a single-threaded runtime.
///
/// Among the gateway's tasks the writer would get one turn per round of hundreds of calls under load and fall
/// behind until the queue refuses calls; on its own thread the operating system shares the CPU with it fairly,
/// and its hashing and encoding stay off the relay's workers. If no thread can be started it runs as a task.
pub(crate) fn spawn(
    setup: WriterSetup,
    queue: mpsc::Receiver<Command>,
    completed: mpsc::UnboundedReceiver<Command>,
    counters: Arc<Counters>,
) {
    let writer = run(setup, queue, completed, counters);
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(error) => {
            tracing::warn!(%error, "no runtime for the audit writer's thread; it runs among the gateway's tasks");
            tokio::spawn(writer);
            return;
        }
    };
    let (sender, receiver) = std::sync::mpsc::channel();
    let spawned = std::thread::Builder::new().name("toolgate-audit".into()).spawn(move || {
        if let Ok(writer) = receiver.recv() {
            runtime.block_on(writer);
        }
    });
    match spawned {
        Ok(_) => {
            let _ = sender.send(Box::pin(writer) as std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>);
        }
        Err(error) => {
            tracing::warn!(%error, "no thread for the audit writer; it runs among the gateway's tasks");
            tokio::spawn(writer);
        }
    }
}

/// The writer's periodic upkeep: measures the database and the free disk (warning once when it runs low) and
/// applies the retention policy.
async fn periodic_upkeep(setup: &WriterSetup, counters: &Counters, watch_disk: bool) {
    if setup.retention.is_set() {
        match retention::prune(&setup.backend, &setup.retention, SystemTime::now()).await {
            Ok(report) if report.rows > 0 => {
                counters.pruned.fetch_add(report.rows, Ordering::Relaxed);
                tracing::info!(
                    rows = report.rows,
                    checkpoint_seq = report.checkpoint.as_ref().map(|checkpoint| checkpoint.seq),
                    exported = report.exported.len(),
                    "audit rows pruned by retention"
                );
            }
            Ok(_) => {}
            Err(error) => tracing::error!(%error, "audit retention failed; nothing more was pruned"),
        }
    }
    if watch_disk {
        retention::measure(&setup.database, counters);
    }
}

/// One batch: rows with, for each, who waits for its commit and where it is journaled.
#[derive(Default)]
struct Batch {
    rows: Vec<PreparedRow>,
    replies: Vec<Option<Reply>>,
    tickets: Vec<Option<JournalTicket>>,
    flushes: Vec<tokio::sync::oneshot::Sender<()>>,
}

impl Batch {
    fn take(&mut self, command: Command) {
        match command {
            Command::Append { row, reply, journal } => {
                self.rows.push(*row);
                self.replies.push(reply);
                self.tickets.push(journal);
            }
            Command::Flush(done) => self.flushes.push(done),
        }
    }
}

async fn run(
    setup: WriterSetup,
    mut queue: mpsc::Receiver<Command>,
    mut completed: mpsc::UnboundedReceiver<Command>,
    counters: Arc<Counters>,
) {
    let batch_max = setup.batch_max.max(1);
    // Only the gateway's store (the one with a journal) watches the disk: a `toolgate audit` or `approvals` command
    // has nothing to warn about.
    let watch_disk = setup.journal.is_some();
    if watch_disk {
        retention::measure(&setup.database, &counters);
    }
    let period = setup.upkeep_interval.max(Duration::from_millis(100));
    let mut upkeep = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
    upkeep.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let (mut queue_open, mut completed_open) = (true, true);
    let mut from_queue = Vec::with_capacity(batch_max);
    let mut from_completed = Vec::with_capacity(batch_max);
    while queue_open || completed_open {
        tokio::select! {
            received = queue.recv_many(&mut from_queue, batch_max), if queue_open => queue_open = received > 0,
            received = completed.recv_many(&mut from_completed, batch_max), if completed_open => {
                completed_open = received > 0;
            }
            _ = upkeep.tick() => {
                periodic_upkeep(&setup, &counters, watch_disk).await;
                continue;
            }
        }
        if from_queue.is_empty() && from_completed.is_empty() {
            continue;
        }
        // Group commit: when nobody waits for this batch's commit, gather what arrives in the next moment too, so a
        // busy gateway writes tens of rows per transaction instead of one or two. Nothing on a call path waits for
        // these rows (the pre-forward row is already in the journal).
        let waited_on = from_queue.iter().any(|command| matches!(command, Command::Append { reply: Some(_), .. }));
        if !waited_on && from_queue.len() + from_completed.len() < batch_max {
            tokio::time::sleep(GROUP_COMMIT_WINDOW).await;
            while from_queue.len() + from_completed.len() < batch_max {
                match completed.try_recv() {
                    Ok(command) => from_completed.push(command),
                    Err(_) => match queue.try_recv() {
                        Ok(command) => from_queue.push(command),
                        Err(_) => break,
                    },
                }
            }
        }
        // A flush promises every call completed before it: take all completions waiting now.
        if from_queue.iter().any(|command| matches!(command, Command::Flush(_))) {
            while let Ok(command) = completed.try_recv() {
                from_completed.push(command);
            }
        }
        let mut batch = Batch::default();
        for command in from_completed.drain(..).chain(from_queue.drain(..)) {
            batch.take(command);
        }
        let flushes = std::mem::take(&mut batch.flushes);
        if !batch.rows.is_empty() {
            write_batch(&setup, batch, &counters).await;
        }
        for done in flushes {
            let _ = done.send(());
        }
        counters.room.notify_waiters();
    }
}

/// Writes one batch, retrying until it is written (see the module documentation).
async fn write_batch(setup: &WriterSetup, mut batch: Batch, counters: &Counters) {
    let mut attempt = 1_u32;
    let mut backoff = FIRST_BACKOFF;
    loop {
        match append(&setup.backend, &mut batch.rows, &[], false).await {
            Ok(()) => {
                if let Some(error) = counters.set_failure(None) {
                    tracing::warn!(attempts = attempt, %error, "the audit writer recovered: rows are written again");
                }
                committed(setup, batch, counters);
                return;
            }
            Err(error) => {
                let message = error.to_string();
                let was_failing = counters.set_failure(Some(message.clone())).is_some();
                if attempt == WRITE_ATTEMPTS {
                    give_up_waited_rows(&mut batch, &message, counters);
                    tracing::error!(
                        rows = batch.rows.len(),
                        error = message,
                        "audit rows cannot be written; retrying until they are (new calls are refused while the \
                         rows waiting fill the queue)"
                    );
                } else if !was_failing {
                    tracing::warn!(attempt, error = message, "audit batch failed; retrying");
                }
                if batch.rows.is_empty() {
                    counters.room.notify_waiters();
                    return;
                }
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(MAX_BACKOFF);
                attempt = attempt.saturating_add(1);
            }
        }
    }
}

/// After a commit: counters, the journal's outstanding rows, and the receipts of those waiting.
fn committed(setup: &WriterSetup, batch: Batch, counters: &Counters) {
    counters.written.fetch_add(batch.rows.len() as u64, Ordering::Relaxed);
    let completions = batch.tickets.iter().flatten().count();
    if let Some(journal) = &setup.journal {
        journal.committed(batch.tickets.iter().flatten());
    }
    counters.completions.fetch_sub(completions.min(counters.completions.load(Ordering::Relaxed)), Ordering::Relaxed);
    for (row, reply) in batch.rows.iter().zip(batch.replies) {
        if let Some(reply) = reply {
            // The waiter may have gone away (its call was cancelled); the row is written either way.
            let _ = reply.send(Ok(AuditReceipt { seq: row.row.seq, hash: row.row.hash.clone() }));
        }
    }
}

/// Answers every caller waiting for a commit with the error and drops their rows: they refuse what they were about
/// to do, so writing the row later would record something that did not happen.
fn give_up_waited_rows(batch: &mut Batch, error: &str, counters: &Counters) {
    let mut kept = Batch::default();
    let mut given_up = 0_u64;
    for ((row, reply), ticket) in batch.rows.drain(..).zip(batch.replies.drain(..)).zip(batch.tickets.drain(..)) {
        match reply {
            Some(reply) => {
                given_up += 1;
                let _ = reply.send(Err(StoreError::AuditWrite(error.to_owned())));
            }
            None => {
                kept.rows.push(row);
                kept.replies.push(None);
                kept.tickets.push(ticket);
            }
        }
    }
    counters.failed.fetch_add(given_up, Ordering::Relaxed);
    batch.rows = kept.rows;
    batch.replies = kept.replies;
    batch.tickets = kept.tickets;
}
