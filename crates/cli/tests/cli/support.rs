//! Running the built `toolgate` binary with a hang guard, and redactions for snapshots.

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use toolgate_test_support::PeerCommand;

/// What a finished `toolgate` run printed and returned.
#[derive(Debug)]
pub(crate) struct Run {
    pub(crate) code: i32,
    pub(crate) stdout: String,
    pub(crate) stderr: String,
}

/// A generous limit after which a run counts as hung: not a performance assertion, a guard against hangs.
const HANG_GUARD: Duration = Duration::from_secs(120);

/// Runs `toolgate ARGS...`, with a peer's environment when given.
pub(crate) fn toolgate(args: &[&str], peer_env: Option<&PeerCommand>) -> Run {
    let mut command = Command::new(env!("CARGO_BIN_EXE_toolgate"));
    command.args(args).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    command.env_remove("TOOLGATE_LOG").env("NO_COLOR", "1");
    if let Some(peer) = peer_env {
        for (key, value) in &peer.env {
            command.env(key, value);
        }
    }
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

/// `toolgate <command> [flags] -- <peer argv>`.
pub(crate) fn toolgate_against(command: &[&str], peer: &PeerCommand) -> Run {
    let argv = peer.argv();
    let mut args: Vec<&str> = command.to_vec();
    args.push("--");
    args.extend(argv.iter().map(String::as_str));
    toolgate(&args, Some(peer))
}

/// Insta settings that hide machine-specific paths.
pub(crate) fn snapshot_settings(paths: &[&std::path::Path]) -> insta::Settings {
    let mut settings = insta::Settings::clone_current();
    for path in paths {
        let text = path.to_string_lossy().into_owned();
        settings.add_filter(&regex_escape(&text), "[TEMP]");
        if let Ok(canonical) = std::fs::canonicalize(path) {
            settings.add_filter(&regex_escape(&canonical.to_string_lossy()), "[TEMP]");
        }
    }
    settings
}

fn regex_escape(text: &str) -> String {
    let mut escaped = String::new();
    for character in text.chars() {
        if "\\.+*?()|[]{}^$#&-~".contains(character) {
            escaped.push('\\');
        }
        escaped.push(character);
    }
    escaped
}

/// Parses stdout as JSON, with the run in the panic message when it is not.
pub(crate) fn json_stdout(run: &Run) -> serde_json::Value {
    serde_json::from_str(&run.stdout).unwrap_or_else(|error| panic!("stdout is not JSON ({error}): {run:?}"))
}
