//! Sandboxes for stdio MCP servers: what a server may see and do, and the command that holds it to that.
//!
//! A [`Profile`] says what one server gets: the network or none, the host paths it may write (everything else is
//! read-only), the paths it may not see at all, the environment (only what is passed), its resource limits and its
//! working directory. [`Profile::for_upstream`] builds one from an upstream's `[upstream.sandbox]` settings and
//! whether its effective hints need the network; a verifier builds one directly ([`Profile::observing`]).
//! [`command`] turns a profile plus a program into the command that runs it confined, on the mechanisms the
//! [`probe`] found: `bwrap` (bubblewrap) for the file-system, network, pid, IPC and UTS namespaces, a session of its
//! own and no capabilities; `prlimit` for memory and open files; the sandbox's own pid namespace with a small
//! `pid_max` for the process count (`RLIMIT_NPROC` does not bind root). [`explain_denial`] reads a server's error text
//! and names the sandbox rule that most likely refused it.
//!
//! ```no_run
//! use toolgate_sandbox::{Profile, command, probe};
//! let mechanisms = probe();
//! let profile = Profile::observing("/tmp/scratch".into(), vec![("PATH".into(), "/usr/bin:/bin".into())]);
//! let sandboxed = command(&profile, &mechanisms, &["strace".into(), "-f".into()], "python3", &["server.py".into()])?;
//! println!("{} {:?}", sandboxed.program, sandboxed.args);
//! # Ok::<(), toolgate_sandbox::SandboxError>(())
//! ```
//!
//! This crate spawns only its probes (`bwrap`, `unshare` running `/bin/true`); it never runs a server itself, never
//! reads toolgate's config and never decides policy.

mod command;
mod denial;
mod port_guard;
mod probe;
mod profile;

pub use command::{SandboxedCommand, command};
pub use denial::explain_denial;
pub use port_guard::{PORT_GUARD_ARG, run_port_guard};
pub use probe::{Mechanisms, probe};
pub use profile::{Cwd, HintNeeds, Network, Profile, ResourceLimits};

/// Why a sandboxed command cannot be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SandboxError {
    /// A mechanism the profile needs is missing on this machine.
    #[error("the sandbox needs {mechanism}, which is not available here: {reason}")]
    Unavailable {
        /// What is missing (`bubblewrap`, `process limit`, ...).
        mechanism: &'static str,
        /// What the probe found.
        reason: String,
    },
    /// A path in the profile cannot be used.
    #[error("sandbox path {path}: {reason}")]
    Path {
        /// The path as configured.
        path: String,
        /// Why not.
        reason: String,
    },
}
