//! Running the built `toolgate` binary (test-support's runner) and a store in a fresh state directory.

use std::path::Path;

use sqlx::sqlite::{SqliteConnectOptions, SqlitePool};
use toolgate_store::Store;
pub(crate) use toolgate_test_support::Run;
/// The built binary, and running it to completion (blocking) with `USER=tester`.
pub(crate) use toolgate_test_support::toolgate::{binary as toolgate_binary, run as toolgate};

/// Runs `toolgate ARGS...` from async code without blocking the runtime.
pub(crate) async fn toolgate_async(args: &[&str]) -> Run {
    let args: Vec<String> = args.iter().map(|arg| (*arg).to_owned()).collect();
    tokio::task::spawn_blocking(move || toolgate(&args.iter().map(String::as_str).collect::<Vec<_>>()))
        .await
        .expect("the run finishes")
}

/// A store in a fresh state directory (kept alive by the returned guard).
pub(crate) async fn fresh_state() -> (tempfile::TempDir, Store) {
    let directory = tempfile::tempdir().expect("tempdir");
    let store = Store::open(directory.path()).await.expect("open store");
    (directory, store)
}

/// The state directory as a command-line argument.
pub(crate) fn dir(directory: &tempfile::TempDir) -> &str {
    directory.path().to_str().expect("UTF-8 temp path")
}

/// A raw connection to the same file: what someone editing the database by hand would use.
pub(crate) async fn tamper(database: &Path, statement: &'static str) {
    let pool = SqlitePool::connect_with(SqliteConnectOptions::new().filename(database)).await.expect("raw connection");
    sqlx::query(statement).execute(&pool).await.expect(statement);
    pool.close().await;
}
