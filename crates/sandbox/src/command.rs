//! Turning a profile and a program into the command that runs the program confined.
//!
//! The command is a chain of small, well-known programs, each doing one thing and then `exec`ing the next, so no
//! process of toolgate's stays between the server and its pipes:
//!
//! ```text
//! unshare --pid --fork --kill-child --mount-proc -- /bin/sh -c 'echo N > /proc/sys/kernel/pid_max; exec "$@"'
//!   prlimit --data=BYTES --nofile=N:N --
//!     bwrap --ro-bind / / --dev /dev --proc /proc [--tmpfs SOCKET_DIR]... [--bind W W]... [--tmpfs HIDDEN]... --unshare-pid --unshare-ipc
//!           --unshare-uts --unshare-cgroup-try [--unshare-net] --die-with-parent --new-session --clearenv
//!           [--setenv K V]... --cap-drop ALL [--chdir DIR] --
//!       [PREFIX...] PROGRAM ARGS...
//! ```
//!
//! The outer pid namespace exists only to carry the process limit: `RLIMIT_NPROC` does not bind root, but a pid
//! namespace's `pid_max` bounds every process inside it and inside the namespaces it nests, root or not, and the
//! server (without capabilities, behind a read-only `/proc/sys`) cannot raise it. Nothing here runs the command.

use std::path::{Path, PathBuf};

use crate::SandboxError;
use crate::probe::{Mechanisms, PID_MAX_SCRIPT};
use crate::profile::{Cwd, Network, Profile};

/// A program and its arguments that run a server confined; spawn it as the server's command, with its stdio pipes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxedCommand {
    /// The first program of the chain (`unshare`, `prlimit` or `bwrap`), as an absolute path.
    pub program: String,
    /// Everything after it, ending with the prefix, the server's program and its arguments.
    pub args: Vec<String>,
}

/// The command that runs `program args` under `profile`, preceded inside the sandbox by `prefix` (for example
/// `strace -f -o FILE`; empty for none). Fails when a mechanism the profile needs is missing; a caller that accepts
/// less (auto mode) removes that part of the profile first and says so.
pub fn command(
    profile: &Profile,
    mechanisms: &Mechanisms,
    prefix: &[String],
    program: &str,
    args: &[String],
) -> Result<SandboxedCommand, SandboxError> {
    let bwrap = mechanisms.bubblewrap.as_ref().map_err(|reason| unavailable("bubblewrap", reason))?;
    for path in &profile.writable {
        check_path(path, true)?;
    }
    let mut chain: Vec<String> = Vec::new();
    if let Network::Host { deny_ports, guard } = &profile.network
        && !deny_ports.is_empty()
    {
        mechanisms.landlock.as_ref().map_err(|reason| unavailable("a Landlock port guard", reason))?;
        let guard = guard.as_ref().ok_or_else(|| unavailable("a Landlock port guard", "no guard program given"))?;
        chain.push(text(guard));
        chain.extend(crate::port_guard::guard_args(deny_ports));
    }
    if let Some(processes) = profile.limits.max_processes {
        let (unshare, shell) =
            mechanisms.process_limit.as_ref().map_err(|reason| unavailable("a process limit", reason))?;
        chain.extend([text(unshare), "--pid".into(), "--fork".into(), "--kill-child".into(), "--mount-proc".into()]);
        chain.extend(["--".into(), text(shell), "-c".into(), PID_MAX_SCRIPT.into(), "sh".into()]);
        // pid_max N leaves pids 1..N-1; the chain's own pid 1 (bwrap's parent) takes one of them.
        chain.push(processes.saturating_add(2).to_string());
    }
    if profile.limits.memory_bytes.is_some() || profile.limits.max_open_files.is_some() {
        let prlimit =
            mechanisms.prlimit.as_ref().map_err(|reason| unavailable("memory and open-file limits", reason))?;
        chain.push(text(prlimit));
        if let Some(bytes) = profile.limits.memory_bytes {
            chain.push(format!("--data={bytes}:{bytes}"));
        }
        if let Some(files) = profile.limits.max_open_files {
            chain.push(format!("--nofile={files}:{files}"));
        }
        chain.push("--".into());
    }
    chain.push(text(bwrap));
    chain.extend(bwrap_args(profile));
    chain.push("--".into());
    chain.extend(prefix.iter().cloned());
    chain.push(program.to_owned());
    chain.extend(args.iter().cloned());
    let mut chain = chain.into_iter();
    let program = chain.next().unwrap_or_default();
    Ok(SandboxedCommand { program, args: chain.collect() })
}

