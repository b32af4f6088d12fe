//! `toolgate verify`: run an MCP server in an observing sandbox, call each of its tools with arguments generated
//! from its schema, watch what the calls do to files, the network and processes, and compare that with the hints
//! the tools declare.
//!
//! Principal types and functions:
//! - [`VerifyOptions`] → [`verify`] → [`Verification`]: the whole run (scratch copy, sandbox, calls, trace).
//! - [`ToolReport`]: per tool, its calls ([`CallObservation`]), its [`Finding`]s (observed contradictions of a
//!   declared hint, rule codes `TG4xx` next to lint's catalogue) and its [`Observed`] summary (what a verification
//!   record stores and `serve` weighs as evidence).
//!
//! The sandbox is bubblewrap (read-only root, the scratch copy writable and the working directory, no network, a
//! private process tree) under `strace -f`, because together they both confine and *see*: bubblewrap turns a write
//! outside the copy or a connection into a refused attempt, and strace records the attempt with its result. The
//! snapshot diff of the scratch tree sees what was written whatever syscall wrote it. Every run is bounded (per
//! call and in total); nothing is written outside the scratch copy, and nothing here touches the state store (the
//! binary stores the records).
//!
//! ```no_run
//! # async fn example() -> Result<(), toolgate_verify::VerifyError> {
//! let options = toolgate_verify::VerifyOptions::new(vec!["python3".into(), "server.py".into()], ".".into());
//! let verification = toolgate_verify::verify(&options).await?;
//! for tool in &verification.tools {
//!     println!("{}: {} finding(s), supported: {}", tool.name, tool.findings.len(), tool.observed.supported);
//! }
//! # Ok(())
//! # }
//! ```

mod answer;
pub mod args;
mod findings;
mod observe;
mod sandbox;
pub mod snapshot;
pub mod strace;

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Serialize;

pub use findings::{Finding, RULES, Rule, findings_for, observed_of};
pub use observe::{QUIET_ERROR, verify};
pub use sandbox::{Sandbox, missing_tools};

/// How a verification runs.
#[derive(Debug, Clone)]
pub struct VerifyOptions {
    /// The server command and its arguments.
    pub command: Vec<String>,
    /// The working directory copied into the scratch tree (the server runs in the copy).
    pub workdir: PathBuf,
    /// Environment variables given to the server (nothing else of toolgate's environment is, except `PATH`,
    /// `HOME`, `LANG` and `TERM`); `{scratch}` in a value stands for the scratch copy's path.
    pub env: Vec<(String, String)>,
    /// How many times each tool is called with the same arguments (at least 1; 2 or more sees repeats).
    pub calls: u32,
    /// Call tools that do not declare `readOnlyHint: true` (they may write, inside the scratch copy only).
    pub allow_writes: bool,
    /// Time allowed for `initialize`, the listing and each call.
    pub timeout_per_call: Duration,
    /// Time allowed for the whole run; tools not reached in time are reported as not called.
    pub timeout: Duration,
}

impl VerifyOptions {
    /// Two calls per tool, no writers, 30 s per call and 5 minutes in all.
    pub fn new(command: Vec<String>, workdir: PathBuf) -> VerifyOptions {
        VerifyOptions {
            command,
            workdir,
            env: Vec::new(),
            calls: 2,
            allow_writes: false,
            timeout_per_call: Duration::from_secs(30),
            timeout: Duration::from_secs(300),
        }
    }
}

/// The outcome of one run.
#[derive(Debug, Clone, Serialize)]
pub struct Verification {
    /// The server command, as given.
    pub command: Vec<String>,
    /// `serverInfo.name` and `version`, when given.
    pub server: String,
    /// Calls per tool asked for.
    pub calls: u32,
    /// Per tool, in listing order.
    pub tools: Vec<ToolReport>,
}

