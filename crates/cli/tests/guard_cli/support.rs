//! Running the built `toolgate` binary with a hang guard, and a store in a fresh state directory.

use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use sqlx::sqlite::{SqliteConnectOptions, SqlitePool};
use toolgate_store::Store;

/// What a finished `toolgate` run printed and returned.
#[derive(Debug)]
pub(crate) struct Run {
    pub(crate) code: i32,
    pub(crate) stdout: String,
    pub(crate) stderr: String,
}

/// Not a performance assertion: a guard against hangs.
const HANG_GUARD: Duration = Duration::from_secs(120);

/// The built binary.
pub(crate) fn toolgate_binary() -> &'static str {
    env!("CARGO_BIN_EXE_toolgate")
}

/// Runs `toolgate ARGS...` (blocking) with `USER=tester`.
pub(crate) fn toolgate(args: &[&str]) -> Run {
    let mut command = Command::new(toolgate_binary());
    command.args(args).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    command.env_remove("TOOLGATE_LOG").env_remove("TOOLGATE_STATE_DIR").env("NO_COLOR", "1").env("USER", "tester");
    let mut child = command.spawn().expect("the toolgate binary starts");
    let mut stdout_pipe = child.stdout.take().expect("stdout is piped");
    let mut stderr_pipe = child.stderr.take().expect("stderr is piped");
    let stdout_reader = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stdout_pipe.read_to_string(&mut text);
        text
    });
    let stderr_reader = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stderr_pipe.read_to_string(&mut text);
        text
    });
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("waiting on toolgate works") {
            break status;
        }
        if started.elapsed() > HANG_GUARD {
            let _ = child.kill();
            panic!("toolgate {args:?} did not finish within {HANG_GUARD:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Run {
        code: status.code().unwrap_or(-1),
        stdout: stdout_reader.join().expect("stdout reader"),
        stderr: stderr_reader.join().expect("stderr reader"),
    }
}

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
