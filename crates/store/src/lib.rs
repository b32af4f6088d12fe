//! toolgate's persistence for the guardrails: the hash-chained audit log, tool pins with their quarantine, and
//! the approvals queue. SQLite (WAL) in `<state-dir>/toolgate.db` by default; PostgreSQL ([`Store::open_postgres`])
//! when several gateway processes share one state, behind the same API.
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
//! - [`RequestStateStore`]: the secret 2026-07-28 request states are sealed with, shared by every process on this
//!   database, and the nonces already used, so a sealed state opens once.
//! - [`Store::record_verification`] / [`Store::verifications_for`]: what `toolgate verify` saw each tool do, bound
//!   to its fingerprint and the server command; `serve` weighs the newest record per fingerprint as evidence.
//!
//! - [`Store::changes`]: what this or another process changed (approvals, pins), for waiters to re-read at once.
//!
//! The backend is the crate-private `Backend` enum (`backend`); each statement is written once and compiled for
//! both drivers by `on_backend!`, with the few dialect differences named where they occur. Every audit row names the
//! instance that wrote it ([`Store::instance`]). Nothing here decides policy: the proxy says what to record, pin or
//! approve.
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
mod approval_state;
mod approvals;
mod audit;
mod backend;
mod claim;
mod decisions;
mod error;
mod feed;
mod heartbeat;
mod instance;
mod inventory;
mod migrations;
mod permissions;
mod pins;
mod request_states;
mod time;
mod verification;

use std::path::{Path, PathBuf};
use std::str::FromStr as _;
use std::sync::Arc;
use std::time::Duration;

use crate::backend::on_backend;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};

pub(crate) use backend::Backend;

pub use activity::{Activity, ActivityBucket, ActivitySpan, ActivityVerdict};
pub use approval_state::{ApprovalState, ConsumeRefusal};
pub use approvals::{
    ApprovalDecision, ApprovalId, ApprovalRecord, ApprovalStore, ApprovalWait, PendingApproval, ToolRisk,
};
pub use audit::chain::{GENESIS_HASH, verify_rows};
pub use audit::pending::{ABANDONED_OUTCOME, PendingCall, UNANSWERED_OUTCOME};
pub use audit::prepare::digest_arguments;
pub use audit::retention::{Checkpoint, PruneReport, Retention};
pub use audit::{
    ArgumentRedaction, AuditEntry, AuditFilter, AuditKind, AuditReceipt, AuditRow, AuditStats, AuditWriter, Caller,
    ChainBreak, ChainBreakKind, ChainReport, verdict_name,
};
pub use audit::{JournalBacklog, NOT_RECORDED_OUTCOME};
pub use decisions::{PIN_DECISION_KIND, PinDecision, PinDecisionRecord};
pub use error::{AuditQueueError, StoreError};
pub use feed::StoreChange;
pub use heartbeat::{HEARTBEAT_INTERVAL, HEARTBEAT_STALE};
pub use instance::{INSTANCE_ENV, INSTANCE_FILE, valid_instance_id};
pub use inventory::{InventoryAccess, InventoryFinding, InventoryState, InventoryTool};
pub use permissions::create_state_dir;
pub use pins::{INSTRUCTIONS, PendingPinChange, PinKind, PinObservation, PinState, PinStore, PinnedTool, ToolSnapshot};
pub use request_states::RequestStateStore;
pub use time::{format_rfc3339, parse_age, parse_rfc3339};
pub use verification::{VerificationRecord, VerifiedFacts};

/// The database file inside the state directory.
pub const DATABASE_FILE: &str = "toolgate.db";

/// What the audit journals of a PostgreSQL store are named after in the state directory
/// (`toolgate-postgres.journal-<pid>`): journals stay local files whatever the backend.
pub const POSTGRES_JOURNAL_BASE: &str = "toolgate-postgres";

/// A PostgreSQL database to open, and its connection pool.
#[derive(Clone, PartialEq, Eq)]
pub struct PostgresTarget {
    /// `postgres://user:password@host:port/database?sslmode=...` (the password comes from the environment, never
    /// from a config file; it is never printed: see [`PostgresTarget::redacted`]).
    pub url: String,
    /// Most connections the pool opens.
    pub max_connections: u32,
    /// How long a statement waits for a free connection (or a new one to be made) before it fails: during an outage
    /// calls that need a row are refused after this, never held.
    pub acquire_timeout: Duration,
}