/// bubblewrap's options for `profile`, in the order they must apply: the read-only root, the private `/tmp` of a
/// clean working directory, the writable paths over them, then the hidden paths over everything.
fn bwrap_args(profile: &Profile) -> Vec<String> {
    let mut args: Vec<String> = ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"].map(String::from).to_vec();
    if profile.cwd == Cwd::Clean {
        args.extend(["--tmpfs".into(), "/tmp".into()]);
    }
    // A read-only bind does not stop connect() to a socket file, and --unshare-net covers only abstract sockets:
    // the host's D-Bus, Docker, X11 and per-user sockets are hidden behind empty tmpfs before the writable binds,
    // so a writable path under one of them still works.
    let sockets: Vec<PathBuf> =
        socket_dirs().into_iter().filter(|dir| !(profile.cwd == Cwd::Clean && dir.starts_with("/tmp"))).collect();
    for dir in &sockets {
        args.extend(["--tmpfs".into(), text(dir)]);
    }
    for path in &profile.writable {
        let path = text(path);
        args.extend(["--bind".into(), path.clone(), path]);
    }
    // A writable path above a socket directory (a writable /tmp, say) would show it again: hide it once more,
    // unless a writable path lies inside it (that bind wins, as above).
    for dir in &sockets {
        let under_writable = profile.writable.iter().any(|path| dir.starts_with(path));
        let holds_writable = profile.writable.iter().any(|path| path.starts_with(dir));
        if under_writable && !holds_writable {
            args.extend(["--tmpfs".into(), text(dir)]);
        }
    }
    // /etc/resolv.conf may point into the hidden /run (systemd-resolved): bind the file it names back, read-only.
    if let Ok(target) = std::fs::canonicalize("/etc/resolv.conf")
        && sockets.iter().any(|dir| target.starts_with(dir))
        && target.is_file()
    {
        let target = text(target);
        args.extend(["--ro-bind".into(), target.clone(), target]);
    }
    for path in &profile.hidden {
        if path.is_dir() {
            args.extend(["--tmpfs".into(), text(path)]);
        } else if path.exists() {
            args.extend(["--ro-bind".into(), "/dev/null".into(), text(path)]);
        }
    }
    args.extend(["--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"].map(String::from));
    if profile.network == Network::None {
        args.push("--unshare-net".into());
    }
    args.extend(["--die-with-parent", "--new-session", "--clearenv"].map(String::from));
    for (key, value) in &profile.env {
        args.extend(["--setenv".into(), key.clone(), value.clone()]);
    }
    args.extend(["--cap-drop".into(), "ALL".into()]);
    match &profile.cwd {
        Cwd::Clean => args.extend(["--chdir".into(), "/tmp".into()]),
        Cwd::Keep(Some(dir)) => args.extend(["--chdir".into(), text(dir)]),
        Cwd::Keep(None) => {
            if let Ok(dir) = std::env::current_dir() {
                args.extend(["--chdir".into(), text(&dir)]);
            }
        }
    }
    args
}

/// The host directories that hold well-known Unix sockets (D-Bus, Docker, systemd, X11, ICE, the user's runtime
/// directory), those that exist as real directories. `/var/run` only when it is not a link into `/run`.
fn socket_dirs() -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = ["/run", "/var/run", "/tmp/.X11-unix", "/tmp/.ICE-unix"].map(PathBuf::from).to_vec();
    if let Some(runtime) = std::env::var_os("XDG_RUNTIME_DIR") {
        dirs.push(PathBuf::from(runtime));
    }
    let mut kept: Vec<PathBuf> = Vec::new();
    for dir in dirs {
        let real = std::fs::symlink_metadata(&dir).map(|meta| meta.is_dir()).unwrap_or(false);
        if real && dir.is_absolute() && !kept.iter().any(|done| dir.starts_with(done)) {
            kept.push(dir);
        }
    }
    kept
}

fn check_path(path: &Path, must_exist: bool) -> Result<(), SandboxError> {
    let problem = |reason: &str| SandboxError::Path { path: path.display().to_string(), reason: reason.to_owned() };
    if !path.is_absolute() {
        return Err(problem("is not absolute"));
    }
    if path.to_str().is_none() {
        return Err(problem("is not valid UTF-8"));
    }
    if must_exist && !path.exists() {
        return Err(problem("does not exist (create it before the server starts)"));
    }
    Ok(())
}

fn text(path: impl AsRef<Path>) -> String {
    path.as_ref().to_string_lossy().into_owned()
}

fn unavailable(mechanism: &'static str, reason: &str) -> SandboxError {
    SandboxError::Unavailable { mechanism, reason: reason.to_owned() }
}
