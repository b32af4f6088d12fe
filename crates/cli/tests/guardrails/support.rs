//! Helpers for the end-to-end guardrail tests: a `toolgate serve --config FILE --state-dir DIR` in front of the
//! bundled demo server, a raw HTTP/1.1 client (one connection per request, so a test controls every header,
//! `Host` included), and running the other `toolgate` commands against the same state directory.
//!
//! Every wait is bounded by [`HANG_GUARD`]; no test asserts how long anything took.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// A generous limit after which a wait counts as hung: not a performance assertion.
pub(crate) use toolgate_test_support::{HANG_GUARD, Run, run_guarded, wait_guarded};

/// The toolgate binary under test.
pub(crate) fn toolgate_binary() -> &'static str {
    env!("CARGO_BIN_EXE_toolgate")
}

/// A state directory and a config file next to it.
pub(crate) struct Setup {
    pub(crate) dir: tempfile::TempDir,
    pub(crate) config: PathBuf,
}

impl Setup {
    /// Writes `gateway.toml`: the demo server as the only upstream (`get_note` overridden read-only, so reading a
    /// note back never needs a person), HTTP on a loopback port the OS picks, then `extra`.
    pub(crate) fn demo(extra: &str) -> Setup {
        let dir = tempfile::tempdir().expect("tempdir");
        let config = dir.path().join("gateway.toml");
        let text = format!(
            "[[upstream]]\nname = \"demo\"\ncommand = {binary:?}\nargs = [\"demo-server\"]\n\n\
             [upstream.tools.get_note]\nreadOnlyHint = true\n\n\
             [listen.http]\nbind = \"127.0.0.1:0\"\n\n{extra}\n",
            binary = toolgate_binary()
        );
        std::fs::write(&config, text).expect("write the config");
        Setup { dir, config }
    }

    /// The state directory.
    pub(crate) fn state(&self) -> PathBuf {
        self.dir.path().join("state")
    }

    /// The state directory as an argument.
    pub(crate) fn state_arg(&self) -> String {
        self.state().to_string_lossy().into_owned()
    }
}

/// A running `toolgate serve`; killed (SIGKILL) when dropped.
pub(crate) struct Serve {
    pub(crate) child: Child,
    /// `http://127.0.0.1:PORT/mcp`.
    pub(crate) url: String,
    /// `127.0.0.1:PORT`.
    pub(crate) authority: String,
    /// Every stderr line so far.
    pub(crate) stderr: Arc<Mutex<Vec<String>>>,
}

impl Serve {
    /// Starts `toolgate serve --config CONFIG --state-dir STATE` with `env` and waits for its URL.
    pub(crate) fn start(setup: &Setup, env: &[(&str, &str)]) -> Serve {
        let mut command = Command::new(toolgate_binary());
        command.args(["serve", "--config"]).arg(&setup.config).arg("--state-dir").arg(setup.state());
        Serve::spawn(command, env)
    }

    /// Like [`Serve::start`], but through `sh -c 'PRELUDE; exec toolgate serve ...'` (a `ulimit`, say).
    pub(crate) fn start_after(prelude: &str, setup: &Setup, env: &[(&str, &str)]) -> Serve {
        let mut command = Command::new("sh");
        command
            .arg("-c")
            .arg(format!("{prelude} && exec \"$0\" serve --config \"$1\" --state-dir \"$2\""))
            .arg(toolgate_binary())
            .arg(&setup.config)
            .arg(setup.state());
        Serve::spawn(command, env)
    }

