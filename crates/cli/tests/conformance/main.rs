//! The official MCP conformance suite (npm `@modelcontextprotocol/conformance`, Node 22) against toolgate's
//! Streamable HTTP endpoint: all active server scenarios through toolgate fronting the fixture upstream, and
//! server-everything through toolgate passing at least every check it passes directly, plus DNS-rebinding
//! protection. `modern` runs the 2026-07-28 suite against a list of the checks still expected to fail, and
//! `modern_upstream` runs it through toolgate in front of a modern (2026-07-28) upstream.
//!
//! Real peers only (test-support fails loudly when one is missing). Everything listens on loopback ports chosen
//! by the OS; every child is killed when its guard drops.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod bridging;
mod fleet;
mod held_calls;
mod held_stdio;
mod modern;
mod modern_upstream;

use std::collections::BTreeMap;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use toolgate_test_support::toolgate::Serving;
use toolgate_test_support::{PeerCommand, Peers, fixture_http, fixture_stdio};

/// Kills a child process when dropped.
struct Guard(Child);

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `toolgate serve --listen 127.0.0.1:0 -- <upstream>`; it knows its MCP URL.
fn toolgate_in_front_of(upstream: &PeerCommand, peers: &Peers) -> Serving {
    let mut arguments = vec!["--".to_owned()];
    arguments.extend(upstream.argv());
    start_toolgate(&arguments, upstream, peers)
}

/// Starts the fixture serving Streamable HTTP on a free port and `toolgate serve --upstream-url` in front of it;
/// the guard stops the fixture. Over HTTP each request the fixture sends during a call comes on that call's own
/// response stream (SEP-2260), so toolgate knows exactly which call it belongs to however many run at once.
fn toolgate_in_front_of_the_http_fixture(peers: &Peers) -> (Guard, Serving) {
    let port = free_port();
    let fixture = fixture_http(port);
    let mut command = fixture.command();
    command.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null());
    let guard = Guard(command.spawn().expect("the fixture starts"));
    wait_for_port(port);
    let upstream_url = format!("http://127.0.0.1:{port}/mcp");
    (guard, start_toolgate(&["--upstream-url".to_owned(), upstream_url], &fixture, peers))
}

/// Starts `toolgate serve --listen 127.0.0.1:0 <arguments>`; it knows its MCP URL.
fn start_toolgate(arguments: &[String], upstream: &PeerCommand, peers: &Peers) -> Serving {
    Serving::start(toolgate_command(arguments, upstream, peers))
}

/// `toolgate serve --listen 127.0.0.1:0 <arguments>` as the suites run it, not started.
fn toolgate_command(arguments: &[String], upstream: &PeerCommand, peers: &Peers) -> std::process::Command {
    let mut command = toolgate_test_support::toolgate::command();
    // The relay itself is under test here: every call is allowed (the guardrails have their own tests), and state
    // goes to a scratch directory.
    command.args(["serve", "--listen", "127.0.0.1:0", "--policy", "permissive"]).args(arguments);
    command
        .env("TOOLGATE_STATE_DIR", std::env::temp_dir().join(format!("toolgate-conformance-{}", std::process::id())));
    command.env("PATH", peers.path_env()).env("TOOLGATE_LOG", "warn");
    for (key, value) in &upstream.env {
        command.env(key, value);
    }
    command
}

/// Runs the active server suite against `url`; returns (exit success, per-scenario (passed, failed), output).
fn run_suite(peers: &Peers, url: &str) -> (bool, BTreeMap<String, (u32, u32)>, String) {
    let output_dir = tempfile::tempdir().unwrap();
    let suite = peers.conformance();
    let mut command = suite.command();
    command.args(["server", "--url", url, "--suite", "active", "-o"]).arg(output_dir.path());
    command.env("PATH", peers.path_env()).stdin(Stdio::null());
    let started = Instant::now();
    let output = command.output().expect("the conformance suite runs");
    let text = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    eprintln!("conformance against {url} took {:?}", started.elapsed());
    (output.status.success(), parse_summary(&text), text)
}

/// Reads `✓ name: N passed, M failed` lines of the summary.
fn parse_summary(text: &str) -> BTreeMap<String, (u32, u32)> {
    let mut scenarios = BTreeMap::new();
    let summary = text.split("=== SUMMARY ===").nth(1).unwrap_or_default();
    for line in summary.lines() {
        let line = line.trim().trim_start_matches(['✓', '✗']).trim();
        let Some((name, counts)) = line.split_once(": ") else { continue };
        if name == "Total" {
            continue;
        }
        let numbers: Vec<u32> = counts
            .split(|c: char| !c.is_ascii_digit())
            .filter(|part| !part.is_empty())
            .filter_map(|n| n.parse().ok())
            .collect();
        if let [passed, failed] = numbers[..] {
            scenarios.insert(name.to_owned(), (passed, failed));
        }
    }
    scenarios
}

