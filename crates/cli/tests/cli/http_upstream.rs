//! `toolgate serve` in front of a Streamable HTTP upstream (the fixture server) that dies: the gateway notices
//! without a person (the server forgot the session, or nobody answers), shows the upstream down with the reason,
//! starts a new session when the server is back, and calls succeed again within a bounded wait.
//!
//! Real processes on loopback: the fixture is killed with SIGKILL and started again on the same port; the test's
//! client is `toolgate-upstream`'s own connection, speaking to toolgate's HTTP endpoint (whose session survives).

use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use toolgate_test_support::fixture_http;
use toolgate_test_support::toolgate::Serving;
use toolgate_upstream::{ConnectOptions, Connection, Endpoint};

use crate::support::toolgate;

/// What the fixture's `test_simple_text` answers.
const SIMPLE_TEXT: &str = "This is a simple text response for testing.";

/// Kills a child process when dropped (SIGKILL: a crash, not a polite shutdown).
struct Guard(Child);

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts the fixture serving Streamable HTTP on `port` and waits until it accepts connections.
fn start_fixture(port: u16) -> Guard {
    let mut command = fixture_http(port).command();
    command.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null());
    let guard = Guard(command.spawn().expect("the fixture starts"));
    let started = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(started.elapsed() < Duration::from_secs(30), "the fixture did not listen on port {port} within 30 s");
        std::thread::sleep(Duration::from_millis(20));
    }
    guard
}

/// `toolgate serve --listen 127.0.0.1:0 --upstream-url ...`, its MCP URL and log, and its state directory.
struct Gateway {
    serving: Serving,
    state: tempfile::TempDir,
}

impl Gateway {
    fn start(upstream_port: u16) -> Gateway {
        let state = tempfile::tempdir().unwrap();
        let upstream_url = format!("http://127.0.0.1:{upstream_port}/mcp");
        let mut command = toolgate_test_support::toolgate::command();
        command
            .args(["serve", "--listen", "127.0.0.1:0", "--policy", "permissive", "--upstream-url", &upstream_url])
            .arg("--state-dir")
            .arg(state.path())
            .env("TOOLGATE_LOG", "warn");
        Gateway { serving: Serving::start(command), state }
    }

    fn log(&self) -> String {
        self.serving.stderr_text()
    }

    /// The upstream's entry in `toolgate status --json`, when there is one.
    fn upstream_status(&self) -> Option<Value> {
        let run = toolgate(&["status", "--json", "--state-dir", self.state.path().to_str().unwrap()], None);
        let runs: Value = serde_json::from_str(&run.stdout).ok()?;
        runs.get(0)?["status"]["upstreams"].as_array()?.first().cloned()
    }

    /// A client session with toolgate (not with the upstream).
    async fn client(&self) -> Connection {
        let options = ConnectOptions { request_timeout: Duration::from_secs(10), ..ConnectOptions::default() };
        Connection::connect(&Endpoint::http(self.serving.url.clone()), options)
            .await
            .expect("a client connects to toolgate")
    }
}

/// Calls the fixture's `test_simple_text` through toolgate: its text, or why it failed.
async fn call_simple_text(client: &Connection) -> Result<(), String> {
    let params = json!({"name": "test_simple_text", "arguments": {}});
    let result = client.request("tools/call", Some(params)).await.map_err(|error| error.to_string())?;
    match result["content"][0]["text"].as_str() {
        Some(SIMPLE_TEXT) => Ok(()),
        _ => Err(format!("an unexpected result: {result}")),
    }
}

/// Calls until one succeeds or `within` passes; returns the last failure when none did.
async fn call_until_it_succeeds(client: &Connection, within: Duration) -> Result<Duration, String> {
    let started = Instant::now();
    loop {
        let failure = match call_simple_text(client).await {
            Ok(()) => return Ok(started.elapsed()),
            Err(failure) => failure,
        };
        if started.elapsed() > within {
            return Err(failure);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The fixture over HTTP on a free port, `toolgate serve` in front of it, and a client whose first call went through.
async fn serving() -> (u16, Guard, Gateway, Connection) {
    let port = crate::inspect::free_port();
    let fixture = start_fixture(port);
    let gateway = Gateway::start(port);
    let client = gateway.client().await;
    if let Err(failure) = call_until_it_succeeds(&client, Duration::from_secs(30)).await {
        panic!("the first call failed: {failure}\ntoolgate log:\n{}", gateway.log());
    }
    (port, fixture, gateway, client)
}

/// The upstream restarts at once: the new process answers the old session id with 404, and the gateway starts a
/// new session instead of failing every call from then on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_succeed_again_after_the_http_upstream_restarts() {
    let (port, fixture, gateway, client) = serving().await;

    drop(fixture);
    let _fixture = start_fixture(port);
    match call_until_it_succeeds(&client, Duration::from_secs(20)).await {
        Ok(after) => eprintln!("calls succeed again {after:?} after the restart"),
        Err(failure) => panic!(
            "calls still fail 20 s after the upstream restarted: {failure}\nstatus: {:?}\ntoolgate log:\n{}",
            gateway.upstream_status(),
            gateway.log()
        ),
    }
    client.close().await;
}

/// The upstream stays away: the gateway does not keep calling it ready, `toolgate status` shows it down with the
/// reason, and once it is back the gateway reconnects by itself.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http_upstream_that_went_away_is_down_with_its_reason_until_it_returns() {
    let (port, fixture, gateway, client) = serving().await;

    drop(fixture);
    let started = Instant::now();
    let down = loop {
        let status = gateway.upstream_status();
        if let Some(status) = &status
            && status["state"] == "down"
        {
            break status.clone();
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "30 s after the upstream died, status still says {status:?}\ntoolgate log:\n{}",
            gateway.log()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let reason = down["reason"].as_str().unwrap_or_default();
    assert!(reason.contains("cannot reach") && reason.contains(&port.to_string()), "{down:#}");
    assert!(call_simple_text(&client).await.is_err(), "a call succeeded with the upstream down");

    let _fixture = start_fixture(port);
    match call_until_it_succeeds(&client, Duration::from_secs(60)).await {
        Ok(after) => eprintln!("calls succeed again {after:?} after the upstream returned"),
        Err(failure) => panic!(
            "calls still fail 60 s after the upstream returned: {failure}\nstatus: {:?}\ntoolgate log:\n{}",
            gateway.upstream_status(),
            gateway.log()
        ),
    }
    // The status file is rewritten from time to time, so it may lag behind the first call that succeeded.
    let started = Instant::now();
    loop {
        let status = gateway.upstream_status();
        if status.as_ref().is_some_and(|status| status["state"] == "ready") {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(30), "status never became ready again: {status:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    client.close().await;
}
