//! Retention of the audit log: how old or how large it may grow, pruning the oldest rows past that while keeping
//! the chain verifiable, exporting what is pruned, and watching the disk.
//!
//! Rows are pruned from the start of the chain only, in chunks, each in one `BEGIN IMMEDIATE` transaction that
//! deletes the rows and moves the checkpoint (`audit_checkpoint`: the seq and hash of the last pruned row, when,
//! and how many rows were pruned in all). `verify` starts from the checkpoint instead of the genesis hash, so any
//! change, insertion or removal after it is still found, and removing the checkpoint shows as rows missing from
//! the start. Before a chunk is deleted its rows are checked to continue the chain from the previous checkpoint (a
//! broken segment is kept, as evidence, and pruning stops with an error) and, when an export directory is set,
//! written there as JSON lines (`audit-<first seq>-<last seq>.jsonl`, one `toolgate audit --json` row per line,
//! synced to disk and renamed into place before the delete): consecutive files chain into each other and the last
//! one ends with the row the checkpoint names, which is what anchors it (docs/reliability.md). Freed pages are
//! reused by later rows, so the file stops growing rather than shrinking. Nothing here decides about calls.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::time::{Duration, SystemTime};

use serde::Serialize;

use super::AuditRow;
use super::chain::row_hash;
use super::query::{audit_columns, decode_row};
use super::queue::Counters;
use crate::backend::{Backend, Columns as _, Dialect, on_backend};
use crate::error::StoreError;
use crate::time::format_rfc3339;

/// Rows deleted per transaction: other writers wait for at most one chunk.
const PRUNE_CHUNK: i64 = 5_000;

/// Below this share of its filesystem free, the state directory is reported as running out of disk.
const LOW_DISK_PERCENT: u64 = 10;

/// How much of the audit log to keep. The default keeps everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Retention {
    /// Rows older than this are pruned.
    pub keep: Option<Duration>,
    /// When the database uses more than this many bytes, the oldest rows are pruned until it uses 90% of it.
    pub max_bytes: Option<u64>,
    /// Pruned rows are exported here first (JSON lines); when the export fails, nothing is pruned.
    pub export_dir: Option<PathBuf>,
}

impl Retention {
    pub(crate) fn is_set(&self) -> bool {
        self.keep.is_some() || self.max_bytes.is_some()
    }
}

/// The chain's anchor after pruning: the last pruned row.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Checkpoint {
    /// The last pruned row's seq; the log continues at `seq + 1`.
    pub seq: i64,
    /// The last pruned row's hash: the next row's `prev_hash`.
    pub hash: String,
    /// The last pruned row's time.
    pub time: String,
    /// When it was pruned.
    pub pruned_at: String,
    /// Rows pruned in all.
    pub rows_pruned: i64,
}

/// What one pruning run did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct PruneReport {
    /// Rows pruned.
    pub rows: u64,
    /// The checkpoint after it (unchanged when nothing was pruned).
    pub checkpoint: Option<Checkpoint>,
    /// The export files written, in chain order.
    pub exported: Vec<PathBuf>,
}

/// The checkpoint, if any rows were ever pruned.
pub(crate) async fn checkpoint(backend: &Backend) -> Result<Option<Checkpoint>, StoreError> {
    on_backend!(backend, |pool| {
        let row = sqlx::query("SELECT seq, hash, time, pruned_at, rows_pruned FROM audit_checkpoint WHERE id = 1")
            .fetch_optional(pool)
            .await?;
        Ok(row
            .map(|row| {
                Ok::<_, sqlx::Error>(Checkpoint {
                    seq: row.column("seq")?,
                    hash: row.column("hash")?,
                    time: row.column("time")?,
                    pruned_at: row.column("pruned_at")?,
                    rows_pruned: row.column("rows_pruned")?,
                })
            })
            .transpose()?)
    })
}

