//! Checks that every peer `cargo xtask test` installed really starts and speaks MCP, and that the misbehave
//! fixture misbehaves as documented.
//!
//! These tests fail (never skip) when peers are missing. They talk to child processes over pipes and to
//! loopback only; they must not depend on the network.
#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use toolgate_test_support::{PEERS_TOML, PeerCommand, Peers, misbehave};

const TIMEOUT: Duration = Duration::from_secs(60);

/// A child MCP server over stdio with its stdout lines arriving on a channel.
struct StdioPeer {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
}

impl StdioPeer {
    fn spawn(peer: &PeerCommand) -> StdioPeer {
        let mut child = peer
            .command()
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|error| panic!("cannot start {:?}: {error}", peer.argv()));
        let stdout = child.stdout.take().unwrap();
        let (sender, lines) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if sender.send(line).is_err() {
                    break;
                }
            }
        });
        let stdin = child.stdin.take();
        StdioPeer { child, stdin, lines }
    }

    fn send(&mut self, message: Value) {
        let stdin = self.stdin.as_mut().unwrap();
        writeln!(stdin, "{message}").unwrap();
        stdin.flush().unwrap();
    }

    fn next_line(&self) -> Result<String, RecvTimeoutError> {
        self.lines.recv_timeout(TIMEOUT)
    }

    /// The next JSON message on stdout, skipping nothing: a non-JSON line fails the test.
    fn next_message(&self) -> Value {
        let line = self.next_line().expect("the peer answers in time");
        serde_json::from_str(&line).unwrap_or_else(|error| panic!("not JSON ({error}): {line:.200}"))
    }

    /// The response to request `id`, skipping notifications and server-to-client requests.
    fn response(&self, id: u64) -> Value {
        loop {
            let message = self.next_message();
            if message.get("id") == Some(&json!(id)) && message.get("method").is_none() {
                return message;
            }
        }
    }

    fn initialize(&mut self, protocol_version: &str) -> Value {
        self.send(json!({
            "jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {
                "protocolVersion": protocol_version,
                "capabilities": {},
                "clientInfo": {"name": "toolgate-test-support", "version": "0"}
            }
        }));
        let answer = self.response(1);
        self.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        answer
    }

    fn list_tools(&mut self, id: u64, cursor: Option<&str>) -> Value {
        let params = cursor.map_or(json!({}), |cursor| json!({ "cursor": cursor }));
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": "tools/list", "params": params}));
        self.response(id)
    }

    /// Closes stdin and waits for the exit status, killing the child if it lingers.
    fn close(mut self) -> Option<i32> {
        drop(self.stdin.take());
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status.code();
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        self.child.kill().unwrap();
        self.child.wait().unwrap().code()
    }
}

impl Drop for StdioPeer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn output_of(peer: &PeerCommand) -> String {
    let output = peer
        .command()
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|error| panic!("cannot run {:?}: {error}", peer.argv()));
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "{:?} failed: {}\n{stdout}\n{}",
        peer.argv(),
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}

fn assert_speaks_mcp(peer: &PeerCommand) -> Value {
    let mut server = StdioPeer::spawn(peer);
    let answer = server.initialize("2025-06-18");
    assert!(answer["result"]["protocolVersion"].is_string(), "{:?}: {answer}", peer.argv());
    let tools = server.list_tools(2, None);
    assert!(tools["result"]["tools"].as_array().is_some_and(|t| !t.is_empty()), "{:?}: {tools:.300}", peer.argv());
    server.close();
    tools
}

#[test]
fn node_is_version_22_and_python_has_the_pinned_sdk() {
    let peers = Peers::locate();
    let version = output_of(&PeerCommand::new(peers.node()).arg("--version"));
    assert!(version.starts_with("v22."), "node is {version}");

    let sdk = output_of(
        &PeerCommand::new(peers.python())
            .args(["-c", "import importlib.metadata, mcp; print(importlib.metadata.version('mcp'))"]),
    );
    assert!(
        PEERS_TOML.contains(&format!("\"mcp\" = \"{}\"", sdk.trim())),
        "the venv has mcp {sdk}, not the pinned version"
    );
}

#[test]
fn stdio_reference_servers_speak_mcp() {
    let peers = Peers::locate();
    let scratch = tempfile::tempdir().unwrap();

    assert_speaks_mcp(&peers.server_everything());
    assert_speaks_mcp(&peers.server_filesystem(scratch.path()));
    assert_speaks_mcp(&peers.server_memory(&scratch.path().join("memory.jsonl")));

    let repo = scratch.path().join("repo");
    let init = std::process::Command::new("git").args(["init", "--quiet"]).arg(&repo).status().unwrap();
    assert!(init.success());
    assert_speaks_mcp(&peers.mcp_server_git(&repo));
}

#[test]
fn inspector_cli_lists_the_tools_of_server_everything() {
    let peers = Peers::locate();
    let listed = output_of(&peers.inspector_cli().args(["mcp-server-everything", "--method", "tools/list"]));
    assert!(listed.contains("\"echo\""), "{listed:.500}");
}

