//! Resource bounds of the HTTP listener through the real `toolgate serve` (issue 10 "Degraded", issue 17 items 3
//! and 4): sessions per caller with the least recently used idle session making room, the 503 that names the limit,
//! the header-read timeout against half-sent requests and trickled bodies, the connection cap and the per-caller
//! share sized from the open-files limit, anonymous clients unable to close each other's sessions, and the privacy
//! of `/metrics` and of the state files.
//!
//! Each reading of a socket is bounded by [`READ_BOUND`], a hang guard: no test asserts how long anything took.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use serde_json::json;

use crate::support::{HttpSession, Reply, Setup, post, start_serve, start_serve_after};

const CALLERS: &str = "[[caller]]\nname = \"alice\"\ntoken_env = \"ALICE_TOKEN\"\n\n\
                       [[caller]]\nname = \"bob\"\ntoken_env = \"BOB_TOKEN\"\n\n\
                       [[caller]]\nname = \"carol\"\ntoken_env = \"CAROL_TOKEN\"\n";
const TOKENS: [(&str, &str); 3] =
    [("ALICE_TOKEN", "alice-token-5d1e"), ("BOB_TOKEN", "bob-token-0c7b"), ("CAROL_TOKEN", "carol-token-93aa")];
/// The longest a test waits for the server to answer or close a socket before calling it hung.
const READ_BOUND: Duration = Duration::from_secs(20);

fn bearer(index: usize) -> String {
    format!("Bearer {}", TOKENS[index].1)
}

fn initialize() -> serde_json::Value {
    json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "limits", "version": "0"}}})
}

/// Opens the session's GET stream on a connection of its own and returns the connection once the stream's headers
/// arrived (the session is then in use for as long as the connection stays open).
fn open_stream(session: &HttpSession) -> TcpStream {
    let mut stream = TcpStream::connect(&session.authority).unwrap();
    stream.set_read_timeout(Some(READ_BOUND)).unwrap();
    let mut request = format!(
        "GET /mcp HTTP/1.1\r\nHost: {}\r\nAccept: text/event-stream\r\nMcp-Session-Id: {}\r\n\
         MCP-Protocol-Version: 2025-11-25\r\n",
        session.authority, session.id
    );
    for (name, value) in &session.auth {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("\r\n");
    stream.write_all(request.as_bytes()).unwrap();
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        assert_eq!(stream.read(&mut byte).unwrap(), 1, "the GET stream ended before its headers");
        head.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&head);
    assert!(head.starts_with("HTTP/1.1 200"), "GET stream refused: {head}");
    stream
}

/// `GET PATH` on a fresh connection with `headers`.
fn get(authority: &str, path: &str, headers: &[(&str, &str)]) -> Reply {
    let mut stream = TcpStream::connect(authority).unwrap();
    stream.set_read_timeout(Some(READ_BOUND)).unwrap();
    let mut request = format!("GET {path} HTTP/1.1\r\nHost: {authority}\r\nConnection: close\r\n");
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("\r\n");
    stream.write_all(request.as_bytes()).unwrap();
    read_reply(&mut stream)
}

fn read_reply(stream: &mut TcpStream) -> Reply {
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).unwrap_or_else(|error| panic!("no reply within the bound: {error}"));
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or_else(|| panic!("no HTTP reply: {text:?}"));
    let mut lines = head.split("\r\n");
    let status = lines.next().and_then(|line| line.split(' ').nth(1)).and_then(|code| code.parse().ok()).unwrap();
    let headers = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(name, value)| (name.trim().to_owned(), value.trim().to_owned()))
        .collect();
    Reply { status, headers, body: body.to_owned() }
}

/// The value of the metric line that starts with `series` (name and labels), 0 when absent.
fn metric(text: &str, series: &str) -> u64 {
    text.lines()
        .find_map(|line| line.strip_prefix(series).and_then(|rest| rest.trim().parse::<f64>().ok()))
        .map_or(0, |value| value as u64)
}

/// The number after `key=` in the first stderr line that has it.
fn logged_number(stderr: &str, key: &str) -> Option<u64> {
    let rest = stderr.split(&format!("{key}=")).nth(1)?;
    rest.chars().take_while(char::is_ascii_digit).collect::<String>().parse().ok()
}

