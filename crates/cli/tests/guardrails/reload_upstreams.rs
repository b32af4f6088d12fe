//! A config reload on SIGHUP applies the upstreams the file adds, removes or changes, through the real `toolgate
//! serve`: an added upstream's tools appear and a connected client hears `tools/list_changed`; a removed upstream's
//! tools are unknown at once, a call in flight to it is answered with an `isError` naming the reload, a call waiting
//! for a person lapses with the reason (its row's outcome `lapsed`), and its process is gone; a changed upstream runs with its new arguments; a
//! setting that needs a restart is named and the rest is applied.
//!
//! Name precedence survives a restart: of two upstreams listing the same unprefixed name, the first in the file
//! keeps it after a reload restarts it, as a fresh start with that file would give it.
//!
//! The second upstream is `misbehave.py` (`tool-faults`, whose `hang` never answers and which logs its pid; then
//! `open-world-error`), beside the bundled demo server; both have explicit prefixes, so adding one renames nothing.

use std::io::{Read as _, Write as _};
use std::net::TcpStream;
use std::path::Path;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use toolgate_test_support::fixtures_dir;

use crate::support::{HANG_GUARD, HttpSession, Serve, Setup, poll, start_serve, toolgate, toolgate_binary};

/// The demo server (unprefixed, so its names never change), HTTP on a loopback port the OS picks, then `extra`.
fn setup(extra: &str) -> Setup {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("gateway.toml");
    std::fs::write(&config, demo_config(&toolgate_binary().to_string_lossy(), extra)).expect("write the config");
    Setup { dir, config }
}

fn demo_config(binary: &str, extra: &str) -> String {
    format!(
        "[[upstream]]\nname = \"demo\"\ncommand = {binary:?}\nargs = [\"demo-server\"]\nprefix = false\n\n\
         [listen.http]\nbind = \"127.0.0.1:0\"\n\n{extra}\n"
    )
}

/// The fault server as upstream `faults` in `mode`, logging its pid to `log`; `hang` is read-only by override so the
/// standard policy lets it through without a person.
fn faults(mode: &str, log: &Path) -> String {
    let script = fixtures_dir().join("misbehave.py");
    format!(
        "[[upstream]]\nname = \"faults\"\ncommand = \"python3\"\nargs = [{script:?}, \"--mode\", \"{mode}\"]\n\
         prefix = \"faults\"\nenv = {{ MISBEHAVE_LOG = {log:?}, PYTHONUNBUFFERED = \"1\" }}\n\n\
         [upstream.tools.hang]\nreadOnlyHint = true\n\n[upstream.tools.post_message]\nreadOnlyHint = true\n",
        script = script.to_string_lossy(),
        log = log.to_string_lossy(),
    )
}

fn tool_names(session: &mut HttpSession) -> Vec<String> {
    let listed = session.request("tools/list", json!({})).unwrap();
    listed["result"]["tools"].as_array().unwrap().iter().map(|tool| tool["name"].as_str().unwrap().to_owned()).collect()
}

fn hangup(serve: &Serve) {
    let status = std::process::Command::new("kill").arg("-HUP").arg(serve.child.id().to_string()).status().unwrap();
    assert!(status.success());
}

/// Rewrites the config and sends SIGHUP.
fn reload(serve: &Serve, setup: &Setup, text: &str) {
    std::fs::write(&setup.config, text).unwrap();
    hangup(serve);
}

/// The pids `misbehave.py` logged at start, in order.
fn logged_pids(log: &Path) -> Vec<u32> {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    text.lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter_map(|entry| entry["pid"].as_u64().and_then(|pid| u32::try_from(pid).ok()))
        .collect()
}

