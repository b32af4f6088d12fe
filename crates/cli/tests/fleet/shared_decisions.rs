//! Decisions made on one process take effect on another: a call waiting on one process is approved in another
//! process's console or by `toolgate approvals approve --config` (a process that serves nothing), and a pinned
//! upstream's tools waiting on all three are pinned in process 3's console or by `toolgate pins approve --config`.
//! Every release travels through the store's change feed (PostgreSQL LISTEN/NOTIFY).

use std::sync::mpsc;

use serde_json::{Value, json};
use toolgate_test_support::HANG_GUARD;
use toolgate_test_support::toolgate::raw_http::HttpSession;
use toolgate_test_support::toolgate::{Setup, binary, poll};

use crate::console::{Console, form_fields, status_of, user_config};
use crate::{PgFleet, holder_of_the_session, start_fleet};

#[test]
fn a_call_waiting_on_one_process_is_approved_in_another_processs_console() {
    a_waiting_call_is_released(|fleet, holder, id| {
        let console = Console::login(&fleet.process((holder + 1) % 3).authority);
        let action = format!("/console/approvals/{id}/approve");
        let page = poll("the approval on the other process's console", || {
            let page = console.get("/console");
            page.contains(&action).then_some(page)
        });
        let decided = console.post(&action, &form_fields(&page, &action));
        assert_eq!(status_of(&decided), 303, "the console took the decision:\n{decided}");
        "console:reviewer"
    });
}

#[test]
fn a_call_waiting_on_one_process_is_approved_by_the_approvals_command_of_another() {
    a_waiting_call_is_released(|fleet, _holder, id| {
        let approve = fleet.toolgate(&["approvals", "approve", id]);
        assert_eq!(approve.code, Some(0), "{approve:?}");
        "tester"
    });
}

/// A call waiting for a person on one process, released by `decide(fleet, holder, approval id)` made elsewhere
/// (it returns who the audit row says decided); the client gets the result and the rows say who decided.
fn a_waiting_call_is_released(decide: impl FnOnce(&PgFleet, usize, &str) -> &'static str) {
    let setup = Setup::demo(&format!(
        "[confirmation]\ntimeout_seconds = 120\n\n[policy]\nsession_taint = false\n\n\
         [[policy.rule]]\nid = \"ask-notes\"\neffect = \"confirm\"\nmatch = {{ tool = \"add_note\" }}\n\n{}",
        user_config()
    ));
    let fleet = start_fleet(&setup, 3);

    let (sender, receiver) = mpsc::channel();
    let balancer = fleet.balancer.authority.clone();
    std::thread::spawn(move || {
        let mut session = HttpSession::open(&balancer, &[]).expect("a session through the balancer");
        let arguments = json!({"title": "fleet", "body": "approved elsewhere"});
        let _ = sender.send(session.request("tools/call", json!({"name": "add_note", "arguments": arguments})));
    });
    let id = poll("the queued approval", || {
        let run = fleet.toolgate(&["approvals", "list", "--json"]);
        let entry: Value = serde_json::from_str(run.stdout.lines().next()?).ok()?;
        entry["id"].as_str().map(str::to_owned)
    });
    let holder = holder_of_the_session(&fleet);
    let decided_by = decide(&fleet, holder, &id);

    let answer = receiver.recv_timeout(HANG_GUARD).expect("the waiting call ends").expect("answered");
    assert!(answer.get("result").is_some() && answer["result"]["isError"] != json!(true), "{answer}");
    // The call's row is completed by the process that held it, through its audit writer: wait for it.
    let rows = poll("the call's audit row", || {
        let audit = fleet.toolgate(&["audit", "--json"]);
        let rows: Vec<Value> = audit.stdout.lines().filter_map(|line| serde_json::from_str(line).ok()).collect();
        rows.iter().any(|row| row["kind"] == "call" && row["outcome"] == "ok").then_some(rows)
    });
    let row = |kind: &str| rows.iter().find(|row| row["kind"] == kind).cloned().unwrap_or_default();
    assert_eq!(row("confirmation")["detail"]["decided_by"], decided_by, "the person's decision: {rows:?}");
    assert_eq!(row("call")["tool"], "add_note", "{rows:?}");
    assert_eq!(row("call")["approval_id"], id.as_str(), "the call's row names its approval: {rows:?}");
}

