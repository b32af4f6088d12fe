//! The schema, embedded in the binary and applied at open with sqlx's `Migrator` (no `migrate!` macro, so the
//! proc-macro stack is not built).
//!
//! Migrations are append-only: a released file is never edited (sqlx checks each applied migration's checksum).
//! PostgreSQL will get its own list beside this one.

use std::borrow::Cow;

use sqlx::SqlSafeStr as _;
use sqlx::migrate::{Migration, MigrationType, Migrator};
use sqlx::sqlite::SqlitePool;

use crate::error::StoreError;

const SQLITE: &[(i64, &str, &str)] = &[
    (1, "initial", include_str!("../migrations/sqlite/0001_initial.sql")),
    (2, "journal", include_str!("../migrations/sqlite/0002_journal.sql")),
    (3, "approval risk", include_str!("../migrations/sqlite/0003_approval_risk.sql")),
    (4, "tool inventory", include_str!("../migrations/sqlite/0004_tool_inventory.sql")),
    (5, "inventory access", include_str!("../migrations/sqlite/0005_inventory_access.sql")),
];

/// Brings a SQLite database up to the latest schema.
pub(crate) async fn run(pool: &SqlitePool) -> Result<(), StoreError> {
    let migrations = SQLITE
        .iter()
        .map(|&(version, description, sql)| {
            Migration::new(version, Cow::Borrowed(description), MigrationType::Simple, sql.into_sql_str(), false)
        })
        .collect();
    Migrator::with_migrations(migrations).run(pool).await?;
    Ok(())
}