#[test]
fn conformance_suite_lists_its_scenarios() {
    let peers = Peers::locate();
    let listed = output_of(&peers.conformance().arg("list"));
    assert!(listed.contains("server-initialize"), "{listed:.500}");
}

#[test]
fn server_everything_listens_over_http() {
    let peers = Peers::locate();
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let mut child = peers
        .server_everything_http(port)
        .command()
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + TIMEOUT;
    let connected = loop {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            break true;
        }
        if Instant::now() > deadline || child.try_wait().unwrap().is_some() {
            break false;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(connected, "server-everything never listened on port {port}");
}

#[test]
fn misbehave_crash_on_initialize_exits_3() {
    let mut server = StdioPeer::spawn(&misbehave("crash-on-initialize"));
    server.send(json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}));
    assert_eq!(server.next_line(), Err(RecvTimeoutError::Disconnected));
    assert_eq!(server.close(), Some(3));
}

#[test]
fn misbehave_silent_never_answers() {
    let mut server = StdioPeer::spawn(&misbehave("silent"));
    server.send(json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}));
    assert_eq!(server.lines.recv_timeout(Duration::from_millis(500)), Err(RecvTimeoutError::Timeout));
    assert_eq!(server.close(), Some(0));
}

#[test]
fn misbehave_garbage_is_not_json() {
    let mut server = StdioPeer::spawn(&misbehave("garbage"));
    server.send(json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}));
    let line = server.next_line().unwrap();
    assert!(serde_json::from_str::<Value>(&line).is_err(), "{line}");
}

#[test]
fn misbehave_huge_tools_sends_about_50_mb_on_one_line() {
    let mut server = StdioPeer::spawn(&misbehave("huge-tools"));
    let answer = server.initialize("2025-11-25");
    assert_eq!(answer["result"]["protocolVersion"], "2025-06-18");
    server.send(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}));
    let line = server.next_line().unwrap();
    assert!(line.len() > 45_000_000, "{} bytes", line.len());
    let tools: Value = serde_json::from_str(&line).unwrap();
    assert_eq!(tools["result"]["tools"].as_array().unwrap().len(), 5_000);
}

#[test]
fn misbehave_paginated_lists_three_pages_of_odd_tools() {
    let mut server = StdioPeer::spawn(&misbehave("paginated"));
    server.initialize("2025-11-25");
    let mut tools = Vec::new();
    let mut cursor: Option<String> = None;
    let mut pages = 0;
    loop {
        let page = server.list_tools(10 + pages, cursor.as_deref());
        pages += 1;
        tools.extend(page["result"]["tools"].as_array().unwrap().iter().cloned());
        match page["result"]["nextCursor"].as_str() {
            Some(next) => cursor = Some(next.to_owned()),
            None => break,
        }
    }
    assert_eq!(pages, 3);
    let text = Value::Array(tools.clone()).to_string();
    for odd in [
        "\"readOnly\":true",
        "\"readOnlyHint\":\"true\"",
        "\"visibility\":[\"app\"]",
        "\"execution\":{\"taskSupport\":\"optional\"}",
        "\"$defs\"",
    ] {
        assert!(text.contains(odd), "no {odd} in {text}");
    }
    let bad = server.list_tools(99, Some("not-a-cursor"));
    assert_eq!(bad["error"]["code"], -32602);

    server.send(json!({"jsonrpc": "2.0", "id": 100, "method": "tools/call",
        "params": {"name": "read_config", "arguments": {}}}));
    assert_eq!(server.response(100)["result"]["content"][0]["text"], "called read_config");
    assert_eq!(server.close(), Some(0));
}

#[test]
fn misbehave_crash_mid_call_exits_without_answering() {
    let mut server = StdioPeer::spawn(&misbehave("crash-mid-call"));
    server.initialize("2025-11-25");
    let tools = server.list_tools(2, None);
    assert_eq!(tools["result"]["tools"].as_array().unwrap().len(), 1);
    server.send(json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
        "params": {"name": "slow_operation", "arguments": {}}}));
    assert_eq!(server.next_line(), Err(RecvTimeoutError::Disconnected));
    assert_eq!(server.close(), Some(1));
}

#[test]
fn misbehave_stderr_noise_still_answers() {
    // stderr is piped and read to the end, as a gateway must, to prove the noise is really there.
    let mut child = misbehave("stderr-noise")
        .command()
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let noise = std::thread::spawn(move || std::io::read_to_string(stderr).unwrap().len());
    let mut stdin = child.stdin.take().unwrap();
    writeln!(
        stdin,
        "{}",
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18"}})
    )
    .unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    let answer: Value = serde_json::from_str(&line).unwrap();
    assert_eq!(answer["result"]["protocolVersion"], "2025-06-18");
    drop(stdin);
    assert!(child.wait().unwrap().success());
    assert!(noise.join().unwrap() > 1_000_000);
}