    fn spawn(mut command: Command, env: &[(&str, &str)]) -> Serve {
        command.env_remove("TOOLGATE_STATE_DIR").env("TOOLGATE_LOG", "info").env("NO_COLOR", "1");
        for (key, value) in env {
            command.env(key, value);
        }
        command.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::piped());
        let mut child = command.spawn().expect("toolgate serve starts");
        let stderr_pipe = child.stderr.take().expect("stderr is piped");
        let stderr = Arc::new(Mutex::new(Vec::new()));
        let (sender, receiver) = mpsc::channel();
        let lines = Arc::clone(&stderr);
        std::thread::spawn(move || {
            for line in BufReader::new(stderr_pipe).lines().map_while(Result::ok) {
                if let Some(url) = line.split("serving MCP on ").nth(1) {
                    let _ = sender.send(url.trim().to_owned());
                }
                lines.lock().expect("stderr lines").push(line);
            }
        });
        let Ok(url) = receiver.recv_timeout(HANG_GUARD) else {
            let _ = child.kill();
            let _ = child.wait();
            panic!("toolgate serve did not announce its URL; stderr:\n{}", stderr.lock().expect("lines").join("\n"));
        };
        let authority = url.trim_start_matches("http://").split('/').next().unwrap_or_default().to_owned();
        Serve { child, url, authority, stderr }
    }

    /// Everything toolgate wrote to stderr so far.
    pub(crate) fn stderr_text(&self) -> String {
        self.stderr.lock().expect("stderr lines").join("\n")
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One HTTP response.
#[derive(Debug)]
pub(crate) struct Reply {
    pub(crate) status: u16,
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) body: String,
}

impl Reply {
    /// A header's value (name case-insensitive).
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(key, _)| key.eq_ignore_ascii_case(name)).map(|(_, value)| value.as_str())
    }

    /// The JSON-RPC messages in the body: the JSON body itself, or each SSE `data:` line.
    pub(crate) fn messages(&self) -> Vec<Value> {
        if self.header("content-type").is_some_and(|kind| kind.starts_with("text/event-stream")) {
            self.body
                .lines()
                .filter_map(|line| line.strip_prefix("data:"))
                .filter_map(|data| serde_json::from_str(data.trim()).ok())
                .collect()
        } else {
            serde_json::from_str(&self.body).into_iter().collect()
        }
    }

    /// The response with this id, if the body holds it.
    pub(crate) fn response(&self, id: &Value) -> Option<Value> {
        self.messages().into_iter().find(|message| &message["id"] == id && message.get("method").is_none())
    }
}

/// POSTs `body` to `http://AUTHORITY/mcp` on a fresh connection. `headers` are added as given; `Host` defaults to
/// the authority unless `headers` sets it.
pub(crate) fn post(authority: &str, headers: &[(&str, &str)], body: &Value) -> std::io::Result<Reply> {
    post_text(authority, headers, &body.to_string())
}

/// [`post`] with the body as written, byte for byte (a number no `Value` of the test's own would keep).
pub(crate) fn post_text(authority: &str, headers: &[(&str, &str)], body: &str) -> std::io::Result<Reply> {
    let mut stream = TcpStream::connect(authority)?;
    stream.set_read_timeout(Some(HANG_GUARD))?;
    let mut request = String::from("POST /mcp HTTP/1.1\r\n");
    if !headers.iter().any(|(name, _)| name.eq_ignore_ascii_case("host")) {
        request.push_str(&format!("Host: {authority}\r\n"));
    }
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str(&format!(
        "Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n{body}",
        body.len()
    ));
    stream.write_all(request.as_bytes())?;
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw)?;
    parse_reply(&raw)
}

fn parse_reply(raw: &[u8]) -> std::io::Result<Reply> {
    let invalid = |what: &str| std::io::Error::new(std::io::ErrorKind::InvalidData, what.to_owned());
    let split = raw.windows(4).position(|window| window == b"\r\n\r\n").ok_or_else(|| invalid("no header end"))?;
    let head = String::from_utf8_lossy(&raw[..split]).into_owned();
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .and_then(|line| line.split(' ').nth(1))
        .and_then(|code| code.parse().ok())
        .ok_or_else(|| invalid("no status line"))?;
    let headers: Vec<(String, String)> = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(name, value)| (name.trim().to_owned(), value.trim().to_owned()))
        .collect();
    let mut body = raw[split + 4..].to_vec();
    let chunked = headers
        .iter()
        .any(|(name, value)| name.eq_ignore_ascii_case("transfer-encoding") && value.eq_ignore_ascii_case("chunked"));
    if chunked {
        body = dechunk(&body).ok_or_else(|| invalid("bad chunked body"))?;
    }
    Ok(Reply { status, headers, body: String::from_utf8_lossy(&body).into_owned() })
}

