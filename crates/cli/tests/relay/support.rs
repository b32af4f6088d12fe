//! Running clients against `toolgate serve` with a hang guard: the Python SDK client scripts in
//! `tests/relay_clients/`, the MCP Inspector CLI, a raw line-by-line JSON-RPC client over stdio, and a toolgate
//! serving Streamable HTTP on a loopback port it picks itself.
//!
//! Every wait is bounded by [`HANG_GUARD`], a generous limit that turns a hang into a failure; no test asserts how
//! long anything took.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tempfile::TempDir;
use toolgate_test_support::toolgate::Serving;
use toolgate_test_support::{PeerCommand, Peers};

/// A generous limit after which a run counts as hung: not a performance assertion, a guard against hangs.
pub(crate) use toolgate_test_support::{HANG_GUARD, Run};

/// The toolgate binary under test (test-support finds it).
pub(crate) use toolgate_test_support::toolgate::binary as toolgate_binary;

/// The `serve` options every toolgate in these tests runs with: the permissive policy (these tests check what the
/// relay carries; the standard policy's confirmations have their own suite) and a state directory of its own (pins
/// and audit of one test never meet another's: every npm peer is an upstream called `node`).
pub(crate) fn serve_flags(state_dir: &Path) -> Vec<String> {
    vec!["--policy".into(), "permissive".into(), "--state-dir".into(), state_dir.to_string_lossy().into_owned()]
}

/// A fresh temporary directory.
pub(crate) fn temp_dir() -> TempDir {
    tempfile::tempdir().expect("a temporary directory")
}

/// How a client reaches toolgate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Via {
    /// The client spawns `toolgate serve -- <peer>` and talks over its stdin/stdout.
    Stdio,
    /// The test starts `toolgate serve --listen 127.0.0.1:0 -- <peer>` and the client posts to its `/mcp`.
    Http,
}

/// Runs a command to completion with stdin closed and toolgate's logging and colour off, failing after
/// [`HANG_GUARD`].
pub(crate) fn run_guarded(mut command: Command, what: &str) -> Run {
    command.env_remove("TOOLGATE_LOG").env("NO_COLOR", "1");
    toolgate_test_support::run_guarded(command, what)
}

/// The directory of the Python client scripts.
fn clients_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests").join("relay_clients")
}

/// How a Python client script reaches the toolgate under test.
pub(crate) enum PythonReach<'a> {
    /// Over stdio: the script spawns `toolgate serve SERVE_ARGS [-- SERVER]` with `env` added to its environment.
    Spawn {
        /// Extra environment for toolgate (and so for the upstream it spawns).
        env: &'a [(String, String)],
        /// The `serve` options.
        serve_args: Vec<String>,
        /// The upstream's argv after `--`, or `None` when toolgate's config names the upstream.
        server: Option<Vec<String>>,
    },
    /// Over Streamable HTTP, to a toolgate the test started at this URL.
    Url(&'a str),
}

/// Runs `relay_clients/<script> ARGS` with the SDK's Python, reaching toolgate as `reach` says, and returns the one
/// JSON object it printed last; fails the test with its output when it exits non-zero or prints none. `what` names
/// the run in that failure.
pub(crate) fn run_python_client(script: &str, args: &[&str], reach: PythonReach<'_>, what: &str) -> Value {
    let mut command = Command::new(Peers::locate().python());
    // No __pycache__ next to the scripts in the source tree.
    command.env("PYTHONDONTWRITEBYTECODE", "1").arg(clients_dir().join(script)).args(args);
    match reach {
        PythonReach::Spawn { env, serve_args, server } => {
            let env: serde_json::Map<String, Value> =
                env.iter().map(|(key, value)| (key.clone(), Value::String(value.clone()))).collect();
            command
                .arg("--toolgate")
                .arg(toolgate_binary())
                .arg("--env-json")
                .arg(Value::Object(env).to_string())
                .arg("--serve-args-json")
                .arg(json!(serve_args).to_string());
            if let Some(server) = server {
                command.arg("--").args(server);
            }
        }
        PythonReach::Url(url) => {
            command.arg("--url").arg(url);
        }
    }
    let run = run_guarded(command, what);
    let line = run.stdout.lines().rev().find(|line| !line.trim().is_empty()).unwrap_or_default();
    match (run.code, serde_json::from_str::<Value>(line)) {
        (Some(0), Ok(value)) => value,
        _ => panic!("{what} failed (exit {:?})\nstdout:\n{}\nstderr:\n{}", run.code, run.stdout, run.stderr),
    }
}

