//! A broken store while a call waits for a person, attacked for what it tells the client: the store's error names
//! disks, hosts and schema, which are the operator's to read (the log and the call's audit row), never the model's.
//! The approval cannot be queued, or a person's approval cannot be used: each call is refused with a generic
//! reason, runs nothing, and its row keeps the store's error. (A retry's request state the store cannot check is in
//! `round_trip`.)

use std::time::Duration;

use serde_json::{Value, json};
use toolgate_core::trust::TrustLevel;
use toolgate_store::{AuditFilter, AuditKind};

use crate::harness::*;
use crate::support::{FixtureLog, STORE_SECRET, break_store};

/// A gateway over the rug-pull fixture whose `update_record` asks a person (through the queue: the client cannot
/// be asked).
async fn asking(log: &FixtureLog) -> Harness {
    let mut guardrails = standard(Duration::from_secs(60));
    guardrails.policy =
        policy(json!({"rule": [{"id": "ask", "effect": "confirm", "match": {"tool": "update_record"}}]}));
    Harness::start(vec![rug("rug", log, TrustLevel::Untrusted)], guardrails).await
}

/// Asserts the client read nothing of the store's error.
fn assert_no_store_detail(response: &Value) {
    let seen = response.to_string().to_lowercase();
    for secret in [STORE_SECRET, "secret-volume", "db-host", "approvals", "sqlite", "trigger"] {
        assert!(!seen.contains(&secret.to_lowercase()), "{secret} reached the client: {response}");
    }
}

/// The detail of the one `update_record` call row with `outcome`.
async fn row_detail(harness: &Harness, outcome: &str) -> Value {
    harness.store.audit().flush().await.unwrap();
    let filter = AuditFilter { kind: Some(AuditKind::Call), ..AuditFilter::default() };
    let rows = harness.store.query_audit(&filter).await.unwrap();
    let row = rows
        .iter()
        .find(|row| row.tool.as_deref() == Some("rug_update_record") && row.outcome.as_deref() == Some(outcome))
        .unwrap_or_else(|| panic!("no {outcome} row: {rows:#?}"));
    row.detail.clone().unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue_12_an_approval_the_store_cannot_queue_tells_the_model_nothing_of_the_stores_error() {
    let log = FixtureLog::new();
    let harness = asking(&log).await;
    let mut client = harness.client(Elicit::None).await;
    break_store(harness.state.path(), "broken_queue", "INSERT ON approvals").await;
    let refused = client.call(json!("queue"), "rug_update_record", json!({"id": 1, "text": "new"})).await;
    assert!(is_error(&refused), "{refused}");
    assert!(text(&refused).contains("cannot queue the approval"), "{refused}");
    assert_no_store_detail(&refused);
    assert_eq!(fixture_called(&log, "update_record"), 0);
    let detail = row_detail(&harness, "cannot_queue").await;
    assert!(detail["error"].as_str().unwrap_or_default().contains(STORE_SECRET), "the row keeps it: {detail}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue_12_an_approval_the_store_cannot_use_tells_the_model_nothing_of_the_stores_error() {
    let log = FixtureLog::new();
    let harness = asking(&log).await;
    let mut client = harness.client(Elicit::None).await;
    let arguments = json!({"id": 1, "text": "new"});
    client.send(json!("queued"), "tools/call", json!({"name": "rug_update_record", "arguments": arguments}));
    let pending = wait_pending(&harness.store, "rug_update_record", &arguments).await;
    // The person's decision is written; using it for the call is what fails.
    let consuming = "UPDATE OF state ON approvals WHEN NEW.state = 'consumed'";
    break_store(harness.state.path(), "broken_consume", consuming).await;
    harness
        .other_handle()
        .await
        .approvals()
        .decide(&pending.approval.id, toolgate_store::ApprovalDecision::Approve, "tester")
        .await
        .unwrap();
    let refused = client.response(&json!("queued")).await;
    assert!(is_error(&refused), "{refused}");
    assert!(text(&refused).contains("could not be used"), "{refused}");
    assert_no_store_detail(&refused);
    assert_eq!(fixture_called(&log, "update_record"), 0);
    let detail = row_detail(&harness, "approval_unusable").await;
    assert!(detail["error"].as_str().unwrap_or_default().contains(STORE_SECRET), "the row keeps it: {detail}");
}
