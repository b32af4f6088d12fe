//! The schema, embedded in the binary and applied at open with sqlx's `Migrator` (no `migrate!` macro, so the
//! proc-macro stack is not built).
//!
//! Migrations are append-only: a released file is never edited (sqlx checks each applied migration's checksum).
//! Each backend has its own list (`migrations/sqlite/`, `migrations/postgres/`); PostgreSQL's first migration is the
//! schema SQLite reached through its own, and from there a change gets a file in each list. sqlx's PostgreSQL
//! migrator holds an advisory lock while it runs, so processes starting together against one database take turns.

use std::borrow::Cow;
use std::path::{Path, PathBuf};

use sqlx::SqlSafeStr as _;
use sqlx::migrate::{Migration, MigrationType, Migrator};
use sqlx::postgres::PgPool;
use sqlx::sqlite::SqlitePool;

use crate::error::StoreError;

const SQLITE: &[(i64, &str, &str)] = &[
    (1, "initial", include_str!("../migrations/sqlite/0001_initial.sql")),
    (2, "journal", include_str!("../migrations/sqlite/0002_journal.sql")),
    (3, "approval risk", include_str!("../migrations/sqlite/0003_approval_risk.sql")),
    (4, "tool inventory", include_str!("../migrations/sqlite/0004_tool_inventory.sql")),
    (5, "inventory access", include_str!("../migrations/sqlite/0005_inventory_access.sql")),
    (6, "audit checkpoint", include_str!("../migrations/sqlite/0006_audit_checkpoint.sql")),
    (7, "audit text", include_str!("../migrations/sqlite/0007_audit_text.sql")),
    (8, "approval lapse", include_str!("../migrations/sqlite/0008_approval_lapse.sql")),
    (9, "pin kinds", include_str!("../migrations/sqlite/0009_pin_kinds.sql")),
    (10, "verification", include_str!("../migrations/sqlite/0010_verification.sql")),
    (11, "request states", include_str!("../migrations/sqlite/0011_request_states.sql")),
    (12, "instance", include_str!("../migrations/sqlite/0012_instance.sql")),
    (13, "inventory instance", include_str!("../migrations/sqlite/0013_inventory_instance.sql")),
    (14, "instance heartbeat", include_str!("../migrations/sqlite/0014_instance_heartbeat.sql")),
    (16, "approval caller", include_str!("../migrations/sqlite/0016_approval_caller.sql")),
    (17, "approval detached", include_str!("../migrations/sqlite/0017_approval_detached.sql")),
    (18, "console id tokens", include_str!("../migrations/sqlite/0018_console_id_tokens.sql")),
];

const POSTGRES: &[(i64, &str, &str)] = &[
    (1, "initial", include_str!("../migrations/postgres/0001_initial.sql")),
    (2, "inventory instance", include_str!("../migrations/postgres/0002_inventory_instance.sql")),
    (3, "request states", include_str!("../migrations/postgres/0003_request_states.sql")),
    (4, "instance heartbeat", include_str!("../migrations/postgres/0004_instance_heartbeat.sql")),
    (6, "approval caller", include_str!("../migrations/postgres/0006_approval_caller.sql")),
    (7, "approval detached", include_str!("../migrations/postgres/0007_approval_detached.sql")),
    (8, "console id tokens", include_str!("../migrations/postgres/0008_console_id_tokens.sql")),
];

/// The newest SQLite migration this build applies.
pub(crate) fn latest_version() -> i64 {
    SQLITE.iter().map(|&(version, _, _)| version).max().unwrap_or(0)
}

/// The newest PostgreSQL migration this build applies.
pub(crate) fn latest_postgres_version() -> i64 {
    POSTGRES.iter().map(|&(version, _, _)| version).max().unwrap_or(0)
}

/// The newest migration applied to the database behind `pool` (0 when none is), read without writing.
pub(crate) async fn applied_version(pool: &SqlitePool) -> Result<i64, StoreError> {
    let exists: i64 =
        sqlx::query_scalar("SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = '_sqlx_migrations'")
            .fetch_one(pool)
            .await?;
    if exists == 0 {
        return Ok(0);
    }
    let version: Option<i64> =
        sqlx::query_scalar("SELECT max(version) FROM _sqlx_migrations WHERE success").fetch_one(pool).await?;
    Ok(version.unwrap_or(0))
}

/// Serializes opening a database between processes: held while the first connections switch the database to WAL
/// and the schema is brought up to date.
///
/// sqlx's migrator checks what is applied and then applies the rest, in separate steps, and switching a new
/// database to WAL needs it alone: two processes opening a fresh state directory at once (a gateway and `toolgate
/// approvals`, say) would both create the tables, or find it locked, and one would fail. An exclusive advisory lock
/// on `<database>.lock`, released when the file closes (so a crashed holder never blocks the next), makes the
/// second wait and then find nothing to do.
pub(crate) struct OpenLock {
    _file: std::fs::File,
}

impl OpenLock {
    /// Waits for the lock beside `database`.
    pub(crate) async fn take(database: &Path) -> Result<OpenLock, StoreError> {
        let mut path = database.as_os_str().to_owned();
        path.push(".lock");
        let path = PathBuf::from(path);
        let lock_error = |source| StoreError::MigrationLock { path: path.clone(), source };
        let file =
            std::fs::OpenOptions::new().create(true).truncate(false).write(true).open(&path).map_err(lock_error)?;
        let file = tokio::task::spawn_blocking(move || file.lock().map(|()| file))
            .await
            .map_err(|error| lock_error(std::io::Error::other(error)))?
            .map_err(lock_error)?;
        Ok(OpenLock { _file: file })
    }
}

/// The newest migration applied to the PostgreSQL database behind `pool` (0 when none is), read without writing.
pub(crate) async fn applied_postgres_version(pool: &PgPool) -> Result<i64, StoreError> {
    let exists: bool = sqlx::query_scalar("SELECT to_regclass('_sqlx_migrations') IS NOT NULL").fetch_one(pool).await?;
    if !exists {
        return Ok(0);
    }
    let version: Option<i64> =
        sqlx::query_scalar("SELECT max(version) FROM _sqlx_migrations WHERE success").fetch_one(pool).await?;
    Ok(version.unwrap_or(0))
}

/// Brings a PostgreSQL database up to the latest schema (sqlx's migrator locks it against other processes).
pub(crate) async fn run_postgres(pool: &PgPool) -> Result<(), StoreError> {
    Migrator::with_migrations(migrations_of(POSTGRES)).run(pool).await?;
    Ok(())
}

fn migrations_of(list: &'static [(i64, &'static str, &'static str)]) -> Vec<Migration> {
    list.iter()
        .map(|&(version, description, sql)| {
            Migration::new(version, Cow::Borrowed(description), MigrationType::Simple, sql.into_sql_str(), false)
        })
        .collect()
}

/// Brings a SQLite database up to the latest schema (under an [`OpenLock`]).
pub(crate) async fn run(pool: &SqlitePool) -> Result<(), StoreError> {
    Migrator::with_migrations(migrations_of(SQLITE)).run(pool).await?;
    Ok(())
}
