//! Approvals: single use, bound to the tool fingerprint and argument digest, expiry, and a decision written through
//! a second handle on the same file while the first waits. A failed erase of settled summaries (a full disk) fails
//! neither the write before it nor the calls after it, and the next write erases them. A lapsed approval (its call
//! stopped waiting) leaves the queue and can be neither decided nor used.

use std::time::Duration;

use serde_json::json;
use toolgate_store::{
    ApprovalDecision, ApprovalId, ApprovalWait, ConsumeRefusal, PendingApproval, StoreError, StoreOptions,
    digest_arguments,
};
use toolgate_test_support::pending_approval;

use crate::support::{Kind, Raw, fresh_store, matrix, raw_connection, tamper};

/// The shared fixture with the arguments these tests bind approvals to.
fn pending(expires_in: Duration) -> PendingApproval {
    pending_approval(&json!({"path": "/tmp/a"}), expires_in)
}

fn refusal(result: Result<(), StoreError>) -> ConsumeRefusal {
    match result {
        Err(StoreError::ApprovalRefused { refusal, .. }) => refusal,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

matrix! {
#[tokio::test]
async fn an_approval_is_used_once_for_the_approved_call_only(kind) {
    let (_directory, store) = fresh_store(kind, StoreOptions::default()).await;
    let approvals = store.approvals();
    let request = pending(Duration::from_secs(60));
    approvals.create(&request).await.expect("create");
    assert_eq!(approvals.list_pending().await.expect("list").len(), 1);
    let id = &request.id;
    assert_eq!(
        refusal(approvals.consume(id, "sha256:tool", &request.args_digest).await),
        ConsumeRefusal::NotApproved(toolgate_store::ApprovalState::Pending)
    );
    approvals.decide(id, ApprovalDecision::Approve, "alice").await.expect("decide");
    assert!(approvals.list_pending().await.expect("list").is_empty());
    let again = approvals.decide(id, ApprovalDecision::Deny, "bob").await;
    assert!(matches!(again, Err(StoreError::AlreadyDecided { ref state, .. }) if state == "approved"), "{again:?}");

    let other_args = digest_arguments(&json!({"path": "/etc/passwd"}));
    assert_eq!(refusal(approvals.consume(id, "sha256:tool", &other_args).await), ConsumeRefusal::ArgsMismatch);
    assert_eq!(
        refusal(approvals.consume(id, "sha256:changed", &request.args_digest).await),
        ConsumeRefusal::FingerprintMismatch
    );
    approvals.consume(id, "sha256:tool", &request.args_digest).await.expect("first use");
    assert_eq!(refusal(approvals.consume(id, "sha256:tool", &request.args_digest).await), ConsumeRefusal::AlreadyUsed);
    let unknown = ApprovalId::from_text("no-such-id");
    assert_eq!(
        refusal(approvals.consume(&unknown, "sha256:tool", &request.args_digest).await),
        ConsumeRefusal::NotFound
    );
}
}

matrix! {
#[tokio::test]
async fn an_expired_approval_can_be_neither_decided_nor_used(kind) {
    let (_directory, store) = fresh_store(kind, StoreOptions::default()).await;
    let approvals = store.approvals();
    let request = pending(Duration::from_millis(300));
    approvals.create(&request).await.expect("create");
    approvals.decide(&request.id, ApprovalDecision::Approve, "alice").await.expect("decide");
    let late = pending(Duration::from_millis(300));
    approvals.create(&late).await.expect("create");
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(
        refusal(approvals.consume(&request.id, "sha256:tool", &request.args_digest).await),
        ConsumeRefusal::Expired
    );
    let decided = approvals.decide(&late.id, ApprovalDecision::Approve, "alice").await;
    assert!(matches!(decided, Err(StoreError::Expired(_))), "{decided:?}");
    assert!(approvals.list_pending().await.expect("list").is_empty());
    assert_eq!(approvals.wait(&late.id, Duration::from_secs(5)).await.expect("wait"), ApprovalWait::Expired);
}
}

matrix! {
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_decision_from_another_handle_ends_the_wait(kind) {
    let (directory, gateway) = fresh_store(kind, StoreOptions::default()).await;
    // The CLI's `toolgate approvals approve ID`: another handle (another process in real life) on the same file.
    let cli = directory.open(StoreOptions::default()).await;
    let request = pending(Duration::from_secs(60));
    gateway.approvals().create(&request).await.expect("create");
    let waiting = {
        let approvals = gateway.approvals();
        let id = request.id.clone();
        tokio::spawn(async move { approvals.wait(&id, Duration::from_secs(10)).await })
    };
    tokio::time::sleep(Duration::from_millis(250)).await;
    let listed = cli.approvals().list_pending().await.expect("list");
    assert_eq!(listed.iter().map(|record| &record.approval.id).collect::<Vec<_>>(), [&request.id]);
    assert_eq!(listed[0].approval.caller.as_deref(), Some("agent"), "the caller whose call waits is kept");
    cli.approvals().decide(&request.id, ApprovalDecision::Approve, "alice").await.expect("decide");
    let outcome = waiting.await.expect("task").expect("wait");
    assert_eq!(outcome, ApprovalWait::Approved { by: "alice".into() });
    gateway.approvals().consume(&request.id, "sha256:tool", &request.args_digest).await.expect("use");

    let denied = pending(Duration::from_secs(60));
    gateway.approvals().create(&denied).await.expect("create");
    cli.approvals().decide(&denied.id, ApprovalDecision::Deny, "bob").await.expect("decide");
    let outcome = gateway.approvals().wait(&denied.id, Duration::from_secs(1)).await.expect("wait");
    assert_eq!(outcome, ApprovalWait::Denied { by: "bob".into() });

    let nobody = pending(Duration::from_secs(60));
    gateway.approvals().create(&nobody).await.expect("create");
    let outcome = gateway.approvals().wait(&nobody.id, Duration::from_millis(250)).await.expect("wait");
    assert_eq!(outcome, ApprovalWait::TimedOut);
}
}

#[test]
fn approval_ids_are_random() {
    let ids: std::collections::HashSet<_> = (0..1000).map(|_| ApprovalId::generate()).collect();
    assert_eq!(ids.len(), 1000);
    assert!(ids.iter().all(|id| id.as_str().len() == 32));
}

matrix! {
#[tokio::test]
async fn an_approval_keeps_the_tools_risk_class_or_none(kind) {
    let (_directory, store) = fresh_store(kind, StoreOptions::default()).await;
    let approvals = store.approvals();
    let with_risk = pending(Duration::from_secs(60));
    let without = PendingApproval { id: ApprovalId::generate(), risk: None, ..pending(Duration::from_secs(60)) };
    approvals.create(&with_risk).await.expect("create");
    approvals.create(&without).await.expect("create");
    let read = |id: &ApprovalId| {
        let approvals = approvals.clone();
        let id = id.clone();
        async move { approvals.get(&id).await.expect("get").expect("present").approval.risk }
    };
    assert_eq!(read(&with_risk.id).await, Some(toolgate_store::ToolRisk { level: 4, category: "destructive".into() }));
    assert_eq!(read(&without.id).await, None);
}
}

#[tokio::test]
async fn a_failed_summary_erase_fails_no_write_and_the_next_write_retries_it() {
    let (directory, store) = fresh_store(Kind::Sqlite, StoreOptions::default()).await;
    let approvals = store.approvals();
    let raw = Raw::Sqlite(raw_connection(&directory.database()).await);
    // The erase is the only write that blanks a summary: make exactly it fail, as a full disk would.
    tamper(
        &raw,
        "CREATE TRIGGER fail_erase BEFORE UPDATE OF args_summary ON approvals WHEN NEW.args_summary = '' \
         BEGIN SELECT RAISE(ABORT, 'database or disk is full'); END",
    )
    .await;
    let first = pending(Duration::from_secs(60));
    approvals.create(&first).await.expect("create");
    // The approval is recorded although the erase after it fails (its summary is now settled).
    approvals.decide(&first.id, ApprovalDecision::Approve, "alice").await.expect("the decision stands");
    let second = pending(Duration::from_secs(60));
    approvals.create(&second).await.expect("a call is not refused for an erase");
    approvals.consume(&first.id, "sha256:tool", &first.args_digest).await.expect("consume");
    let kept = approvals.get(&first.id).await.expect("get").expect("recorded");
    assert_eq!(kept.state, toolgate_store::ApprovalState::Consumed);
    assert_eq!(kept.approval.args_summary, r#"{"path":"/tmp/a"}"#, "not erased while the erase fails");

    // Once the disk has room, the next write erases what the failed ones left.
    tamper(&raw, "DROP TRIGGER fail_erase").await;
    approvals.lapse(&second.id, "the call ended").await.expect("lapse");
    for id in [&first.id, &second.id] {
        assert_eq!(approvals.get(id).await.expect("get").expect("recorded").approval.args_summary, "");
    }
}

matrix! {
#[tokio::test]
async fn a_lapsed_approval_leaves_the_queue_and_can_be_neither_decided_nor_used(kind) {
    let (_directory, store) = fresh_store(kind, StoreOptions::default()).await;
    let approvals = store.approvals();
    let waiting = pending(Duration::from_secs(60));
    approvals.create(&waiting).await.expect("create");
    assert!(approvals.lapse(&waiting.id, "the client cancelled the call").await.expect("lapse"));
    assert!(!approvals.lapse(&waiting.id, "again").await.expect("lapse"), "a lapse keeps its first reason");
    let record = approvals.get(&waiting.id).await.expect("get").expect("kept");
    assert_eq!(record.state, toolgate_store::ApprovalState::Lapsed);
    assert_eq!(record.lapsed_why.as_deref(), Some("the client cancelled the call"));
    assert!(approvals.list_pending().await.expect("list").is_empty(), "only live calls are listed");
    match approvals.decide(&waiting.id, ApprovalDecision::Approve, "alice").await {
        Err(StoreError::Lapsed { why, .. }) => assert_eq!(why, "the client cancelled the call"),
        other => panic!("approving a lapsed approval: {other:?}"),
    }
    assert!(approvals.consume(&waiting.id, "sha256:tool", &waiting.args_digest).await.is_err());

    // Approved, then its call ended before using it: lapsed too. Used: left as it is.
    let approved = pending(Duration::from_secs(60));
    approvals.create(&approved).await.expect("create");
    approvals.decide(&approved.id, ApprovalDecision::Approve, "alice").await.expect("approve");
    assert!(approvals.lapse(&approved.id, "the gateway stopped").await.expect("lapse"));
    assert!(approvals.consume(&approved.id, "sha256:tool", &approved.args_digest).await.is_err());
    let used = pending(Duration::from_secs(60));
    approvals.create(&used).await.expect("create");
    approvals.decide(&used.id, ApprovalDecision::Approve, "alice").await.expect("approve");
    approvals.consume(&used.id, "sha256:tool", &used.args_digest).await.expect("consume");
    assert!(!approvals.lapse(&used.id, "late").await.expect("lapse"));
    let record = approvals.get(&used.id).await.expect("get").expect("kept");
    assert_eq!((record.state, record.lapsed_why), (toolgate_store::ApprovalState::Consumed, None));
}
}

/// On PostgreSQL a decision made by another process reaches the waiting one by notification: with the re-read
/// interval far longer than the wait, only the notification can end it with the decision.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_decision_in_another_process_wakes_the_wait_by_notification() {
    let slow = StoreOptions { approval_poll_interval: Duration::from_secs(600), ..StoreOptions::default() };
    let (place, gateway) = fresh_store(Kind::Postgres, slow.clone()).await;
    let console = place.open(slow).await;
    let request = pending(Duration::from_secs(600));
    gateway.approvals().create(&request).await.expect("create");
    let waiting = {
        let approvals = gateway.approvals();
        let id = request.id.clone();
        tokio::spawn(async move { approvals.wait(&id, Duration::from_secs(20)).await })
    };
    // Give the waiter time to read the approval once and start waiting (a decision before that is read directly).
    tokio::time::sleep(Duration::from_millis(500)).await;
    console.approvals().decide(&request.id, ApprovalDecision::Approve, "alice").await.expect("decide");
    let outcome = tokio::time::timeout(Duration::from_secs(15), waiting).await;
    let outcome = outcome.expect("the notification ended the wait").expect("task").expect("wait");
    assert_eq!(outcome, ApprovalWait::Approved { by: "alice".into() });
}
