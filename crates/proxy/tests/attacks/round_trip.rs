//! 2026-07-28 confirmations as `input_required` round trips (MRTR), attacked: a client (and the model behind it)
//! holds the sealed `requestState` and may tamper with it, replay it, keep it past its expiry, hand it to another
//! caller, reuse it for other arguments, answer a question toolgate never asked, retry after the tool changed, or
//! omit the elicitation capability and hope to be asked anyway. Each case asserts what the client got, that the
//! fixture ran nothing it should not have, and the call's one audit row.

use std::time::Duration;

use serde_json::{Value, json};
use toolgate_core::trust::TrustLevel;
use toolgate_proxy::session::{Caller, ClientBound};
use toolgate_spec::ConfirmationSpec;
use toolgate_store::{AuditFilter, AuditKind};

use crate::harness::*;
use crate::support::{FixtureLog, STORE_SECRET, break_used_nonces};

/// The input key of toolgate's own question.
const CONFIRM: &str = "toolgate/confirm";

/// A gateway over the rug-pull fixture whose `update_record` asks a person (states valid for `lifetime`) and whose
/// `rug_pull` runs.
async fn asking(log: &FixtureLog, lifetime: Duration) -> Harness {
    let mut guardrails = standard(Duration::from_secs(60));
    guardrails.confirmation = ConfirmationSpec { approval_ttl: lifetime, ..guardrails.confirmation };
    guardrails.policy = policy(json!({"rule": [
        {"id": "control", "effect": "allow", "match": {"tool": "rug_pull"}},
        {"id": "ask", "effect": "confirm", "match": {"tool": "update_record"}}
    ]}));
    Harness::start(vec![rug("rug", log, TrustLevel::Untrusted)], guardrails).await
}

/// A 2026-07-28 `tools/call` of `update_record` with `arguments`, declaring `capabilities` in its own `_meta`, and
/// `extra` (the retry's `requestState`, `inputResponses`) merged in.
fn modern_call(arguments: Value, capabilities: Value, extra: Value) -> Value {
    let mut params = json!({
        "name": "rug_update_record",
        "arguments": arguments,
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": capabilities,
        },
    });
    for (key, value) in extra.as_object().cloned().unwrap_or_default() {
        params[key] = value;
    }
    params
}

fn eliciting() -> Value {
    json!({"elicitation": {}})
}

fn accept() -> Value {
    json!({CONFIRM: {"action": "accept", "content": {"approve": true}}})
}

/// Round one: the call is answered `input_required` with toolgate's question; returns the sealed state.
async fn first_round(client: &mut Client, id: &str, arguments: &Value) -> String {
    let asked = client.request(json!(id), "tools/call", modern_call(arguments.clone(), eliciting(), json!({}))).await;
    let result = &asked["result"];
    assert_eq!(result["resultType"], "input_required", "{asked}");
    let question = &result["inputRequests"][CONFIRM];
    assert_eq!(question["method"], "elicitation/create", "{asked}");
    assert!(question["params"]["message"].as_str().unwrap_or_default().starts_with("toolgate asks"), "{asked}");
    assert_eq!(question["params"]["_meta"]["toolgate/question"]["kind"], "confirmation", "{asked}");
    assert!(client.elicitations.is_empty(), "a modern request is never sent a pushed question");
    result["requestState"].as_str().expect("a sealed state").to_owned()
}

/// A retry of the call with `arguments`, `state` and `responses`.
async fn retry(client: &mut Client, id: &str, arguments: &Value, state: &str, responses: Value) -> Value {
    let extra = json!({"requestState": state, "inputResponses": responses});
    client.request(json!(id), "tools/call", modern_call(arguments.clone(), eliciting(), extra)).await
}

