//! Helpers shared by the store tests: a store in a fresh temporary directory and a raw connection for tampering.

use std::path::Path;

use sqlx::sqlite::{SqliteConnectOptions, SqlitePool};
use toolgate_store::{AuditEntry, AuditKind, Store, StoreOptions};

/// A fresh store in its own temporary directory (kept alive by the returned guard).
pub(crate) async fn fresh_store(options: StoreOptions) -> (tempfile::TempDir, Store) {
    let directory = tempfile::tempdir().expect("tempdir");
    let store = Store::open_file(&directory.path().join("toolgate.db"), options).await.expect("open store");
    (directory, store)
}

/// A second, raw connection to the same file: what someone editing the database by hand would use.
pub(crate) async fn raw_connection(path: &Path) -> SqlitePool {
    SqlitePool::connect_with(SqliteConnectOptions::new().filename(path)).await.expect("raw connection")
}

/// Runs a statement on a raw connection.
pub(crate) async fn tamper(pool: &SqlitePool, statement: &'static str) {
    sqlx::query(statement).execute(pool).await.expect(statement);
}

/// A call entry for tool `tool` with some arguments.
pub(crate) fn call_entry(tool: &str, n: u64) -> AuditEntry {
    AuditEntry {
        session: Some("session-1".into()),
        upstream: Some("files".into()),
        tool: Some(tool.into()),
        args: Some(serde_json::json!({"path": format!("/tmp/{n}"), "n": n})),
        ..AuditEntry::new(AuditKind::Call)
    }
}