/// Whether a process with `pid` exists (a zombie, not yet reaped, counts as existing).
fn process_exists(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

fn call_text(response: &Value) -> String {
    response["result"]["content"][0]["text"].as_str().unwrap_or_default().to_owned()
}

/// The session's GET stream, read on a thread into a shared text.
fn listen(session: &HttpSession) -> Arc<Mutex<String>> {
    let mut stream = TcpStream::connect(&session.authority).unwrap();
    stream.set_read_timeout(Some(HANG_GUARD)).unwrap();
    let request = format!(
        "GET /mcp HTTP/1.1\r\nHost: {}\r\nAccept: text/event-stream\r\nMcp-Session-Id: {}\r\n\
         MCP-Protocol-Version: 2025-11-25\r\n\r\n",
        session.authority, session.id
    );
    stream.write_all(request.as_bytes()).unwrap();
    let heard = Arc::new(Mutex::new(String::new()));
    let sink = Arc::clone(&heard);
    std::thread::spawn(move || {
        let mut buffer = [0u8; 4096];
        while let Ok(read) = stream.read(&mut buffer) {
            if read == 0 {
                break;
            }
            sink.lock().unwrap().push_str(&String::from_utf8_lossy(&buffer[..read]));
        }
    });
    poll("the GET stream's headers", || heard.lock().unwrap().starts_with("HTTP/1.1 200").then_some(()));
    heard
}

fn tools_changed(heard: &Mutex<String>) -> usize {
    heard.lock().unwrap().matches("notifications/tools/list_changed").count()
}

#[test]
fn sighup_starts_an_added_upstream_and_a_connected_client_hears_its_tools_arrive() {
    let setup = setup("");
    let base = std::fs::read_to_string(&setup.config).unwrap();
    let serve = start_serve(&setup, &[]);
    let mut session = HttpSession::open(&serve.authority, &[]).unwrap();
    let heard = listen(&session);
    assert!(!tool_names(&mut session).contains(&"faults_echo".to_owned()));
    let before = tools_changed(&heard);

    let log = setup.dir.path().join("faults.log");
    reload(&serve, &setup, &format!("{base}\n{}", faults("tool-faults", &log)));
    // The policy reload tells clients to re-list at once; the new upstream tells them again once its tools are in.
    poll("a second tools/list_changed after the reload", || (tools_changed(&heard) >= before + 2).then_some(()));
    let tools = tool_names(&mut session);
    assert!(tools.contains(&"faults_echo".to_owned()), "the added upstream's tools are listed: {tools:?}");
    assert!(tools.contains(&"list_notes".to_owned()), "the demo keeps its names: {tools:?}");
    let echoed = session.request("tools/call", json!({"name": "faults_echo", "arguments": {"text": "hello"}})).unwrap();
    assert!(call_text(&echoed).contains("hello"), "the added upstream answers: {echoed}");
    let stderr = serve.stderr_text();
    assert!(stderr.contains("upstream `faults` was added: applied"), "the change is logged: {stderr}");
    assert!(!stderr.contains("restart toolgate"), "nothing needs a restart: {stderr}");
}

#[test]
fn sighup_stops_a_removed_upstream_its_tools_unknown_its_calls_answered_and_its_process_gone() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("faults.log");
    let setup = setup(&faults("tool-faults", &log));
    let without = demo_config(&toolgate_binary().to_string_lossy(), "");
    let serve = start_serve(&setup, &[]);
    let mut session = HttpSession::open(&serve.authority, &[]).unwrap();
    assert!(tool_names(&mut session).contains(&"faults_echo".to_owned()));
    let pid = poll("the fault server's pid", || logged_pids(&log).first().copied());
    assert!(process_exists(pid));

    // A call in flight to the upstream (`hang` never answers) and a destructive call waiting for a person.
    // Each on a session of its own: a session's clone would reuse its request ids.
    let mut hanging = HttpSession::open(&serve.authority, &[]).unwrap();
    let in_flight =
        std::thread::spawn(move || hanging.request("tools/call", json!({"name": "faults_hang", "arguments": {}})));
    let state = setup.state_arg();
    let mut deleting = HttpSession::open(&serve.authority, &[]).unwrap();
    let waiting = std::thread::spawn(move || {
        deleting.request("tools/call", json!({"name": "delete_note", "arguments": {"id": 1}}))
    });
    poll("the delete waiting in the queue", || {
        let listed = toolgate(&["approvals", "list", "--state-dir", &state]);
        listed.stdout.contains("delete_note").then_some(())
    });
    poll("the hang call in flight", || {
        std::fs::read_to_string(&log).unwrap_or_default().contains("\"hang\"").then_some(())
    });

    // The file without `faults`: the demo keeps running, `faults` stops.
    reload(&serve, &setup, &without);
    let answer = in_flight.join().unwrap().unwrap();
    assert_eq!(answer["result"]["isError"], Value::Bool(true), "{answer}");
    assert!(call_text(&answer).contains("removed from the configuration"), "the answer names why: {answer}");
    poll("the removed upstream's tools gone", || {
        (!tool_names(&mut session).iter().any(|name| name.starts_with("faults_"))).then_some(())
    });
    let called = session.request("tools/call", json!({"name": "faults_echo", "arguments": {"text": "x"}})).unwrap();
    assert_eq!(call_text(&called), "Unknown tool: faults_echo", "{called}");
    poll("the removed upstream's process reaped", || (!process_exists(pid)).then_some(()));
    // The change is logged once the reload returns, which may be just after the reap.
    poll("the removal logged", || serve.stderr_text().contains("upstream `faults` was removed: applied").then_some(()));
    // The demo was not touched: its queued call still waits, and a person can still decide it.
    assert!(toolgate(&["approvals", "list", "--state-dir", &setup.state_arg()]).stdout.contains("delete_note"));
    drop(waiting);
}

