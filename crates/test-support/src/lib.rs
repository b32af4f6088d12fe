//! Test-only helpers for toolgate's integration tests: where the real MCP peers are installed and how to launch
//! them, and a misbehaving fake server for fault tests.
//!
//! - [`Peers`] finds the peers `cargo xtask test` installed (pinned in `peers.toml`) and builds a
//!   [`PeerCommand`] for each: Node reference servers, the Python SDK's interpreter, `mcp-server-git`, the
//!   Inspector CLI and the conformance suite.
//! - [`misbehave`] launches `fixtures/misbehave.py`, a stdlib-only Python fake that crashes, hangs, prints
//!   garbage or sends huge and oddly annotated answers on demand; [`liar`] launches `fixtures/liar.py`, whose
//!   hints lie about what its tools do.
//! - [`run_guarded`] / [`wait_guarded`] run a child to completion under a hang guard and capture its output.
//! - With the `cli` feature, `toolgate` runs the built `toolgate` binary for the CLI's tests: one command to
//!   completion, or a `toolgate serve` that announced where it listens, and talks raw HTTP to it.
//! - With the `store` feature, `pending_approval`: the one pending-approval fixture.
//! - With the `gateway` feature, `gateway_client::Client`: the one in-process client of a gateway session.
//! - With the `postgres` feature, `postgres::PostgresCluster`: a fresh PostgreSQL cluster in a temporary directory,
//!   one per test process, a database per test.
//! - With the `oidc` feature, `oidc::OidcProvider`: a real OpenID provider (npm `oidc-provider`) configured by the
//!   test, for the OAuth resource server, upstream-credential and console-SSO tests; `oidc_login::log_in` walks a
//!   person through its login and consent pages without a browser, to the client's redirect URI.
//!
//! A missing peer is a test failure, never a skip: [`Peers::locate`] panics with the command that installs them.
//! This crate never installs anything itself and is never a dependency of shipped code.
//!
//! ```no_run
//! let peers = toolgate_test_support::Peers::locate();
//! let mut child = peers
//!     .server_everything()
//!     .command()
//!     .stdin(std::process::Stdio::piped())
//!     .stdout(std::process::Stdio::piped())
//!     .spawn()
//!     .unwrap();
//! # child.kill().unwrap();
//! ```

// Test-support code runs only inside tests, where a panic is how a precondition failure is reported (a missing
// peer must fail the test loudly rather than skip it), so the workspace's no-panic lints do not apply here.
#![allow(clippy::panic, clippy::expect_used, clippy::unwrap_used)]

#[cfg(feature = "store")]
mod approvals;
pub mod fixture;
#[cfg(feature = "gateway")]
pub mod gateway_client;
#[cfg(feature = "oidc")]
pub mod oidc;
#[cfg(feature = "oidc")]
pub mod oidc_login;
mod peers;
#[cfg(feature = "postgres")]
pub mod postgres;
pub mod process;
#[cfg(feature = "cli")]
pub mod toolgate;

#[cfg(feature = "store")]
pub use approvals::pending_approval;
pub use fixture::{fixture_binary, fixture_http, fixture_stdio};
pub use peers::{PEERS_TOML, Peers};
pub use process::{HANG_GUARD, Run, run_guarded, wait_guarded};

use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// How to start one peer: a program, its arguments, and environment variables to add to the inherited ones.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerCommand {
    /// The executable (an absolute path, or a name looked up in `PATH` such as `python3`).
    pub program: PathBuf,
    /// Arguments after the program.
    pub args: Vec<String>,
    /// Variables set on top of the inherited environment (`PATH` with Node 22 first, `MEMORY_FILE_PATH`, ...).
    pub env: Vec<(String, String)>,
}

impl PeerCommand {
    /// A command with no arguments and no extra environment.
    pub fn new(program: impl Into<PathBuf>) -> Self {
        PeerCommand { program: program.into(), args: Vec::new(), env: Vec::new() }
    }

    /// Appends one argument.
    pub fn arg(mut self, arg: impl Into<String>) -> Self {
        self.args.push(arg.into());
        self
    }

    /// Appends several arguments.
    pub fn args<I, S>(mut self, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }

    /// Sets one extra environment variable, replacing an earlier value of the same name.
    pub fn env(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        let key = key.into();
        self.env.retain(|(existing, _)| *existing != key);
        self.env.push((key, value.into()));
        self
    }

    /// The program followed by its arguments, e.g. for a config file's `command`/`args` or a shell line.
    pub fn argv(&self) -> Vec<String> {
        std::iter::once(self.program.to_string_lossy().into_owned()).chain(self.args.iter().cloned()).collect()
    }

    /// A ready-to-configure `std::process::Command` (stdio is left at its defaults; set pipes as needed).
    /// For tokio, use `tokio::process::Command::from(peer.command())`.
    pub fn command(&self) -> std::process::Command {
        let mut command = std::process::Command::new(&self.program);
        command.args(&self.args);
        for (key, value) in &self.env {
            command.env(key, value);
        }
        command
    }
}

