//! Issue 15: the reference servers behind `toolgate serve` as a new user runs it (default trust `untrusted`, the
//! standard policy). Every tool a server declares read-only stays read-only and is called without a person, and
//! every declared `openWorldHint: false` stays closed-world, so session taint can still tell local tools from the
//! web. Checked on the six reference servers (server-everything, filesystem, memory, mcp-server-git,
//! mcp-server-time and mcp-server-fetch); each server's own listing, read directly, is the declaration. The time
//! server's two tools are the one case inference cannot back: a closed-world claim on a server too small for a
//! convention needs evidence from behaviour, so that test records a `toolgate verify` run first, as a user would.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::{Value, json};
use toolgate_test_support::{PeerCommand, Peers};

use crate::support::{RawClient, temp_dir, toolgate_binary};

/// Declared reads that inference, alone, does not confirm, with the reason; each is a known miss reported in
/// docs/inference.md, not a pass. Only a tool listed here may be relayed as a write.
const KNOWN_MISSES: &[(&str, &str)] = &[(
    "trigger-long-running-operation",
    "`trigger` runs something; nothing in \"Demonstrates a long running operation with progress updates\" says it \
     only waits",
)];

/// The relay's listing once the upstream is connected: a slow upstream (a Python server on a loaded machine) may
/// still be starting when the first `tools/list` arrives.
fn relayed_tools(relay: &mut RawClient) -> Vec<Value> {
    for _ in 0..120 {
        let tools = relay.list_all_tools();
        if !tools.is_empty() {
            return tools;
        }
        std::thread::sleep(std::time::Duration::from_millis(500));
    }
    panic!("toolgate listed no tools within a minute");
}

/// Lists the peer's tools directly and through a default toolgate; checks every declared read and closed world,
/// then calls `read_call` (a declared read with harmless arguments) through toolgate, which must run at once.
fn check_reference_server(peer: &PeerCommand, read_call: (&str, Value)) {
    let result = check_behind(peer, RawClient::through_toolgate_by_default(peer), read_call);
    assert!(result.get("result").is_some_and(|result| result["isError"] != true), "{result:#}");
}

/// [`check_reference_server`] through a gateway already started (on a state directory with records); returns the
/// read call's response for the caller to judge.
fn check_behind(peer: &PeerCommand, mut relay: RawClient, read_call: (&str, Value)) -> Value {
    let mut direct = RawClient::direct(peer);
    direct.initialize(json!({}));
    let declared = direct.list_all_tools();
    relay.initialize(json!({}));
    let relayed = relayed_tools(&mut relay);
    let relayed_named = |name: &str| -> &Value {
        relayed
            .iter()
            .find(|tool| {
                tool["_meta"][crate::META_KEY]["upstreamName"]
                    .as_str()
                    .unwrap_or(tool["name"].as_str().unwrap_or_default())
                    == name
            })
            .unwrap_or_else(|| panic!("{name} is not relayed: {relayed:#?}"))
    };
    let mut reads = 0;
    for tool in &declared {
        let name = tool["name"].as_str().expect("a tool has a name");
        let annotations = &tool["annotations"];
        if tool["execution"]["taskSupport"] == "required" {
            // toolgate does not relay tasks; such a tool is hidden, which the relay tests cover.
            continue;
        }
        let exposed = relayed_named(name);
        if annotations["readOnlyHint"] == true && !KNOWN_MISSES.iter().any(|(missed, _)| *missed == name) {
            reads += 1;
            assert_eq!(
                exposed["annotations"]["readOnlyHint"], true,
                "{name} is declared read-only but relayed as a write: {exposed:#}"
            );
        }
        if annotations["openWorldHint"] == true {
            assert_eq!(exposed["annotations"]["openWorldHint"], true, "{name} reaches out: {exposed:#}");
        }
        if annotations["openWorldHint"] == false {
            assert_eq!(
                exposed["annotations"]["openWorldHint"], false,
                "{name} is declared closed-world but relayed open-world: {exposed:#}"
            );
        }
    }
    assert!(reads > 0, "the server declares reads: {declared:#?}");
    // A read runs without a person: this client offers no elicitation, so a confirmation would fail the call.
    let (tool, arguments) = read_call;
    let exposed_name = relayed_named(tool)["name"].clone();
    relay.request("tools/call", json!({"name": exposed_name, "arguments": arguments}))
}

