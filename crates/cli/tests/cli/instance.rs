//! One instance id, one live process: two `toolgate serve` on one state directory without ids would resolve the same
//! generated id, and the second would lapse the first one's waiting approvals as its own restart's. The second is
//! refused at start with what to set instead, and the first's approval stays decidable; with distinct
//! `$TOOLGATE_INSTANCE_ID` both run.

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
fn a_second_serve_with_the_same_generated_id_is_refused_and_leaves_the_first_ones_approval_alone() {
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

    let second = run_guarded(serve(&setup, None), "a second toolgate serve on the same state directory");
    assert_ne!(second.code, Some(0), "the second process is refused: {second:?}");
    assert!(
        second.stderr.contains("in use by another running toolgate process")
            && second.stderr.contains("[store] instance_id")
            && second.stderr.contains("TOOLGATE_INSTANCE_ID"),
        "the refusal says what to set: {}",
        second.stderr
    );

    // The first process's approval is still waiting, and deciding it answers the call.
    let list = toolgate(&["approvals", "list", "--json", "--state-dir", &state]);
    assert!(list.stdout.contains(&id), "the approval still waits after the refused start: {list:?}");
    let approve = toolgate(&["approvals", "approve", &id, "--state-dir", &state]);
    assert_eq!(approve.code, Some(0), "{approve:?}");
    let answer = receiver.recv_timeout(HANG_GUARD).expect("the waiting call ends").expect("answered");
    assert!(answer.get("result").is_some() && answer["result"]["isError"] != json!(true), "{answer}");

    // Distinct ids share the state directory.
    let other = Serving::start(serve(&setup, Some("second-1")));
    let (code, body) = get(&other.authority, "/healthz/ready").expect("ready answers");
    assert_eq!(code, 200, "{body}");
    assert!(body.contains("\"instance\":\"second-1\""), "{body}");
    let (code, body) = get(&first.authority, "/healthz/ready").expect("ready answers");
    assert_eq!(code, 200, "{body}");
    assert!(body.contains("\"instance\":\"gw-"), "the first keeps its generated id: {body}");
}