#[test]
fn one_caller_cannot_take_every_session_and_idle_sessions_make_room_first() {
    let setup = Setup::demo(&format!("{CALLERS}\n[limits]\nmax_sessions = 4\nmax_sessions_per_caller = 2\n"));
    let serve = start_serve(&setup, &TOKENS);
    let authority = serve.authority.clone();
    let (alice, bob, carol) = (bearer(0), bearer(1), bearer(2));

    // At her limit, Alice's next session takes the place of her least recently used idle one.
    let mut first = HttpSession::open(&authority, &[("Authorization", &alice)]).unwrap();
    let mut second = HttpSession::open(&authority, &[("Authorization", &alice)]).unwrap();
    let mut third = HttpSession::open(&authority, &[("Authorization", &alice)]).unwrap();
    let reply = first.post(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}})).unwrap();
    assert_eq!(reply.status, 404, "the idle session unused longest made room: {reply:?}");
    assert!(second.request("tools/list", json!({})).unwrap()["result"]["tools"].is_array());
    assert!(third.request("tools/list", json!({})).unwrap()["result"]["tools"].is_array());
    assert!(first.request("tools/list", json!({})).is_err(), "the closed session stays closed");

    // With both of her sessions in use (a GET stream each), a third is refused, and the answer says why.
    let _streams = [open_stream(&second), open_stream(&third)];
    let refused = post(&authority, &[("Authorization", &alice)], &initialize()).unwrap();
    assert_eq!(refused.status, 503, "{refused:?}");
    assert!(refused.header("retry-after").is_some_and(|seconds| seconds.parse::<u64>().is_ok()), "{refused:?}");
    assert!(refused.body.contains("max_sessions_per_caller"), "the answer names the setting: {}", refused.body);
    assert!(refused.body.contains("alice"), "and the caller: {}", refused.body);

    // Another caller is not locked out.
    let mut bob_session = HttpSession::open(&authority, &[("Authorization", &bob)]).unwrap();
    assert!(bob_session.request("tools/list", json!({})).unwrap()["result"]["tools"].is_array());
    let _bob_again = HttpSession::open(&authority, &[("Authorization", &bob)]).unwrap();

    // The table is full and nobody's session has been idle long enough to make room: the total limit answers.
    let full = post(&authority, &[("Authorization", &carol)], &initialize()).unwrap();
    assert_eq!(full.status, 503, "{full:?}");
    assert!(full.body.contains("[limits] max_sessions"), "{}", full.body);
    assert!(full.header("retry-after").is_some(), "{full:?}");

    let metrics = get(&authority, "/metrics", &[("Authorization", &alice)]);
    assert_eq!(metrics.status, 200, "{metrics:?}");
    assert_eq!(metric(&metrics.body, "toolgate_sessions_refused_total{reason=\"per_caller\"}"), 1, "{}", metrics.body);
    assert_eq!(metric(&metrics.body, "toolgate_sessions_refused_total{reason=\"total\"}"), 1, "{}", metrics.body);
    let stderr = serve.stderr_text();
    assert!(
        stderr.lines().any(|line| line.contains("WARN") && line.contains("refused a new session")),
        "refusals are logged at warn: {stderr}"
    );
}

#[test]
fn half_sent_requests_are_closed_after_the_header_timeout_while_others_are_served() {
    let setup = Setup::demo("[limits]\nheader_read_timeout_seconds = 1\n");
    let serve = start_serve(&setup, &[]);
    let authority = serve.authority.clone();
    let mut half_sent: Vec<TcpStream> = (0..200)
        .map(|_| {
            let mut stream = TcpStream::connect(&authority).unwrap();
            stream.write_all(format!("POST /mcp HTTP/1.1\r\nHost: {authority}\r\nContent-Type: ").as_bytes()).unwrap();
            stream
        })
        .collect();
    // A well-behaved client meanwhile gets its answers.
    let mut session = HttpSession::open(&authority, &[]).unwrap();
    let tools = session.request("tools/list", json!({})).unwrap();
    assert!(tools["result"]["tools"].as_array().is_some_and(|tools| !tools.is_empty()), "{tools}");
    // Every half-sent request is closed by the server (end of stream or a reset), never left open.
    for (index, stream) in half_sent.iter_mut().enumerate() {
        stream.set_read_timeout(Some(READ_BOUND)).unwrap();
        let mut sink = Vec::new();
        if let Err(error) = stream.read_to_end(&mut sink) {
            assert!(
                !matches!(error.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut),
                "half-sent request {index} is still open: {error}"
            );
        }
    }
    // And the server still serves.
    assert!(session.request("tools/list", json!({})).unwrap()["result"]["tools"].is_array());
}