#[test]
fn issue_15_server_everything_reads_flow_by_default() {
    check_reference_server(&Peers::locate().server_everything(), ("echo", json!({"message": "hello"})));
}

#[test]
fn issue_15_filesystem_reads_flow_and_stay_closed_world_by_default() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let root = std::fs::canonicalize(dir.path()).expect("canonical path");
    check_reference_server(&Peers::locate().server_filesystem(&root), ("list_allowed_directories", json!({})));
}

#[test]
fn issue_15_memory_reads_flow_and_stay_closed_world_by_default() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    check_reference_server(&Peers::locate().server_memory(&dir.path().join("memory.jsonl")), ("read_graph", json!({})));
}

#[test]
fn issue_15_git_reads_flow_and_stay_closed_world_by_default() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let repo = std::fs::canonicalize(dir.path()).expect("canonical path");
    crate::servers::init_repository(&repo);
    let path = repo.to_string_lossy().into_owned();
    check_reference_server(&Peers::locate().mcp_server_git(&repo), ("git_status", json!({"repo_path": path})));
}

#[test]
fn issue_15_time_reads_flow_and_stay_closed_world_once_verified() {
    let peer = Peers::locate().mcp_server_time();
    // Inference holds no closed world for "Convert time between timezones" and two tools make no convention, so the
    // declared `openWorldHint: false` counts only with evidence: `toolgate verify` into the state directory serve uses.
    let state = temp_dir();
    let work = temp_dir();
    let run = Command::new(toolgate_binary())
        .arg("verify")
        .arg("--format")
        .arg("json")
        .arg("--state-dir")
        .arg(state.path())
        .arg("--dir")
        .arg(work.path())
        .arg("--")
        .args(peer.argv())
        .envs(peer.env.iter().map(|(key, value)| (key, value)))
        .output()
        .expect("toolgate verify runs");
    assert_eq!(run.status.code(), Some(0), "verify: {}", String::from_utf8_lossy(&run.stderr));
    let relay = RawClient::through_toolgate_by_default_in(&peer, state);
    let call = json!({"source_timezone": "Europe/Berlin", "time": "12:00", "target_timezone": "UTC"});
    let result = check_behind(&peer, relay, ("convert_time", call));
    assert!(result.get("result").is_some_and(|result| result["isError"] != true), "{result:#}");
}

#[test]
fn issue_15_fetch_reads_flow_and_stay_open_world_by_default() {
    // A page on loopback, so the call needs no network: robots.txt is missing (fetching is allowed), the page is
    // a line of HTML.
    let listener = TcpListener::bind("127.0.0.1:0").expect("a loopback port");
    let address = listener.local_addr().expect("its address");
    let requests = Arc::new(AtomicUsize::new(0));
    let seen = Arc::clone(&requests);
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            seen.fetch_add(1, Ordering::SeqCst);
            let mut request_line = String::new();
            let mut reader = BufReader::new(&stream);
            if reader.read_line(&mut request_line).is_err() {
                continue;
            }
            let mut header = String::new();
            while reader.read_line(&mut header).is_ok_and(|read| read > 2) {
                header.clear();
            }
            let (status, body) = if request_line.contains("/robots.txt") {
                ("404 Not Found", "missing")
            } else {
                ("200 OK", "<html><body><p>hello from the reference test</p></body></html>")
            };
            let reply = format!(
                "HTTP/1.1 {status}\r\ncontent-type: text/html\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = stream.write_all(reply.as_bytes());
        }
    });
    let url = format!("http://{address}/page");
    // The server refuses loopback addresses unless told otherwise.
    let peer = Peers::locate().mcp_server_fetch().arg("--allow-private-ips");
    let result = check_behind(&peer, RawClient::through_toolgate_by_default(&peer), ("fetch", json!({"url": url})));
    // The read ran without a person: toolgate forwarded it and the server reached the page. Whether the fetch then
    // succeeds is the upstream's affair (a loaded CI machine once saw it fail after connecting).
    assert!(result.get("result").is_some(), "{result:#}");
    assert!(requests.load(Ordering::SeqCst) > 0, "the fetch never reached the page: {result:#}");
}
