//! One instance id, one live process: two `toolgate serve` on one state directory without ids (two MCP clients each
//! starting toolgate) resolved the same generated id, and the second lapsed the first one's waiting approvals as its
//! own restart's. The second now runs under the next generated slot and the first's approval stays decidable; a
//! process told to use a live process's id is refused at start with what to set instead.

use std::sync::mpsc;

use serde_json::{Value, json};
use toolgate_test_support::HANG_GUARD;
use toolgate_test_support::process::run_guarded;
use toolgate_test_support::toolgate::fleet::get;
use toolgate_test_support::toolgate::raw_http::HttpSession;
use toolgate_test_support::toolgate::{Serving, Setup, command, poll, run as toolgate};

fn serve(setup: &Setup, id: Option<&str>) -> std::process::Command {
    let mut serve = command();
    serve.args(["serve", "--config"]).arg(&setup.config).arg("--state-dir").arg(setup.state());
    serve.env("TOOLGATE_LOG", "info").env_remove("TOOLGATE_INSTANCE_ID");
    if let Some(id) = id {
        serve.env("TOOLGATE_INSTANCE_ID", id);
    }
    serve
}

#[test]
fn a_second_serve_without_an_id_runs_as_another_instance_and_leaves_the_first_ones_approval_alone() {
    let setup = Setup::demo(
        "[confirmation]\ntimeout_seconds = 120\n\n[policy]\nsession_taint = false\n\n\
         [[policy.rule]]\nid = \"ask-notes\"\neffect = \"confirm\"\nmatch = { tool = \"add_note\" }\n",
    );
    let state = setup.state_arg();
    let first = Serving::start(serve(&setup, None));

    let (sender, receiver) = mpsc::channel();
    let authority = first.authority.clone();
    std::thread::spawn(move || {
        let mut session = HttpSession::open(&authority, &[]).expect("a session");
        let arguments = json!({"title": "one id", "body": "waits for a person"});
        let _ = sender.send(session.request("tools/call", json!({"name": "add_note", "arguments": arguments})));
    });
    let id = poll("the queued approval", || {
        let run = toolgate(&["approvals", "list", "--json", "--state-dir", &state]);
        let entry: Value = serde_json::from_str(run.stdout.lines().next()?).ok()?;
        entry["id"].as_str().map(str::to_owned)
    });
    let first_id = instance_of(&first);
    assert!(first_id.starts_with("gw-"), "the first runs under a generated id: {first_id}");

    // A second process without an id runs, as another instance.
    let second = Serving::start(serve(&setup, None));
    let second_id = instance_of(&second);
    assert!(second_id.starts_with("gw-") && second_id != first_id, "{first_id} and {second_id}");

    // One told to be the first is refused, saying what to set.
    let twin = run_guarded(serve(&setup, Some(&first_id)), "a toolgate serve named as the live first one");
    assert_ne!(twin.code, Some(0), "the twin is refused: {twin:?}");
    assert!(
        twin.stderr.contains("in use by another running toolgate process")
            && twin.stderr.contains("[store] instance_id")
            && twin.stderr.contains("TOOLGATE_INSTANCE_ID"),
        "the refusal says what to set: {}",
        twin.stderr
    );

    // The first process's approval is still waiting, and deciding it answers the call.
    let list = toolgate(&["approvals", "list", "--json", "--state-dir", &state]);
    assert!(list.stdout.contains(&id), "the approval still waits after the other starts: {list:?}");
    let approve = toolgate(&["approvals", "approve", &id, "--state-dir", &state]);
    assert_eq!(approve.code, Some(0), "{approve:?}");
    let answer = receiver.recv_timeout(HANG_GUARD).expect("the waiting call ends").expect("answered");
    assert!(answer.get("result").is_some() && answer["result"]["isError"] != json!(true), "{answer}");

    // Distinct configured ids share the state directory too.
    let other = Serving::start(serve(&setup, Some("second-1")));
    assert_eq!(instance_of(&other), "second-1");
    assert_eq!(instance_of(&first), first_id, "the first keeps its id");
    drop(second);
}

/// The instance id a running serve reports on its readiness endpoint.
fn instance_of(serving: &Serving) -> String {
    let (code, body) = get(&serving.authority, "/healthz/ready").expect("ready answers");
    assert_eq!(code, 200, "{body}");
    let ready: Value = serde_json::from_str(&body).expect("ready is JSON");
    ready["instance"].as_str().expect("an instance id").to_owned()
}