impl PostgresTarget {
    /// Default pool size: the writer, a few calls and the console at once (the change listener has its own
    /// connection, outside the pool).
    pub const DEFAULT_MAX_CONNECTIONS: u32 = 10;
    /// Default acquire timeout.
    pub const DEFAULT_ACQUIRE_TIMEOUT: Duration = Duration::from_secs(5);

    /// A target with the default pool settings.
    pub fn new(url: impl Into<String>) -> PostgresTarget {
        PostgresTarget {
            url: url.into(),
            max_connections: PostgresTarget::DEFAULT_MAX_CONNECTIONS,
            acquire_timeout: PostgresTarget::DEFAULT_ACQUIRE_TIMEOUT,
        }
    }

    /// The URL without its password, for messages and status.
    pub fn redacted(&self) -> String {
        match PgConnectOptions::from_str(&self.url) {
            Ok(options) => format!(
                "postgres://{}@{}:{}/{}",
                options.get_username(),
                options.get_host(),
                options.get_port(),
                options.get_database().unwrap_or_default()
            ),
            Err(_) => "postgres://(unparseable URL)".to_owned(),
        }
    }
}

impl std::fmt::Debug for PostgresTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresTarget")
            .field("url", &self.redacted())
            .field("max_connections", &self.max_connections)
            .field("acquire_timeout", &self.acquire_timeout)
            .finish()
    }
}

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
    /// How long a statement waits for another connection's (or process's) write lock (SQLite; PostgreSQL's wait for a
    /// connection is [`PostgresTarget::acquire_timeout`]).
    pub busy_timeout: Duration,
    /// How often `ApprovalStore::wait` looks for a decision written by another process (on PostgreSQL, where a
    /// decision also arrives as a notification, at least every second: the fallback for a lost notification).
    pub approval_poll_interval: Duration,
    /// Keep an audit journal for [`AuditWriter::record_journaled`] (the gateway's store). Journals of dead
    /// processes are recovered at every open, whatever this says.
    pub journal: bool,
    /// How much of the audit log the writer keeps (the default keeps everything).
    pub retention: Retention,
    /// How often the writer measures the database and the free disk and applies `retention`.
    pub audit_upkeep_interval: Duration,
    /// This process's instance id (`[store] instance_id`); `None` takes `$TOOLGATE_INSTANCE_ID`, else the one kept in
    /// the state directory (generated at the first open).
    pub instance_id: Option<String>,
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
            instance_id: None,
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
    instance: Option<Arc<str>>,
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
    let stamp = audit::prepare::RowStamp { redaction: options.redaction, instance };
    AuditWriter::spawn(setup, stamp, options.audit_queue_wait)
}

