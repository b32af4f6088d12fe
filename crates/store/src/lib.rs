//! toolgate's persistence for the guardrails: the hash-chained audit log, tool pins with their quarantine, and
//! the approvals queue. SQLite (WAL) in `<state-dir>/toolgate.db` today; PostgreSQL later, behind the same API.
//!
//! Principal types:
//! - [`Store`]: opens (and migrates) the database; hands out the parts below. Cheap to clone.
//! - [`AuditWriter`]: `try_record` (bounded queue, never blocks, full is an error) and `record_durable` (returns
//!   once committed: the row written before a call is forwarded); [`Store::verify_audit`] walks the hash chain,
//!   [`Store::query_audit`] selects rows.
//! - [`PinStore`]: pinned tool definitions by `(upstream, tool)`, changed definitions held in quarantine with a
//!   field-by-field diff until approved or rejected.
//! - [`ApprovalStore`]: confirmations waiting for a person, decided from another process (`toolgate approvals
//!   approve ID`), used at most once, only for the tool fingerprint and arguments they were granted for.
//! - [`Store::record_pin_decision`] / [`Store::record_approval_decision`]: a person's decisions as audit rows;
//!   [`Store::activity`]: calls by verdict per minute or hour, for the console's chart.
//! - [`Store::replace_inventory`] / [`Store::inventory`]: every tool each upstream lists, as the gateway last saw
//!   it (hints with sources, risk, lint findings, pin state), for the console's tools page.
//! - [`Store::record_verification`] / [`Store::verifications_for`]: what `toolgate verify` saw each tool do, bound
//!   to its fingerprint and the server command; `serve` weighs the newest record per fingerprint as evidence.
//!
//! The backend is the crate-private `Backend` enum; every SQL statement sits behind a `let Backend::Sqlite(..)`,
//! so adding a PostgreSQL variant makes the compiler list each place that needs its statement. Nothing here
//! decides policy: the proxy says what to record, pin or approve.
//!
//! ```no_run
//! # async fn example(state_dir: &std::path::Path) -> Result<(), toolgate_store::StoreError> {
//! use toolgate_store::{AuditEntry, AuditKind, Store};
//! let store = Store::open(state_dir).await?;
//! let audit = store.audit();
//! // Before forwarding a call: returns once the row is committed.
//! let call = AuditEntry { tool: Some("delete_file".into()), ..AuditEntry::new(AuditKind::Call) };
//! let receipt = audit.record_durable(call).await?;
//! // After it: queued without waiting; a full queue is an error to count or log, never a silent drop.
//! let result = AuditEntry { outcome: Some("ok".into()), ..AuditEntry::new(AuditKind::Result) };
//! if let Err(error) = audit.try_record(result) {
//!     tracing::warn!(%error, "audit entry not recorded");
//! }
//! audit.flush().await?;
//! assert!(store.verify_audit().await?.is_intact());
//! # let _ = receipt;
//! # Ok(())
//! # }
//! ```

mod activity;
mod approvals;
mod audit;
mod decisions;
mod error;
mod inventory;
mod migrations;
mod permissions;
mod pins;
mod time;
mod verification;

use std::path::{Path, PathBuf};
use std::str::FromStr as _;
use std::sync::Arc;
use std::time::Duration;

use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous};

pub use activity::{Activity, ActivityBucket, ActivitySpan, ActivityVerdict};
pub use approvals::{
    ApprovalDecision, ApprovalId, ApprovalRecord, ApprovalState, ApprovalStore, ApprovalWait, ConsumeRefusal,
    PendingApproval, ToolRisk,
};
pub use audit::chain::{GENESIS_HASH, verify_rows};
pub use audit::pending::{ABANDONED_OUTCOME, PendingCall, UNANSWERED_OUTCOME};
pub use audit::retention::{Checkpoint, PruneReport, Retention};
pub use audit::writer::digest_arguments;
pub use audit::{
    ArgumentRedaction, AuditEntry, AuditFilter, AuditKind, AuditReceipt, AuditRow, AuditStats, AuditWriter, Caller,
    ChainBreak, ChainBreakKind, ChainReport, verdict_name,
};
pub use audit::{JournalBacklog, NOT_RECORDED_OUTCOME};
pub use decisions::{PIN_DECISION_KIND, PinDecision};
pub use error::{AuditQueueError, StoreError};
pub use inventory::{InventoryAccess, InventoryFinding, InventoryState, InventoryTool};
pub use permissions::create_state_dir;
pub use pins::{INSTRUCTIONS, PendingPinChange, PinKind, PinObservation, PinState, PinStore, PinnedTool, ToolSnapshot};
pub use time::{format_rfc3339, parse_age, parse_rfc3339};
pub use verification::{VerificationRecord, VerifiedFacts};

/// The database file inside the state directory.
pub const DATABASE_FILE: &str = "toolgate.db";

