//! The audit writer: a bounded queue in front of one background task that appends rows in batched transactions.
//!
//! The call path never waits on the disk except where it must: [`AuditWriter::try_record`] only queues (a full
//! queue is an error the caller sees, never a silent drop), and [`AuditWriter::record_durable`] — for the row
//! written *before* a call is forwarded — returns once the transaction holding the row has committed, so a call
//! that went upstream always has its row after a crash. Appends run under `BEGIN IMMEDIATE` and read the chain's
//! tail inside the transaction, so several processes may append to one file without forking the chain.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use serde::Serialize;
use serde_json::Value;
use sqlx::Row;
use tokio::sync::{mpsc, oneshot};
use toolgate_core::fingerprint::digest_bytes;
use toolgate_core::jcs;

use super::chain::{GENESIS_HASH, JsonColumns, PreparedRow, row_hash_with};
use super::journal::{Journal, JournalTicket};
use super::pending::PendingCall;
use super::{ArgumentRedaction, AuditEntry, AuditReceipt, AuditRow, verdict_name};
use crate::Backend;
use crate::error::{AuditQueueError, StoreError};
use crate::time::format_rfc3339;

/// Rows per INSERT statement (18 bound values each; SQLite allows 32766 per statement).
const INSERT_CHUNK: usize = 256;

/// How long a batch nobody waits for gathers more rows before it is committed.
///
/// Each batch wakes the writer and its SQLite thread; on two cores a call that needs a CPU just then waits, so
/// the writer's wake-ups showed as the relay's p99 (5 ms: 200 batches a second, +340-430 us p99 over stdio at one
/// call in flight; 50 ms: +170-190 us, same runs, `toolgate-bench`). Rows reach the database up to 50 ms later;
/// the journal already holds every forwarded call's row, and a full batch is committed at once.
const GROUP_COMMIT_WINDOW: Duration = Duration::from_millis(50);

/// Attempts per batch before its entries are reported as failed.
const WRITE_ATTEMPTS: u32 = 3;

type Reply = oneshot::Sender<Result<AuditReceipt, StoreError>>;

pub(crate) enum Command {
    Append { row: Box<PreparedRow>, reply: Option<Reply>, journal: Option<JournalTicket> },
    Flush(oneshot::Sender<()>),
}

/// Counters of the writer, for `status` and metrics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct AuditStats {
    /// Entries waiting in the queue now.
    pub queued: usize,
    /// Rows committed since the store was opened.
    pub written: u64,
    /// Entries that could not be written after retrying (each also logged at error level).
    pub failed: u64,
    /// Entries refused by `try_record` because the queue was full.
    pub rejected: u64,
}

#[derive(Debug, Default)]
struct Counters {
    written: AtomicU64,
    failed: AtomicU64,
    rejected: AtomicU64,
}

/// A cloneable handle to the store's audit writer.
#[derive(Debug, Clone)]
pub struct AuditWriter {
    sender: mpsc::Sender<Command>,
    capacity: usize,
    redaction: ArgumentRedaction,
    counters: Arc<Counters>,
    journal: Option<Arc<Journal>>,
    queue_wait: Duration,
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

impl AuditWriter {
    /// Starts the writer task on the current tokio runtime.
    pub(crate) fn spawn(
        backend: Backend,
        redaction: ArgumentRedaction,
        capacity: usize,
        batch_max: usize,
        journal: Option<Arc<Journal>>,
        queue_wait: Duration,
    ) -> AuditWriter {
        let capacity = capacity.max(1);
        let (sender, receiver) = mpsc::channel(capacity);
        let counters = Arc::new(Counters::default());
        let writer = run(backend, receiver, batch_max.max(1), Arc::clone(&counters), journal.clone());
        spawn_writer(writer);
        AuditWriter { sender, capacity, redaction, counters, journal, queue_wait }
    }

    /// Queues an entry without waiting. The row is committed shortly after, in a batch; use
    /// [`AuditWriter::record_durable`] when the caller must know it is on disk.
    pub fn try_record(&self, entry: AuditEntry) -> Result<(), AuditQueueError> {
        self.queue_row(Box::new(prepare(entry, self.redaction)))
    }

    /// Queues a prepared row without waiting; a full queue is counted and reported.
    pub(crate) fn queue_row(&self, row: Box<PreparedRow>) -> Result<(), AuditQueueError> {
        match self.sender.try_send(Command::Append { row, reply: None, journal: None }) {
            Ok(()) => Ok(()),
            Err(mpsc::error::TrySendError::Full(_)) => {
                self.counters.rejected.fetch_add(1, Ordering::Relaxed);
                tracing::error!(capacity = self.capacity, "audit record not written: the audit queue is full");
                Err(AuditQueueError::Full { capacity: self.capacity })
            }
            Err(mpsc::error::TrySendError::Closed(_)) => Err(AuditQueueError::Closed),
        }
    }

