//! Running the built `toolgate` binary for the CLI's tests: one command to completion ([`run`]), a `toolgate
//! serve` that said where it listens ([`Serving`]), and a serve of the bundled demo server from a config file
//! ([`Setup`], [`start_serve`]); [`raw_http`] talks to its Streamable HTTP endpoint. Only with the `cli` feature.
//!
//! The binary is the one cargo built next to the running test executable (like the fixture, see
//! [`crate::fixture`]). Every run starts from the same environment: no inherited `TOOLGATE_LOG` or
//! `TOOLGATE_STATE_DIR`, no colour, `USER=tester`; a test adds what it needs to the [`command`]. Every wait is
//! bounded by [`HANG_GUARD`]; nothing here asserts how long anything took, and nothing is built or installed here.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

pub mod fleet;
pub mod raw_http;

use crate::{HANG_GUARD, Run, run_guarded};

/// The built `toolgate` binary next to the running test executable.
///
/// Panics when it is not there, with the command that builds it.
pub fn binary() -> PathBuf {
    crate::fixture::built_binary(if cfg!(windows) { "toolgate.exe" } else { "toolgate" }, "toolgate")
}

/// `toolgate` with the tests' environment: `TOOLGATE_LOG` and `TOOLGATE_STATE_DIR` removed, `NO_COLOR=1`,
/// `USER=tester` (the name decisions made from the command line are recorded under).
pub fn command() -> Command {
    let mut command = Command::new(binary());
    test_environment(&mut command);
    command
}

/// Gives `command` (`toolgate`, or a shell that execs it) the tests' environment, as [`command`] describes.
pub fn test_environment(command: &mut Command) -> &mut Command {
    command.env_remove("TOOLGATE_LOG").env_remove("TOOLGATE_STATE_DIR").env("NO_COLOR", "1").env("USER", "tester")
}

/// Runs `toolgate ARGS...` to completion with stdin closed, under the hang guard.
pub fn run(args: &[&str]) -> Run {
    let mut command = command();
    command.args(args);
    run_guarded(command, &format!("toolgate {args:?}"))
}

/// A running `toolgate serve` that announced its MCP URL; killed (SIGKILL) when dropped.
#[derive(Debug)]
pub struct Serving {
    /// The process.
    pub child: Child,
    /// `http://127.0.0.1:PORT/mcp`, as it announced it.
    pub url: String,
    /// `127.0.0.1:PORT`.
    pub authority: String,
    stderr: Arc<Mutex<Vec<String>>>,
}

impl Serving {
    /// Spawns `command` (a `toolgate serve` with an HTTP listener, or a shell that execs one) with stdin and stdout
    /// closed, reads its stderr to the end on a thread (so it never blocks on a full pipe), and waits for the
    /// `serving MCP on URL` line. Panics with everything it wrote when no such line comes within the hang guard.
    pub fn start(mut command: Command) -> Serving {
        command.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::piped());
        let mut child = command.spawn().unwrap_or_else(|error| panic!("toolgate serve does not start: {error}"));
        let pipe = child.stderr.take().expect("stderr is piped");
        let stderr = Arc::new(Mutex::new(Vec::new()));
        let (sender, receiver) = mpsc::channel();
        let lines = Arc::clone(&stderr);
        std::thread::spawn(move || {
            for line in BufReader::new(pipe).lines().map_while(Result::ok) {
                if let Some(url) = line.split("serving MCP on ").nth(1) {
                    let _ = sender.send(url.trim().to_owned());
                }
                lines.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(line);
            }
        });
        let Ok(url) = receiver.recv_timeout(HANG_GUARD) else {
            let _ = child.kill();
            let _ = child.wait();
            let said = stderr.lock().unwrap_or_else(std::sync::PoisonError::into_inner).join("\n");
            panic!("toolgate serve did not announce its URL within {HANG_GUARD:?}; stderr:\n{said}");
        };
        let authority = url.trim_start_matches("http://").split('/').next().unwrap_or_default().to_owned();
        Serving { child, url, authority, stderr }
    }

    /// Everything it wrote to stderr so far, one line each.
    pub fn stderr_text(&self) -> String {
        self.stderr.lock().unwrap_or_else(std::sync::PoisonError::into_inner).join("\n")
    }
}

impl Drop for Serving {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A state directory and a config file next to it.
pub struct Setup {
    /// The directory holding the config file and the state directory.
    pub dir: tempfile::TempDir,
    /// `gateway.toml` in it.
    pub config: PathBuf,
}

impl Setup {
    /// Writes `gateway.toml`: the demo server as the only upstream (`get_note` overridden read-only, so reading a
    /// note back never needs a person), HTTP on a loopback port the OS picks, then `extra`.
    pub fn demo(extra: &str) -> Setup {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let config = dir.path().join("gateway.toml");
        let text = format!(
            "[[upstream]]\nname = \"demo\"\ncommand = {binary:?}\nargs = [\"demo-server\"]\n\n\
             [upstream.tools.get_note]\nreadOnlyHint = true\n\n\
             [listen.http]\nbind = \"127.0.0.1:0\"\n\n{extra}\n",
            binary = binary()
        );
        std::fs::write(&config, text).expect("write the config");
        Setup { dir, config }
    }

    /// The state directory.
    pub fn state(&self) -> PathBuf {
        self.dir.path().join("state")
    }

    /// The state directory as an argument.
    pub fn state_arg(&self) -> String {
        self.state().to_string_lossy().into_owned()
    }
}

/// Starts `toolgate serve --config CONFIG --state-dir STATE` with `env` (and its log at `info`) and waits for its
/// URL.
pub fn start_serve(setup: &Setup, env: &[(&str, &str)]) -> Serving {
    let mut command = command();
    command.args(["serve", "--config"]).arg(&setup.config).arg("--state-dir").arg(setup.state());
    serve_command(command, env)
}

/// Like [`start_serve`], but through `sh -c 'PRELUDE; exec toolgate serve ...'` (a `ulimit`, say).
pub fn start_serve_after(prelude: &str, setup: &Setup, env: &[(&str, &str)]) -> Serving {
    let mut command = Command::new("sh");
    command
        .arg("-c")
        .arg(format!("{prelude} && exec \"$0\" serve --config \"$1\" --state-dir \"$2\""))
        .arg(binary())
        .arg(&setup.config)
        .arg(setup.state());
    test_environment(&mut command);
    serve_command(command, env)
}

fn serve_command(mut command: Command, env: &[(&str, &str)]) -> Serving {
    command.env("TOOLGATE_LOG", "info");
    for (key, value) in env {
        command.env(key, value);
    }
    Serving::start(command)
}

/// Polls `check` every 50 ms until it returns `Some`, failing after [`HANG_GUARD`].
pub fn poll<T>(what: &str, mut check: impl FnMut() -> Option<T>) -> T {
    let started = Instant::now();
    loop {
        if let Some(value) = check() {
            return value;
        }
        assert!(started.elapsed() < HANG_GUARD, "never saw {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}
