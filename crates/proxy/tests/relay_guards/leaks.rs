//! Issue 10, item 6: notifications reach only the session whose request caused them, from the upstream that
//! request went to. Progress is routed by (upstream, token) with random tokens; a log line that no single session's
//! request owns goes to the operator's log, never to every session.

use serde_json::json;
use toolgate_spec::Limits;

use crate::message_of;
use crate::support::{Client, Elicit, FixtureLog, GUARD, start, text_of, upstream};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_upstream_cannot_write_progress_into_a_call_to_another_even_with_its_token() {
    let faulty_log = FixtureLog::new();
    let gateway = start(
        vec![
            upstream("faulty", "tool-faults", GUARD, Some(&faulty_log.path)),
            upstream("hostile", "hostile-relay", GUARD, None),
        ],
        Limits::default(),
    )
    .await;
    let mut client = Client::connect(&gateway).await;
    client.send(
        json!("victim"),
        "tools/call",
        json!({"name": "faulty_hang", "arguments": {"text": "victim"}, "_meta": {"progressToken": "mine"}}),
    );
    let call = faulty_log
        .wait_for("the victim's call", |entry| {
            entry["method"] == "tools/call" && entry["params"]["arguments"]["text"] == "victim"
        })
        .await;
    let token = call["params"]["_meta"]["progressToken"].clone();

    // The other upstream writes progress with exactly that token: the worst case, as if it had guessed it.
    let injected = client.call(json!("inject"), "hostile_inject_progress", json!({"token": token})).await;
    assert_eq!(text_of(&injected), "injected");
    // The upstream wrote its progress before its answer, on the same pipe: had it been routed, it is queued now.
    client.drain();
    let progress: Vec<_> =
        client.all.iter().map(message_of).filter(|message| message["method"] == "notifications/progress").collect();
    assert!(progress.is_empty(), "another upstream's progress reached the victim's call: {progress:?}");
    // And the token itself was not one to guess: not a counter.
    assert!(token.as_str().is_some_and(|token| token.len() >= 32), "toolgate's token is a counter: {token}");
    gateway.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_log_line_reaches_no_session_while_two_callers_have_calls_in_flight_to_its_upstream() {
    let log = FixtureLog::new();
    let gateway = start(vec![upstream("faulty", "tool-faults", GUARD, Some(&log.path))], Limits::default()).await;
    let mut bystander = Client::connect(&gateway).await;
    let mut caller = Client::connect(&gateway).await;
    bystander.send(json!(1), "tools/call", json!({"name": "faulty_hang", "arguments": {"text": "bystander"}}));
    log.call_id("hang", "bystander").await;

    // Over stdio nothing says which of the two calls a log line belongs to.
    let response = caller.call(json!(2), "faulty_log", json!({"text": "the caller's personal data"})).await;
    assert_eq!(text_of(&response), "logged");
    // The log line came before the answer on the same pipe: had it been sent to anyone, it is queued now.
    bystander.drain();
    caller.drain();
    assert!(!bystander.everything().contains("personal data"), "the log line leaked: {}", bystander.everything());
    assert!(!caller.everything().contains("personal data"), "an unattributable line was guessed for the caller");
    gateway.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstream_cannot_announce_a_change_to_a_resource_another_upstream_serves() {
    let gateway = start(
        vec![upstream("first", "resource-templates", GUARD, None), upstream("hostile", "hostile-relay", GUARD, None)],
        Limits::default(),
    )
    .await;
    let mut client = Client::connect(&gateway).await;
    let subscribed = client.request(json!(1), "resources/subscribe", json!({"uri": "notes://shared/2"})).await;
    assert_eq!(subscribed["result"], json!({}), "{subscribed}");

    let announced = client.call(json!(2), "hostile_announce_update", json!({"uri": "notes://shared/2"})).await;
    assert_eq!(text_of(&announced), "announced");
    // The notification came before the answer on the same pipe: had it been relayed, it is queued now.
    client.drain();
    let updates: Vec<_> = client
        .all
        .iter()
        .map(message_of)
        .filter(|message| message["method"] == "notifications/resources/updated")
        .collect();
    assert!(updates.is_empty(), "another upstream announced a change to first's resource: {updates:?}");
    gateway.shutdown().await;
}

/// Two callers on one stdio upstream: the bystander's call starts while the owner's is in flight, the owner's
/// call ends, and only then does the upstream write a line (`late`) for the owner's call. Only the bystander's
/// call is in flight when it arrives, yet it overlapped the owner's, so elimination names nobody.
async fn late_line_after_overlapping_calls(ask: bool) -> (Client, Client, FixtureLog, toolgate_proxy::Gateway) {
    let log = FixtureLog::new();
    let gateway = start(vec![upstream("faulty", "tool-faults", GUARD, Some(&log.path))], Limits::default()).await;
    let mut owner = Client::connect_with(&gateway, Elicit::Hold).await;
    let mut bystander = Client::connect_with(&gateway, Elicit::Hold).await;
    let arguments = json!({"text": "the owner's personal data", "late": true, "ask": ask, "delayMs": 700});
    owner.start_call(json!("late"), "faulty_log", arguments);
    let late_id = log.call_id("log", "the owner's personal data").await;
    bystander.start_call(json!("hang"), "faulty_hang", json!({"text": "bystander"}));
    log.call_id("hang", "bystander").await;
    assert_eq!(text_of(&owner.response(&json!("late")).await), "logged");
    log.wait_for("the late line", |entry| entry["sent-late"] == late_id).await;
    // The late line came before this answer on the same pipe: had it been routed to anyone, it is queued now.
    let echoed = owner.call(json!("flush"), "faulty_echo", json!({"text": "flush"})).await;
    assert_eq!(text_of(&echoed), "flush");
    bystander.drain();
    owner.drain();
    (owner, bystander, log, gateway)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_log_line_written_after_its_call_ended_does_not_reach_the_caller_whose_call_overlapped_it() {
    let (owner, bystander, _log, gateway) = late_line_after_overlapping_calls(false).await;
    assert!(!bystander.everything().contains("personal data"), "the late line leaked: {}", bystander.everything());
    // Nothing names the owner either (its call was over): the line is the operator's.
    assert!(!owner.everything().contains("personal data"), "a late line was guessed for the owner");
    gateway.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_elicitation_sent_after_its_call_ended_is_refused_not_relayed_to_the_caller_whose_call_overlapped_it() {
    let (_owner, bystander, log, gateway) = late_line_after_overlapping_calls(true).await;
    assert!(bystander.elicitations.is_empty(), "the late elicitation reached the bystander");
    assert!(!bystander.everything().contains("personal data"), "the late request leaked: {}", bystander.everything());
    let refusal = log
        .wait_for("toolgate's answer to the late elicitation", |entry| {
            entry["id"].as_str().is_some_and(|id| id.starts_with("late-ask-"))
        })
        .await;
    assert!(refusal["error"].is_object(), "the late elicitation was not refused: {refusal}");
    gateway.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_log_line_carrying_its_calls_progress_token_reaches_that_call_even_beside_another_callers_call() {
    let log = FixtureLog::new();
    let gateway = start(vec![upstream("faulty", "tool-faults", GUARD, Some(&log.path))], Limits::default()).await;
    let mut bystander = Client::connect(&gateway).await;
    let mut caller = Client::connect(&gateway).await;
    bystander.start_call(json!("hang"), "faulty_hang", json!({"text": "bystander"}));
    log.call_id("hang", "bystander").await;

    let params = json!({
        "name": "faulty_log",
        "arguments": {"text": "the caller's own line", "withToken": true},
        "_meta": {"progressToken": "caller-token"}
    });
    let response = caller.request(json!(2), "tools/call", params).await;
    assert_eq!(text_of(&response), "logged");
    bystander.drain();
    caller.drain();
    assert!(!bystander.everything().contains("own line"), "the line leaked: {}", bystander.everything());
    let line = caller
        .all
        .iter()
        .map(message_of)
        .find(|message| message["method"] == "notifications/message")
        .unwrap_or_else(|| panic!("the caller's line did not reach it: {}", caller.everything()));
    assert_eq!(line["params"]["data"], "the caller's own line");
    assert_eq!(line["params"]["_meta"]["progressToken"], "caller-token", "toolgate's token is not the client's");
    gateway.shutdown().await;
}
