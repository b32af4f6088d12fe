//! The store's typed errors: what failed (opening, migrating, a query, a stored value that does not parse) and
//! the refusals that are answers rather than failures (an approval that cannot be used, a full audit queue).
//!
//! Messages are lowercase without a final period. Nothing here logs; callers decide what to say and where.

use std::path::PathBuf;

/// Why a store operation failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The audit writer is behind: as many rows as the queue holds wait for it, so the row was not written (the
    /// caller must not go ahead as if it were).
    #[error("the audit writer is behind ({capacity} rows wait to be written)")]
    AuditQueueFull {
        /// The queue's capacity.
        capacity: usize,
    },
    /// The audit writer's attempts fail (a full disk, an IO error): rows wait for it and the row was not written.
    /// The writer keeps retrying and recovers by itself.
    #[error("the audit writer is failing ({error}); {waiting} rows wait to be written")]
    AuditWriterFailing {
        /// The writer's last error.
        error: String,
        /// Rows waiting for it.
        waiting: usize,
    },
    /// Rows about to be pruned could not be exported (and were not pruned).
    #[error("cannot export audit rows to {path}: {source}")]
    Export {
        /// The export file or directory.
        path: PathBuf,
        /// The IO error.
        source: std::io::Error,
    },
    /// The audit journal could not be written or read.
    #[error("audit journal {path}: {source}")]
    Journal {
        /// The journal file.
        path: PathBuf,
        /// The IO error.
        source: std::io::Error,
    },
    /// The state directory could not be created.
    #[error("cannot create state directory {path}: {source}")]
    StateDir {
        /// The directory.
        path: PathBuf,
        /// The IO error.
        source: std::io::Error,
    },
    /// The database could not be opened or configured.
    #[error("cannot open store {path}: {source}")]
    Open {
        /// The database file.
        path: PathBuf,
        /// The driver's error.
        source: sqlx::Error,
    },
    /// A PostgreSQL store could not be reached or configured.
    #[error("cannot open store {target}: {source}")]
    OpenPostgres {
        /// The database, its URL without a password.
        target: String,
        /// The driver's error.
        source: sqlx::Error,
    },
    /// The instance id file could not be read or written.
    #[error("instance id {path}: {source}")]
    Instance {
        /// The file in the state directory.
        path: PathBuf,
        /// The IO error.
        source: std::io::Error,
    },
    /// Another live process on this machine holds this instance id (two processes on one state directory that
    /// resolved the same id): the second is refused, so it never takes the first one's approvals for its own.
    #[error(
        "instance id {id:?} is in use by another running toolgate process ({path} is locked); give each process \
         sharing a state directory its own id with `[store] instance_id` or $TOOLGATE_INSTANCE_ID"
    )]
    InstanceInUse {
        /// The id.
        id: String,
        /// Its lock file.
        path: PathBuf,
    },
    /// Another live process on the shared database holds this instance id (two machines told the same
    /// `[store] instance_id`, or a copied state directory): the second is refused.
    #[error(
        "instance id {id:?} is held by another running toolgate process on this database (another machine with the \
         same `[store] instance_id` or $TOOLGATE_INSTANCE_ID, or a copy of its state directory); give each process its \
         own id"
    )]
    InstanceClaimed {
        /// The id.
        id: String,
    },
    /// The lock that serializes opening the database between processes could not be taken.
    #[error("cannot lock {path} to open the store: {source}")]
    MigrationLock {
        /// The lock file beside the database.
        path: PathBuf,
        /// The IO error.
        source: std::io::Error,
    },
    /// A database opened read-only has an older schema than this toolgate reads, and read-only opens never migrate.
    #[error(
        "{path} has schema version {found} and this toolgate reads version {needed}: open it once with a command that \
         migrates it (`toolgate audit`, or `toolgate serve`), then verify"
    )]
    SchemaBehind {
        /// The database file.
        path: PathBuf,
        /// The newest migration applied to it.
        found: i64,
        /// The newest migration this build knows.
        needed: i64,
    },
    /// The schema could not be brought up to date.
    #[error("cannot migrate store schema: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    /// A query failed (locked beyond the busy timeout, disk full, IO error, ...).
    #[error("store query failed: {0}")]
    Database(#[from] sqlx::Error),
    /// A value could not be turned into JSON, or stored JSON does not parse.
    #[error("store value is not valid JSON ({what}): {source}")]
    Json {
        /// Which value.
        what: &'static str,
        /// The serde error.
        source: serde_json::Error,
    },
    /// A value could not be canonicalized for hashing (RFC 8785 rejects some numbers).
    #[error("cannot canonicalize audit entry: {0}")]
    Canonical(#[from] toolgate_core::fingerprint::FingerprintError),
    /// A stored value is not what this version of the store writes.
    #[error("corrupt store value ({what}): {detail}")]
    Corrupt {
        /// Which value.
        what: &'static str,
        /// What was wrong with it.
        detail: String,
    },
    /// A timestamp could not be parsed as RFC 3339.
    #[error("not an RFC 3339 time: {0:?}")]
    Time(String),
    /// The audit writer task has stopped (after [`crate::Store::close`], or because its runtime shut down).
    #[error("the audit writer has stopped")]
    AuditWriterStopped,
    /// A call's row was to be journaled, but the store was opened without an audit journal (only the gateway's
    /// store keeps one: `StoreOptions::journal`).
    #[error("the store has no audit journal, so it cannot record a call (open it with `journal` set)")]
    NoAuditJournal,
    /// The audit writer could not write a batch after retrying.
    #[error("audit write failed: {0}")]
    AuditWrite(String),
    /// A definition's pin kept changing while a listing was compared with it (see `PinStore::observe`).
    #[error("the pin of {0} changed on every try while it was compared with the listed definition")]
    PinMoved(String),
    /// No approval or pin with that key exists.
    #[error("not found: {0}")]
    NotFound(String),
    /// A decision was asked for an approval that is no longer pending.
    #[error("approval {id} is already {state}")]
    AlreadyDecided {
        /// The approval.
        id: String,
        /// Its state (`approved`, `denied`, `consumed`).
        state: String,
    },
    /// An approval could not be used for this call.
    #[error("approval {id} refused: {refusal}")]
    ApprovalRefused {
        /// The approval.
        id: String,
        /// Why.
        refusal: crate::approval_state::ConsumeRefusal,
    },
    /// A decision arrived after the approval expired.
    #[error("approval {0} has expired")]
    Expired(String),
    /// A decision arrived for an approval whose call no longer waits (it timed out, was cancelled, its client went
    /// away): approving it would approve nothing.
    #[error("approval {id} lapsed: nothing waits for it any more ({why})")]
    Lapsed {
        /// The approval.
        id: String,
        /// Why its call stopped waiting.
        why: String,
    },
}

/// `try_record` could not queue an audit entry. Never a silent drop: the caller logs it, counts it, or refuses the
/// call it was about to make.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum AuditQueueError {
    /// The bounded queue is full: the writer is behind (slow disk, lock held by another process).
    #[error("audit queue is full ({capacity} entries waiting)")]
    Full {
        /// The queue's capacity.
        capacity: usize,
    },
    /// The writer has stopped; nothing more can be recorded.
    #[error("audit writer has stopped")]
    Closed,
}
