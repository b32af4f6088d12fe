//! `toolgate approvals`: a pending approval created through the store is listed, then approved or denied from the
//! command line while a waiter (as the gateway) observes the decision; unknown and expired ids exit 2. A decision
//! whose summary erase fails (a full disk) is still reported as recorded.

use std::time::Duration;

use serde_json::{Value, json};
use toolgate_store::{ApprovalWait, PendingApproval};
use toolgate_test_support::pending_approval;

use crate::support::{dir, fresh_state, tamper, toolgate_async};

/// The shared fixture with the arguments these tests look for in `toolgate approvals list`.
fn pending(expires_in: Duration) -> PendingApproval {
    pending_approval(&json!({"path": "/tmp/report.txt", "force": true}), expires_in)
}

#[tokio::test(flavor = "multi_thread")]
async fn list_then_approve_while_the_gateway_waits() {
    let (directory, store) = fresh_state().await;
    let request = pending(Duration::from_secs(300));
    store.approvals().create(&request).await.expect("create");

    let list = toolgate_async(&["approvals", "list", "--state-dir", dir(&directory)]).await;
    assert_eq!(list.code, Some(0), "{list:?}");
    for expected in [request.id.as_str(), "Delete file: delete a file", "upstream files, tool delete_file"] {
        assert!(list.stdout.contains(expected), "{expected}: {}", list.stdout);
    }
    assert!(list.stdout.contains(r#"arguments: path="/tmp/report.txt", force=true"#), "{}", list.stdout);
    assert!(list.stdout.contains("risk 4 (destructive)"), "the risk stored with the approval: {}", list.stdout);

    let json_list = toolgate_async(&["approvals", "list", "--json", "--state-dir", dir(&directory)]).await;
    let entry: Value = serde_json::from_str(json_list.stdout.trim()).expect("one JSON line");
    assert_eq!(entry["id"], request.id.as_str());
    assert_eq!(entry["state"], "pending");
    assert_eq!((&entry["risk_level"], &entry["category"]), (&json!(4), &json!("destructive")));

    let approvals = store.approvals();
    let id = request.id.clone();
    let waiter = tokio::spawn(async move { approvals.wait(&id, Duration::from_secs(60)).await });
    let approve = toolgate_async(&["approvals", "approve", request.id.as_str(), "--state-dir", dir(&directory)]).await;
    assert_eq!(approve.code, Some(0), "{approve:?}");
    assert!(approve.stdout.starts_with(&format!("approved {} by tester", request.id)), "{}", approve.stdout);
    let seen = waiter.await.expect("waiter").expect("wait");
    assert_eq!(seen, ApprovalWait::Approved { by: "tester".into() });

    let again = toolgate_async(&["approvals", "deny", request.id.as_str(), "--state-dir", dir(&directory)]).await;
    assert_eq!(again.code, Some(2), "{again:?}");
    assert!(again.stderr.contains("is already approved"), "{}", again.stderr);
    let empty = toolgate_async(&["approvals", "list", "--state-dir", dir(&directory)]).await;
    assert_eq!(empty.stdout, "no approvals are waiting\n");
    store.close().await.expect("close");
}

#[tokio::test(flavor = "multi_thread")]
async fn deny_records_who_and_bad_ids_say_why() {
    let (directory, store) = fresh_state().await;
    let request = pending(Duration::from_secs(300));
    store.approvals().create(&request).await.expect("create");
    let approvals = store.approvals();
    let id = request.id.clone();
    let waiter = tokio::spawn(async move { approvals.wait(&id, Duration::from_secs(60)).await });
    let deny =
        toolgate_async(&["approvals", "deny", request.id.as_str(), "--by", "alice", "--state-dir", dir(&directory)])
            .await;
    assert_eq!(deny.code, Some(0), "{deny:?}");
    assert_eq!(waiter.await.expect("waiter").expect("wait"), ApprovalWait::Denied { by: "alice".into() });
    let audit = toolgate_async(&["audit", "--json", "--state-dir", dir(&directory)]).await;
    let row: serde_json::Value = serde_json::from_str(audit.stdout.trim()).expect("one JSON row");
    assert_eq!((row["kind"].as_str(), row["outcome"].as_str()), (Some("confirmation"), Some("denied")), "{row}");
    assert_eq!(row["approval_id"], request.id.as_str());
    assert_eq!(row["detail"]["decided_by"], "alice");

    let unknown = toolgate_async(&["approvals", "approve", "nope", "--state-dir", dir(&directory)]).await;
    assert_eq!(unknown.code, Some(2), "{unknown:?}");
    assert!(unknown.stderr.contains("no approval with id nope"), "{}", unknown.stderr);

    let expiring = pending(Duration::from_millis(200));
    store.approvals().create(&expiring).await.expect("create");
    tokio::time::sleep(Duration::from_millis(400)).await;
    let late = toolgate_async(&["approvals", "approve", expiring.id.as_str(), "--state-dir", dir(&directory)]).await;
    assert_eq!(late.code, Some(2), "{late:?}");
    assert!(late.stderr.contains("has expired"), "{}", late.stderr);
    store.close().await.expect("close");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_approval_stored_without_its_risk_says_so_when_nothing_else_knows() {
    let (directory, store) = fresh_state().await;
    // As approvals were stored before the risk was: no risk, and no decision row or pin to work it out from.
    let request = PendingApproval { risk: None, ..pending(Duration::from_secs(300)) };
    store.approvals().create(&request).await.expect("create");
    let list = toolgate_async(&["approvals", "list", "--state-dir", dir(&directory)]).await;
    assert_eq!(list.code, Some(0), "{list:?}");
    assert!(list.stdout.contains("risk unknown"), "{}", list.stdout);
}

#[tokio::test(flavor = "multi_thread")]
async fn an_approval_whose_summary_erase_fails_is_reported_as_recorded() {
    let (directory, store) = fresh_state().await;
    let request = pending(Duration::from_secs(300));
    store.approvals().create(&request).await.expect("create");
    // Only the erase of a settled summary fails, as on a full disk; the decision itself is written.
    let database = directory.path().join(toolgate_store::DATABASE_FILE);
    tamper(
        &database,
        "CREATE TRIGGER fail_erase BEFORE UPDATE OF args_summary ON approvals WHEN NEW.args_summary = '' \
         BEGIN SELECT RAISE(ABORT, 'database or disk is full'); END",
    )
    .await;
    let approve = toolgate_async(&["approvals", "approve", request.id.as_str(), "--state-dir", dir(&directory)]).await;
    assert_eq!(approve.code, Some(0), "{approve:?}");
    assert!(approve.stdout.starts_with(&format!("approved {} by tester", request.id)), "{}", approve.stdout);
    let record = store.approvals().get(&request.id).await.expect("get").expect("recorded");
    assert_eq!(record.state, toolgate_store::ApprovalState::Approved);
    assert!(approve.stderr.contains("summaries could not be erased"), "the failure is logged: {}", approve.stderr);
    store.close().await.expect("close");
}
