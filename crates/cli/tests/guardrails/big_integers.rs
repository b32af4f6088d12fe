//! Integers beyond 64 bits reach the person and the upstream as the model wrote them (issue 10, degraded "display"
//! item): `toolgate serve` in front of `misbehave.py --mode rug-pull` (which logs every message it reads, parsed by
//! Python, whose integers have no size limit), a confirm rule on `update_record`, arguments kept in clear in the
//! audit log and a console user.
//!
//! A call whose arguments hold `18446744073709551616123` (2^64 · 1000 + 123), its negative and `9007199254740993`
//! (2^53 + 1, the first integer a double cannot hold) waits in the queue; `approvals list`, the console's pending
//! page, the upstream's log of what it received and the audit row (`audit --json`, its chain still verifying) all
//! show those digits, never `1.8446744073709552e22`. The request is sent as raw text, so the test's own JSON
//! handling cannot round anything.

use std::io::{Read, Write};
use std::sync::mpsc;

use crate::support::{HANG_GUARD, HttpSession, Serve, Setup, poll, start_serve, toolgate};

const BIG: &str = "18446744073709551616123";
const NEGATIVE: &str = "-18446744073709551616123";
const ODD: &str = "9007199254740993";
/// What the upstream or a person saw before the fix.
const ROUNDED: &str = "1.8446744073709552e";

/// A console user's token; the config names it by its SHA-256.
const REVIEWER: &str = "reviewer-console-6a09e667f3bcc908b2fb1366";

fn setup(log: &std::path::Path) -> Setup {
    let fixture = toolgate_test_support::misbehave("rug-pull");
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("gateway.toml");
    let text = format!(
        "[[upstream]]\nname = \"records\"\ncommand = {program:?}\nargs = {args:?}\nprefix = false\n\
         env = {{ MISBEHAVE_LOG = {log:?} }}\n\n\
         [listen.http]\nbind = \"127.0.0.1:0\"\n\n[confirmation]\ntimeout_seconds = 120\n\n\
         [audit]\narguments = \"clear\"\n\n\
         [[console.user]]\nname = \"reviewer\"\ntoken_sha256 = \"{token}\"\n\n\
         [[policy.rule]]\nid = \"ask-updates\"\neffect = \"confirm\"\nmatch = {{ tool = \"update_record\" }}\n",
        program = fixture.program.to_string_lossy(),
        args = fixture.args,
        token = toolgate_core::fingerprint::digest_bytes(REVIEWER.as_bytes()),
    );
    std::fs::write(&config, text).expect("write the config");
    Setup { dir, config }
}

/// One console request on its own connection: the whole raw response (head and body).
fn console(serve: &Serve, method: &str, path: &str, cookie: Option<&str>, body: &str) -> String {
    let mut stream = std::net::TcpStream::connect(&serve.authority).expect("connect to the console");
    stream.set_read_timeout(Some(HANG_GUARD)).expect("read timeout");
    let cookie = cookie.map(|cookie| format!("Cookie: {cookie}\r\n")).unwrap_or_default();
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: {}\r\n{cookie}Content-Type: application/x-www-form-urlencoded\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        serve.authority,
        body.len()
    );
    stream.write_all(request.as_bytes()).expect("send the request");
    let mut raw = String::new();
    stream.read_to_string(&mut raw).expect("read the response");
    raw
}

/// Fails unless `text` holds every integer as sent and nothing rounded.
fn assert_exact(what: &str, text: &str) {
    for digits in [BIG, NEGATIVE, ODD] {
        assert!(text.contains(digits), "{what} lacks {digits}:\n{text}");
    }
    assert!(!text.contains(ROUNDED), "{what} shows a rounded number:\n{text}");
}

#[test]
fn integers_beyond_64_bits_reach_the_person_and_the_upstream_as_sent() {
    let scratch = tempfile::tempdir().expect("tempdir");
    let log = scratch.path().join("upstream.jsonl");
    let setup = setup(&log);
    let serve = start_serve(&setup, &[]);
    let state = setup.state_arg();

    let (sender, receiver) = mpsc::channel();
    let authority = serve.authority.clone();
    std::thread::spawn(move || {
        let session = HttpSession::open(&authority, &[]).expect("initialize");
        let call = format!(
            r#"{{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{{"name":"update_record","arguments":{{"id":{BIG},"text":"x","range":[{NEGATIVE},{ODD}]}}}}}}"#
        );
        let _ = sender.send(session.post_text(&call));
    });

    let listed = poll("the queued approval", || {
        let run = toolgate(&["approvals", "list", "--state-dir", &state]);
        run.stdout.contains("1 waiting").then_some(run)
    });
    assert_exact("approvals list", &listed.stdout);
    assert_exact("approvals list --json", &toolgate(&["approvals", "list", "--json", "--state-dir", &state]).stdout);

    let login = console(&serve, "POST", "/console/login", None, &format!("token={REVIEWER}"));
    let cookie = login
        .lines()
        .take_while(|line| !line.is_empty())
        .filter_map(|line| line.split_once(':'))
        .find(|(name, _)| name.eq_ignore_ascii_case("set-cookie"))
        .and_then(|(_, value)| value.trim().split(';').next().map(str::to_owned))
        .unwrap_or_else(|| panic!("the console login sets a cookie:\n{login}"));
    assert_exact("the console's pending page", &console(&serve, "GET", "/console", Some(&cookie), ""));

    let id = listed.stdout.lines().next().expect("the id line").trim().to_owned();
    let approved = toolgate(&["approvals", "approve", &id, "--state-dir", &state]);
    assert_eq!(approved.code, Some(0), "{approved:?}");
    let reply = receiver.recv_timeout(HANG_GUARD).expect("the call ends").expect("answered");
    assert!(reply.body.contains("called update_record"), "{reply:?}");

    let received = std::fs::read_to_string(&log).expect("the upstream's log");
    let call = received.lines().find(|line| line.contains("\"tools/call\"")).expect("the upstream got the call");
    assert_exact("what the upstream received", call);

    let audit = poll("the call's audit row", || {
        let run = toolgate(&["audit", "--json", "--state-dir", &state]);
        run.stdout.contains("\"call\"").then_some(run)
    });
    assert_exact("audit --json", &audit.stdout);
    let verified = toolgate(&["audit", "verify", "--state-dir", &state]);
    assert_eq!(verified.code, Some(0), "the chain verifies with exact integers: {verified:?}");
}