fn listed(session: &mut HttpSession) -> Vec<String> {
    let response = session.request("tools/list", json!({})).expect("tools/list");
    response["result"]["tools"]
        .as_array()
        .map(|tools| tools.iter().filter_map(|tool| tool["name"].as_str().map(str::to_owned)).collect())
        .unwrap_or_default()
}

#[test]
fn a_pin_approved_on_process_3_releases_the_tools_on_all_three() {
    pinned_tools_are_released(|fleet| {
        let console = Console::login(&fleet.process(2).authority);
        let action = "/console/upstreams/demo/pin";
        // The page offers the agreeing definitions first, then all of them: the form with the most tools is all.
        let fields = poll("every waiting definition offered in process 3's console", || {
            let page = console.get("/console/upstreams/demo");
            let forms: Vec<Vec<(String, String)>> = page
                .match_indices(&format!("action=\"{action}\""))
                .map(|(at, _)| form_fields(&page[at..], action))
                .collect();
            forms.into_iter().max_by_key(Vec::len).filter(|fields| fields.iter().any(|(name, _)| name == "tool"))
        });
        let tools: Vec<String> =
            fields.iter().filter(|(name, _)| name == "tool").map(|(_, value)| value.clone()).collect();
        let pinned = console.post(action, &fields);
        assert!(matches!(status_of(&pinned), 200 | 303), "the console pinned them:\n{pinned}");
        tools
    });
}

#[test]
fn a_pin_approved_by_the_pins_command_releases_the_tools_on_all_three() {
    pinned_tools_are_released(|fleet| {
        let waiting = poll("the waiting definitions in the shared store", || {
            let run = fleet.toolgate(&["pins", "list", "--json"]);
            let listed: Value = serde_json::from_str(&run.stdout).ok()?;
            let tools: Vec<String> = listed["pending"]
                .as_array()?
                .iter()
                .filter(|entry| entry["kind"] == "tool")
                .filter_map(|entry| entry["tool"].as_str().map(str::to_owned))
                .collect();
            (!tools.is_empty()).then_some(tools)
        });
        let approve = fleet.toolgate(&["pins", "approve", "--upstream", "demo", "--all"]);
        assert_eq!(approve.code, Some(0), "{approve:?}");
        waiting
    });
}

/// A new pinned upstream's tools wait on all three processes until `approve(fleet)` pins them elsewhere (it returns
/// the tools it pinned); then every process lists them, and so does a session through the balancer.
fn pinned_tools_are_released(approve: impl FnOnce(&PgFleet) -> Vec<String>) {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("gateway.toml");
    let text = format!(
        "[[upstream]]\nname = \"demo\"\ncommand = {binary:?}\nargs = [\"demo-server\"]\ntrust = \"pinned\"\n\n\
         [listen.http]\nbind = \"127.0.0.1:0\"\n\n{users}",
        binary = binary(),
        users = user_config()
    );
    std::fs::write(&config, text).expect("write the config");
    let setup = Setup { dir, config };
    let fleet = start_fleet(&setup, 3);
    let mut sessions: Vec<HttpSession> = (0..3)
        .map(|index| HttpSession::open(&fleet.process(index).authority, &[]).expect("a session on each process"))
        .collect();
    for session in &mut sessions {
        assert!(listed(session).is_empty(), "a new pinned upstream's tools wait for a person on every process");
    }

    let tools = approve(&fleet);

    for (index, session) in sessions.iter_mut().enumerate() {
        let seen = poll(&format!("the pinned tools on process {}", index + 1), || {
            let seen = listed(session);
            tools.iter().all(|tool| seen.contains(tool)).then_some(seen)
        });
        assert_eq!(seen.len(), tools.len(), "process {}: {seen:?}", index + 1);
    }
    let through =
        listed(&mut HttpSession::open(&fleet.balancer.authority, &[]).expect("a session through the balancer"));
    assert_eq!(through.len(), tools.len(), "{through:?}");
}