#[test]
fn sighup_lapses_the_approvals_waiting_on_a_removed_upstreams_tools() {
    let setup = setup("");
    let serve = start_serve(&setup, &[]);
    let mut deleting = HttpSession::open(&serve.authority, &[]).unwrap();
    let waiting = std::thread::spawn(move || {
        deleting.request("tools/call", json!({"name": "delete_note", "arguments": {"id": 1}}))
    });
    let state = setup.state_arg();
    let id = poll("the delete waiting in the queue", || {
        let list = toolgate(&["approvals", "list", "--json", "--state-dir", &state]);
        list.stdout
            .lines()
            .filter_map(|line| serde_json::from_str::<Value>(line).ok())
            .find(|record| record["tool"] == "delete_note")
            .and_then(|record| record["id"].as_str().map(str::to_owned))
    });

    // The demo is replaced by another upstream: the demo's waiting call can never be decided.
    let log = setup.dir.path().join("faults.log");
    let replaced = format!("{}\n[listen.http]\nbind = \"127.0.0.1:0\"\n", faults("tool-faults", &log));
    reload(&serve, &setup, &replaced);
    let answer = waiting.join().unwrap().unwrap();
    assert_eq!(answer["result"]["isError"], Value::Bool(true), "{answer}");
    assert!(call_text(&answer).contains("lapsed"), "{answer}");
    let listed = toolgate(&["approvals", "list", "--state-dir", &state]);
    assert!(!listed.stdout.contains("delete_note"), "nothing waits any more: {listed:?}");
    // Approving it afterwards says nothing waits, and why.
    let approve = toolgate(&["approvals", "approve", &id, "--state-dir", &state]);
    assert_eq!(approve.code, Some(2), "{approve:?}");
    assert!(approve.stderr.contains("removed or restarted by a config reload"), "the lapse says why: {approve:?}");
    let audit = toolgate(&["audit", "--json", "--kind", "call", "--state-dir", &state]);
    let row = audit
        .stdout
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .find(|row| row["tool"] == "delete_note")
        .unwrap_or_else(|| panic!("the call's row: {audit:?}"));
    assert_eq!(row["outcome"], "lapsed", "{row}");
}

#[test]
fn sighup_restarts_a_changed_upstream_with_its_new_arguments_and_names_what_needs_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("faults.log");
    let setup = setup(&faults("tool-faults", &log));
    let text = std::fs::read_to_string(&setup.config).unwrap();
    let serve = start_serve(&setup, &[]);
    let mut session = HttpSession::open(&serve.authority, &[]).unwrap();
    assert!(tool_names(&mut session).contains(&"faults_echo".to_owned()));
    let old = poll("the fault server's pid", || logged_pids(&log).first().copied());

    // New arguments (another mode, other tools) and a setting that needs a restart.
    let changed = text.replace("\"tool-faults\"", "\"open-world-error\"") + "\n[limits]\nmax_sessions = 77\n";
    reload(&serve, &setup, &changed);
    let tools = poll("the changed upstream's new tools", || {
        let tools = tool_names(&mut session);
        tools.contains(&"faults_post_message".to_owned()).then_some(tools)
    });
    assert!(!tools.contains(&"faults_echo".to_owned()), "the old arguments' tools are gone: {tools:?}");
    let posted = session.request("tools/call", json!({"name": "faults_post_message", "arguments": {}})).unwrap();
    assert!(call_text(&posted).contains("called post_message"), "the new process answers: {posted}");
    poll("the old process reaped", || (!process_exists(old)).then_some(()));
    let stderr = serve.stderr_text();
    assert!(stderr.contains("upstream `faults` changed (command, URL, headers or environment): applied"), "{stderr}");
    assert!(stderr.contains("[limits] changed; restart toolgate to apply it"), "{stderr}");
}

