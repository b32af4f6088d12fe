//! 2026-07-28 confirmations in URL mode (issue 12), through the in-process gateway: a request that declared only
//! URL elicitation is answered `input_required` with a link to the console's page of a detached approval; a person
//! decides it in the store (as the console does, from another handle); the client's retry reads the decision. Each
//! case asserts what the client got, what the fixture ran, the store's approval and the call rows.

use std::time::Duration;

use serde_json::{Value, json};
use toolgate_core::trust::TrustLevel;
use toolgate_proxy::session::Caller;
use toolgate_spec::{ConfirmationSpec, ModernConfirm};
use toolgate_store::{ApprovalDecision, ApprovalId, ApprovalState, AuditFilter, AuditKind};

use crate::harness::*;
use crate::support::FixtureLog;

const CONFIRM: &str = "toolgate/confirm";
const CONSOLE: &str = "https://gate.example.com/console";

/// A gateway over the rug-pull fixture whose `update_record` asks a person in URL mode (approvals valid for
/// `lifetime`; a pending retry waits a second before it is asked again) and whose `rug_pull` runs.
async fn asking(log: &FixtureLog, lifetime: Duration) -> Harness {
    let mut guardrails = standard(Duration::from_secs(1));
    guardrails.confirmation = ConfirmationSpec {
        approval_ttl: lifetime,
        modern: ModernConfirm::Auto,
        console_url: Some(CONSOLE.to_owned()),
        ..guardrails.confirmation
    };
    guardrails.policy = policy(json!({"rule": [
        {"id": "control", "effect": "allow", "match": {"tool": "rug_pull"}},
        {"id": "ask", "effect": "confirm", "match": {"tool": "update_record"}}
    ]}));
    Harness::start(vec![rug("rug", log, TrustLevel::Untrusted)], guardrails).await
}

async fn client_of(harness: &Harness, name: &str) -> Client {
    Client::connect_as(&harness.gateway, Caller::named(name, Vec::new()), Elicit::Hold, json!({})).await
}

/// A 2026-07-28 `tools/call` of `update_record` declaring URL elicitation only, with `extra` merged in.
fn url_call(arguments: &Value, extra: Value) -> Value {
    let mut params = json!({
        "name": "rug_update_record",
        "arguments": arguments,
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"url": {}}},
        },
    });
    for (key, value) in extra.as_object().cloned().unwrap_or_default() {
        params[key] = value;
    }
    params
}

/// Asserts an `input_required` URL round pointing at the console's page of one approval; returns its id and state.
fn url_round(response: &Value) -> (ApprovalId, String) {
    let result = &response["result"];
    assert_eq!(result["resultType"], "input_required", "{response}");
    let question = &result["inputRequests"][CONFIRM];
    assert_eq!(question["method"], "elicitation/create", "{response}");
    let params = &question["params"];
    assert_eq!(params["mode"], "url", "{response}");
    assert!(params.get("requestedSchema").is_none(), "a URL question has no form: {response}");
    assert!(params.get("elicitationId").is_none(), "2026-07-28 removed elicitationId: {response}");
    let id = params["_meta"]["toolgate/approval"].as_str().expect("the approval it points to").to_owned();
    assert_eq!(params["url"], format!("{CONSOLE}/approvals/{id}"), "{response}");
    assert!(params["message"].as_str().unwrap_or_default().starts_with("toolgate asks"), "{response}");
    let state = result["requestState"].as_str().expect("a sealed state").to_owned();
    (ApprovalId::from_text(&id), state)
}

async fn ask(client: &mut Client, id: &str, arguments: &Value) -> (ApprovalId, String) {
    url_round(&client.request(json!(id), "tools/call", url_call(arguments, json!({}))).await)
}

async fn retry(client: &mut Client, id: &str, arguments: &Value, state: &str) -> Value {
    let extra = json!({"requestState": state, "inputResponses": {CONFIRM: {"action": "accept"}}});
    client.request(json!(id), "tools/call", url_call(arguments, extra)).await
}

async fn decide(harness: &Harness, approval: &ApprovalId, decision: ApprovalDecision) {
    harness.other_handle().await.approvals().decide(approval, decision, "console:reviewer").await.unwrap();
}

async fn state_of(harness: &Harness, approval: &ApprovalId) -> ApprovalState {
    harness.store.approvals().get(approval).await.unwrap().expect("the approval").state
}