/// Asserts a JSON-RPC invalid-params error whose message says `why`.
fn assert_refused(response: &Value, why: &str) {
    assert_eq!(response["error"]["code"], json!(-32602), "{response}");
    let message = response["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains(why), "{why}: {response}");
}

/// The outcomes of the `update_record` call rows with their details, sorted: a forwarded call's row is journaled
/// and a refused one queued, so the chain's order need not be the requests' order.
async fn call_rows(harness: &Harness) -> Vec<(Option<String>, Option<Value>)> {
    harness.store.audit().flush().await.unwrap();
    let filter = AuditFilter { kind: Some(AuditKind::Call), ..AuditFilter::default() };
    let rows = harness.store.query_audit(&filter).await.unwrap();
    let mut rows: Vec<(Option<String>, Option<Value>)> = rows
        .into_iter()
        .filter(|row| row.tool.as_deref() == Some("rug_update_record"))
        .map(|row| (row.outcome, row.detail))
        .collect();
    rows.sort_by_key(|(outcome, detail)| (outcome.clone(), detail.as_ref().map(Value::to_string)));
    rows
}

fn outcomes(rows: &[(Option<String>, Option<Value>)]) -> Vec<&str> {
    rows.iter().map(|(outcome, _)| outcome.as_deref().unwrap_or_default()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue_12_a_confirmation_round_trip_is_approved_once_and_declined_as_asked() {
    let log = FixtureLog::new();
    let harness = asking(&log, Duration::from_secs(300)).await;
    let mut client = harness.client(Elicit::Hold).await;
    let arguments = json!({"id": 1, "text": "new"});

    let state = first_round(&mut client, "ask", &arguments).await;
    assert_eq!(fixture_called(&log, "update_record"), 0, "nothing runs before a person says yes");
    let approved = retry(&mut client, "yes", &arguments, &state, accept()).await;
    assert_eq!(approved["result"]["resultType"], "complete", "{approved}");
    assert_eq!(text(&approved), "called update_record", "{approved}");
    assert_eq!(fixture_called(&log, "update_record"), 1);

    // Replayed: the same state (and answer) again runs nothing.
    let replayed = retry(&mut client, "again", &arguments, &state, accept()).await;
    assert_refused(&replayed, "used already");
    assert_eq!(fixture_called(&log, "update_record"), 1, "a replayed state runs the call no second time");

    // Declined: refused as the person said, and nothing runs.
    let state = first_round(&mut client, "ask-2", &arguments).await;
    let declined = retry(&mut client, "no", &arguments, &state, json!({CONFIRM: {"action": "decline"}})).await;
    assert!(is_error(&declined), "{declined}");
    assert!(text(&declined).contains("declined"), "{declined}");
    assert_eq!(fixture_called(&log, "update_record"), 1);

    let rows = call_rows(&harness).await;
    assert_eq!(
        outcomes(&rows),
        ["declined", "input_required", "input_required", "ok", "state_refused"],
        "one row per request: {rows:#?}"
    );
    assert_eq!(rows[4].1.as_ref().map(|detail| detail["reason"].clone()), Some(json!("replayed")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue_12_tampered_foreign_and_repurposed_states_approve_nothing() {
    let log = FixtureLog::new();
    let harness = asking(&log, Duration::from_secs(300)).await;
    let mut client = harness.client(Elicit::Hold).await;
    let arguments = json!({"id": 1, "text": "new"});

    // Tampered: one character of the payload changed (its seal no longer verifies), or garbage appended.
    let state = first_round(&mut client, "ask", &arguments).await;
    let mut altered: Vec<char> = state.chars().collect();
    altered[0] = if altered[0] == '7' { '6' } else { '7' };
    let altered: String = altered.into_iter().collect();
    assert_refused(&retry(&mut client, "altered", &arguments, &altered, accept()).await, "altered or forged");
    let appended = format!("{state}-TAMPERED");
    assert_refused(&retry(&mut client, "appended", &arguments, &appended, accept()).await, "not one toolgate issued");
    assert_refused(
        &client
            .request(
                json!("number"),
                "tools/call",
                modern_call(arguments.clone(), eliciting(), json!({"requestState": 7})),
            )
            .await,
        "not one toolgate issued",
    );

    // Reused for other arguments: the state names the arguments it was asked about.
    let other = json!({"id": 2, "text": "something else"});
    assert_refused(&retry(&mut client, "other-args", &other, &state, accept()).await, "other arguments");

    // Another caller's: issued to the session's caller, presented by bob.
    let bob = Caller::named("bob", Vec::new());
    let mut thief = Client::connect_as(&harness.gateway, bob, Elicit::Hold, json!({})).await;
    assert_refused(&retry(&mut thief, "stolen", &arguments, &state, accept()).await, "another caller");

    // None of those used the state up: its own caller may still answer it, once.
    let approved = retry(&mut client, "yes", &arguments, &state, accept()).await;
    assert_eq!(text(&approved), "called update_record", "{approved}");
    assert_eq!(fixture_called(&log, "update_record"), 1);

    let rows = call_rows(&harness).await;
    let mut reasons: Vec<String> = rows
        .iter()
        .filter_map(|(_, detail)| detail.as_ref().and_then(|detail| detail["reason"].as_str()).map(str::to_owned))
        .collect();
    reasons.sort();
    assert_eq!(
        reasons,
        ["forged", "malformed", "malformed", "other_arguments", "other_caller"],
        "each refusal is one row saying why: {rows:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue_12_an_expired_state_and_an_answer_to_no_question_approve_nothing() {
    let log = FixtureLog::new();
    let harness = asking(&log, Duration::from_secs(1)).await;
    let mut client = harness.client(Elicit::Hold).await;
    let arguments = json!({"id": 1, "text": "new"});

    // An answer to a question toolgate never asked (no state): asked properly instead, nothing runs.
    let unasked = client
        .request(
            json!("unasked"),
            "tools/call",
            modern_call(arguments.clone(), eliciting(), json!({"inputResponses": accept()})),
        )
        .await;
    assert_eq!(unasked["result"]["resultType"], "input_required", "{unasked}");

    // A real state, answered under a key toolgate never asked: asked again, nothing runs.
    let state = first_round(&mut client, "ask", &arguments).await;
    let stray = json!({"upstream/other": {"action": "accept", "content": {"approve": true}}});
    let again = retry(&mut client, "stray", &arguments, &state, stray).await;
    assert_eq!(again["result"]["resultType"], "input_required", "{again}");
    assert_eq!(fixture_called(&log, "update_record"), 0);

    // Expired: kept past its one-second lifetime (waited for, not timed).
    let state = again["result"]["requestState"].as_str().expect("a fresh state").to_owned();
    tokio::time::sleep(Duration::from_millis(2_100)).await;
    assert_refused(&retry(&mut client, "late", &arguments, &state, accept()).await, "expired");
    assert_eq!(fixture_called(&log, "update_record"), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue_12_a_retry_after_the_tool_changed_lapses() {
    let log = FixtureLog::new();
    let harness = asking(&log, Duration::from_secs(300)).await;
    let mut client = harness.client(Elicit::Hold).await;
    let arguments = json!({"id": 1, "text": "new"});
    let state = first_round(&mut client, "ask", &arguments).await;
    let asked_about =
        client.tool("rug_update_record").await.expect("listed")["_meta"]["toolgate/annotations"]["fingerprint"].clone();

    // While the person reads, the upstream edits the definition they are reading about.
    let seen = list_changes(&client);
    let pulled = client.call(json!("pull"), "rug_pull", json!({"change": "describe"})).await;
    assert_eq!(text(&pulled), "changed: describe", "{pulled}");
    wait_list_changes(&mut client, seen).await;

    let lapsed = retry(&mut client, "yes", &arguments, &state, accept()).await;
    assert!(is_error(&lapsed), "{lapsed}");
    assert!(text(&lapsed).contains("changed"), "{lapsed}");
    assert_eq!(fixture_called(&log, "update_record"), 0, "the approval of the old definition runs nothing");
    let rows = call_rows(&harness).await;
    assert_eq!(outcomes(&rows), ["input_required", "tool_changed"], "{rows:#?}");
    // Sorted by outcome: the lapse is the second.
    let detail = rows[1].1.clone().unwrap_or_default();
    assert_eq!(detail["approvedFingerprint"], asked_about, "the row names what the person was asked about");
    assert_ne!(detail["currentFingerprint"], asked_about);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue_12_a_modern_request_without_elicitation_is_never_asked() {
    let log = FixtureLog::new();
    let harness = asking(&log, Duration::from_secs(300)).await;
    // The session itself could be asked (its `initialize` declared elicitation); the modern request did not.
    let mut client = harness.client(Elicit::Accept).await;
    // No elicitation at all, and URL mode only (toolgate's question is a form): both wait in the queue.
    for (n, declared) in [json!({"sampling": {}}), json!({"elicitation": {"url": {}}})].into_iter().enumerate() {
        let arguments = json!({"id": n, "text": "new"});
        let id = json!(format!("quiet-{n}"));
        client.send(id.clone(), "tools/call", modern_call(arguments.clone(), declared.clone(), json!({})));
        let pending = wait_pending(&harness.store, "rug_update_record", &arguments).await;
        harness
            .other_handle()
            .await
            .approvals()
            .decide(&pending.approval.id, toolgate_store::ApprovalDecision::Approve, "tester")
            .await
            .unwrap();
        let answer = client.response(&id).await;
        assert_eq!(answer["result"]["resultType"], "complete", "{declared}: {answer}");
        assert_eq!(text(&answer), "called update_record", "{declared}: {answer}");
    }
    assert!(client.elicitations.is_empty(), "no pushed question");
    let asked = client.all.iter().any(|bound| {
        matches!(bound, ClientBound::Related { message, .. } | ClientBound::Unsolicited(message)
            if message["method"] == "elicitation/create")
    });
    assert!(!asked, "a request that declared no elicitation is never asked: {}", client.everything());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue_12_a_store_that_cannot_check_a_state_tells_the_client_nothing_of_its_error() {
    let log = FixtureLog::new();
    let harness = asking(&log, Duration::from_secs(300)).await;
    let mut client = harness.client(Elicit::Hold).await;
    let arguments = json!({"id": 1, "text": "new"});
    let state = first_round(&mut client, "ask", &arguments).await;

    // The used nonces cannot be written any more; the store's error names a disk and a host.
    break_used_nonces(harness.state.path()).await;
    let refused = retry(&mut client, "yes", &arguments, &state, accept()).await;
    // Not the client's fault (so not invalid params), and nothing of the store's error in what it reads.
    assert_eq!(refused["error"]["code"], json!(-32603), "{refused}");
    let message = refused["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("cannot check the requestState"), "{refused}");
    for secret in [STORE_SECRET, "secret-volume", "db-host", "used_request_states", "sqlite", "trigger"] {
        assert!(!refused.to_string().to_lowercase().contains(&secret.to_lowercase()), "{secret} leaked: {refused}");
    }
    assert_eq!(fixture_called(&log, "update_record"), 0, "a state that could not be checked runs nothing");

    // The operator's record keeps the detail.
    let rows = call_rows(&harness).await;
    let refusal = rows
        .iter()
        .find_map(|(outcome, detail)| (outcome.as_deref() == Some("state_refused")).then(|| detail.clone()))
        .flatten()
        .unwrap_or_else(|| panic!("a state_refused row: {rows:#?}"));
    assert_eq!(refusal["reason"], "unavailable", "{refusal}");
    assert!(refusal["error"].as_str().unwrap_or_default().contains(STORE_SECRET), "{refusal}");
}
