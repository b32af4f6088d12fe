//! The approval queue holds only live calls, and no form answers for the person: a call that stopped waiting (its
//! timeout, a stdio client that cancelled it or went away, the gateway stopping) lapses its approval with the
//! reason, a person's later decision on it is refused as "nothing waits", and a confirmation form carries no
//! default. A client without elicitation is told at once where its call waits, by log line and by progress.

use std::time::Duration;

use serde_json::{Value, json};
use toolgate_core::trust::TrustLevel;
use toolgate_proxy::session::ClientBound;
use toolgate_store::{ApprovalDecision, ApprovalState, AuditFilter, Store, StoreError};

use crate::harness::*;
use crate::support::{FixtureLog, GUARD};

/// Waits until the approval `id` lapsed, and returns why.
async fn wait_lapsed(store: &Store, id: &toolgate_store::ApprovalId) -> String {
    let deadline = tokio::time::Instant::now() + GUARD;
    loop {
        let record = store.approvals().get(id).await.unwrap().expect("the approval exists");
        if record.state == ApprovalState::Lapsed {
            assert!(store.approvals().list_pending().await.unwrap().is_empty(), "a lapsed approval is not listed");
            return record.lapsed_why.expect("a lapsed approval says why");
        }
        assert!(tokio::time::Instant::now() < deadline, "approval {id} never lapsed: {record:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A person's decision on a lapsed approval is refused, naming why it lapsed.
async fn assert_deciding_is_refused(store: &Store, id: &toolgate_store::ApprovalId, why: &str) {
    for decision in [ApprovalDecision::Approve, ApprovalDecision::Deny] {
        match store.approvals().decide(id, decision, "late person").await {
            Err(StoreError::Lapsed { why: stored, .. }) => assert!(stored.contains(why), "{stored}"),
            other => panic!("deciding a lapsed approval: {other:?}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timed_out_call_lapses_its_approval_after_telling_the_client_where_it_waited() {
    let log = FixtureLog::new();
    let harness = Harness::start(vec![rug("rug", &log, TrustLevel::Untrusted)], standard(Duration::from_secs(1))).await;
    let mut client = harness.client(Elicit::None).await;
    client.send(
        json!(1),
        "tools/call",
        json!({"name": "rug_purge_records", "arguments": {}, "_meta": {"progressToken": 42}}),
    );
    let response = client.response(&json!(1)).await;
    assert!(text(&response).contains("nobody approved"), "{response}");
    let related: Vec<&Value> = client
        .all
        .iter()
        .filter_map(|bound| match bound {
            ClientBound::Related { request_id, message } if request_id == &json!(1) => Some(message),
            _ => None,
        })
        .collect();
    let notice = related
        .iter()
        .find(|message| message["method"] == "notifications/message")
        .unwrap_or_else(|| panic!("the client was not told where its call waits: {related:#?}"));
    let data = &notice["params"]["data"];
    let id = toolgate_store::ApprovalId::from_text(data["approval"].as_str().expect("the approval's id"));
    assert_eq!(data["approve"], format!("toolgate approvals approve {id}"), "{notice}");
    assert_eq!(notice["params"]["level"], "warning", "{notice}");
    let progress = related
        .iter()
        .find(|message| message["method"] == "notifications/progress")
        .unwrap_or_else(|| panic!("no progress for the call's token: {related:#?}"));
    assert_eq!(progress["params"]["progressToken"], 42, "the client's own token: {progress}");

    let why = wait_lapsed(&harness.store, &id).await;
    assert!(why.contains("nobody decided within 1 s"), "{why}");
    assert_deciding_is_refused(&harness.other_handle().await, &id, "nobody decided").await;
    assert_eq!(fixture_called(&log, "purge_records"), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_its_client_cancels_or_abandons_or_the_gateway_stops_on_lapses_its_approval() {
    let log = FixtureLog::new();
    let harness = Harness::untrusted_rug(&log).await;
    let person = harness.other_handle().await;

    let mut lapsed = Vec::new();
    // Cancelled by the client.
    let client = harness.client(Elicit::None).await;
    client.start_call(json!(1), "rug_purge_records", json!({"n": 1}));
    let waiting = wait_pending(&harness.store, "rug_purge_records", &json!({"n": 1})).await;
    lapsed.push((waiting.approval.id.clone(), "the client cancelled the call"));
    client.session.deliver(json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                                  "params": {"requestId": 1, "reason": "stop"}}));
    let why = wait_lapsed(&harness.store, &waiting.approval.id).await;
    assert_eq!(why, "the client cancelled the call");
    assert_deciding_is_refused(&person, &waiting.approval.id, "cancelled").await;

    // The client goes away (its session closes, as when a stdio client's process dies).
    let gone = harness.client(Elicit::None).await;
    gone.start_call(json!(2), "rug_purge_records", json!({"n": 2}));
    let waiting = wait_pending(&harness.store, "rug_purge_records", &json!({"n": 2})).await;
    gone.session.close();
    let why = wait_lapsed(&harness.store, &waiting.approval.id).await;
    assert!(why.contains("the client went away"), "{why}");
    lapsed.push((waiting.approval.id.clone(), "the client went away (its session closed)"));
    assert_deciding_is_refused(&person, &waiting.approval.id, "went away").await;

    // The gateway stops while a call waits.
    let last = harness.client(Elicit::None).await;
    last.start_call(json!(3), "rug_purge_records", json!({"n": 3}));
    let waiting = wait_pending(&harness.store, "rug_purge_records", &json!({"n": 3})).await;
    harness.gateway.shutdown().await;
    let why = wait_lapsed(&harness.store, &waiting.approval.id).await;
    assert_eq!(why, "the gateway stopped");
    lapsed.push((waiting.approval.id.clone(), "the gateway stopped"));
    assert_deciding_is_refused(&person, &waiting.approval.id, "stopped").await;
    assert_eq!(fixture_called(&log, "purge_records"), 0, "no lapsed call ran");

    // Every call that stopped waiting, the gateway's stop included, has exactly one row: its `call` row, journaled
    // as the person was asked, completed as `withdrawn` with why (its task completes it once it sees the cancel).
    for (id, why) in &lapsed {
        let deadline = tokio::time::Instant::now() + GUARD;
        let rows = loop {
            harness.store.audit().flush().await.unwrap();
            let rows: Vec<(String, Option<String>, Option<Value>)> = harness
                .store
                .query_audit(&AuditFilter::default())
                .await
                .unwrap()
                .into_iter()
                .filter(|row| row.approval_id.as_deref() == Some(id.as_str()))
                .map(|row| (row.kind, row.outcome, row.detail.and_then(|detail| detail.get("reason").cloned())))
                .collect();
            if !rows.is_empty() || tokio::time::Instant::now() > deadline {
                break rows;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        let wanted = vec![("call".to_owned(), Some("withdrawn".to_owned()), Some(json!(why)))];
        assert_eq!(rows, wanted, "the rows of approval {id}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_confirmation_form_has_no_default_that_could_answer_for_the_person() {
    let log = FixtureLog::new();
    let mut guardrails = standard(Duration::from_secs(60));
    guardrails.confirmation.remember_for_session = true;
    let harness = Harness::start(vec![rug("rug", &log, TrustLevel::Untrusted)], guardrails).await;
    let mut asked =
        Client::connect_declaring(&harness.gateway, Elicit::Manual, json!({"elicitation": {"form": {}}})).await;
    asked.deliver(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                      "params": {"name": "rug_purge_records", "arguments": {}}}));
    let question = asked.wait_for("the question", |message| message["method"] == "elicitation/create").await;
    let schema = &question["params"]["requestedSchema"];
    let properties = schema["properties"].as_object().expect("the form's fields");
    assert!(properties.contains_key("approve") && properties.contains_key("remember"), "{schema}");
    for (name, property) in properties {
        assert!(property.get("default").is_none(), "field {name} has a default: {schema}");
    }
    assert_eq!(schema["required"], json!(["approve"]), "the person must answer: {schema}");
    // A client that submits the form untouched (no content) has not approved anything.
    asked.deliver(json!({"jsonrpc": "2.0", "id": question["id"], "result": {"action": "accept", "content": {}}}));
    let response = asked.wait_for("the call's answer", |message| message["id"] == 1).await;
    assert!(is_error(&response), "{response}");
    assert_eq!(fixture_called(&log, "purge_records"), 0);
}

/// A "remember for this session" approval is for the upstream as it ran: a reload that points it elsewhere (the
/// same program and definitions, another environment, as a database upstream switched from staging to prod would
/// be) restarts it, and the same call in the same session asks the person again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_remembered_approval_does_not_outlive_a_reload_that_restarts_its_upstream() {
    let log = FixtureLog::new();
    let mut guardrails = standard(Duration::from_secs(60));
    guardrails.confirmation.remember_for_session = true;
    let staging = rug("db", &log, TrustLevel::Untrusted);
    let harness = Harness::start(vec![staging.clone()], guardrails).await;
    let mut client =
        Client::connect_declaring(&harness.gateway, Elicit::Manual, json!({"elicitation": {"form": {}}})).await;
    let asks = |message: &Value| message["method"] == "elicitation/create";
    let answers = |id: i64| move |message: &Value| message["id"] == id && message.get("method").is_none();

    client.start_call(json!(1), "db_purge_records", json!({}));
    let question = client.wait_for("the question", asks).await;
    client.deliver(json!({"jsonrpc": "2.0", "id": question["id"],
                          "result": {"action": "accept", "content": {"approve": true, "remember": true}}}));
    let first = client.wait_for("the first answer", answers(1)).await;
    assert!(!is_error(&first), "{first}");
    client.start_call(json!(2), "db_purge_records", json!({}));
    let second =
        client.wait_for("the second answer or a question", |message| asks(message) || answers(2)(message)).await;
    assert!(!asks(&second) && !is_error(&second), "the same call is remembered before the reload: {second}");

    let mut prod = staging.clone();
    if let toolgate_spec::Endpoint::Stdio { env, .. } = &mut prod.endpoint {
        env.push(("DATABASE".to_owned(), "prod".to_owned()));
    }
    let changes = harness.gateway.reload_upstreams(&[prod]).await;
    assert_eq!(changes.len(), 1, "the upstream restarts: {changes:?}");
    wait_tools(&mut client, "the restarted upstream's tools", |tools| names(tools).contains(&"db_purge_records")).await;
    client.start_call(json!(3), "db_purge_records", json!({}));
    let third = client.wait_for("the third answer or a question", |message| asks(message) || answers(3)(message)).await;
    assert!(asks(&third), "the restarted upstream's call asks again: {third}");
    assert_eq!(fixture_called(&log, "purge_records"), 2, "the third call waits for the person");
}
