//! The approval queue tells the truth through `toolgate serve` and the real `toolgate approvals`: a client without
//! elicitation is told at once where its call waits (a log line and progress, with the console's address and the
//! exact command), and a call that stopped waiting (timed out, cancelled by its client, its session closed) leaves
//! the queue: `approvals list` no longer shows it and `approvals approve` says nothing waits and exits 2.

use std::io::{Read, Write};
use std::net::TcpStream;

use serde_json::{Value, json};

use crate::support::{HttpSession, Setup, poll, start_serve, toolgate};

/// The id of the approval waiting for `delete_note`, read from `toolgate approvals list --json`.
fn waiting_id(state: &str) -> Option<String> {
    let list = toolgate(&["approvals", "list", "--json", "--state-dir", state]);
    list.stdout
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .find(|record| record["tool"] == "delete_note")
        .and_then(|record| record["id"].as_str().map(str::to_owned))
}

/// Approving `id` with the real command: it must say that nothing waits, and exit 2.
fn assert_nothing_waits(state: &str, id: &str, why: &str) {
    let list = toolgate(&["approvals", "list", "--state-dir", state]);
    assert_eq!(list.stdout, "no approvals are waiting\n", "the ended call left the queue ({why}): {list:?}");
    let approve = toolgate(&["approvals", "approve", id, "--state-dir", state]);
    assert_eq!(approve.code, Some(2), "{approve:?}");
    assert!(approve.stderr.contains("nothing waits for it any more"), "{}", approve.stderr);
    assert!(approve.stderr.contains(why), "the reason is named ({why}): {}", approve.stderr);
    assert!(!approve.stdout.contains("approved"), "{approve:?}");
}

#[test]
fn a_call_that_timed_out_told_where_it_waited_and_approving_it_afterwards_says_nothing_waits() {
    let setup = Setup::demo("[confirmation]\ntimeout_seconds = 2\n");
    let serve = start_serve(&setup, &[]);
    let state = setup.state_arg();
    let session = HttpSession::open(&serve.authority, &[]).expect("a session");
    let call = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                      "params": {"name": "delete_note", "arguments": {"id": 1}, "_meta": {"progressToken": "p-7"}}});
    let reply = session.post(&call).expect("the call is answered");
    let messages = reply.messages();
    let response = reply.response(&json!(7)).expect("a response");
    assert_eq!(response["result"]["isError"], true, "{response}");

    // Told at once, before the answer: where to decide, and the exact commands.
    let notice = messages
        .iter()
        .find(|message| message["method"] == "notifications/message" && message["params"]["logger"] == "toolgate")
        .unwrap_or_else(|| panic!("no notice of where the call waits: {messages:#?}"));
    let data = &notice["params"]["data"];
    let id = data["approval"].as_str().expect("the approval it waits on").to_owned();
    assert_eq!(data["approve"], format!("toolgate approvals approve {id} --state-dir {state}"), "{notice}");
    assert_eq!(data["deny"], format!("toolgate approvals deny {id} --state-dir {state}"), "{notice}");
    assert_eq!(data["console"], format!("http://{}/console", serve.authority), "{notice}");
    let text = data["message"].as_str().unwrap_or_default();
    assert!(text.contains("delete_note") && text.contains(&format!("toolgate approvals approve {id}")), "{text}");
    let progress = messages
        .iter()
        .find(|message| message["method"] == "notifications/progress")
        .unwrap_or_else(|| panic!("no progress for the call's token: {messages:#?}"));
    assert_eq!(progress["params"]["progressToken"], "p-7", "{progress}");
    assert_eq!(progress["params"]["message"], text, "{progress}");
    let position = |wanted: &Value| messages.iter().position(|message| message == wanted);
    assert!(position(notice) < position(&response), "the notice comes before the answer");

    assert_nothing_waits(&state, &id, "nobody decided within 2 s");
}

#[test]
fn a_call_its_client_cancelled_or_abandoned_leaves_the_queue() {
    let setup = Setup::demo("[confirmation]\ntimeout_seconds = 120\n");
    let serve = start_serve(&setup, &[]);
    let state = setup.state_arg();

    // Cancelled: the client sends `notifications/cancelled` for the waiting call.
    let session = HttpSession::open(&serve.authority, &[]).expect("a session");
    let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                      "params": {"name": "delete_note", "arguments": {"id": 1}}});
    let caller = session.clone();
    let waiting = std::thread::spawn(move || caller.post(&call));
    let id = poll("the queued approval", || waiting_id(&state));
    session
        .post(&json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                       "params": {"requestId": 1, "reason": "the user pressed stop"}}))
        .expect("the cancel is accepted");
    poll("the cancelled call to leave the queue", || waiting_id(&state).is_none().then_some(()));
    assert_nothing_waits(&state, &id, "the client cancelled the call");
    drop(waiting);

    // Abandoned: the client ends its session (HTTP DELETE) while the call waits.
    let session = HttpSession::open(&serve.authority, &[]).expect("a second session");
    let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                      "params": {"name": "delete_note", "arguments": {"id": 2}}});
    let caller = session.clone();
    let _waiting = std::thread::spawn(move || caller.post(&call));
    let id = poll("the second queued approval", || waiting_id(&state));
    delete_session(&serve.authority, &session.id);
    poll("the abandoned call to leave the queue", || waiting_id(&state).is_none().then_some(()));
    assert_nothing_waits(&state, &id, "the client went away");

    // Each ended call has its one row: the `call` row journaled as the person was asked, completed as `withdrawn`
    // with why (committed by the gateway's writer once the call's task ends).
    let reasons = poll("each ended call's row", || {
        let audit = toolgate(&["audit", "--json", "--state-dir", &state]);
        let delete_calls: Vec<Value> = audit
            .stdout
            .lines()
            .filter_map(|line| serde_json::from_str::<Value>(line).ok())
            .filter(|row| row["tool"] == "delete_note")
            .collect();
        let reasons: Vec<Value> = delete_calls
            .iter()
            .filter(|row| row["kind"] == "call" && row["verdict"] == "confirm" && row["outcome"] == "withdrawn")
            .map(|row| row["detail"]["reason"].clone())
            .collect();
        (reasons.len() == 2 && delete_calls.len() == 2).then_some(reasons)
    });
    assert_eq!(reasons, [json!("the client cancelled the call"), json!("the client went away (its session closed)")]);
    let verify = toolgate(&["audit", "verify", "--state-dir", &state]);
    assert_eq!(verify.code, Some(0), "{verify:?}; serve stderr:\n{}", serve.stderr_text());
}

/// Ends an HTTP session as a client does: `DELETE /mcp` with its id.
fn delete_session(authority: &str, session_id: &str) {
    let mut stream = TcpStream::connect(authority).expect("connect");
    let request = format!(
        "DELETE /mcp HTTP/1.1\r\nHost: {authority}\r\nMcp-Session-Id: {session_id}\r\nMCP-Protocol-Version: \
         2025-11-25\r\nConnection: close\r\n\r\n"
    );
    stream.write_all(request.as_bytes()).expect("write");
    let mut reply = String::new();
    let _ = stream.read_to_string(&mut reply);
    assert!(reply.starts_with("HTTP/1.1 200") || reply.starts_with("HTTP/1.1 204"), "{reply}");
}