/// An open store: audit log, pins, approvals. Clones share the connection pool and the audit writer.
#[derive(Debug, Clone)]
pub struct Store {
    backend: Backend,
    path: PathBuf,
    audit: AuditWriter,
    options: StoreOptions,
    instance: Option<Arc<str>>,
    feed: Arc<feed::Feed>,
    /// The gateway's hold on its instance id, released when the last handle is dropped.
    _instance_lock: Option<Arc<instance::InstanceLock>>,
    /// The gateway's claim on its instance id in a shared PostgreSQL database (see [`claim`]).
    _instance_claim: Option<Arc<claim::InstanceClaim>>,
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
        let state_dir = path.parent().filter(|parent| !parent.as_os_str().is_empty()).unwrap_or(Path::new("."));
        let store = Store::start(Backend::Sqlite(pool), path, state_dir, options).await;
        // Files SQLite made while the pool opened (a WAL beside an older, looser database, say).
        permissions::tighten(companions.iter().map(PathBuf::as_path));
        store
    }

    /// Opens (and migrates) a PostgreSQL store shared with other gateway processes. `state_dir` keeps what stays
    /// local to this process: its instance id and its audit journals (`toolgate-postgres.journal-<pid>`).
    ///
    /// Must run inside a tokio runtime: the audit writer and the change listener are spawned on it.
    pub async fn open_postgres(
        target: &PostgresTarget,
        state_dir: &Path,
        options: StoreOptions,
    ) -> Result<Store, StoreError> {
        create_state_dir(state_dir)?;
        let pool = connect_postgres(target).await?;
        migrations::run_postgres(&pool).await?;
        let backend = Backend::Postgres(pool);
        Store::start(backend, &state_dir.join(POSTGRES_JOURNAL_BASE), state_dir, options).await
    }

    /// Opens a PostgreSQL store only to read it (`toolgate audit verify`): no migration, no journal recovery.
    pub async fn open_postgres_read_only(target: &PostgresTarget, state_dir: &Path) -> Result<Store, StoreError> {
        let pool = connect_postgres(target).await?;
        let (found, needed) =
            (migrations::applied_postgres_version(&pool).await?, migrations::latest_postgres_version());
        if found < needed {
            pool.close().await;
            return Err(StoreError::SchemaBehind { path: PathBuf::from(target.redacted()), found, needed });
        }
        let backend = Backend::Postgres(pool);
        Ok(Store::read_only(backend, &state_dir.join(POSTGRES_JOURNAL_BASE)))
    }

    /// What every writable open does once the schema is current: the instance id, the restarted gateway's
    /// housekeeping, journal recovery, this process's journal and the writer.
    async fn start(
        backend: Backend,
        path: &Path,
        state_dir: &Path,
        options: StoreOptions,
    ) -> Result<Store, StoreError> {
        // The gateway's store holds its id before it lapses anything as "its previous run's": a second live process
        // configured with the same id stops here, one with a generated id takes the next free slot. Other commands
        // (`toolgate approvals`) only stamp rows with the id.
        let (instance, instance_lock): (Arc<str>, _) = if options.journal {
            let (id, lock) = instance::resolve_locked(state_dir, options.instance_id.as_deref())?;
            (id.into(), Some(Arc::new(lock)))
        } else {
            (instance::resolve(state_dir, options.instance_id.as_deref())?.into(), None)
        };
        // On a database other machines share, the id is claimed there too: the file lock sees one machine only.
        let instance_claim = match &backend {
            Backend::Postgres(pool) if options.journal => {
                Some(Arc::new(claim::InstanceClaim::take(&pool.connect_options(), &instance).await?))
            }
            _ => None,
        };
        let feed = feed::Feed::new();
        if let Backend::Postgres(pool) = &backend {
            feed::Feed::listen(&feed, pool.clone());
        }
        let approvals = ApprovalStore::new(
            backend.clone(),
            options.approval_poll_interval,
            options.redaction == ArgumentRedaction::Digest,
            Some(Arc::clone(&instance)),
            Arc::clone(&feed),
        );
        if options.journal {
            // The gateway's store only: a call this instance's previous run left waiting will never use its
            // approval (the process that held it is gone), so nobody should be asked to decide it.
            approvals.lapse_orphaned().await;
            if options.redaction == ArgumentRedaction::Digest {
                // Summaries a crashed or older gateway left behind after their approvals settled. Housekeeping: a
                // failed erase is logged and does not stop the start.
                approvals.erase_after_write().await;
            }
        }
        // Every process recovers what crashed gateways journaled, so `toolgate audit` sees every forwarded call.
        audit::recover_journals(&backend, path).await?;
        let journal = if options.journal {
            Some(Arc::new(audit::journal::Journal::open(&audit::journal::Journal::path_for(path, std::process::id()))?))
        } else {
            None
        };
        let audit = spawn_writer(&backend, path, journal, &options, Some(Arc::clone(&instance)));
        if options.journal {
            // The gateway's store says it is alive and lapses what stopped processes left waiting.
            heartbeat::Beating {
                backend: backend.clone(),
                audit: audit.clone(),
                instance: Arc::clone(&instance),
                claim: instance_claim.as_ref().map(Arc::downgrade),
                feed: Arc::downgrade(&feed),
                poll_interval: options.approval_poll_interval,
                erase_settled: options.redaction == ArgumentRedaction::Digest,
            }
            .spawn();
        }
        Ok(Store {
            backend,
            path: path.to_path_buf(),
            audit,
            options,
            instance: Some(instance),
            feed,
            _instance_lock: instance_lock,
            _instance_claim: instance_claim,
        })
    }

    /// A store that only reads: its writer refuses nothing but is never asked to write, and it has no instance.
    fn read_only(backend: Backend, path: &Path) -> Store {
        let options = StoreOptions { audit_upkeep_interval: Duration::from_secs(3600), ..StoreOptions::default() };
        let audit = spawn_writer(&backend, path, None, &options, None);
        Store {
            backend,
            path: path.to_path_buf(),
            audit,
            options,
            instance: None,
            feed: feed::Feed::new(),
            _instance_lock: None,
            _instance_claim: None,
        }
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
        Ok(Store::read_only(Backend::Sqlite(pool), path))
    }

    /// Rows in journals of processes that are gone that the database lacks (reads only).
    pub async fn journal_backlog(&self) -> Result<JournalBacklog, StoreError> {
        audit::journal_backlog(&self.backend, &self.path).await
    }

    /// Applies the retention policy now (the writer also does every `audit_upkeep_interval`).
    pub async fn prune_audit(&self) -> Result<PruneReport, StoreError> {
        audit::retention::prune(&self.backend, &self.options.retention, std::time::SystemTime::now()).await
    }

    /// Whether the database answers: one trivial round trip (`SELECT 1`) on either backend, reading no table, so a
    /// readiness probe costs the database nothing and depends on no table's shape.
    pub async fn ping(&self) -> Result<(), StoreError> {
        on_backend!(&self.backend, |pool| {
            sqlx::query("SELECT 1").execute(pool).await?;
            Ok(())
        })
    }

    /// The audit log's checkpoint, once retention pruned rows.
    pub async fn audit_checkpoint(&self) -> Result<Option<Checkpoint>, StoreError> {
        audit::retention::checkpoint(&self.backend).await
    }

    /// The database file (for PostgreSQL, the base name of this process's audit journals in the state directory).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether the store is a shared PostgreSQL database.
    pub fn is_postgres(&self) -> bool {
        matches!(self.backend, Backend::Postgres(_))
    }

    /// The instance id stamped on every audit row this store writes (`None` for a read-only store).
    pub fn instance(&self) -> Option<&str> {
        self.instance.as_deref()
    }

    /// Changes to approvals and pins made from now on, by this process or (on PostgreSQL) any other. A hint to
    /// re-read: a lagging receiver misses changes, and notifications are lost while the database is unreachable.
    pub fn changes(&self) -> tokio::sync::broadcast::Receiver<StoreChange> {
        self.feed.subscribe()
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
        PinStore::new(self.backend.clone(), Arc::clone(&self.feed))
    }

    /// The approvals queue.
    pub fn approvals(&self) -> ApprovalStore {
        let digest_only = self.options.redaction == ArgumentRedaction::Digest;
        ApprovalStore::new(
            self.backend.clone(),
            self.options.approval_poll_interval,
            digest_only,
            self.instance.clone(),
            Arc::clone(&self.feed),
        )
    }

    /// The sealing secret and used nonces of 2026-07-28 request states (MRTR confirmations).
    pub fn request_states(&self) -> RequestStateStore {
        RequestStateStore::new(self.backend.clone())
    }

    /// Writes every queued audit entry, then closes the connections (other clones stop working).
    pub async fn close(self) -> Result<(), StoreError> {
        self.audit.flush().await?;
        self.backend.close().await;
        Ok(())
    }
}

/// The pool of a PostgreSQL store. A connection is checked before it is handed out (sqlx's default), so after a
/// server restart dead connections are replaced rather than failing a statement.
async fn connect_postgres(target: &PostgresTarget) -> Result<sqlx::PgPool, StoreError> {
    let open_error = |source| StoreError::OpenPostgres { target: target.redacted(), source };
    let connect = PgConnectOptions::from_str(&target.url).map_err(open_error)?.application_name("toolgate");
    PgPoolOptions::new()
        .max_connections(target.max_connections.max(1))
        .acquire_timeout(target.acquire_timeout)
        .connect_with(connect)
        .await
        .map_err(open_error)
}