/// Records the database's size and the free space of its filesystem; warns when the free space crosses below
/// [`LOW_DISK_PERCENT`] and says when it is back.
pub(crate) fn measure(database: &Path, counters: &Counters) {
    let size = |path: &Path| std::fs::metadata(path).map(|metadata| metadata.len()).unwrap_or(0);
    let mut wal = database.as_os_str().to_owned();
    wal.push("-wal");
    counters.database_bytes.store(size(database) + size(Path::new(&wal)), Ordering::Relaxed);
    let directory = database.parent().filter(|parent| !parent.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let Ok(stats) = rustix::fs::statvfs(directory) else { return };
    let free = stats.f_bavail.saturating_mul(stats.f_frsize);
    let total = stats.f_blocks.saturating_mul(stats.f_frsize);
    let previous = counters.disk_free.swap(free, Ordering::Relaxed);
    let low = |free: u64| total > 0 && free.saturating_mul(100) < total.saturating_mul(LOW_DISK_PERCENT);
    if low(free) && (previous == u64::MAX || !low(previous)) {
        tracing::warn!(
            directory = %directory.display(),
            free_bytes = free,
            total_bytes = total,
            "the state directory's disk is nearly full: when it is, calls are refused because their audit rows \
             cannot be written (set [audit] keep_days or max_bytes, or free space)"
        );
    } else if !low(free) && previous != u64::MAX && low(previous) {
        tracing::info!(directory = %directory.display(), free_bytes = free, "the state directory has free space again");
    }
}

/// Prunes what the retention policy says is too old or too much, oldest first, in chunks.
pub(crate) async fn prune(
    backend: &Backend,
    retention: &Retention,
    now: SystemTime,
) -> Result<PruneReport, StoreError> {
    let pool = backend;
    let mut report = PruneReport { checkpoint: checkpoint(pool).await?, ..PruneReport::default() };
    // Size is estimated from the share of rows (pages of other tables and half-full pages stay), so the horizon is
    // measured again after each round until the database is under its limit.
    for _ in 0..SIZE_ROUNDS {
        let Some(horizon) = horizon(pool, retention, now).await? else { break };
        let before = report.rows;
        prune_to(pool, retention, now, horizon, &mut report).await?;
        if report.rows == before {
            break;
        }
    }
    Ok(report)
}

/// Rounds of size estimation in one pruning run.
const SIZE_ROUNDS: usize = 8;

/// Prunes every row up to `horizon`, chunk by chunk.
async fn prune_to(
    pool: &Backend,
    retention: &Retention,
    now: SystemTime,
    horizon: i64,
    report: &mut PruneReport,
) -> Result<(), StoreError> {
    loop {
        let first = report.checkpoint.as_ref().map_or(1, |checkpoint| checkpoint.seq + 1);
        if first > horizon {
            return Ok(());
        }
        let last = horizon.min(first + PRUNE_CHUNK - 1);
        let rows = segment(pool, first, last).await?;
        let Some(newest) = rows.last() else { return Ok(()) };
        check_segment(&rows, report.checkpoint.as_ref())?;
        if let Some(directory) = &retention.export_dir {
            report.exported.push(export_segment(directory, &rows)?);
        }
        let anchor = (newest.seq, newest.hash.clone(), newest.time.clone());
        report.checkpoint = Some(delete_segment(pool, report.checkpoint.as_ref(), anchor, rows.len(), now).await?);
        report.rows += rows.len() as u64;
    }
}

/// The last seq to prune: the row before the oldest-seq row within `keep` (all rows when none is that new), or as
/// many of the oldest rows as bring the database to 90% of `max_bytes`, whichever reaches further.
async fn horizon(backend: &Backend, retention: &Retention, now: SystemTime) -> Result<Option<i64>, StoreError> {
    on_backend!(backend, |pool, dialect| {
        let mut horizon: Option<i64> = None;
        if let Some(cutoff) = retention.keep.and_then(|keep| now.checked_sub(keep)) {
            let cutoff = format_rfc3339(cutoff);
            // Time does not rise with seq (journal recovery appends rows with their original time; the clock can step
            // back), so the horizon stops before the first row still within `keep`: a late row with an old time must
            // not carry the recent rows before it away. Only when no row is that new are all rows old.
            let first_kept: Option<i64> = sqlx::query_scalar("SELECT min(seq) FROM audit_log WHERE time >= $1")
                .bind(&cutoff)
                .fetch_one(pool)
                .await?;
            let by_age: Option<i64> = match first_kept {
                Some(seq) => Some(seq - 1),
                None => {
                    sqlx::query_scalar("SELECT max(seq) FROM audit_log WHERE time < $1")
                        .bind(&cutoff)
                        .fetch_one(pool)
                        .await?
                }
            };
            horizon = horizon.max(by_age);
        }
        if let Some(max_bytes) = retention.max_bytes {
            let used: i64 = match dialect {
                Dialect::Sqlite => {
                    let pages: i64 = sqlx::query_scalar("PRAGMA page_count").fetch_one(pool).await?;
                    let free: i64 = sqlx::query_scalar("PRAGMA freelist_count").fetch_one(pool).await?;
                    let page_size: i64 = sqlx::query_scalar("PRAGMA page_size").fetch_one(pool).await?;
                    (pages - free).max(0) * page_size
                }
                // The audit log's share of the database: other tables and other databases of the cluster are not ours.
                Dialect::Postgres => sqlx::query_scalar(
                    "SELECT CAST(pg_total_relation_size('audit_log') + pg_total_relation_size('audit_text') AS BIGINT)",
                )
                .fetch_one(pool)
                .await?,
            };
            let used = u64::try_from(used).unwrap_or(0);
            if used > max_bytes {
                let rows: i64 = sqlx::query_scalar("SELECT count(*) FROM audit_log").fetch_one(pool).await?;
                let target = max_bytes / 10 * 9;
                // Rows are of similar size: prune the share of rows that the excess is of the whole.
                let share = (used - target) as f64 / used as f64;
                let count = ((rows as f64) * share).ceil() as i64;
                if count > 0 {
                    let by_size: Option<i64> =
                        sqlx::query_scalar("SELECT seq FROM audit_log ORDER BY seq LIMIT 1 OFFSET $1")
                            .bind(count.min(rows) - 1)
                            .fetch_optional(pool)
                            .await?;
                    horizon = horizon.max(by_size);
                }
            }
        }
        Ok(horizon)
    })
}

async fn segment(backend: &Backend, first: i64, last: i64) -> Result<Vec<AuditRow>, StoreError> {
    on_backend!(backend, |pool| {
        let rows = sqlx::query(concat!(
            "SELECT ",
            audit_columns!(),
            " FROM audit_log WHERE seq BETWEEN $1 AND $2 ORDER BY seq"
        ))
        .bind(first)
        .bind(last)
        .fetch_all(pool)
        .await?;
        rows.iter().map(decode_row).collect()
    })
}

/// A segment about to be pruned must continue the chain from the checkpoint: pruning a tampered segment would
/// destroy the evidence and anchor the tampering.
fn check_segment(rows: &[AuditRow], checkpoint: Option<&Checkpoint>) -> Result<(), StoreError> {
    let (mut seq, mut hash) = match checkpoint {
        Some(checkpoint) => (checkpoint.seq, checkpoint.hash.clone()),
        None => (0, super::chain::GENESIS_HASH.to_owned()),
    };
    for row in rows {
        if row.seq != seq + 1 || row.prev_hash != hash || row_hash(row)? != row.hash {
            return Err(StoreError::Corrupt {
                what: "audit chain",
                detail: format!("row {} does not continue the chain; run `toolgate audit verify`", row.seq),
            });
        }
        seq = row.seq;
        hash = row.hash.clone();
    }
    Ok(())
}

/// Writes a segment as JSON lines, synced, then renamed into place (a partial file never has the final name).
fn export_segment(directory: &Path, rows: &[AuditRow]) -> Result<PathBuf, StoreError> {
    let (Some(first), Some(last)) = (rows.first(), rows.last()) else {
        return Err(StoreError::Corrupt { what: "audit export", detail: "empty segment".to_owned() });
    };
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| StoreError::Export { path, source }
    };
    std::fs::create_dir_all(directory).map_err(io(directory))?;
    let name = format!("audit-{:012}-{:012}.jsonl", first.seq, last.seq);
    let path = directory.join(&name);
    let partial = directory.join(format!(".{name}.partial"));
    let mut text = Vec::with_capacity(rows.len() * 1024);
    for row in rows {
        serde_json::to_writer(&mut text, row).map_err(|source| StoreError::Json { what: "audit export", source })?;
        text.push(b'\n');
    }
    // Private like the database: rows may hold arguments in clear.
    let mut file = crate::permissions::private(std::fs::OpenOptions::new().write(true).create(true).truncate(true))
        .open(&partial)
        .map_err(io(&partial))?;
    file.write_all(&text).map_err(io(&partial))?;
    // A failed sync is a failed export: the rows are not pruned (and the partial file is not trusted).
    file.sync_all().map_err(io(&partial))?;
    drop(file);
    std::fs::rename(&partial, &path).map_err(io(&path))?;
    if let Ok(directory) = std::fs::File::open(directory) {
        let _ = directory.sync_all();
    }
    Ok(path)
}

