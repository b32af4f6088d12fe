//! The processes a benchmark run starts: upstreams (`toolgate-bench upstream`, over stdio or HTTP) and toolgate
//! itself (`toolgate serve`, on stdio or `--listen`), with readiness checks, polite stops and `/proc` readings.
//!
//! Every child is killed when its handle is dropped, so an error anywhere in a run leaves nothing behind. Each
//! toolgate's stderr goes to a log file in the run's scratch directory, quoted back when it fails to start.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

use crate::BoxError;
use crate::client::StdioClient;

/// How long a toolgate may take to start listening (a debug build with five upstreams is slow).
const READY_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a child gets to exit after stdin closes or SIGTERM before it is killed.
const STOP_GRACE: Duration = Duration::from_secs(5);

/// Numbers the state directories handed to children.
static STATE_DIRS: AtomicUsize = AtomicUsize::new(0);

/// A running child process.
pub(crate) struct Proc {
    child: Child,
    label: String,
    log: Option<PathBuf>,
}

impl Proc {
    /// The process id (for `/proc` readings).
    pub(crate) fn pid(&self) -> Option<u32> {
        self.child.id()
    }

    /// Asks the process to stop (SIGTERM; stdio children also see stdin closed when their client is dropped),
    /// then kills it after a grace period.
    pub(crate) async fn stop(mut self) {
        if let Some(pid) = self.child.id().and_then(|pid| i32::try_from(pid).ok()) {
            let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::Signal::SIGTERM);
        }
        if tokio::time::timeout(STOP_GRACE, self.child.wait()).await.is_err() {
            let _ = self.child.kill().await;
        }
    }

    /// Kills the process at once (SIGKILL: a crash, not a stop) and reaps it.
    pub(crate) async fn kill(mut self) {
        let _ = self.child.kill().await;
    }

    /// Waits for the process to exit on its own (after its stdin closed), killing it after the grace period.
    pub(crate) async fn finish(mut self) {
        if tokio::time::timeout(STOP_GRACE, self.child.wait()).await.is_err() {
            let _ = self.child.kill().await;
        }
    }

    /// An error naming the process, with the end of its log if it has exited.
    fn failure(&mut self, what: &str) -> BoxError {
        let status = match self.child.try_wait() {
            Ok(Some(status)) => format!(" ({status})"),
            _ => String::new(),
        };
        let log = self.log.as_ref().and_then(|path| std::fs::read_to_string(path).ok()).unwrap_or_default();
        let tail: Vec<&str> = log.lines().rev().take(5).collect::<Vec<_>>().into_iter().rev().collect();
        let tail = if tail.is_empty() { String::new() } else { format!(": {}", tail.join(" | ")) };
        format!("{} {what}{status}{tail}", self.label).into()
    }
}

/// Where a run keeps its logs and config files; removed when dropped.
pub(crate) struct Scratch {
    dir: PathBuf,
}

impl Scratch {
    pub(crate) fn new() -> Result<Self, BoxError> {
        let dir = Scratch::dir();
        std::fs::create_dir_all(&dir)?;
        Ok(Scratch { dir })
    }

    /// The scratch directory of this process.
    fn dir() -> PathBuf {
        std::env::temp_dir().join(format!("toolgate-bench-{}", std::process::id()))
    }

    pub(crate) fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn command(program: &Path, args: &[String], log: Option<&Path>) -> Result<Command, BoxError> {
    let state = Scratch::dir().join(format!("state-{}", STATE_DIRS.fetch_add(1, Ordering::Relaxed)));
    command_in(program, args, log, &state)
}

/// Like [`command`], with the state directory chosen by the caller (a run that restarts toolgate on its own state).
fn command_in(program: &Path, args: &[String], log: Option<&Path>, state: &Path) -> Result<Command, BoxError> {
    let mut command = Command::new(program);
    command.args(args).stdin(Stdio::piped()).stdout(Stdio::piped()).kill_on_drop(true);
    // toolgate's default log level, whatever the caller's environment says: the run measures relaying, not logging.
    command.env("TOOLGATE_LOG", "warn");
    // A state directory (audit log, approvals, pins) inside the run's scratch directory: a run must not write its
    // calls into the user's audit log, nor depend on what is already there.
    command.env("TOOLGATE_STATE_DIR", state);
    match log {
        Some(path) => command.stderr(Stdio::from(std::fs::File::create(path)?)),
        None => command.stderr(Stdio::null()),
    };
    Ok(command)
}

/// Spawns an MCP server speaking stdio and completes the handshake; returns the client and the echo tool's name.
pub(crate) async fn spawn_stdio(
    label: &str,
    program: &Path,
    args: &[String],
    log: Option<PathBuf>,
) -> Result<(Proc, Arc<StdioClient>, String), BoxError> {
    let mut child = command(program, args, log.as_deref())?
        .spawn()
        .map_err(|error| format!("cannot run {}: {error}", program.display()))?;
    let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
        return Err("child without pipes".into());
    };
    let mut proc = Proc { child, label: label.to_owned(), log };
    let client = StdioClient::new(stdin, stdout);
    match tokio::time::timeout(READY_TIMEOUT, client.handshake()).await {
        Ok(Ok(tool)) => Ok((proc, client, tool)),
        Ok(Err(error)) => Err(proc.failure(&format!("failed the handshake: {error}"))),
        Err(_) => Err(proc.failure("did not answer the handshake in time")),
    }
}