/// Runs `relay_clients/<script>` connected to toolgate relaying `peer`, and returns the one JSON object it printed.
/// `extra` comes before the transport arguments (e.g. `--scenario echo`).
pub(crate) fn python_via(script: &str, extra: &[&str], peer: &PeerCommand, via: Via) -> Value {
    let what = format!("{script} {extra:?} over {via:?}");
    match via {
        Via::Stdio => {
            // Kept alive until the client is done.
            let state = temp_dir();
            let reach =
                PythonReach::Spawn { env: &peer.env, serve_args: serve_flags(state.path()), server: Some(peer.argv()) };
            run_python_client(script, extra, reach, &what)
        }
        Via::Http => {
            let server = HttpToolgate::start(peer);
            run_python_client(script, extra, PythonReach::Url(&server.url), &what)
        }
    }
}

/// A `toolgate serve --listen 127.0.0.1:0 -- <peer>` serving Streamable HTTP; killed when dropped.
pub(crate) struct HttpToolgate {
    _serving: Serving,
    _state: TempDir,
    /// `http://127.0.0.1:PORT/mcp`, as toolgate announced it.
    pub(crate) url: String,
}

impl HttpToolgate {
    /// Starts toolgate relaying `peer` and waits for the address it announces on stderr.
    pub(crate) fn start(peer: &PeerCommand) -> HttpToolgate {
        let state = temp_dir();
        let mut command = toolgate_test_support::toolgate::command();
        command.args(["serve", "--listen", "127.0.0.1:0"]).args(serve_flags(state.path())).arg("--").args(peer.argv());
        for (key, value) in &peer.env {
            command.env(key, value);
        }
        let serving = Serving::start(command);
        let url = serving.url.clone();
        HttpToolgate { _serving: serving, _state: state, url }
    }
}

/// A raw JSON-RPC client of `toolgate serve -- <peer>` over stdio: writes one line per message, reads lines, no SDK
/// in the way. Everything read is kept in [`RawClient::received`], in order.
pub(crate) struct RawClient {
    child: Child,
    _state: Option<TempDir>,
    stdin: Option<ChildStdin>,
    lines: mpsc::Receiver<String>,
    /// Every message read so far, in arrival order.
    pub(crate) received: Vec<Value>,
    next_id: u64,
}

impl RawClient {
    /// Spawns `toolgate serve -- <peer>`.
    pub(crate) fn through_toolgate(peer: &PeerCommand) -> RawClient {
        let state = temp_dir();
        let mut command = toolgate_test_support::toolgate::command();
        command.arg("serve").args(serve_flags(state.path())).arg("--").args(peer.argv());
        for (key, value) in &peer.env {
            command.env(key, value);
        }
        RawClient::spawn(command, Some(state))
    }

    /// Spawns `toolgate serve` as a user runs it first: no `--policy` (the standard profile) and no trust setting
    /// (untrusted), with only a state directory of its own.
    pub(crate) fn through_toolgate_by_default(peer: &PeerCommand) -> RawClient {
        RawClient::through_toolgate_by_default_in(peer, temp_dir())
    }

    /// [`RawClient::through_toolgate_by_default`] on a state directory prepared beforehand (verification records).
    pub(crate) fn through_toolgate_by_default_in(peer: &PeerCommand, state: TempDir) -> RawClient {
        let mut command = Command::new(toolgate_binary());
        command.arg("serve").arg("--state-dir").arg(state.path()).arg("--").args(peer.argv());
        for (key, value) in &peer.env {
            command.env(key, value);
        }
        RawClient::spawn(command, Some(state))
    }