/// Deletes a checked segment and moves the checkpoint to its last row, in one transaction; refuses if another
/// process moved the checkpoint meanwhile. On PostgreSQL the transaction holds the chain's lock (as appends do), so
/// a prune and an append of another process never interleave.
async fn delete_segment(
    backend: &Backend,
    expected: Option<&Checkpoint>,
    (seq, hash, time): (i64, String, String),
    rows: usize,
    now: SystemTime,
) -> Result<Checkpoint, StoreError> {
    on_backend!(backend, |pool, dialect| {
        let mut connection = pool.acquire().await?;
        let deleted = async {
            let mut transaction = sqlx::Connection::begin_with(&mut *connection, dialect.begin_write()).await?;
            if dialect == Dialect::Postgres {
                sqlx::query("SELECT pg_advisory_xact_lock($1)")
                    .bind(super::append::CHAIN_LOCK)
                    .execute(&mut *transaction)
                    .await?;
            }
            let current: Option<i64> = sqlx::query_scalar("SELECT seq FROM audit_checkpoint WHERE id = 1")
                .fetch_optional(&mut *transaction)
                .await?;
            if current != expected.map(|checkpoint| checkpoint.seq) {
                transaction.rollback().await?;
                return Err(StoreError::Corrupt {
                    what: "audit checkpoint",
                    detail: "another process pruned the log at the same time".to_owned(),
                });
            }
            let first = expected.map_or(1, |checkpoint| checkpoint.seq + 1);
            sqlx::query("DELETE FROM audit_log WHERE seq BETWEEN $1 AND $2")
                .bind(first)
                .bind(seq)
                .execute(&mut *transaction)
                .await?;
            sqlx::query("DELETE FROM audit_journal_ids WHERE seq <= $1").bind(seq).execute(&mut *transaction).await?;
            // Texts no remaining row refers to (a reworded policy's old reasons) go with the rows.
            sqlx::query(
                "DELETE FROM audit_text WHERE id NOT IN (SELECT reasons_ref FROM audit_log WHERE reasons_ref IS NOT NULL) \
                 AND id NOT IN (SELECT hint_sources_ref FROM audit_log WHERE hint_sources_ref IS NOT NULL)",
            )
            .execute(&mut *transaction)
            .await?;
            let checkpoint = Checkpoint {
                seq,
                hash: hash.clone(),
                time: time.clone(),
                pruned_at: format_rfc3339(now),
                rows_pruned: expected.map_or(0, |checkpoint| checkpoint.rows_pruned) + rows as i64,
            };
            sqlx::query(
                "INSERT INTO audit_checkpoint (id, seq, hash, time, pruned_at, rows_pruned) \
                 VALUES (1, $1, $2, $3, $4, $5) \
                 ON CONFLICT (id) DO UPDATE SET seq = excluded.seq, hash = excluded.hash, time = excluded.time, \
                 pruned_at = excluded.pruned_at, rows_pruned = excluded.rows_pruned",
            )
            .bind(checkpoint.seq)
            .bind(&checkpoint.hash)
            .bind(&checkpoint.time)
            .bind(&checkpoint.pruned_at)
            .bind(checkpoint.rows_pruned)
            .execute(&mut *transaction)
            .await?;
            transaction.commit().await?;
            Ok(checkpoint)
        }
        .await;
        if deleted.is_err() {
            // As in `append`: a failed commit must not leave a connection that believes it is in a transaction.
            connection.close_on_drop();
        }
        deleted
    })
}