fn dechunk(mut data: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    loop {
        let line_end = data.windows(2).position(|window| window == b"\r\n")?;
        let size_text = String::from_utf8_lossy(&data[..line_end]).into_owned();
        let size = usize::from_str_radix(size_text.split(';').next()?.trim(), 16).ok()?;
        data = &data[line_end + 2..];
        if size == 0 {
            return Some(out);
        }
        out.extend_from_slice(data.get(..size)?);
        data = data.get(size + 2..).unwrap_or_default();
    }
}

/// An MCP session over raw HTTP: initialize, then requests carrying its session id.
#[derive(Clone)]
pub(crate) struct HttpSession {
    pub(crate) authority: String,
    pub(crate) id: String,
    /// Extra headers on every request (a caller's token).
    pub(crate) auth: Vec<(String, String)>,
    next: u64,
}

impl HttpSession {
    /// Initializes a session (no client capabilities) with these extra headers.
    pub(crate) fn open(authority: &str, auth: &[(&str, &str)]) -> std::io::Result<HttpSession> {
        let initialize = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "guardrails", "version": "0"}}});
        let reply = post(authority, auth, &initialize)?;
        let id = reply.header("mcp-session-id").map(str::to_owned);
        let Some(id) = id.filter(|_| reply.status == 200) else {
            return Err(std::io::Error::other(format!("initialize failed: {reply:?}")));
        };
        let auth: Vec<(String, String)> =
            auth.iter().map(|(name, value)| ((*name).to_owned(), (*value).to_owned())).collect();
        let session = HttpSession { authority: authority.to_owned(), id, auth, next: 1 };
        session.post(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))?;
        Ok(session)
    }

    /// POSTs a message with the session's headers.
    pub(crate) fn post(&self, message: &Value) -> std::io::Result<Reply> {
        self.post_text(&message.to_string())
    }

    /// POSTs a message written as text with the session's headers.
    pub(crate) fn post_text(&self, message: &str) -> std::io::Result<Reply> {
        let mut headers: Vec<(&str, &str)> =
            self.auth.iter().map(|(name, value)| (name.as_str(), value.as_str())).collect();
        headers.push(("Mcp-Session-Id", &self.id));
        headers.push(("MCP-Protocol-Version", "2025-11-25"));
        post_text(&self.authority, &headers, message)
    }

    /// Sends a request and returns its response message.
    pub(crate) fn request(&mut self, method: &str, params: Value) -> std::io::Result<Value> {
        let id = json!(self.next);
        self.next += 1;
        let reply = self.post(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))?;
        reply.response(&id).ok_or_else(|| std::io::Error::other(format!("no response to {id}: {reply:?}")))
    }
}

/// Runs `toolgate ARGS...` to completion (hang-guarded).
pub(crate) fn toolgate(args: &[&str]) -> Run {
    let mut command = Command::new(toolgate_binary());
    command.args(args).env_remove("TOOLGATE_STATE_DIR").env_remove("TOOLGATE_LOG").env("USER", "tester");
    run_guarded(command, &format!("toolgate {args:?}"))
}

/// Polls `check` every 50 ms until it returns `Some`, failing after [`HANG_GUARD`].
pub(crate) fn poll<T>(what: &str, mut check: impl FnMut() -> Option<T>) -> T {
    let started = Instant::now();
    loop {
        if let Some(value) = check() {
            return value;
        }
        assert!(started.elapsed() < HANG_GUARD, "never saw {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The directory of the Python guardrail clients.
pub(crate) fn clients_dir() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/guardrail_clients"))
}