/// One tool's verification.
#[derive(Debug, Clone, Serialize)]
pub struct ToolReport {
    /// The tool's name.
    pub name: String,
    /// The fingerprint of its definition as listed (the one the gateway pins).
    pub fingerprint: String,
    /// The raw definition.
    #[serde(skip)]
    pub definition: serde_json::Value,
    /// Why it was not called, when it was not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub skipped: Option<String>,
    /// The arguments every call used.
    pub arguments: serde_json::Value,
    /// Each call, in order.
    pub observations: Vec<CallObservation>,
    /// Observed contradictions of declared hints.
    pub findings: Vec<Finding>,
    /// The summary a record stores.
    pub observed: Observed,
}

/// What one call did.
#[derive(Debug, Clone, Default, Serialize)]
pub struct CallObservation {
    /// The call's error (`isError` text, a JSON-RPC error, or [`QUIET_ERROR`] and the error's first line for an
    /// answer that is an error in all but its flag), when it failed: a failed call is never support.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The scratch tree's difference across the call.
    pub tree: snapshot::TreeDiff,
    /// Files inside the scratch copy opened for writing, removed, renamed or made, as strace saw them. Shown as
    /// detail only: what counts inside the copy is its net change ([`Self::tree`]), so a lock file taken and
    /// dropped (git's optional index lock) is not a write.
    pub writes_inside: Vec<String>,
    /// Writes tried outside the scratch copy, `syscall path errno`: refused by the sandbox (`EROFS`, `EACCES`,
    /// `EPERM`), or `(not refused)` where one got through.
    pub refused_writes: Vec<String>,
    /// Network connections tried, `address (outcome)`.
    pub connections: Vec<String>,
    /// Local (`AF_UNIX`) sockets connected to, or tried, `unix:PATH (outcome)`: not the network (no open-world
    /// finding), but a daemon on this machine may do anything for the tool, so such a call is never support.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub local_connections: Vec<String>,
    /// Programs started.
    pub processes: Vec<String>,
}

impl CallObservation {
    /// True when the call changed the scratch copy or tried to write outside it.
    pub fn wrote(&self) -> bool {
        !self.tree.is_empty() || !self.refused_writes.is_empty()
    }

    /// True when the call connected or tried to.
    pub fn connected(&self) -> bool {
        !self.connections.is_empty()
    }

    /// True when the call connected, or tried to, to a local socket.
    pub fn reached_a_local_socket(&self) -> bool {
        !self.local_connections.is_empty()
    }
}

/// The observed facts about one tool that `serve` weighs as evidence, hint by hint.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Observed {
    /// Calls made.
    pub calls: u32,
    /// Calls that succeeded.
    pub succeeded: u32,
    /// Some call wrote or tried to write: not read-only.
    pub wrote: bool,
    /// Some call connected or tried to: open-world.
    pub connected: bool,
    /// A repeated identical call changed the state again: not idempotent.
    pub repeat_changed: bool,
    /// Some call removed or overwrote existing data: destructive.
    pub destroyed: bool,
    /// Every call succeeded (at least one was made), none wrote, connected or used a local socket: support for
    /// read-only and closed-world.
    pub supported: bool,
}

/// Why a verification could not run.
#[derive(Debug, thiserror::Error)]
pub enum VerifyError {
    /// No command was given.
    #[error("no server command given")]
    NoCommand,
    /// bubblewrap or strace is missing, or the sandbox cannot be built.
    #[error("`toolgate verify` cannot build its observing sandbox: {0} (Debian: apt-get install bubblewrap strace)")]
    Missing(String),
    /// A file operation failed.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// The working directory (or the scratch tree) is beyond the snapshot's bounds.
    #[error("{root} holds more than {} entries or {} MiB; run verify from a smaller directory (--dir)", snapshot::MAX_ENTRIES, snapshot::MAX_BYTES / (1024 * 1024))]
    TreeTooLarge {
        /// The tree.
        root: PathBuf,
    },
    /// The server could not be started or listed.
    #[error("the server did not start or list its tools in the sandbox: {0}")]
    Server(#[from] toolgate_upstream::UpstreamError),
    /// The whole run took longer than its bound.
    #[error("the server did not list its tools within the time allowed")]
    TimedOut,
}

impl VerifyError {
    pub(crate) fn io(path: &Path, source: std::io::Error) -> VerifyError {
        VerifyError::Io { path: path.to_path_buf(), source }
    }
}