/// The fault server as upstream `name`, unprefixed (its `echo` is the name the two share), logging to `log`, with
/// `STAGE` in its environment.
fn echoer(name: &str, log: &Path, stage: &str) -> String {
    let script = fixtures_dir().join("misbehave.py");
    format!(
        "[[upstream]]\nname = \"{name}\"\ncommand = \"python3\"\nargs = [{script:?}, \"--mode\", \"tool-faults\"]\n\
         prefix = false\nenv = {{ MISBEHAVE_LOG = {log:?}, PYTHONUNBUFFERED = \"1\", STAGE = \"{stage}\" }}\n\n",
        script = script.to_string_lossy(),
        log = log.to_string_lossy(),
    )
}

/// The upstream the session's `echo` is listed for (toolgate's record of it).
fn echo_owner(session: &mut HttpSession) -> Option<String> {
    let listed = session.request("tools/list", json!({})).unwrap();
    let tools = listed["result"]["tools"].as_array()?.clone();
    let echo = tools.into_iter().find(|tool| tool["name"] == "echo")?;
    echo["_meta"]["toolgate/annotations"]["upstream"].as_str().map(str::to_owned)
}

/// How many `echo` calls with `text` the fault server logging to `log` received.
fn echoed(log: &Path, text: &str) -> usize {
    let logged = std::fs::read_to_string(log).unwrap_or_default();
    logged
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|entry| entry["method"] == "tools/call" && entry["params"]["arguments"]["text"] == text)
        .count()
}

#[test]
fn sighup_restarting_the_first_of_two_upstreams_sharing_a_name_keeps_the_name_with_it() {
    let dir = tempfile::tempdir().unwrap();
    let (first_log, second_log) = (dir.path().join("first.log"), dir.path().join("second.log"));
    let listen = "[listen.http]\nbind = \"127.0.0.1:0\"\n";
    let text =
        |stage: &str| format!("{}{}{listen}", echoer("first", &first_log, stage), echoer("second", &second_log, "1"));
    let setup = Setup { config: dir.path().join("gateway.toml"), dir };
    std::fs::write(&setup.config, text("1")).unwrap();
    let serve = start_serve(&setup, &[]);
    let mut session = HttpSession::open(&serve.authority, &[]).unwrap();
    // Both are up and listed, and the first in the file has the name.
    poll("both upstreams started", || (logged_pids(&second_log).len() == 1).then_some(()));
    let old = poll("the first upstream's pid", || logged_pids(&first_log).first().copied());
    poll("the first upstream owning `echo`", || (echo_owner(&mut session).as_deref() == Some("first")).then_some(()));
    let before = session.request("tools/call", json!({"name": "echo", "arguments": {"text": "before"}})).unwrap();
    assert!(call_text(&before).contains("before"), "{before}");
    assert_eq!((echoed(&first_log, "before"), echoed(&second_log, "before")), (1, 0));

    // The first one's environment changes: it restarts in a new slot, and must win the name again.
    reload(&serve, &setup, &text("2"));
    poll("the first upstream restarted", || (logged_pids(&first_log).len() == 2).then_some(()));
    poll("the restarted first upstream owns `echo` again", || {
        (echo_owner(&mut session).as_deref() == Some("first")).then_some(())
    });
    let after = session.request("tools/call", json!({"name": "echo", "arguments": {"text": "after"}})).unwrap();
    assert!(call_text(&after).contains("after"), "{after}");
    assert_eq!((echoed(&first_log, "after"), echoed(&second_log, "after")), (1, 0), "the name reaches the first");
    poll("the old process reaped", || (!process_exists(old)).then_some(()));
    assert!(serve.stderr_text().contains("upstream `first` changed (command, URL, headers or environment): applied"));
}
