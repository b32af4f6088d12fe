//! The MCP Python SDK's client through `toolgate serve` (standard policy) to the demo server's destructive
//! `delete_note`, with the effect checked by reading the note back (`get_note`): confirmed by an elicitation
//! accept, refused by a decline (the note is still there), and, for a client without elicitation, approved with
//! the real `toolgate approvals approve` while the Python call waits.

use std::process::{Command, Stdio};

use serde_json::Value;
use toolgate_test_support::Peers;

use crate::support::{Setup, clients_dir, poll, run_guarded, start_serve, toolgate, wait_guarded};

fn client(peers: &Peers, url: &str, scenario: &str, note: u64) -> Command {
    let mut command = Command::new(peers.python());
    command.env("PYTHONDONTWRITEBYTECODE", "1").arg(clients_dir().join("confirm_delete.py")).args([
        "--url",
        url,
        "--scenario",
        scenario,
        "--note",
        &note.to_string(),
    ]);
    command
}

fn findings(run: &crate::support::Run, what: &str) -> Value {
    let line = run.stdout.lines().rev().find(|line| !line.trim().is_empty()).unwrap_or_default();
    match (run.code, serde_json::from_str::<Value>(line)) {
        (Some(0), Ok(value)) => value,
        _ => panic!("{what} failed: {run:?}"),
    }
}

fn text(result: &Value) -> String {
    result["texts"]
        .as_array()
        .map(|texts| texts.iter().filter_map(Value::as_str).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

#[test]
fn a_destructive_call_is_confirmed_declined_or_approved_from_the_queue_and_its_effect_follows() {
    let peers = Peers::locate();
    let setup = Setup::demo("[confirmation]\ntimeout_seconds = 120\n");
    let serve = start_serve(&setup, &[]);

    // (a) Accepted by elicitation: the note is gone.
    let run = run_guarded(client(&peers, &serve.url, "accept", 1), "accept");
    let accepted = findings(&run, "accept");
    assert_eq!(accepted["elicitations"].as_array().map(Vec::len), Some(1), "{accepted}");
    let question = accepted["elicitations"][0]["message"].as_str().unwrap_or_default();
    assert!(question.contains("demo"), "the question names the upstream: {question}");
    assert_eq!(accepted["delete"]["isError"], false, "{accepted}");
    assert!(text(&accepted["delete"]).contains("deleted note 1"), "{accepted}");
    assert_eq!(accepted["after"]["isError"], true, "note 1 is gone: {accepted}");

    // (b) Declined: an isError result saying the user refused; the note is still there.
    let run = run_guarded(client(&peers, &serve.url, "decline", 2), "decline");
    let declined = findings(&run, "decline");
    assert_eq!(declined["elicitations"].as_array().map(Vec::len), Some(1), "{declined}");
    assert_eq!(declined["delete"]["isError"], true, "{declined}");
    let refusal = text(&declined["delete"]);
    assert!(refusal.contains("the user declin") && refusal.contains("not made"), "{refusal}");
    assert_eq!(declined["after"]["isError"], false, "note 2 is still there: {declined}");
    assert!(text(&declined["after"]).contains("Q3 planning"), "{declined}");

    // (c) No elicitation: the call waits until `toolgate approvals approve` lets it through.
    let mut command = client(&peers, &serve.url, "queue", 3);
    command.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let waiting = command.spawn().expect("the queue client starts");
    let state = setup.state_arg();
    let id = poll("the queued approval in `toolgate approvals list`", || {
        let list = toolgate(&["approvals", "list", "--json", "--state-dir", &state]);
        list.stdout
            .lines()
            .filter_map(|line| serde_json::from_str::<Value>(line).ok())
            .find(|record| record["tool"] == "delete_note")
            .and_then(|record| record["id"].as_str().map(str::to_owned))
    });
    let approve = toolgate(&["approvals", "approve", &id, "--state-dir", &state]);
    assert_eq!(approve.code, Some(0), "{approve:?}");
    let run = wait_guarded(waiting, "queue");
    let queued = findings(&run, "queue");
    assert_eq!(queued["elicitations"].as_array().map(Vec::len), Some(0), "{queued}");
    assert_eq!(queued["delete"]["isError"], false, "{queued}");
    assert!(text(&queued["delete"]).contains("deleted note 3"), "{queued}");
    assert_eq!(queued["after"]["isError"], true, "note 3 is gone: {queued}");
    // The id went to the person, never to the client.
    assert!(!run.stdout.contains(&id), "the approval id reached the client");

    // Nobody else was affected: the audit chain is intact.
    let verify = toolgate(&["audit", "verify", "--state-dir", &state]);
    assert_eq!(verify.code, Some(0), "{verify:?}; serve stderr:\n{}", serve.stderr_text());
}