/// What a committed transaction survives.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Durability {
    /// `synchronous=NORMAL`: survives the process being killed (`kill -9`), may lose the last commits on power loss
    /// or an OS crash (WAL is fsynced at checkpoints only).
    ProcessCrash,
    /// `synchronous=FULL`: every commit is fsynced before it returns; survives power loss too.
    #[default]
    PowerLoss,
}

/// How a store is opened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreOptions {
    /// How tool-call arguments are kept in the audit log.
    pub redaction: ArgumentRedaction,
    /// What a commit survives.
    pub durability: Durability,
    /// Audit entries that may wait for the writer before `try_record` reports the queue full.
    pub audit_queue_capacity: usize,
    /// How long `record_journaled` (the row of a call about to be forwarded) waits for room in a full queue
    /// before it reports the queue full: a burst becomes latency, a writer that stays behind an error.
    pub audit_queue_wait: Duration,
    /// Most rows appended in one transaction.
    pub audit_batch_max: usize,
    /// How long a statement waits for another connection's (or process's) write lock.
    pub busy_timeout: Duration,
    /// How often `ApprovalStore::wait` looks for a decision written by another process.
    pub approval_poll_interval: Duration,
    /// Keep an audit journal for [`AuditWriter::record_journaled`] (the gateway's store). Journals of dead
    /// processes are recovered at every open, whatever this says.
    pub journal: bool,
    /// How much of the audit log the writer keeps (the default keeps everything).
    pub retention: Retention,
    /// How often the writer measures the database and the free disk and applies `retention`.
    pub audit_upkeep_interval: Duration,
}

impl Default for StoreOptions {
    fn default() -> StoreOptions {
        StoreOptions {
            redaction: ArgumentRedaction::Digest,
            durability: Durability::PowerLoss,
            audit_queue_capacity: 4096,
            audit_queue_wait: Duration::from_secs(1),
            audit_batch_max: 512,
            busy_timeout: Duration::from_secs(5),
            approval_poll_interval: Duration::from_millis(100),
            journal: false,
            retention: Retention::default(),
            audit_upkeep_interval: Duration::from_secs(10),
        }
    }
}

impl StoreOptions {
    /// The options `toolgate serve` opens its store with, before its configured redaction and retention: an audit
    /// journal (each call's row is journaled before the call is forwarded or put to a person, and journals a
    /// crashed gateway left are recovered) and commits that survive a crash of the process (WAL with
    /// `synchronous=NORMAL`: the journal is not synced to the disk either; surviving a power cut would need both
    /// synced). The in-process gateway refuses a store without a journal.
    pub fn gateway() -> StoreOptions {
        StoreOptions { journal: true, durability: Durability::ProcessCrash, ..StoreOptions::default() }
    }
}

fn spawn_writer(
    backend: &Backend,
    database: &Path,
    journal: Option<Arc<audit::journal::Journal>>,
    options: &StoreOptions,
) -> AuditWriter {
    let setup = audit::batches::WriterSetup {
        backend: backend.clone(),
        capacity: options.audit_queue_capacity,
        batch_max: options.audit_batch_max,
        journal,
        database: database.to_path_buf(),
        retention: options.retention.clone(),
        upkeep_interval: options.audit_upkeep_interval,
    };
    AuditWriter::spawn(setup, options.redaction, options.audit_queue_wait)
}

/// The database behind the store. One variant today; PostgreSQL will be the second.
#[derive(Debug, Clone)]
pub(crate) enum Backend {
    /// An embedded SQLite file in WAL mode.
    Sqlite(SqlitePool),
}

/// An open store: audit log, pins, approvals. Clones share the connection pool and the audit writer.
#[derive(Debug, Clone)]
pub struct Store {
    backend: Backend,
    path: PathBuf,
    audit: AuditWriter,
    options: StoreOptions,
}

impl Store {
    /// Opens `<state_dir>/toolgate.db` with default options, creating the directory and the database as needed.
    pub async fn open(state_dir: &Path) -> Result<Store, StoreError> {
        create_state_dir(state_dir)?;
        Store::open_file(&state_dir.join(DATABASE_FILE), StoreOptions::default()).await
    }

