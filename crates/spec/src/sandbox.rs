//! How a stdio upstream is confined: its sandbox settings as configured, and what the gateway must hide from every
//! sandbox (its own state, config and listening ports).
//!
//! Plain data: `toolgate-sandbox` turns these settings and an upstream's effective hints into a profile and a
//! command; nothing here probes the machine or spawns anything.

use std::path::PathBuf;

/// Environment variables passed from toolgate's own environment to a sandboxed server unless the config says
/// otherwise: what Node and Python need to find their interpreter (`PATH`), a home for libraries that ask for one
/// (`HOME`) and the text encoding (`LANG`). Nothing else of toolgate's environment is passed.
pub const DEFAULT_SANDBOX_PASS_ENV: [&str; 3] = ["PATH", "HOME", "LANG"];

/// Memory (data segment and private writable mappings, `RLIMIT_DATA`) a sandboxed server may use unless configured.
pub const DEFAULT_SANDBOX_MEMORY_MIB: u64 = 2048;

/// Processes and threads a sandboxed server may have at once unless configured.
pub const DEFAULT_SANDBOX_MAX_PROCESSES: u32 = 512;

/// The fewest processes a sandbox can be limited to: the process limit is the sandbox's own pid namespace's
/// `pid_max`, which the kernel keeps at 301 or more.
pub const MIN_SANDBOX_MAX_PROCESSES: u32 = 300;

/// Open files a sandboxed server may have unless configured.
pub const DEFAULT_SANDBOX_MAX_OPEN_FILES: u64 = 1024;

/// How strictly a stdio upstream is confined.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SandboxMode {
    /// A plain child process, as before sandboxes existed.
    #[default]
    Off,
    /// The profile follows the effective hints: no network unless a tool is open-world (or it is granted), the file
    /// system read-only except the writable paths. A missing mechanism is reported loudly; the server still runs.
    Auto,
    /// No network and nothing writable unless listed; a missing mechanism fails the upstream closed.
    Strict,
}

impl SandboxMode {
    /// The mode's name as the config spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            SandboxMode::Off => "off",
            SandboxMode::Auto => "auto",
            SandboxMode::Strict => "strict",
        }
    }
}

/// One upstream's `[upstream.sandbox]` settings, lowered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxSpec {
    /// Off, auto or strict.
    pub mode: SandboxMode,
    /// Host paths the server may write (bound read-write at the same path); everything else is read-only.
    pub writable: Vec<PathBuf>,
    /// `Some(true)`: the network is granted whatever the hints; `Some(false)`: never; `None`: by mode (auto: only
    /// when a tool is open-world by its effective hints; strict: none).
    pub network: Option<bool>,
    /// Names of toolgate's environment variables passed to the server (the upstream's own `env` is always set).
    pub pass_env: Vec<String>,
    /// `RLIMIT_DATA` in MiB.
    pub memory_mib: u64,
    /// Most processes and threads at once (at least [`MIN_SANDBOX_MAX_PROCESSES`]).
    pub max_processes: u32,
    /// `RLIMIT_NOFILE`.
    pub max_open_files: u64,
    /// Start in an empty private directory (a private `/tmp`) rather than the configured or inherited one.
    pub clean_cwd: bool,
}

impl SandboxSpec {
    /// The settings of a sandbox in `mode` with every default.
    pub fn with_mode(mode: SandboxMode) -> SandboxSpec {
        SandboxSpec {
            mode,
            writable: Vec::new(),
            network: None,
            pass_env: DEFAULT_SANDBOX_PASS_ENV.iter().map(|name| (*name).to_owned()).collect(),
            memory_mib: DEFAULT_SANDBOX_MEMORY_MIB,
            max_processes: DEFAULT_SANDBOX_MAX_PROCESSES,
            max_open_files: DEFAULT_SANDBOX_MAX_OPEN_FILES,
            clean_cwd: false,
        }
    }
}

impl Default for SandboxSpec {
    /// Off, with the defaults a sandbox would have.
    fn default() -> Self {
        SandboxSpec::with_mode(SandboxMode::Off)
    }
}

/// What no sandbox may see or reach, whatever its settings: filled in by whoever knows the gateway's own files.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SandboxEnvironment {
    /// Files and directories hidden inside every sandbox (the state directory, the config file).
    pub hidden_paths: Vec<PathBuf>,
    /// TCP ports toolgate listens on; a sandbox that has the network may not connect to them.
    pub own_ports: Vec<u16>,
    /// The program that refuses those connections (toolgate's own binary, which runs `toolgate-sandbox`'s port
    /// guard); without it a sandbox with the network cannot be kept off `own_ports`.
    pub port_guard: Option<PathBuf>,
}