/// Spawns `toolgate-bench upstream --http 127.0.0.1:0` and reads the address it listens on.
pub(crate) async fn spawn_http_upstream(bench: &Path) -> Result<(Proc, SocketAddr), BoxError> {
    let args = ["upstream".to_owned(), "--http".to_owned(), "127.0.0.1:0".to_owned()];
    let mut child = command(bench, &args, None)?.spawn()?;
    let stdout = child.stdout.take().ok_or("child without stdout")?;
    let mut proc = Proc { child, label: "HTTP upstream".to_owned(), log: None };
    let mut first = String::new();
    let read = tokio::time::timeout(READY_TIMEOUT, BufReader::new(stdout).read_line(&mut first)).await;
    if !matches!(read, Ok(Ok(n)) if n > 0) {
        return Err(proc.failure("did not report its address"));
    }
    let addr = first.trim().strip_prefix("listening on ").ok_or("unexpected first line from the HTTP upstream")?;
    Ok((proc, addr.parse()?))
}

/// Spawns toolgate with these arguments and waits until `addr` accepts connections.
pub(crate) async fn spawn_listening(
    label: &str,
    toolgate: &Path,
    args: &[String],
    addr: SocketAddr,
    log: PathBuf,
) -> Result<Proc, BoxError> {
    let command = command(toolgate, args, Some(&log))?;
    wait_listening(command, label, toolgate, addr, log).await
}

/// [`spawn_listening`] on a given state directory.
pub(crate) async fn spawn_listening_in(
    label: &str,
    toolgate: &Path,
    args: &[String],
    addr: SocketAddr,
    log: PathBuf,
    state: &Path,
) -> Result<Proc, BoxError> {
    let command = command_in(toolgate, args, Some(&log), state)?;
    wait_listening(command, label, toolgate, addr, log).await
}

/// [`spawn_listening_in`] as the instance `instance`: processes sharing one state directory each need their own
/// id, or the second is refused (the store holds a lock per instance id).
pub(crate) async fn spawn_instance_in(
    label: &str,
    toolgate: &Path,
    args: &[String],
    addr: SocketAddr,
    log: PathBuf,
    state: &Path,
    instance: &str,
) -> Result<Proc, BoxError> {
    let mut command = command_in(toolgate, args, Some(&log), state)?;
    command.env("TOOLGATE_INSTANCE_ID", instance);
    wait_listening(command, label, toolgate, addr, log).await
}

/// Spawns `command` (stdout discarded) and waits until `addr` accepts connections; `log` is quoted on failure.
pub(crate) async fn wait_listening(
    mut command: Command,
    label: &str,
    toolgate: &Path,
    addr: SocketAddr,
    log: PathBuf,
) -> Result<Proc, BoxError> {
    let child =
        command.stdout(Stdio::null()).spawn().map_err(|error| format!("cannot run {}: {error}", toolgate.display()))?;
    let mut proc = Proc { child, label: label.to_owned(), log: Some(log) };
    let started = Instant::now();
    loop {
        if let Ok(Some(_)) = proc.child.try_wait() {
            return Err(proc.failure("exited before listening"));
        }
        if tokio::net::TcpStream::connect(addr).await.is_ok() {
            return Ok(proc);
        }
        if started.elapsed() > READY_TIMEOUT {
            return Err(proc.failure("did not start listening in time"));
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// A loopback address with a port that was free a moment ago.
pub(crate) fn free_addr() -> Result<SocketAddr, BoxError> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    Ok(listener.local_addr()?)
}

/// `VmRSS` and `VmHWM` of a process, in KiB.
pub(crate) fn memory_kib(pid: u32) -> Result<(u64, u64), BoxError> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let field = |name: &str| {
        status
            .lines()
            .find_map(|line| line.strip_prefix(name))
            .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            .ok_or_else(|| format!("no {name} in /proc/{pid}/status"))
    };
    Ok((field("VmRSS:")?, field("VmHWM:")?))
}

/// User + system CPU time a process has used so far, in microseconds (from `/proc/PID/stat`, 100 ticks a second).
pub(crate) fn cpu_us(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may contain spaces; the fields after its closing parenthesis are plain.
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let user: u64 = fields.get(11)?.parse().ok()?;
    let system: u64 = fields.get(12)?.parse().ok()?;
    Some((user + system) * 10_000)
}

/// Context switches (voluntary and not) of all of a process's threads so far, from `/proc/PID/task/*/status`.
pub(crate) fn context_switches(pid: u32) -> Option<u64> {
    let mut total = 0;
    for task in std::fs::read_dir(format!("/proc/{pid}/task")).ok()?.flatten() {
        let Ok(status) = std::fs::read_to_string(task.path().join("status")) else { continue };
        for line in status.lines() {
            if let Some(rest) = line
                .strip_prefix("voluntary_ctxt_switches:")
                .or_else(|| line.strip_prefix("nonvoluntary_ctxt_switches:"))
            {
                total += rest.trim().parse::<u64>().unwrap_or(0);
            }
        }
    }
    Some(total)
}