#[test]
fn under_a_low_open_files_limit_extra_connections_get_a_clear_refusal_and_the_server_keeps_serving() {
    // A long header timeout, so the held connections stay open for the whole test.
    let setup = Setup::demo("[limits]\nheader_read_timeout_seconds = 600\n");
    let serve = start_serve_after("ulimit -n 64", &setup, &[]);
    let authority = serve.authority.clone();
    let stderr = serve.stderr_text();
    let connections = logged_number(&stderr, "max_connections").unwrap_or_else(|| panic!("no sizing line: {stderr}"));
    let sessions = logged_number(&stderr, "max_sessions").unwrap_or_else(|| panic!("no sizing line: {stderr}"));
    assert!((1..64).contains(&connections), "connections sized from 64 descriptors: {stderr}");
    assert!(sessions <= connections, "sessions sized from the connections: {stderr}");

    // The limit's worth of idle connections, then ten more: those are answered 503 and closed, not left hanging.
    let held: Vec<TcpStream> = (0..connections).map(|_| TcpStream::connect(&authority).unwrap()).collect();
    let mut extra: Vec<TcpStream> = (0..10).map(|_| TcpStream::connect(&authority).unwrap()).collect();
    for stream in &mut extra {
        stream.set_read_timeout(Some(READ_BOUND)).unwrap();
        let reply = read_reply(stream);
        assert_eq!(reply.status, 503, "{reply:?}");
        assert!(reply.header("retry-after").is_some(), "{reply:?}");
        assert!(reply.body.contains("max_connections"), "the refusal names the setting: {}", reply.body);
    }
    drop(held);

    // Once they are gone the server serves again, and the refusals were counted.
    let mut session = poll_open(&authority);
    assert!(session.request("tools/list", json!({})).unwrap()["result"]["tools"].is_array());
    let metrics = get(&authority, "/metrics", &[]);
    assert_eq!(metrics.status, 200, "{metrics:?}");
    let refused = metric(&metrics.body, "toolgate_connections_refused_total{reason=\"connection_limit\"}");
    assert!(refused >= 10, "refused connections are counted: {}", metrics.body);
}

/// The hard open-files limit a child of this process gets.
fn hard_open_files_limit() -> u64 {
    let output = std::process::Command::new("sh").args(["-c", "ulimit -H -n"]).output().unwrap();
    let text = String::from_utf8_lossy(&output.stdout).trim().to_owned();
    if text == "unlimited" { u64::MAX } else { text.parse().unwrap_or_else(|_| panic!("ulimit -H -n: {text}")) }
}

/// Opens a session, retrying while the server is still closing the connections a test dropped.
fn poll_open(authority: &str) -> HttpSession {
    crate::support::poll("a session once the held connections closed", || HttpSession::open(authority, &[]).ok())
}

#[test]
fn the_soft_open_files_limit_is_raised_to_the_hard_limit_at_start() {
    let setup = Setup::demo("");
    let serve = start_serve_after("ulimit -S -n 100", &setup, &[]);
    let stderr = serve.stderr_text();
    let before = logged_number(&stderr, "open_files_before").unwrap_or_else(|| panic!("no sizing line: {stderr}"));
    let now = logged_number(&stderr, "open_files").unwrap_or_else(|| panic!("no sizing line: {stderr}"));
    assert_eq!(before, 100, "{stderr}");
    let hard = hard_open_files_limit();
    assert_eq!(now, hard.min(1 << 20), "raised to the hard limit: {stderr}");
}

