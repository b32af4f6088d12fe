//! Running a child process to completion under a hang guard, with its output captured.
//!
//! The guard is not a performance assertion: it turns a hang into a failure that names the command, instead of a
//! test that never ends.

use std::io::Read;
use std::process::{Child, Command, Stdio};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long a run may take before it counts as hung.
pub const HANG_GUARD: Duration = Duration::from_secs(120);

/// What a finished process printed and returned.
#[derive(Debug)]
pub struct Run {
    /// The exit code; `None` when a signal ended the process.
    pub code: Option<i32>,
    /// Standard output (invalid UTF-8 replaced).
    pub stdout: String,
    /// Standard error (invalid UTF-8 replaced).
    pub stderr: String,
}

/// Runs `command` with stdin closed and stdout/stderr captured, failing the test (after killing the child) when it
/// outlives [`HANG_GUARD`]. `what` names the command in failure messages.
pub fn run_guarded(mut command: Command, what: &str) -> Run {
    command.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let child = command.spawn().unwrap_or_else(|error| panic!("{what} does not start: {error}"));
    wait_guarded(child, what)
}

/// Waits for a child already spawned (with stdout and stderr piped, or not captured) within [`HANG_GUARD`].
pub fn wait_guarded(mut child: Child, what: &str) -> Run {
    let stdout = child.stdout.take().map(drain);
    let stderr = child.stderr.take().map(drain);
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap_or_else(|error| panic!("waiting on {what} fails: {error}")) {
            break status;
        }
        if started.elapsed() > HANG_GUARD {
            let _ = child.kill();
            let _ = child.wait();
            let stderr = stderr.map(joined).unwrap_or_default();
            panic!("{what} did not finish within {HANG_GUARD:?}; stderr:\n{stderr}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Run {
        code: status.code(),
        stdout: stdout.map(joined).unwrap_or_default(),
        stderr: stderr.map(joined).unwrap_or_default(),
    }
}

/// Reads a pipe to its end on a thread, so a child that fills one pipe never blocks on the other.
fn drain(mut pipe: impl Read + Send + 'static) -> JoinHandle<String> {
    std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = pipe.read_to_end(&mut bytes);
        String::from_utf8_lossy(&bytes).into_owned()
    })
}

fn joined(reader: JoinHandle<String>) -> String {
    reader.join().unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn captures_code_and_both_streams() {
        let mut command = Command::new("sh");
        command.args(["-c", "printf out; printf err >&2; exit 3"]);
        let run = run_guarded(command, "sh");
        assert_eq!(run.code, Some(3));
        assert_eq!((run.stdout.as_str(), run.stderr.as_str()), ("out", "err"));
    }

    #[test]
    fn a_signal_leaves_no_exit_code() {
        let mut command = Command::new("sh");
        command.args(["-c", "kill -9 $$"]);
        assert_eq!(run_guarded(command, "sh").code, None);
    }
}