    /// Spawns the peer itself, to see what it says without toolgate in between.
    pub(crate) fn direct(peer: &PeerCommand) -> RawClient {
        RawClient::spawn(peer.command(), None)
    }

    fn spawn(mut command: Command, state: Option<TempDir>) -> RawClient {
        command.env_remove("TOOLGATE_LOG").stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::null());
        let mut child = command.spawn().expect("the server starts");
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().expect("stdout is piped");
        let (sender, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if sender.send(line).is_err() {
                    break;
                }
            }
        });
        RawClient { child, _state: state, stdin, lines, received: Vec::new(), next_id: 1 }
    }

    /// Completes the handshake with these client capabilities; returns the `initialize` result.
    pub(crate) fn initialize(&mut self, capabilities: Value) -> Value {
        let result = self.request_ok(
            "initialize",
            json!({
                "protocolVersion": "2025-11-25",
                "capabilities": capabilities,
                "clientInfo": {"name": "toolgate-relay-test", "version": "0.0.0"},
            }),
        );
        self.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        result
    }

    /// Every tool, following `nextCursor` until it is absent.
    pub(crate) fn list_all_tools(&mut self) -> Vec<Value> {
        let mut tools = Vec::new();
        let mut params = json!({});
        for _ in 0..100 {
            let result = self.request_ok("tools/list", params);
            tools.extend(result["tools"].as_array().expect("tools is an array").iter().cloned());
            match result.get("nextCursor") {
                Some(cursor) if !cursor.is_null() => params = json!({"cursor": cursor}),
                _ => return tools,
            }
        }
        panic!("tools/list did not end after 100 pages");
    }

    /// Writes one message as one line.
    pub(crate) fn send(&mut self, message: &Value) {
        let stdin = self.stdin.as_mut().expect("stdin is open");
        let mut line = message.to_string();
        line.push('\n');
        stdin.write_all(line.as_bytes()).and_then(|()| stdin.flush()).expect("toolgate reads its stdin");
    }

    /// A fresh request id.
    pub(crate) fn next_id(&mut self) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        json!(id)
    }

    /// Reads messages until one satisfies `done`, and returns it (it is also kept in `received`).
    pub(crate) fn read_until(&mut self, what: &str, done: impl Fn(&Value) -> bool) -> Value {
        let deadline = Instant::now() + HANG_GUARD;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = match self.lines.recv_timeout(left) {
                Ok(line) => line,
                Err(mpsc::RecvTimeoutError::Timeout) => panic!("no {what} within {HANG_GUARD:?}: {:#?}", self.received),
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    panic!("toolgate closed stdout before {what}: {:#?}", self.received)
                }
            };
            let message: Value = serde_json::from_str(&line)
                .unwrap_or_else(|error| panic!("toolgate wrote a line that is not JSON ({error}): {line:?}"));
            self.received.push(message.clone());
            if done(&message) {
                return message;
            }
        }
    }

    /// Sends a request and waits for the response with its id (whole message).
    pub(crate) fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.next_id();
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        self.read_until(&format!("response to {method}"), |message| is_response_to(message, &id))
    }

    /// Sends a request and returns its `result`, failing on an error response.
    pub(crate) fn request_ok(&mut self, method: &str, params: Value) -> Value {
        let response = self.request(method, params.clone());
        match response.get("result") {
            Some(result) => result.clone(),
            None => panic!("{method} {params} failed: {response}"),
        }
    }
}

impl Drop for RawClient {
    fn drop(&mut self) {
        // Closing stdin is how a stdio client says goodbye; kill only if toolgate lingers.
        drop(self.stdin.take());
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// True when `message` is the response (result or error) to request `id`.
pub(crate) fn is_response_to(message: &Value, id: &Value) -> bool {
    message.get("id") == Some(id) && message.get("method").is_none()
}

/// `message.method`, or "".
pub(crate) fn method_of(message: &Value) -> &str {
    message.get("method").and_then(Value::as_str).unwrap_or_default()
}