/// Every check id that passed, from the suite's per-scenario `checks.json` files.
fn passed_checks(output: &std::path::Path) -> Vec<String> {
    let mut passed = Vec::new();
    for entry in std::fs::read_dir(output).unwrap() {
        let directory = entry.unwrap().path();
        let Ok(text) = std::fs::read_to_string(directory.join("checks.json")) else { continue };
        let checks: serde_json::Value = serde_json::from_str(&text).unwrap();
        let scenario = scenario_name(&directory.file_name().unwrap().to_string_lossy());
        for check in checks.as_array().into_iter().flatten() {
            if check["status"] == "SUCCESS" {
                passed.push(format!("{scenario}/{}", check["id"].as_str().unwrap_or_default()));
            }
        }
    }
    passed.sort();
    passed
}

/// `server-ping-2026-11-25T23-52-20-123Z` -> `server-ping`: the name before the `-YYYY-MM-DDT` timestamp.
fn scenario_name(directory: &str) -> String {
    let bytes = directory.as_bytes();
    let starts_timestamp = |index: usize| {
        bytes.get(index..index + 12).is_some_and(|part| {
            part[0] == b'-'
                && part[1..5].iter().all(u8::is_ascii_digit)
                && part[5] == b'-'
                && part[6..8].iter().all(u8::is_ascii_digit)
                && part[8] == b'-'
                && part[9..11].iter().all(u8::is_ascii_digit)
                && part[11] == b'T'
        })
    };
    let end = (0..bytes.len()).find(|index| starts_timestamp(*index)).unwrap_or(bytes.len());
    directory[..end].to_owned()
}

#[test]
fn every_active_scenario_passes_through_toolgate_in_front_of_the_fixture() {
    let peers = Peers::locate();
    let toolgate = toolgate_in_front_of(&fixture_stdio(), &peers);
    every_active_scenario_passes(&peers, &toolgate.url);
}

/// The active suite against `url` (toolgate, or a balancer in front of several) passes every scenario.
fn every_active_scenario_passes(peers: &Peers, url: &str) {
    let (success, scenarios, text) = run_suite(peers, url);
    assert!(success, "the suite failed through toolgate:\n{text}");
    assert_eq!(scenarios.len(), 30, "30 active scenarios ran:\n{text}");
    for (name, (passed, failed)) in &scenarios {
        assert!(*passed > 0 && *failed == 0, "{name}: {passed} passed, {failed} failed\n{text}");
    }
}

#[test]
fn every_active_scenario_passes_through_toolgate_in_front_of_the_fixture_over_http() {
    let peers = Peers::locate();
    let (_fixture, toolgate) = toolgate_in_front_of_the_http_fixture(&peers);
    let url = toolgate.url.clone();
    let (success, scenarios, text) = run_suite(&peers, &url);
    assert!(success, "the suite failed through toolgate with a Streamable HTTP upstream:\n{text}");
    assert_eq!(scenarios.len(), 30, "30 active scenarios ran:\n{text}");
}

#[test]
fn server_everything_passes_at_least_as_much_through_toolgate() {
    let peers = Peers::locate();
    let port = free_port();
    let direct_server = peers.server_everything_http(port);
    let mut command = direct_server.command();
    command.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null());
    let _direct = Guard(command.spawn().expect("server-everything starts"));
    wait_for_port(port);

    let run_checks = |url: &str| {
        let output_dir = tempfile::tempdir().unwrap();
        let mut command = peers.conformance().command();
        command.args(["server", "--url", url, "--suite", "active", "-o"]).arg(output_dir.path());
        command.env("PATH", peers.path_env()).stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null());
        let _ = command.status().expect("the conformance suite runs");
        passed_checks(output_dir.path())
    };
    let direct = run_checks(&format!("http://127.0.0.1:{port}/mcp"));
    let toolgate = toolgate_in_front_of(&peers.server_everything(), &peers);
    let url = toolgate.url.clone();
    let through = run_checks(&url);
    assert!(!direct.is_empty(), "the direct run passed no check at all");
    let missing: Vec<&String> = direct.iter().filter(|check| !through.contains(check)).collect();
    assert!(missing.is_empty(), "checks server-everything passes directly but not through toolgate: {missing:?}");
    assert!(
        through.iter().filter(|check| check.starts_with("server-dns-rebinding-protection/")).count() >= 2,
        "DNS-rebinding protection passes through toolgate: {through:?}"
    );
    eprintln!("direct: {} checks passed; through toolgate: {}", direct.len(), through.len());
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn wait_for_port(port: u16) {
    for _ in 0..600 {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("nothing listened on port {port} within 30 s");
}

#[test]
fn scenario_names_drop_the_timestamp() {
    assert_eq!(scenario_name("server-ping-2026-11-25T23-52-20-123Z"), "server-ping");
    assert_eq!(scenario_name("server-tools-call-image-2026-11-25T23-20-06-644Z"), "server-tools-call-image");
}

#[test]
fn the_summary_parser_reads_counts() {
    let text = "noise\n=== SUMMARY ===\n✓ ping: 1 passed, 0 failed\n✗ tools-call-image: 0 passed, 1 failed\n\nTotal: 1 passed, 1 failed\n";
    let scenarios = parse_summary(text);
    assert_eq!(scenarios.get("ping"), Some(&(1, 0)));
    assert_eq!(scenarios.get("tools-call-image"), Some(&(0, 1)));
    assert_eq!(scenarios.len(), 2, "{scenarios:?}");
}
