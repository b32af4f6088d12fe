//! Approvals: single use, bound to arguments, unforgeable, never shown to the client, lapsing when the tool's
//! definition changes while a call waits, and the queue path for clients that cannot show a form.

use std::time::Duration;

use serde_json::{Value, json};
use toolgate_core::trust::TrustLevel;
use toolgate_proxy::session::ClientBound;
use toolgate_store::{
    ApprovalDecision, ApprovalId, AuditFilter, AuditKind, ConsumeRefusal, PendingApproval, StoreError, digest_arguments,
};

use crate::harness::*;
use crate::support::{FixtureLog, message_of};
use toolgate_test_support::pending_approval;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_is_single_use_bound_to_its_arguments_and_cannot_be_forged_in_the_store() {
    let state = tempfile::tempdir().unwrap();
    let store = crate::support::gateway_store(state.path()).await;
    let approvals = store.approvals();
    let (a, b) = (json!({"path": "/tmp/a"}), json!({"path": "/tmp/b"}));
    let pending = PendingApproval { session: "s".into(), risk: None, ..pending_approval(&a, Duration::from_secs(300)) };
    approvals.create(&pending).await.unwrap();

    // Forged: an id nobody issued cannot be approved or used.
    let forged = ApprovalId::from_text("approval-made-up-by-the-model");
    assert!(matches!(
        approvals.decide(&forged, ApprovalDecision::Approve, "model").await,
        Err(StoreError::NotFound(_))
    ));
    let refused = approvals.consume(&forged, "sha256:tool", &digest_arguments(&a)).await;
    assert!(
        matches!(refused, Err(StoreError::ApprovalRefused { refusal: ConsumeRefusal::NotFound, .. })),
        "{refused:?}"
    );

    // Not approved yet: not usable.
    let refused = approvals.consume(&pending.id, "sha256:tool", &digest_arguments(&a)).await;
    assert!(matches!(refused, Err(StoreError::ApprovalRefused { refusal: ConsumeRefusal::NotApproved(_), .. })));

    approvals.decide(&pending.id, ApprovalDecision::Approve, "tester").await.unwrap();
    // Reused for other arguments, or another tool definition: refused, and still usable for what it was for.
    let refused = approvals.consume(&pending.id, "sha256:tool", &digest_arguments(&b)).await;
    assert!(
        matches!(refused, Err(StoreError::ApprovalRefused { refusal: ConsumeRefusal::ArgsMismatch, .. })),
        "{refused:?}"
    );
    let refused = approvals.consume(&pending.id, "sha256:other-tool", &digest_arguments(&a)).await;
    assert!(matches!(refused, Err(StoreError::ApprovalRefused { refusal: ConsumeRefusal::FingerprintMismatch, .. })));
    approvals.consume(&pending.id, "sha256:tool", &digest_arguments(&a)).await.unwrap();
    // Replayed: used once only.
    let refused = approvals.consume(&pending.id, "sha256:tool", &digest_arguments(&a)).await;
    assert!(
        matches!(refused, Err(StoreError::ApprovalRefused { refusal: ConsumeRefusal::AlreadyUsed, .. })),
        "{refused:?}"
    );
    assert!(matches!(
        approvals.decide(&pending.id, ApprovalDecision::Approve, "tester").await,
        Err(StoreError::AlreadyDecided { .. })
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn through_the_gateway_an_approval_is_neither_replayed_nor_reused_nor_forged_by_the_client() {
    let log = FixtureLog::new();
    let harness = Harness::untrusted_rug(&log).await;
    let person = harness.other_handle().await;
    let mut client = harness.client(Elicit::None).await;
    let (a, b) = (json!({"scope": "a"}), json!({"scope": "b"}));

    // Call A waits; a person approves it; it goes through once.
    client.start_call(json!(1), "rug_purge_records", a.clone());
    let first = wait_pending(&harness.store, "rug_purge_records", &a).await;
    // The queued approval carries the tool's risk class, for the console's badge.
    let risk = first.approval.risk.as_ref().expect("the gateway records the risk class");
    assert_eq!((risk.level, risk.category.as_str()), (4, "destructive"), "{risk:?}");
    person.approvals().decide(&first.approval.id, ApprovalDecision::Approve, "tester").await.unwrap();
    let response = client.response(&json!(1)).await;
    assert_eq!(text(&response), "called purge_records", "{response}");
    assert_eq!(fixture_called(&log, "purge_records"), 1);

    // Replay: the identical call needs a new approval (a new id); denied, it does not go through.
    client.start_call(json!(2), "rug_purge_records", a.clone());
    let second = wait_pending(&harness.store, "rug_purge_records", &a).await;
    assert_ne!(second.approval.id, first.approval.id, "a replay gets a fresh approval request");
    person.approvals().decide(&second.approval.id, ApprovalDecision::Deny, "tester").await.unwrap();
    let response = client.response(&json!(2)).await;
    assert!(is_error(&response) && text(&response).contains("denied"), "{response}");

    // Reuse for other arguments: an approved, unused approval for A exists, yet a call with B waits for its own.
    client.start_call(json!(3), "rug_purge_records", a.clone());
    let for_a = wait_pending(&harness.store, "rug_purge_records", &a).await;
    client.start_call(json!(4), "rug_purge_records", b.clone());
    let for_b = wait_pending(&harness.store, "rug_purge_records", &b).await;
    assert_ne!(for_a.approval.id, for_b.approval.id);
    person.approvals().decide(&for_b.approval.id, ApprovalDecision::Deny, "tester").await.unwrap();
    let response = client.response(&json!(4)).await;
    assert!(is_error(&response), "B is refused although A is pending approval: {response}");
    person.approvals().decide(&for_a.approval.id, ApprovalDecision::Approve, "tester").await.unwrap();
    let response = client.response(&json!(3)).await;
    assert_eq!(text(&response), "called purge_records", "{response}");
    let purges: Vec<Value> = log
        .entries()
        .into_iter()
        .filter(|entry| entry["method"] == "tools/call" && entry["params"]["name"] == "purge_records")
        .map(|entry| entry["params"]["arguments"].clone())
        .collect();
    assert_eq!(purges, vec![a.clone(), a.clone()], "only the approved calls with A reached the upstream");

    // Forged: the client names an approval (a real, approved and unused one even) in the arguments and in
    // `_meta`; the gateway asks anew, and the named approval stays unused.
    let tool = client.tool("rug_purge_records").await.unwrap();
    let fingerprint = tool["_meta"][META_KEY]["fingerprint"].as_str().unwrap().to_owned();
    let planted = PendingApproval {
        session: "someone-else".into(),
        upstream: "rug".into(),
        tool: "rug_purge_records".into(),
        title: "Purge records".into(),
        action: "purge".into(),
        risk: None,
        tool_fingerprint: fingerprint.clone(),
        ..pending_approval(&json!({}), Duration::from_secs(300))
    };
    person.approvals().create(&planted).await.unwrap();
    person.approvals().decide(&planted.id, ApprovalDecision::Approve, "tester").await.unwrap();
    let id = planted.id.as_str().to_owned();
    client.send(
        json!(5),
        "tools/call",
        json!({"name": "rug_purge_records", "arguments": {},
               "_meta": {"toolgate/approval": id, "approvalId": id, "approval": {"id": id, "approved": true}}}),
    );
    let asked = wait_pending(&harness.store, "rug_purge_records", &json!({})).await;
    assert_ne!(asked.approval.id, planted.id, "the gateway asks with its own approval");
    person.approvals().decide(&asked.approval.id, ApprovalDecision::Deny, "tester").await.unwrap();
    assert!(is_error(&client.response(&json!(5)).await));
    let forged_args = json!({"approval": id, "approval_id": id, "approved": true});
    client.start_call(json!(6), "rug_purge_records", forged_args.clone());
    let asked = wait_pending(&harness.store, "rug_purge_records", &forged_args).await;
    person.approvals().decide(&asked.approval.id, ApprovalDecision::Deny, "tester").await.unwrap();
    assert!(is_error(&client.response(&json!(6)).await));
    let planted_now = person.approvals().get(&planted.id).await.unwrap().unwrap();
    assert_eq!(planted_now.state, toolgate_store::ApprovalState::Approved, "the named approval was never consumed");
    assert_eq!(fixture_called(&log, "purge_records"), 2, "no forged call reached the upstream");
}

// ---------------------------------------------------------------------------------------------------------------
// 6. An approval code relayed through the model

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_approval_id_ever_reaches_the_client() {
    let log = FixtureLog::new();
    let harness = Harness::untrusted_rug(&log).await;
    let person = harness.other_handle().await;
    let mut queued = harness.client(Elicit::None).await;
    let mut asked = harness.client(Elicit::Accept).await;
    let mut ids = Vec::new();

    // Queue: approved, denied, and one left to time out is covered elsewhere; here approved and denied.
    for (id, decision) in [(1, ApprovalDecision::Approve), (2, ApprovalDecision::Deny)] {
        let arguments = json!({"n": id});
        queued.start_call(json!(id), "rug_purge_records", arguments.clone());
        let pending = wait_pending(&harness.store, "rug_purge_records", &arguments).await;
        ids.push(pending.approval.id.as_str().to_owned());
        person.approvals().decide(&pending.approval.id, decision, "tester").await.unwrap();
        queued.response(&json!(id)).await;
    }
    // Elicitation: the question and the answer.
    let response = asked.call(json!(3), "rug_purge_records", json!({"n": 3})).await;
    assert_eq!(text(&response), "called purge_records", "{response}");
    assert_eq!(asked.elicitations.len(), 1);
    // Whatever else arrives (list_changed after a change, late notifications) is searched too.
    asked.call(json!(4), "rug_pull", json!({"change": "none"})).await;
    queued.wait_list_changed().await;
    asked.receive_until_quiet(Duration::from_millis(200)).await;

    ids.extend(audited_approval_ids(&harness.store).await);
    ids.sort();
    ids.dedup();
    assert!(ids.len() >= 2, "the queue issued approval ids: {ids:?}");
    // The queued client was told where its calls wait: toolgate's own log line naming the approval and the command
    // a person runs. That locator approves nothing (deciding needs the store or a console login), and it never
    // travels in anything the model reads as a result; everything else is searched as before.
    let notices = queued.all.iter().filter(|bound| is_waiting_notice(bound)).count();
    assert_eq!(notices, 2, "each queued call was told where it waits");
    for client in [&queued, &asked] {
        let everything = everything_but_waiting_notices(client);
        assert!(!everything.is_empty());
        for id in &ids {
            assert!(!everything.contains(id.as_str()), "approval id {id} reached the client:\n{everything}");
        }
    }
}

/// toolgate's notice that a call waits in the approval queue (a log line with logger `toolgate`).
fn is_waiting_notice(bound: &ClientBound) -> bool {
    matches!(bound, ClientBound::Related { message, .. }
        if message["method"] == "notifications/message" && message["params"]["logger"] == "toolgate")
}

/// [`Client::everything`] without toolgate's waiting notices.
fn everything_but_waiting_notices(client: &Client) -> String {
    client
        .all
        .iter()
        .filter(|bound| !is_waiting_notice(bound))
        .map(|bound| message_of(bound).to_string())
        .collect::<Vec<_>>()
        .join("\n")
}

// ---------------------------------------------------------------------------------------------------------------
// 7. A client without elicitation gets the queue

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_elicitation_a_call_waits_in_the_queue_and_is_let_through_denied_or_timed_out() {
    let log = FixtureLog::new();
    let harness = Harness::untrusted_rug(&log).await;
    let person = harness.other_handle().await;
    let mut client = harness.client(Elicit::None).await;

    client.start_call(json!(1), "rug_purge_records", json!({"n": 1}));
    let pending = wait_pending(&harness.store, "rug_purge_records", &json!({"n": 1})).await;
    assert_eq!(client.waiting_responses(), 0, "the call waits");
    assert_eq!(fixture_called(&log, "purge_records"), 0, "nothing forwarded before the approval");
    person.approvals().decide(&pending.approval.id, ApprovalDecision::Approve, "tester").await.unwrap();
    let response = client.response(&json!(1)).await;
    assert_eq!(text(&response), "called purge_records", "{response}");

    client.start_call(json!(2), "rug_purge_records", json!({"n": 2}));
    let pending = wait_pending(&harness.store, "rug_purge_records", &json!({"n": 2})).await;
    person.approvals().decide(&pending.approval.id, ApprovalDecision::Deny, "tester").await.unwrap();
    let response = client.response(&json!(2)).await;
    assert!(is_error(&response), "{response}");
    assert!(text(&response).contains("denied"), "{response}");
    assert_eq!(fixture_called(&log, "purge_records"), 1);

    // The audit log has each call once, with its approval id: the approved one forwarded, the denied one not.
    harness.store.audit().flush().await.unwrap();
    let calls = harness
        .store
        .query_audit(&AuditFilter { kind: Some(AuditKind::Call), ..AuditFilter::default() })
        .await
        .unwrap();
    let purge_calls: Vec<_> = calls
        .iter()
        .filter(|row| row.tool.as_deref() == Some("rug_purge_records"))
        .map(|row| (row.outcome.as_deref(), row.approval_id.is_some()))
        .collect();
    assert_eq!(purge_calls, [(Some("ok"), true), (Some("denied"), true)], "{calls:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queued_call_nobody_decides_is_refused_at_the_timeout() {
    let log = FixtureLog::new();
    let harness = Harness::start(vec![rug("rug", &log, TrustLevel::Untrusted)], standard(Duration::from_secs(1))).await;
    let mut client = harness.client(Elicit::None).await;
    let response = client.call(json!(1), "rug_purge_records", json!({})).await;
    assert!(is_error(&response), "{response}");
    assert!(text(&response).contains("nobody approved"), "{response}");
    assert_eq!(fixture_called(&log, "purge_records"), 0);
    // A late approval of the expired wait does not make the call happen after all.
    let ids = audited_approval_ids(&harness.store).await;
    assert_eq!(ids.len(), 1, "{ids:?}");
    let _ = harness
        .other_handle()
        .await
        .approvals()
        .decide(&ApprovalId::from_text(&ids[0]), ApprovalDecision::Approve, "late")
        .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(fixture_called(&log, "purge_records"), 0);
}

// ---------------------------------------------------------------------------------------------------------------
// 8. A definition that changes while a call waits for a person

/// Numbers beyond what a double holds (`1e400`) are kept by serde_json; every such definition once got one shared
/// stand-in fingerprint, so two tools passed for each other and a swap while a person approved went unnoticed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn definitions_with_numbers_beyond_a_double_keep_their_own_fingerprints_and_lapse_when_swapped() {
    let log = FixtureLog::new();
    let harness = asking_about_update_record(&log).await;
    let person = harness.other_handle().await;
    let mut waiting = harness.client(Elicit::None).await;
    let mut puller = harness.client(Elicit::None).await;

    pull(&mut puller, "huge").await;
    let fingerprint = |tool: &Value| tool["_meta"][META_KEY]["fingerprint"].as_str().unwrap_or_default().to_owned();
    let update = puller.tool("rug_update_record").await.expect("listed");
    let read = puller.tool("rug_read_records").await.expect("listed");
    assert!(update.to_string().contains("1e+400") || update.to_string().contains("1e400"), "{update}");
    assert!(fingerprint(&update).starts_with("sha256:"), "{update}");
    assert_ne!(fingerprint(&update), fingerprint(&read), "two definitions never share a fingerprint");

    let arguments = json!({"id": 7});
    waiting.start_call(json!(1), "rug_update_record", arguments.clone());
    let pending = wait_pending(&harness.store, "rug_update_record", &arguments).await;
    assert_eq!(pending.approval.tool_fingerprint, fingerprint(&update));
    // While it waits, the upstream swaps the definition (keeping 1e400 in its schema). A fresh session pulls (the
    // default guardrails ask a person about the first puller's second pull).
    let mut puller = harness.client(Elicit::None).await;
    pull(&mut puller, "describe").await;
    let now = puller.tool("rug_update_record").await.expect("still listed");
    assert_ne!(fingerprint(&now), fingerprint(&update), "the swapped definition has another fingerprint");

    person.approvals().decide(&pending.approval.id, ApprovalDecision::Approve, "tester").await.unwrap();
    let response = waiting.response(&json!(1)).await;
    assert!(text(&response).contains("changed while"), "{response}");
    assert_eq!(fixture_called(&log, "update_record"), 0, "the approval of the old definition ran nothing");
    assert_tool_changed_row(&harness, pending.approval.id.as_str()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_lapses_when_the_tool_definition_changes_while_the_call_waits() {
    let log = FixtureLog::new();
    let harness = asking_about_update_record(&log).await;
    let person = harness.other_handle().await;
    let mut waiting = harness.client(Elicit::None).await;
    let mut puller = harness.client(Elicit::None).await;

    let arguments = json!({"id": 7});
    waiting.start_call(json!(1), "rug_update_record", arguments.clone());
    let pending = wait_pending(&harness.store, "rug_update_record", &arguments).await;
    // While it waits, the upstream swaps the definition the person is about to approve.
    pull(&mut puller, "describe").await;
    let now = puller.tool("rug_update_record").await.expect("still listed");
    assert_ne!(
        now["_meta"][META_KEY]["fingerprint"].as_str(),
        Some(pending.approval.tool_fingerprint.as_str()),
        "the listed definition is not the one waiting for approval"
    );

    person.approvals().decide(&pending.approval.id, ApprovalDecision::Approve, "tester").await.unwrap();
    let response = waiting.response(&json!(1)).await;
    assert!(is_error(&response), "{response}");
    assert!(text(&response).contains("changed while"), "{response}");
    assert_eq!(fixture_called(&log, "update_record"), 0, "the approval of the old definition ran nothing");

    assert_tool_changed_row(&harness, pending.approval.id.as_str()).await;
    let calls = harness
        .store
        .query_audit(&AuditFilter { kind: Some(AuditKind::Call), ..AuditFilter::default() })
        .await
        .unwrap();
    let update_calls: Vec<Option<&str>> = calls
        .iter()
        .filter(|row| row.tool.as_deref() == Some("rug_update_record"))
        .map(|row| row.outcome.as_deref())
        .collect();
    assert_eq!(update_calls, [Some("tool_changed")], "one row, of a call that was not forwarded: {calls:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_elicitation_accepted_after_the_definition_changed_runs_nothing() {
    let log = FixtureLog::new();
    let harness = asking_about_update_record(&log).await;
    let mut asked =
        Client::connect_declaring(&harness.gateway, Elicit::Manual, json!({"elicitation": {"form": {}}})).await;
    let mut puller = harness.client(Elicit::None).await;

    asked.deliver(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                      "params": {"name": "rug_update_record", "arguments": {"id": 8}}}));
    let question = asked.wait_for("the question", |message| message["method"] == "elicitation/create").await;
    // The person is still reading the question when the upstream swaps the definition.
    let seen = list_changes(&puller);
    puller.call(json!("pull"), "rug_pull", json!({"change": "describe"})).await;
    wait_list_changes(&mut puller, seen).await;
    asked.deliver(json!({"jsonrpc": "2.0", "id": question["id"],
                      "result": {"action": "accept", "content": {"approve": true}}}));
    let response = asked.wait_for("the call's answer", |message| message["id"] == 1).await;
    assert!(is_error(&response), "{response}");
    assert!(text(&response).contains("changed while"), "{response}");
    assert_eq!(fixture_called(&log, "update_record"), 0, "the yes to the old definition ran nothing");
}

// ---------------------------------------------------------------------------------------------------------------
// 9. Which declared elicitation gets a form

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_a_client_that_declared_form_elicitation_is_asked_with_a_form() {
    let log = FixtureLog::new();
    let harness = Harness::untrusted_rug(&log).await;
    let person = harness.other_handle().await;
    // 2025-11-25: `{}` means form (as before modes existed); `url` alone means the client cannot show a form.
    let cases = [
        (json!({}), "form"),
        (json!({"form": {}}), "form"),
        (json!({"form": {}, "url": {}}), "form"),
        (json!({"url": {}}), "queue"),
    ];
    for (n, (elicitation, expected)) in cases.into_iter().enumerate() {
        let mut session =
            Client::connect_declaring(&harness.gateway, Elicit::Manual, json!({"elicitation": elicitation})).await;
        let arguments = json!({"case": n});
        session.deliver(json!({"jsonrpc": "2.0", "id": n, "method": "tools/call",
                            "params": {"name": "rug_purge_records", "arguments": arguments}}));
        let digest = digest_arguments(&arguments);
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        let how = loop {
            if let Some(message) = session.next_message(Duration::from_millis(50)).await {
                if message["method"] == "elicitation/create" {
                    session.deliver(json!({"jsonrpc": "2.0", "id": message["id"], "result": {"action": "decline"}}));
                    break "form";
                }
                // A queued call's client is told where it waits; anything else is unexpected.
                assert_eq!(message["method"], "notifications/message", "unexpected message for {elicitation}");
                continue;
            }
            let queued = harness.store.approvals().list_pending().await.unwrap();
            if let Some(record) = queued.into_iter().find(|record| record.approval.args_digest == digest) {
                person.approvals().decide(&record.approval.id, ApprovalDecision::Deny, "tester").await.unwrap();
                break "queue";
            }
            assert!(tokio::time::Instant::now() < deadline, "neither asked nor queued for {elicitation}");
        };
        assert_eq!(how, expected, "capabilities.elicitation = {elicitation}");
        let response = loop {
            if let Some(message) = session.next_message(Duration::from_millis(50)).await
                && message["method"] != "notifications/message"
            {
                break message;
            }
            assert!(tokio::time::Instant::now() < deadline, "no answer for {elicitation}");
        };
        assert!(is_error(&response), "{response}");
    }
    assert_eq!(fixture_called(&log, "purge_records"), 0);
}

/// A gateway over the rug-pull fixture (untrusted) whose `update_record` asks a person and whose `rug_pull` runs.
async fn asking_about_update_record(log: &FixtureLog) -> Harness {
    let mut guardrails = standard(Duration::from_secs(60));
    guardrails.policy = policy(json!({"rule": [
        {"id": "control", "effect": "allow", "match": {"tool": "rug_pull"}},
        {"id": "ask", "effect": "confirm", "match": {"tool": "update_record"}}
    ]}));
    Harness::start(vec![rug("rug", log, TrustLevel::Untrusted)], guardrails).await
}

/// Has the fixture change its definitions (`change`) through `puller`, and waits until `puller` hears of it.
async fn pull(puller: &mut Client, change: &str) {
    let seen = list_changes(puller);
    let response = puller.call(json!(change), "rug_pull", json!({"change": change})).await;
    assert_eq!(text(&response), format!("changed: {change}"), "{response}");
    wait_list_changes(puller, seen).await;
}

/// Asserts the audit log holds the call row of `approval_id` completed as `tool_changed`: the swap was caught.
async fn assert_tool_changed_row(harness: &Harness, approval_id: &str) {
    harness.store.audit().flush().await.unwrap();
    let rows = harness
        .store
        .query_audit(&AuditFilter { kind: Some(AuditKind::Call), ..AuditFilter::default() })
        .await
        .unwrap();
    assert!(
        rows.iter().any(
            |row| row.approval_id.as_deref() == Some(approval_id) && row.outcome.as_deref() == Some("tool_changed")
        ),
        "the swap is caught as tool_changed: {rows:#?}"
    );
}
