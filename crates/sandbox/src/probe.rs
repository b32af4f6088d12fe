//! What this machine offers a sandbox, found once by trying each mechanism for real.
//!
//! Each mechanism is found on `PATH` (then in `/usr/bin` and `/bin`) and run once with a harmless command, since a
//! binary that exists may still be refused by the kernel (no user or pid namespaces in a container, say). The
//! result is kept for the life of the process. The probe never changes anything outside its own short-lived
//! children.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

/// Sets the pid namespace's `pid_max` to its first argument and runs the rest; a failure stops the start.
pub(crate) const PID_MAX_SCRIPT: &str = "echo \"$1\" > /proc/sys/kernel/pid_max || { echo 'toolgate sandbox: cannot \
                                         set the process limit' >&2; exit 126; }; shift; exec \"$@\"";

/// The `pid_max` the process-limit probe sets in a throwaway pid namespace.
const PROBE_PID_MAX: u32 = 400;

/// What this machine offers, each with what was found or why not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mechanisms {
    /// `bwrap` (bubblewrap), found and able to build a sandbox here.
    pub bubblewrap: Result<PathBuf, String>,
    /// `prlimit` (util-linux), for the memory and open-file limits.
    pub prlimit: Result<PathBuf, String>,
    /// `unshare` (util-linux) and `/bin/sh`, able to give a pid namespace its own `pid_max` (Linux 6.14 and later):
    /// the process limit that binds root.
    pub process_limit: Result<(PathBuf, PathBuf), String>,
    /// The Landlock ABI version (4 or more can refuse TCP connections by port).
    pub landlock: Result<u32, String>,
    /// Whether the kernel has seccomp filtering (reported; toolgate installs no filter of its own).
    pub seccomp: bool,
}

impl Mechanisms {
    /// One line for the start-up log: each mechanism and what was found.
    pub fn summary(&self) -> String {
        fn state<T>(found: &Result<T, String>) -> String {
            match found {
                Ok(_) => "yes".to_owned(),
                Err(reason) => format!("no ({reason})"),
            }
        }
        format!(
            "bubblewrap: {}; memory and open-file limits: {}; process limit: {}; landlock: {}; seccomp: {}",
            state(&self.bubblewrap),
            state(&self.prlimit),
            state(&self.process_limit),
            match &self.landlock {
                Ok(abi) => format!("TCP port rules (ABI {abi} or later)"),
                Err(reason) => format!("no ({reason})"),
            },
            if self.seccomp { "yes" } else { "no" }
        )
    }
}

/// The mechanisms of this machine, probed on first use and then remembered.
pub fn probe() -> &'static Mechanisms {
    static MECHANISMS: OnceLock<Mechanisms> = OnceLock::new();
    MECHANISMS.get_or_init(probe_now)
}

fn probe_now() -> Mechanisms {
    let bubblewrap = find("bwrap").and_then(|bwrap| {
        let args = [
            "--ro-bind",
            "/",
            "/",
            "--dev",
            "/dev",
            "--proc",
            "/proc",
            "--unshare-pid",
            "--unshare-net",
            "--unshare-ipc",
            "--unshare-uts",
            "--die-with-parent",
            "--new-session",
            "--clearenv",
            "--cap-drop",
            "ALL",
            "--",
            "/bin/true",
        ];
        try_run(&bwrap, &args).map(|()| bwrap)
    });
    let prlimit =
        find("prlimit").and_then(|prlimit| try_run(&prlimit, &["--nofile=64:64", "--", "/bin/true"]).map(|()| prlimit));
    let process_limit = find("unshare").and_then(|unshare| {
        let shell = PathBuf::from("/bin/sh");
        let limit = PROBE_PID_MAX.to_string();
        let args = [
            "--pid",
            "--fork",
            "--kill-child",
            "--mount-proc",
            "--",
            "/bin/sh",
            "-c",
            PID_MAX_SCRIPT,
            "sh",
            &limit,
            "/bin/true",
        ];
        try_run(&unshare, &args).map(|()| (unshare, shell))
    });
    Mechanisms {
        bubblewrap,
        prlimit,
        process_limit,
        landlock: crate::port_guard::probe_landlock(),
        seccomp: std::fs::read_to_string("/proc/self/status")
            .map(|status| status.lines().any(|line| line.starts_with("Seccomp:")))
            .unwrap_or(false),
    }
}

/// `name` on `PATH`, else in `/usr/bin` or `/bin`.
fn find(name: &str) -> Result<PathBuf, String> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/bin"), PathBuf::from("/bin")])
        .map(|dir| dir.join(name))
        .find(|candidate| is_executable(candidate))
        .ok_or_else(|| format!("`{name}` not found"))
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
}

fn try_run(program: &Path, args: &[&str]) -> Result<(), String> {
    let output = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .map_err(|error| format!("cannot run {}: {error}", program.display()))?;
    if output.status.success() {
        return Ok(());
    }
    let stderr = String::from_utf8_lossy(&output.stderr);
    let first: String = stderr.lines().next().unwrap_or("").chars().take(200).collect();
    Err(format!("{} failed ({}): {}", program.display(), output.status, first.trim()))
}
