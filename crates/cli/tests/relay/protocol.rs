//! Protocol details a relay must get right, checked on the wire with a raw JSON-RPC client against
//! server-everything: progress carries the client's own token (string or number, unchanged), a cancelled request
//! never gets a late response, and toolgate's own answers (unknown tool, foreign cursor, `server/discover`).

use serde_json::{Value, json};
use toolgate_test_support::Peers;

use crate::support::{RawClient, is_response_to, method_of};

pub(crate) fn everything() -> RawClient {
    let mut client = RawClient::through_toolgate(&Peers::locate().server_everything());
    client.initialize(json!({}));
    client
}

/// Every progress notification for `token` among the messages received so far.
pub(crate) fn progress_for<'a>(received: &'a [Value], token: &Value) -> Vec<&'a Value> {
    received
        .iter()
        .filter(|message| {
            method_of(message) == "notifications/progress" && message["params"]["progressToken"] == *token
        })
        .collect()
}

pub(crate) fn long_call(client: &mut RawClient, id: &Value, token: &Value, duration: u64, steps: u64) {
    client.send(&json!({
        "jsonrpc": "2.0",
        "id": id,
        "method": "tools/call",
        "params": {
            "name": "trigger-long-running-operation",
            "arguments": {"duration": duration, "steps": steps},
            "_meta": {"progressToken": token},
        },
    }));
}

/// Progress notifications come back with exactly the token the client chose (a string stays that string, a number
/// stays a number), in order. That every one of them arrives before the response is checked separately
/// (`progress_order`).
#[test]
fn progress_keeps_the_clients_token() {
    let mut client = everything();
    for token in [json!("client-token-\u{2713}"), json!(7)] {
        let id = client.next_id();
        long_call(&mut client, &id, &token, 1, 3);
        let response = client.read_until("the long call's response", |message| is_response_to(message, &id));
        assert!(response["result"]["content"][0]["text"].as_str().unwrap_or_default().starts_with("Long running"));
        // A ping afterwards, so that anything still on its way has arrived.
        client.request_ok("ping", json!({}));
        let progress = progress_for(&client.received, &token);
        let values: Vec<Value> = progress.iter().map(|message| message["params"]["progress"].clone()).collect();
        assert!(!values.is_empty(), "no progress came back for {token}: {:#?}", client.received);
        assert_eq!(values, [json!(1), json!(2), json!(3)][..values.len()], "progress for {token}, in order");
        assert!(progress.iter().all(|message| message["params"]["total"] == 3));
    }
    // No notification carries a token toolgate made up.
    let foreign: Vec<&Value> = client
        .received
        .iter()
        .filter(|message| method_of(message) == "notifications/progress")
        .filter(|message| ![json!("client-token-\u{2713}"), json!(7)].contains(&message["params"]["progressToken"]))
        .collect();
    assert!(foreign.is_empty(), "progress with a token the client never sent: {foreign:#?}");
}

/// After `notifications/cancelled`, the cancelled request gets no response (not even when the upstream finishes
/// it later) and at most one progress notification already in flight; the session goes on working.
#[test]
fn a_cancelled_call_gets_no_late_response() {
    let mut client = everything();
    let cancelled_id = json!("long-call-to-cancel");
    let cancelled_token = json!("cancelled-progress");
    long_call(&mut client, &cancelled_id, &cancelled_token, 4, 4);
    client.read_until("the first progress", |message| {
        method_of(message) == "notifications/progress" && message["params"]["progressToken"] == cancelled_token
    });
    client.send(&json!({
        "jsonrpc": "2.0",
        "method": "notifications/cancelled",
        "params": {"requestId": cancelled_id, "reason": "the relay test changed its mind"},
    }));
    let progress_at_cancel = progress_for(&client.received, &cancelled_token).len();

    // A longer call afterwards: by its end the cancelled one has long finished upstream.
    let later_id = client.next_id();
    long_call(&mut client, &later_id, &json!("later"), 6, 3);
    let later = client.read_until("the later call's response", |message| is_response_to(message, &later_id));
    assert!(later["result"]["content"][0]["text"].as_str().unwrap_or_default().starts_with("Long running"));
    let ping = client.request("ping", json!({}));
    assert_eq!(ping["result"], json!({}));

    assert!(
        !client.received.iter().any(|message| is_response_to(message, &cancelled_id)),
        "a cancelled request got a response: {:#?}",
        client.received
    );
    let progress_after_cancel = progress_for(&client.received, &cancelled_token).len() - progress_at_cancel;
    assert!(progress_after_cancel <= 1, "progress kept flowing after the cancel: {:#?}", client.received);
}

/// What toolgate answers itself: an unknown tool gets an `isError` result naming it (as the TypeScript and Python
/// SDKs answer); a cursor it never issued is invalid params (-32602); `server/discover` gets a prompt JSON-RPC
/// error so dual-era clients fall back to `initialize`; the session goes on working.
#[test]
fn toolgate_answers_unknown_tools_cursors_and_discover() {
    let mut client = everything();
    let unknown = client.request_ok("tools/call", json!({"name": "no-such-tool", "arguments": {}}));
    assert_eq!(unknown["isError"], true, "{unknown}");
    assert_eq!(unknown["content"][0]["text"], "Unknown tool: no-such-tool");
    let cursor = client.request("tools/list", json!({"cursor": "not-a-cursor-toolgate-issued"}));
    assert_eq!(cursor["error"]["code"], -32602, "{cursor}");
    let discover = client.request("server/discover", json!({}));
    assert!(discover["error"]["code"].is_i64(), "server/discover gets an error: {discover}");
    let echo = client.request_ok("tools/call", json!({"name": "echo", "arguments": {"message": "after errors"}}));
    assert_eq!(echo["content"][0]["text"], "Echo: after errors");
}
