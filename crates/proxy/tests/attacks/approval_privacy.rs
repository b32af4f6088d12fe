//! With arguments kept as digests (the default), an approval's clear argument summary lives only while a person
//! may need to read it (issue 10): once decided, or once nobody waits for it, the queue no longer holds it.

use std::time::Duration;

use serde_json::json;
use toolgate_core::trust::TrustLevel;
use toolgate_store::{ApprovalDecision, ApprovalState};

use crate::harness::*;
use crate::support::FixtureLog;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_digest_mode_an_approvals_arguments_are_erased_once_decided_or_abandoned() {
    let log = FixtureLog::new();
    let harness = Harness::start(vec![rug("rug", &log, TrustLevel::Untrusted)], standard(Duration::from_secs(5))).await;
    let person = harness.other_handle().await;
    let mut client = harness.client(Elicit::None).await;

    let decided_arguments = json!({"n": 1, "token": "sk-live-7f3a9c"});
    client.start_call(json!(1), "rug_purge_records", decided_arguments.clone());
    let pending = wait_pending(&harness.store, "rug_purge_records", &decided_arguments).await;
    assert!(pending.approval.args_summary.contains("sk-live-7f3a9c"), "the person reads the arguments: {pending:?}");
    // The queue names whose call waits (the session's caller identity), so the console can refuse self-approval.
    assert!(pending.approval.caller.as_deref().is_some_and(|caller| !caller.is_empty()), "{pending:?}");
    person.approvals().decide(&pending.approval.id, ApprovalDecision::Approve, "tester").await.unwrap();
    let response = client.response(&json!(1)).await;
    assert_eq!(text(&response), "called purge_records", "{response}");
    let decided = harness.store.approvals().get(&pending.approval.id).await.unwrap().unwrap();
    assert_eq!(decided.state, ApprovalState::Consumed);
    assert!(!decided.approval.args_summary.contains("sk-live"), "kept after the decision: {decided:?}");

    // Nobody decides: once the call stops waiting, the approval is withdrawn and its summary erased.
    let abandoned_arguments = json!({"n": 2, "token": "sk-live-0d41e2"});
    client.start_call(json!(2), "rug_purge_records", abandoned_arguments.clone());
    let pending = wait_pending(&harness.store, "rug_purge_records", &abandoned_arguments).await;
    let response = client.response(&json!(2)).await;
    assert!(is_error(&response), "{response}");
    let abandoned = harness.store.approvals().get(&pending.approval.id).await.unwrap().unwrap();
    assert!(!abandoned.approval.args_summary.contains("sk-live"), "kept after nobody waits: {abandoned:?}");
    let listed = harness.store.approvals().list_pending().await.unwrap();
    assert!(listed.iter().all(|record| record.approval.id != pending.approval.id), "withdrawn: {listed:?}");
    // The digests still bind what was approved.
    assert_eq!(decided.approval.args_digest, toolgate_store::digest_arguments(&decided_arguments));
}