/// The directory holding this crate's fixtures (`misbehave.py`).
pub fn fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures")
}

/// The root of the toolgate workspace these tests were built from.
pub fn workspace_root() -> PathBuf {
    let manifest_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest_dir.ancestors().nth(2).map(Path::to_path_buf).unwrap_or_else(|| manifest_dir.to_path_buf())
}

/// The modes `misbehave.py` understands; see the fixture's docstring for what each does.
pub const MISBEHAVE_MODES: &[&str] = &[
    "crash-on-initialize",
    "initialize-first",
    "silent",
    "garbage",
    "huge-tools",
    "paginated",
    "crash-mid-call",
    "crash-once",
    "open-world-error",
    "stubborn",
    "stderr-noise",
    "tool-faults",
    "lossless",
    "rug-pull",
    "lying-reads",
    "relist",
    "hostile-relay",
    "resource-templates",
    "subscriptions",
    "hostile-text",
    "pinned-content",
];

/// Launches the misbehaving fake MCP server over stdio in `mode` (one of [`MISBEHAVE_MODES`]).
///
/// Use it only for faults no real server produces on demand. Panics on an unknown mode, so a typo fails the
/// test instead of testing a server that exits with a usage error.
pub fn misbehave(mode: &str) -> PeerCommand {
    assert!(MISBEHAVE_MODES.contains(&mode), "unknown misbehave mode {mode:?}; known modes: {MISBEHAVE_MODES:?}");
    let script = fixtures_dir().join("misbehave.py");
    PeerCommand::new("python3")
        .arg(script.to_string_lossy())
        .arg("--mode")
        .arg(mode)
        // Unbuffered, so a crash never loses an answer the fixture already "sent".
        .env("PYTHONUNBUFFERED", "1")
}

/// Launches `fixtures/modern.py` with the peers' Python (PyPI `mcp` 2.3), a server that answers both eras
/// (2026-07-28 requests and legacy sessions), over stdio. See the script's docstring for its tools.
pub fn modern_fixture(peers: &Peers) -> PeerCommand {
    let script = fixtures_dir().join("modern.py");
    PeerCommand::new(peers.python()).arg(script.to_string_lossy()).env("PYTHONUNBUFFERED", "1")
}

/// Launches `fixtures/modern_conformance.py` over stdio: a modern server on PyPI `mcp` 2.3 offering the tools,
/// resources and prompts the 2026-07-28 conformance scenarios call (the input-required ones included).
pub fn modern_conformance_fixture(peers: &Peers) -> PeerCommand {
    let script = fixtures_dir().join("modern_conformance.py");
    PeerCommand::new(peers.python()).arg(script.to_string_lossy()).env("PYTHONUNBUFFERED", "1")
}

/// [`modern_fixture`] over Streamable HTTP on `127.0.0.1:port`, endpoint `/mcp`.
pub fn modern_fixture_http(peers: &Peers, port: u16) -> PeerCommand {
    modern_fixture(peers).arg("--http").arg(port.to_string())
}

/// Launches `fixtures/liar.py`, the stdlib-only server whose hints lie (a read-only tool that appends to
/// `status.log`, a closed-world one that connects to 127.0.0.1, an idempotent one that appends, a non-destructive one
/// that removes `notes.txt`) and one honest reader, for `toolgate verify` and the sandbox. It works in its cwd.
pub fn liar() -> PeerCommand {
    PeerCommand::new("python3").arg(fixtures_dir().join("liar.py").to_string_lossy())
}

/// Launches `fixtures/evader.py`, the stdlib-only server whose read-only tools try to hide from `toolgate verify`
/// (one connects out then truncates verify's trace through `/proc/self/root`, one uses a local socket).
pub fn evader() -> PeerCommand {
    PeerCommand::new("python3").arg(fixtures_dir().join("evader.py").to_string_lossy())
}

/// `PATH` with `dir` first, for peers that start other programs by name (Inspector, conformance, npm bins).
fn path_with_first(dir: &Path) -> String {
    let rest = std::env::var_os("PATH").unwrap_or_default();
    let joined = std::env::join_paths(std::iter::once(dir.to_path_buf()).chain(std::env::split_paths(&rest)))
        .unwrap_or_else(|_| OsString::from(dir));
    joined.to_string_lossy().into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `MISBEHAVE_MODES` repeats the fixture's `--mode` choices so a typo fails with the list instead of a crashed
    /// fake; this keeps the two lists equal.
    #[test]
    fn misbehave_modes_match_the_fixture_choices() {
        let script = std::fs::read_to_string(fixtures_dir().join("misbehave.py")).expect("misbehave.py is readable");
        let start = script.find("choices=[").expect("misbehave.py declares its --mode choices") + "choices=[".len();
        let end = start + script[start..].find(']').expect("the choices list ends");
        let choices: Vec<&str> = script[start..end]
            .split(',')
            .map(|choice| choice.trim().trim_matches('"'))
            .filter(|choice| !choice.is_empty())
            .collect();
        assert_eq!(choices, MISBEHAVE_MODES);
    }
}