#[test]
fn metrics_need_a_callers_token_and_state_files_are_private() {
    let setup = Setup::demo(CALLERS);
    // An older toolgate's state: a directory and a database readable by everyone.
    std::fs::create_dir_all(setup.state()).unwrap();
    let database = setup.state().join("toolgate.db");
    std::fs::write(&database, b"").unwrap();
    set_mode(&database, 0o644);
    let serve = start_serve(&setup, &TOKENS);
    let authority = serve.authority.clone();

    let anonymous = get(&authority, "/metrics", &[]);
    assert_eq!(anonymous.status, 401, "/metrics without a token: {anonymous:?}");
    assert!(anonymous.header("www-authenticate").is_some(), "{anonymous:?}");
    assert_eq!(get(&authority, "/metrics", &[("Authorization", "Bearer not-a-token")]).status, 401);
    let scraped = get(&authority, "/metrics", &[("Authorization", &bearer(1))]);
    assert_eq!(scraped.status, 200, "{scraped:?}");
    assert!(scraped.body.contains("toolgate_upstream_up"), "{}", scraped.body);

    let mut session = HttpSession::open(&authority, &[("Authorization", &bearer(0))]).unwrap();
    assert!(session.request("tools/list", json!({})).unwrap()["result"]["tools"].is_array());
    for entry in std::fs::read_dir(setup.state()).unwrap().map(Result::unwrap) {
        let path = entry.path();
        if path.is_file() {
            assert_eq!(mode_of(&path), 0o600, "{} is private", path.display());
        }
    }
    assert!(serve.stderr_text().contains("tightened the permissions"), "the change is logged: {}", serve.stderr_text());

    // A state directory toolgate creates is the owner's only.
    let fresh = Setup::demo("");
    let _fresh_serve = start_serve(&fresh, &[]);
    assert_eq!(mode_of(&fresh.state()), 0o700);
    assert_eq!(mode_of(&fresh.state().join("toolgate.db")), 0o600);
}

fn mode_of(path: &std::path::Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

fn set_mode(path: &std::path::Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

#[test]
fn a_client_that_does_not_read_its_answers_costs_bounded_memory_and_blocks_nobody() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("misbehave.log");
    let fixture = toolgate_test_support::misbehave("tool-faults");
    let args: Vec<String> = fixture.args.clone();
    let extra = format!(
        "[[upstream]]\nname = \"faults\"\ncommand = {:?}\nargs = {:?}\nenv = {{ MISBEHAVE_LOG = {:?} }}\n\n\
         [upstream.tools.progress]\nreadOnlyHint = true\n",
        fixture.program.to_string_lossy(),
        args,
        log.to_string_lossy()
    );
    let setup = Setup::demo(&extra);
    let serve = start_serve(&setup, &[]);
    let authority = serve.authority.clone();

    // A client asks for 250 progress notifications of 1 MB each, then never reads the answer.
    let session = HttpSession::open(&authority, &[]).unwrap();
    let call = json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {
        "name": "faults_progress", "arguments": {"n": 1, "count": 250, "bytes": 1_000_000},
        "_meta": {"progressToken": "flood"}}});
    let body = call.to_string();
    let mut silent = TcpStream::connect(&authority).unwrap();
    let request = format!(
        "POST /mcp HTTP/1.1\r\nHost: {authority}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nMcp-Session-Id: {}\r\nMCP-Protocol-Version: 2025-11-25\r\n\
         Content-Length: {}\r\n\r\n{body}",
        session.id,
        body.len()
    );
    silent.write_all(request.as_bytes()).unwrap();
    crate::support::poll("the fixture sent every notification", || {
        std::fs::read_to_string(&log).ok().filter(|text| text.contains("sent-progress")).map(|_| ())
    });
    // Another client is served meanwhile.
    let mut other = HttpSession::open(&authority, &[]).unwrap();
    assert!(other.request("tools/list", json!({})).unwrap()["result"]["tools"].is_array());

    let status = std::fs::read_to_string(format!("/proc/{}/status", serve.child.id())).unwrap();
    let peak_kib: u64 = status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap();
    // 250 MB went through; what a non-reading client may hold is bounded far below that.
    eprintln!(
        "toolgate peak RSS after 250 x 1 MB notifications to a client that does not read: {} MiB",
        peak_kib / 1024
    );
    assert!(peak_kib < 150 * 1024, "toolgate peaked at {} MiB", peak_kib / 1024);
    let metrics = get(&authority, "/metrics", &[]);
    assert!(metric(&metrics.body, "toolgate_client_messages_dropped_total") > 0, "{}", metrics.body);
    drop(silent);
}

