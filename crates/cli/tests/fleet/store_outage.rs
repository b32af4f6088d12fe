//! A PostgreSQL restart under a serving gateway (a cluster of this test's own, stopped and started while a client
//! calls): a call that needs a record the database must hold at once (a person's approval) is refused visibly,
//! naming the store, and never forwarded; calls whose rows the process's journal holds go on; once the server is
//! back, service resumes without restarting toolgate, every answered call has its row and `toolgate audit verify`
//! passes.

use std::collections::HashSet;

use serde_json::{Value, json};
use toolgate_store::digest_arguments;
use toolgate_test_support::Run;
use toolgate_test_support::postgres::PostgresCluster;
use toolgate_test_support::toolgate::raw_http::HttpSession;
use toolgate_test_support::toolgate::{Serving, Setup, poll};

use crate::{serve_command, state_command};

/// A call of `tool` with `arguments` on `session`: the JSON-RPC response.
fn call(session: &mut HttpSession, tool: &str, arguments: &Value) -> Value {
    session.request("tools/call", json!({"name": tool, "arguments": arguments})).expect("an answer")
}

/// The audit's `call` rows of `tool`, read by `reader` (`toolgate audit --json --kind call`).
fn call_rows(reader: impl Fn(&[&str]) -> Run, tool: &str) -> Vec<Value> {
    let rows = reader(&["audit", "--json", "--kind", "call"]);
    rows.stdout
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|row| row["tool"] == tool)
        .collect()
}

fn succeeded(response: &Value) -> bool {
    response.get("result").is_some() && response["result"]["isError"] != json!(true)
}

#[test]
fn a_postgres_restart_under_serve_refuses_what_needs_the_database_then_service_resumes_by_itself() {
    let cluster = PostgresCluster::start_new();
    let url = cluster.fresh_database();
    let setup = Setup::demo(
        "[confirmation]\ntimeout_seconds = 60\n\n[policy]\nsession_taint = false\n\n\
         [[policy.rule]]\nid = \"ask-deletes\"\neffect = \"confirm\"\nmatch = { tool = \"delete_note\" }\n\n\
         [[policy.rule]]\nid = \"notes\"\neffect = \"allow\"\nmatch = { tool = \"add_note\" }\n\n\
         [store]\nurl_env = \"TOOLGATE_FLEET_STORE_URL\"\nacquire_timeout_ms = 500\n",
    );
    let state = setup.dir.path().join("state-1");
    let serving = Serving::start(serve_command(&setup.config, &state, &url, 0));
    let mut session = HttpSession::open(&serving.authority, &[]).expect("a session");
    let mut answered: Vec<Value> = Vec::new();
    let note = |n: usize| json!({"title": format!("outage {n}"), "body": "postgres restart"});

    let before = note(0);
    assert!(succeeded(&call(&mut session, "add_note", &before)), "a call before the outage");
    answered.push(before);

    cluster.stop();
    // A person's approval must be in the database before anyone can decide it: refused now, visibly.
    let refused = call(&mut session, "delete_note", &json!({"id": "n1"}));
    assert!(!succeeded(&refused), "a confirmation needing the database was not refused: {refused}");
    let text = refused.to_string();
    assert!(text.contains("store") || text.contains("database"), "the refusal names the store: {text}");
    // Calls the journal can hold go on (their rows reach the database later).
    for n in 1..=3 {
        let arguments = note(n);
        let response = call(&mut session, "add_note", &arguments);
        assert!(succeeded(&response), "a journaled call during the outage: {response}");
        answered.push(arguments);
    }

    cluster.start();
    // No restart of toolgate: the pool reconnects and calls succeed again.
    poll("calls succeed again after the restart", || {
        let arguments = note(answered.len() + 10);
        succeeded(&call(&mut session, "add_note", &arguments)).then(|| answered.push(arguments))
    });
    let approval = std::thread::spawn({
        let authority = serving.authority.clone();
        move || {
            let mut session = HttpSession::open(&authority, &[]).expect("a session");
            call(&mut session, "delete_note", &json!({"id": "n1"}))
        }
    });
    let reader_state = setup.dir.path().join("reader");
    let reader = |args: &[&str]| state_command(&setup.config, &reader_state, &url, args);
    let id = poll("the confirmation is queued again once the database is back", || {
        let run = reader(&["approvals", "list", "--json"]);
        let entry: Value = serde_json::from_str(run.stdout.lines().next()?).ok()?;
        entry["id"].as_str().map(str::to_owned)
    });
    let denied = reader(&["approvals", "deny", &id]);
    assert_eq!(denied.code, Some(0), "{denied:?}");
    let denied = approval.join().expect("the waiting client");
    assert!(!succeeded(&denied), "a denied call: {denied}");

    let digests: HashSet<String> = answered.iter().map(digest_arguments).collect();
    poll("a row for every answered call", || {
        let recorded: HashSet<String> = call_rows(reader, "add_note")
            .iter()
            .filter_map(|row| row["args_digest"].as_str().map(str::to_owned))
            .collect();
        digests.is_subset(&recorded).then_some(())
    });
    // Both confirmations have their row: the one refused during the outage (journaled) and the one denied after.
    let deletes = call_rows(reader, "delete_note");
    let outcomes: Vec<&str> = deletes.iter().filter_map(|row| row["outcome"].as_str()).collect();
    assert_eq!(outcomes, ["cannot_queue", "denied"], "the refusal during the outage is audited: {deletes:?}");
    let verify = reader(&["audit", "verify"]);
    assert_eq!(verify.code, Some(0), "audit verify after the restart: {verify:?}");
    drop(serving);
}