    /// Appends an entry and returns once its transaction has committed (waiting for queue space if needed).
    ///
    /// For the row written before a call is forwarded: after a crash, every forwarded call has its row.
    /// Concurrent durable entries share one commit.
    pub async fn record_durable(&self, entry: AuditEntry) -> Result<AuditReceipt, StoreError> {
        self.commit_prepared(Box::new(prepare(entry, self.redaction))).await
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
    /// A queue slot is reserved first and held until the row is complete: when the queue stays full for the
    /// configured wait the caller gets [`StoreError::AuditQueueFull`] and nothing is journaled (a journaled row
    /// would claim a call that the caller then refuses to forward). Then the row is appended to the audit journal
    /// (one `write` into the page cache); a store opened after a crash appends journaled rows the database lacks.
    /// For the row written before a call is forwarded, on the call path. Without a journal (a store opened
    /// without one) the row is committed first ([`AuditWriter::record_durable`]) and the outcome becomes a
    /// "result" row of its own.
    pub async fn record_journaled(&self, entry: AuditEntry) -> Result<PendingCall, StoreError> {
        let Some(journal) = &self.journal else {
            let row = Box::new(prepare(entry, self.redaction));
            self.commit_prepared(row.clone()).await?;
            return Ok(PendingCall::committed(self.clone(), row));
        };
        let permit = match self.sender.clone().try_reserve_owned() {
            Ok(permit) => permit,
            Err(mpsc::error::TrySendError::Full(sender)) => {
                match tokio::time::timeout(self.queue_wait, sender.reserve_owned()).await {
                    Ok(Ok(permit)) => permit,
                    Ok(Err(_)) => return Err(StoreError::AuditWriterStopped),
                    Err(_) => {
                        self.counters.rejected.fetch_add(1, Ordering::Relaxed);
                        return Err(StoreError::AuditQueueFull { capacity: self.capacity });
                    }
                }
            }
            Err(mpsc::error::TrySendError::Closed(_)) => return Err(StoreError::AuditWriterStopped),
        };
        let row = Box::new(prepare(entry, self.redaction));
        let ticket = journal.append(&row)?;
        Ok(PendingCall::journaled(permit, row, ticket))
    }

    /// Waits until every entry queued before this call has been committed (or has failed).
    pub async fn flush(&self) -> Result<(), StoreError> {
        let (done, flushed) = oneshot::channel();
        self.sender.send(Command::Flush(done)).await.map_err(|_| StoreError::AuditWriterStopped)?;
        flushed.await.map_err(|_| StoreError::AuditWriterStopped)
    }

    /// The writer's counters.
    pub fn stats(&self) -> AuditStats {
        AuditStats {
            queued: self.capacity.saturating_sub(self.sender.capacity()),
            written: self.counters.written.load(Ordering::Relaxed),
            failed: self.counters.failed.load(Ordering::Relaxed),
            rejected: self.counters.rejected.load(Ordering::Relaxed),
        }
    }
}

/// Runs the writer on a thread of its own, with a single-threaded runtime.
///
/// Among the gateway's tasks the writer would get one turn per round of hundreds of calls under load and fall
/// behind until the queue refuses calls; on its own thread the operating system shares the CPU with it fairly,
/// and its hashing and encoding stay off the relay's workers. If no thread can be started it runs as a task.
fn spawn_writer(writer: impl std::future::Future<Output = ()> + Send + 'static) {
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

/// Turns an entry into a row without chain fields: redaction applied, JSON columns as canonical text, time taken
/// if absent. Runs on the caller's task, so the writer thread and the journal reuse the text.
fn prepare(entry: AuditEntry, redaction: ArgumentRedaction) -> PreparedRow {
    let args_text = entry.args.as_ref().map(canonical_text);
    let args_digest = args_text.as_ref().map(|text| digest_bytes(text.as_bytes()));
    let json = JsonColumns {
        caller: entry.caller.as_ref().map(|caller| canonical_text(&to_json(caller))),
        reasons: (!entry.reasons.is_empty()).then(|| canonical_text(&to_json(&entry.reasons))),
        hint_sources: entry.hint_sources.as_ref().map(|hints| canonical_text(&to_json(hints))),
        args: match redaction {
            ArgumentRedaction::Digest => None,
            ArgumentRedaction::Clear => args_text,
        },
        detail: entry.detail.as_ref().map(canonical_text),
    };
    let row = AuditRow {
        seq: 0,
        time: format_rfc3339(entry.time.unwrap_or_else(SystemTime::now)),
        kind: entry.kind.as_str().to_owned(),
        caller: None,
        session: entry.session,
        upstream: entry.upstream,
        tool: entry.tool,
        verdict: entry.verdict.map(|verdict| verdict_name(verdict).to_owned()),
        reasons: None,
        hint_sources: None,
        approval_id: entry.approval_id,
        duration_us: entry.duration_us.map(|micros| i64::try_from(micros).unwrap_or(i64::MAX)),
        outcome: entry.outcome,
        args_digest,
        args: None,
        detail: None,
        prev_hash: String::new(),
        hash: String::new(),
    };
    PreparedRow { row, json }
}

/// The canonical text of a JSON value. serde_json values always canonicalize today; if that ever changes, the plain
/// text is kept rather than the row lost.
fn canonical_text(value: &Value) -> String {
    jcs::to_string(value).unwrap_or_else(|_| value.to_string())
}

/// A typed entry field as a JSON column. These types (strings, booleans, enums, vectors of them) always serialize.
fn to_json<T: Serialize>(value: &T) -> Value {
    serde_json::to_value(value).unwrap_or(Value::Null)
}

/// `sha256:` of the canonical arguments; the same function gives the digest an approval is bound to.
pub fn digest_arguments(args: &Value) -> String {
    digest_bytes(canonical_text(args).as_bytes())
}

async fn run(
    backend: Backend,
    mut receiver: mpsc::Receiver<Command>,
    batch_max: usize,
    counters: Arc<Counters>,
    journal: Option<Arc<Journal>>,
) {
    let mut commands = Vec::with_capacity(batch_max);
    while receiver.recv_many(&mut commands, batch_max).await > 0 {
        // Group commit: when nobody waits for this batch's commit, gather what arrives in the next moment too, so a
        // busy gateway writes tens of rows per transaction instead of one or two. Nothing on a call path waits for
        // these rows (the pre-forward row is already in the journal).
        let waited_on = commands.iter().any(|command| matches!(command, Command::Append { reply: Some(_), .. }));
        if !waited_on && commands.len() < batch_max {
            tokio::time::sleep(GROUP_COMMIT_WINDOW).await;
            while commands.len() < batch_max {
                match receiver.try_recv() {
                    Ok(command) => commands.push(command),
                    Err(_) => break,
                }
            }
        }
        let mut rows = Vec::new();
        let mut replies = Vec::new();
        let mut tickets = Vec::new();
        let mut flushes = Vec::new();
        for command in commands.drain(..) {
            match command {
                Command::Append { row, reply, journal } => {
                    rows.push(*row);
                    replies.push(reply);
                    tickets.push(journal);
                }
                Command::Flush(done) => flushes.push(done),
            }
        }
        if !rows.is_empty() {
            let journal_ids: Vec<Option<&str>> =
                tickets.iter().map(|ticket| ticket.as_ref().map(|ticket| ticket.id.as_str())).collect();
            let outcome = append_with_retries(&backend, &mut rows, &journal_ids).await;
            match &outcome {
                Ok(()) => {
                    counters.written.fetch_add(rows.len() as u64, Ordering::Relaxed);
                    if let Some(journal) = &journal {
                        journal.committed(tickets.iter().flatten());
                    }
                }
                Err(error) => {
                    // Journaled rows stay in the journal: the next open appends them.
                    counters.failed.fetch_add(rows.len() as u64, Ordering::Relaxed);
                    tracing::error!(rows = rows.len(), %error, "audit rows could not be written");
                }
            }
            for (row, reply) in rows.iter().zip(replies) {
                if let Some(reply) = reply {
                    let answer = match &outcome {
                        Ok(()) => Ok(AuditReceipt { seq: row.row.seq, hash: row.row.hash.clone() }),
                        Err(error) => Err(StoreError::AuditWrite(error.to_string())),
                    };
                    // The waiter may have gone away (its call was cancelled); the row is written either way.
                    let _ = reply.send(answer);
                }
            }
        }
        for done in flushes {
            let _ = done.send(());
        }
    }
}

async fn append_with_retries(
    backend: &Backend,
    rows: &mut [PreparedRow],
    journal_ids: &[Option<&str>],
) -> Result<(), StoreError> {
    let mut attempt = 1;
    loop {
        match append(backend, rows, journal_ids, false).await {
            Ok(()) => return Ok(()),
            Err(error) if attempt < WRITE_ATTEMPTS => {
                tracing::warn!(attempt, %error, "audit batch failed; retrying");
                tokio::time::sleep(Duration::from_millis(50 << attempt)).await;
                attempt += 1;
            }
            Err(error) => return Err(error),
        }
    }
}

/// Appends `rows` in one `BEGIN IMMEDIATE` transaction, filling in seq, prev_hash and hash, and records the
/// journal id of each journaled row (`journal_ids` is empty or one entry per row).
pub(crate) async fn append(
    backend: &Backend,
    rows: &mut [PreparedRow],
    journal_ids: &[Option<&str>],
    recovering: bool,
) -> Result<(), StoreError> {
    let Backend::Sqlite(pool) = backend;
    let mut transaction = pool.begin_with("BEGIN IMMEDIATE").await?;
    let tail = sqlx::query("SELECT seq, hash FROM audit_log ORDER BY seq DESC LIMIT 1")
        .fetch_optional(&mut *transaction)
        .await?;
    let (mut seq, mut prev_hash) = match tail {
        Some(row) => (row.try_get::<i64, _>("seq")?, row.try_get::<String, _>("hash")?),
        None => (0, GENESIS_HASH.to_owned()),
    };
    // A journaled row already appended (by another process recovering the same journal) is skipped; the check runs
    // inside the write transaction, so two recoveries cannot both append it. Fresh rows need no check.
    let mut skip = vec![false; rows.len()];
    if recovering {
        for (index, journal_id) in journal_ids.iter().enumerate() {
            if let Some(journal_id) = journal_id {
                skip[index] = sqlx::query("SELECT 1 FROM audit_journal_ids WHERE journal_id = ?")
                    .bind(journal_id)
                    .fetch_optional(&mut *transaction)
                    .await?
                    .is_some();
            }
        }
    }
    let mut appended = Vec::with_capacity(rows.len());
    for (index, prepared) in rows.iter_mut().enumerate() {
        if skip.get(index).copied().unwrap_or(false) {
            continue;
        }
        seq += 1;
        prepared.row.seq = seq;
        prepared.row.prev_hash = prev_hash;
        prepared.row.hash = row_hash_with(&prepared.row, &prepared.json);
        prev_hash = prepared.row.hash.clone();
        appended.push(index);
    }
    // One statement per chunk of rows: each statement is a round trip to sqlx's SQLite thread. The JSON columns
    // are stored as the canonical text the chain hashed, so each is written once per row.
    for chunk in appended.chunks(INSERT_CHUNK) {
        let mut insert = sqlx::QueryBuilder::new(
            "INSERT INTO audit_log (seq, time, kind, caller, session, upstream, tool, verdict, reasons, hint_sources, \
             approval_id, duration_us, outcome, args_digest, args, detail, prev_hash, hash) ",
        );
        insert.push_values(chunk.iter().filter_map(|index| rows.get(*index)), |mut values, prepared| {
            let (row, json) = (&prepared.row, &prepared.json);
            values
                .push_bind(row.seq)
                .push_bind(row.time.clone())
                .push_bind(row.kind.clone())
                .push_bind(json.caller.clone())
                .push_bind(row.session.clone())
                .push_bind(row.upstream.clone())
                .push_bind(row.tool.clone())
                .push_bind(row.verdict.clone())
                .push_bind(json.reasons.clone())
                .push_bind(json.hint_sources.clone())
                .push_bind(row.approval_id.clone())
                .push_bind(row.duration_us)
                .push_bind(row.outcome.clone())
                .push_bind(row.args_digest.clone())
                .push_bind(json.args.clone())
                .push_bind(json.detail.clone())
                .push_bind(row.prev_hash.clone())
                .push_bind(row.hash.clone());
        });
        insert.build().execute(&mut *transaction).await?;
    }
    let journaled: Vec<(&str, i64)> = appended
        .iter()
        .filter_map(|index| {
            let journal_id = (*journal_ids.get(*index)?)?;
            Some((journal_id, rows.get(*index)?.row.seq))
        })
        .collect();
    for chunk in journaled.chunks(INSERT_CHUNK) {
        let mut insert = sqlx::QueryBuilder::new("INSERT OR IGNORE INTO audit_journal_ids (journal_id, seq) ");
        insert.push_values(chunk, |mut values, (journal_id, seq)| {
            values.push_bind(journal_id.to_string()).push_bind(*seq);
        });
        insert.build().execute(&mut *transaction).await?;
    }
    sqlx::query(
        "INSERT INTO audit_head (id, seq, hash) VALUES (1, ?, ?) \
         ON CONFLICT (id) DO UPDATE SET seq = excluded.seq, hash = excluded.hash",
    )
    .bind(seq)
    .bind(&prev_hash)
    .execute(&mut *transaction)
    .await?;
    transaction.commit().await?;
    Ok(())
}