/// The `update_record` call rows: outcome and approval id, sorted by outcome.
async fn call_rows(harness: &Harness) -> Vec<(String, Option<String>)> {
    harness.store.audit().flush().await.unwrap();
    let filter = AuditFilter { kind: Some(AuditKind::Call), ..AuditFilter::default() };
    let mut rows: Vec<(String, Option<String>)> = harness
        .store
        .query_audit(&filter)
        .await
        .unwrap()
        .into_iter()
        .filter(|row| row.tool.as_deref() == Some("rug_update_record"))
        .map(|row| (row.outcome.unwrap_or_default(), row.approval_id))
        .collect();
    rows.sort();
    rows
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue_12_a_url_mode_confirmation_waits_in_the_store_and_its_retry_runs_once_approved() {
    let log = FixtureLog::new();
    let harness = asking(&log, Duration::from_secs(300)).await;
    let mut alice = client_of(&harness, "alice").await;
    let arguments = json!({"id": 1, "text": "new"});

    let (approval, state) = ask(&mut alice, "ask", &arguments).await;
    let record = harness.store.approvals().get(&approval).await.unwrap().expect("queued");
    assert!(record.detached, "no call waits on it: {record:?}");
    assert_eq!(record.approval.caller.as_deref(), Some("alice"));
    assert_eq!(record.state, ApprovalState::Pending);

    // Retried before anyone decided: asked again about the same approval, and no second one is queued.
    let (again, state) = url_round(&retry(&mut alice, "early", &arguments, &state).await);
    assert_eq!(again, approval, "the same approval");
    assert_eq!(harness.store.approvals().list_pending().await.unwrap().len(), 1, "no second approval");
    assert_eq!(fixture_called(&log, "update_record"), 0);

    decide(&harness, &approval, ApprovalDecision::Approve).await;
    let approved = retry(&mut alice, "yes", &arguments, &state).await;
    assert_eq!(approved["result"]["resultType"], "complete", "{approved}");
    assert_eq!(text(&approved), "called update_record", "{approved}");
    assert_eq!(fixture_called(&log, "update_record"), 1);
    assert_eq!(state_of(&harness, &approval).await, ApprovalState::Consumed);

    // The same state again runs nothing.
    let replayed = retry(&mut alice, "again", &arguments, &state).await;
    assert_eq!(replayed["error"]["code"], -32602, "{replayed}");
    assert_eq!(fixture_called(&log, "update_record"), 1, "the upstream ran once");

    let id = Some(approval.as_str().to_owned());
    let rows = call_rows(&harness).await;
    let named: Vec<(String, Option<String>)> = rows.iter().filter(|(_, row_id)| row_id.is_some()).cloned().collect();
    assert_eq!(
        named,
        [("input_required".into(), id.clone()), ("input_required".into(), id.clone()), ("ok".into(), id)],
        "every round of the call names its approval: {rows:#?}"
    );
    assert!(rows.iter().any(|(outcome, _)| outcome == "state_refused"), "{rows:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue_12_a_denied_or_expired_url_mode_approval_runs_nothing() {
    let log = FixtureLog::new();
    let harness = asking(&log, Duration::from_secs(2)).await;
    let mut alice = client_of(&harness, "alice").await;
    let arguments = json!({"id": 1, "text": "new"});

    let (approval, state) = ask(&mut alice, "ask", &arguments).await;
    decide(&harness, &approval, ApprovalDecision::Deny).await;
    let denied = retry(&mut alice, "no", &arguments, &state).await;
    assert!(is_error(&denied), "{denied}");
    assert!(text(&denied).contains("console:reviewer denied"), "{denied}");

    // Nobody decides: the approval expires (waited for, not timed), and the late retry is told so.
    let (late, state) = ask(&mut alice, "ask-2", &arguments).await;
    tokio::time::sleep(Duration::from_millis(2_200)).await;
    let expired = retry(&mut alice, "late", &arguments, &state).await;
    assert!(is_error(&expired), "{expired}");
    assert!(text(&expired).contains("nobody approved this call"), "{expired}");
    assert_eq!(state_of(&harness, &late).await, ApprovalState::Lapsed);
    assert_eq!(fixture_called(&log, "update_record"), 0);

    let outcomes: Vec<String> = call_rows(&harness).await.into_iter().map(|(outcome, _)| outcome).collect();
    assert_eq!(outcomes, ["denied", "input_required", "input_required", "timed_out"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue_12_another_callers_retry_and_a_changed_tool_use_no_url_mode_approval() {
    let log = FixtureLog::new();
    let harness = asking(&log, Duration::from_secs(300)).await;
    let mut alice = client_of(&harness, "alice").await;
    let mut bob = client_of(&harness, "bob").await;
    let arguments = json!({"id": 1, "text": "new"});

    let (approval, state) = ask(&mut alice, "ask", &arguments).await;
    decide(&harness, &approval, ApprovalDecision::Approve).await;
    let stolen = retry(&mut bob, "stolen", &arguments, &state).await;
    assert_eq!(stolen["error"]["code"], -32602, "{stolen}");
    assert!(stolen["error"]["message"].as_str().unwrap_or_default().contains("another caller"), "{stolen}");
    assert_eq!(state_of(&harness, &approval).await, ApprovalState::Approved, "bob used nothing");

    // The upstream edits the definition the person approved; alice's retry lapses it.
    let seen = list_changes(&alice);
    let pulled = alice.call(json!("pull"), "rug_pull", json!({"change": "describe"})).await;
    assert_eq!(text(&pulled), "changed: describe", "{pulled}");
    wait_list_changes(&mut alice, seen).await;
    let lapsed = retry(&mut alice, "yes", &arguments, &state).await;
    assert!(is_error(&lapsed), "{lapsed}");
    assert!(text(&lapsed).contains("changed"), "{lapsed}");
    assert_eq!(state_of(&harness, &approval).await, ApprovalState::Lapsed);
    assert_eq!(fixture_called(&log, "update_record"), 0, "nothing ran");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue_12_a_client_that_declines_the_link_withdraws_its_call() {
    let log = FixtureLog::new();
    let harness = asking(&log, Duration::from_secs(300)).await;
    let mut alice = client_of(&harness, "alice").await;
    let arguments = json!({"id": 1, "text": "new"});
    let (approval, state) = ask(&mut alice, "ask", &arguments).await;
    let extra = json!({"requestState": state, "inputResponses": {CONFIRM: {"action": "decline"}}});
    let declined = alice.request(json!("no"), "tools/call", url_call(&arguments, extra)).await;
    assert!(is_error(&declined), "{declined}");
    assert_eq!(state_of(&harness, &approval).await, ApprovalState::Lapsed, "nothing may decide it any more");
    assert_eq!(fixture_called(&log, "update_record"), 0);
}