    /// Opens (creating if missing) the database file `path` and brings its schema up to date.
    ///
    /// Must run inside a tokio runtime: the audit writer is spawned on it.
    pub async fn open_file(path: &Path, options: StoreOptions) -> Result<Store, StoreError> {
        let open_error = |source| StoreError::Open { path: path.to_path_buf(), source };
        let synchronous = match options.durability {
            Durability::ProcessCrash => SqliteSynchronous::Normal,
            Durability::PowerLoss => SqliteSynchronous::Full,
        };
        let connect = SqliteConnectOptions::from_str("sqlite:")
            .map_err(open_error)?
            .filename(path)
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(synchronous)
            .busy_timeout(options.busy_timeout)
            .foreign_keys(true);
        // Before SQLite creates anything: its WAL and shared-memory files take the database's mode.
        permissions::create_database(path)?;
        let companions = permissions::companions(path);
        permissions::tighten(std::iter::once(path).chain(companions.iter().map(PathBuf::as_path)));
        let opening = migrations::OpenLock::take(path).await?;
        let pool = SqlitePoolOptions::new().max_connections(4).connect_with(connect).await.map_err(open_error)?;
        migrations::run(&pool).await?;
        drop(opening);
        let backend = Backend::Sqlite(pool);
        if options.journal && options.redaction == ArgumentRedaction::Digest {
            // The gateway's store only (other commands only read): summaries a crashed or older gateway left
            // behind after their approvals settled. Housekeeping: a failed erase is logged and does not stop the start.
            ApprovalStore::new(backend.clone(), options.approval_poll_interval, true).erase_after_write().await;
        }
        // Every process recovers what crashed gateways journaled, so `toolgate audit` sees every forwarded call.
        audit::recover_journals(&backend, path).await?;
        let journal = if options.journal {
            Some(Arc::new(audit::journal::Journal::open(&audit::journal::Journal::path_for(path, std::process::id()))?))
        } else {
            None
        };
        // Files SQLite made while the pool opened (a WAL beside an older, looser database, say).
        permissions::tighten(companions.iter().map(PathBuf::as_path));
        let audit = spawn_writer(&backend, path, journal, &options);
        Ok(Store { backend, path: path.to_path_buf(), audit, options })
    }

    /// Opens an existing database only to read it: no schema migration, no journal recovery, no write of any
    /// kind (SQLite's read-only mode); for `toolgate audit verify`. [`Store::journal_backlog`] says what a
    /// recovery would add. Its audit writer refuses every row.
    pub async fn open_read_only(path: &Path) -> Result<Store, StoreError> {
        let open_error = |source| StoreError::Open { path: path.to_path_buf(), source };
        let connect = SqliteConnectOptions::from_str("sqlite:")
            .map_err(open_error)?
            .filename(path)
            .read_only(true)
            .create_if_missing(false)
            .busy_timeout(StoreOptions::default().busy_timeout);
        let pool = SqlitePoolOptions::new().max_connections(2).connect_with(connect).await.map_err(open_error)?;
        // A read-only open cannot migrate: an older schema is named as such, not left to fail on a missing column.
        let (found, needed) = (migrations::applied_version(&pool).await?, migrations::latest_version());
        if found < needed {
            pool.close().await;
            return Err(StoreError::SchemaBehind { path: path.to_path_buf(), found, needed });
        }
        let backend = Backend::Sqlite(pool);
        let options = StoreOptions { audit_upkeep_interval: Duration::from_secs(3600), ..StoreOptions::default() };
        let audit = spawn_writer(&backend, path, None, &options);
        Ok(Store { backend, path: path.to_path_buf(), audit, options })
    }

    /// Rows in journals of processes that are gone that the database lacks (reads only).
    pub async fn journal_backlog(&self) -> Result<JournalBacklog, StoreError> {
        audit::journal_backlog(&self.backend, &self.path).await
    }

    /// Applies the retention policy now (the writer also does every `audit_upkeep_interval`).
    pub async fn prune_audit(&self) -> Result<PruneReport, StoreError> {
        audit::retention::prune(&self.backend, &self.options.retention, std::time::SystemTime::now()).await
    }

    /// The audit log's checkpoint, once retention pruned rows.
    pub async fn audit_checkpoint(&self) -> Result<Option<Checkpoint>, StoreError> {
        let Backend::Sqlite(pool) = &self.backend;
        audit::retention::checkpoint(pool).await
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The audit writer.
    pub fn audit(&self) -> AuditWriter {
        self.audit.clone()
    }

    /// Walks the audit chain and reports the first changed, inserted or removed row.
    pub async fn verify_audit(&self) -> Result<ChainReport, StoreError> {
        audit::chain::verify(&self.backend).await
    }

    /// Audit rows matching `filter`, in chain order.
    pub async fn query_audit(&self, filter: &AuditFilter) -> Result<Vec<AuditRow>, StoreError> {
        audit::query::query(&self.backend, filter).await
    }

    /// Tool pins and their quarantine.
    pub fn pins(&self) -> PinStore {
        PinStore::new(self.backend.clone())
    }

    /// The approvals queue.
    pub fn approvals(&self) -> ApprovalStore {
        let digest_only = self.options.redaction == ArgumentRedaction::Digest;
        ApprovalStore::new(self.backend.clone(), self.options.approval_poll_interval, digest_only)
    }

    /// Writes every queued audit entry, then closes the connections (other clones stop working).
    pub async fn close(self) -> Result<(), StoreError> {
        self.audit.flush().await?;
        let Backend::Sqlite(pool) = &self.backend;
        pool.close().await;
        Ok(())
    }
}