#[test]
fn without_configured_callers_a_new_client_cannot_close_another_clients_recent_session() {
    // Every client is the one anonymous caller here, so "its own" sessions are everybody's.
    let setup = Setup::demo("[limits]\nmax_sessions = 2\n");
    let serve = start_serve(&setup, &[]);
    let authority = serve.authority.clone();
    let mut first = HttpSession::open(&authority, &[]).unwrap();
    let mut second = HttpSession::open(&authority, &[]).unwrap();

    // Both are merely between two requests: a third client is refused instead of closing one of them.
    let refused = post(&authority, &[], &initialize()).unwrap();
    assert_eq!(refused.status, 503, "{refused:?}");
    assert!(refused.header("retry-after").is_some(), "{refused:?}");
    assert!(first.request("tools/list", json!({})).unwrap()["result"]["tools"].is_array(), "first still open");
    assert!(second.request("tools/list", json!({})).unwrap()["result"]["tools"].is_array(), "second still open");
}

#[test]
fn under_a_low_open_files_limit_one_caller_still_gets_only_a_quarter_of_the_sessions() {
    let setup = Setup::demo(&format!("{CALLERS}\n[limits]\nheader_read_timeout_seconds = 600\n"));
    let serve = start_serve_after("ulimit -n 64", &setup, &TOKENS);
    let stderr = serve.stderr_text();
    let sessions = logged_number(&stderr, "max_sessions").unwrap_or_else(|| panic!("no sizing line: {stderr}"));
    let per_caller =
        logged_number(&stderr, "max_sessions_per_caller").unwrap_or_else(|| panic!("no sizing line: {stderr}"));
    assert!(sessions < 64, "sessions sized from 64 descriptors: {stderr}");
    assert_eq!(per_caller, (sessions / 4).max(1), "a quarter of the sessions left: {stderr}");
}

#[test]
fn a_body_that_trickles_in_is_answered_408_and_closed_while_others_are_served() {
    let setup = Setup::demo("[limits]\nheader_read_timeout_seconds = 1\n");
    let serve = start_serve(&setup, &[]);
    let authority = serve.authority.clone();
    // Complete headers announcing 200 bytes, then a byte, a pause, and one more byte: never the whole body.
    let mut trickling: Vec<TcpStream> = (0..50)
        .map(|_| {
            let mut stream = TcpStream::connect(&authority).unwrap();
            let head = format!(
                "POST /mcp HTTP/1.1\r\nHost: {authority}\r\nContent-Type: application/json\r\n\
                 Accept: application/json, text/event-stream\r\nContent-Length: 200\r\n\r\n{{"
            );
            stream.write_all(head.as_bytes()).unwrap();
            stream
        })
        .collect();
    std::thread::sleep(Duration::from_millis(200));
    for stream in &mut trickling {
        stream.write_all(b" ").unwrap();
    }
    // A well-behaved client meanwhile gets its answers.
    let mut session = HttpSession::open(&authority, &[]).unwrap();
    assert!(session.request("tools/list", json!({})).unwrap()["result"]["tools"].is_array());
    // Each trickling request gets a 408 and its connection ends (read_reply reads to the end of the stream).
    for stream in &mut trickling {
        stream.set_read_timeout(Some(READ_BOUND)).unwrap();
        let reply = read_reply(stream);
        assert_eq!(reply.status, 408, "{reply:?}");
        assert!(reply.body.contains("header_read_timeout_seconds"), "the answer names the setting: {}", reply.body);
    }
    assert!(session.request("tools/list", json!({})).unwrap()["result"]["tools"].is_array());
}
