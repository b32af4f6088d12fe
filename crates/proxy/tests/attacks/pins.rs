//! Trust and pinning: an untrusted read-only claim on a deleting tool, rug pulls through `list_changed` on a
//! pinned upstream, quarantine modes (an unreviewed definition is never believed, so neither read-only mode nor a
//! deny rule can be slipped past by it), and the release of an approved change.

use std::time::Duration;

use serde_json::json;
use toolgate_core::normalize::normalize_annotations;
use toolgate_core::trust::TrustLevel;
use toolgate_core::{HintOverrides, ToolDefinition, resolve_hints};
use toolgate_spec::{GuardrailSpec, PinSpec, Quarantine};
use toolgate_store::{AuditFilter, AuditKind, ToolSnapshot};

use crate::harness::*;
use crate::support::FixtureLog;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_untrusted_read_only_claim_on_a_deleting_tool_is_rejected_and_its_call_is_not_simply_allowed() {
    let log = FixtureLog::new();
    let harness = Harness::start(vec![rug("rug", &log, TrustLevel::Untrusted)], standard(Duration::from_secs(2))).await;
    let mut client = harness.client(Elicit::None).await;

    let purge = client.tool("rug_purge_records").await.expect("purge_records is listed");
    assert_eq!(purge["annotations"]["readOnlyHint"], json!(false), "{purge}");
    assert_eq!(purge["_meta"][META_KEY]["rules"]["readOnlyHint"], "declared-relaxing-rejected", "{purge}");
    assert_eq!(purge["_meta"][META_KEY]["trust"], "untrusted");

    // No person answers: the call waits in the queue and is refused at the timeout; nothing reaches the upstream.
    let arguments = json!({});
    client.start_call(json!(1), "rug_purge_records", arguments.clone());
    let pending = wait_pending(&harness.store, "rug_purge_records", &arguments).await;
    assert_eq!(pending.approval.upstream, "rug");
    let response = client.response(&json!(1)).await;
    assert!(is_error(&response), "{response}");
    assert!(text(&response).contains("nobody approved"), "{response}");

    // A client that can be asked, and declines: refused too.
    let mut asked = harness.client(Elicit::Decline).await;
    let response = asked.call(json!(2), "rug_purge_records", json!({})).await;
    assert!(is_error(&response), "{response}");
    assert!(text(&response).contains("the user declin"), "{response}");
    assert_eq!(asked.elicitations.len(), 1, "the person was asked once");

    assert_eq!(fixture_called(&log, "purge_records"), 0, "the deleting tool was never called: {:?}", log.entries());
    harness.store.audit().flush().await.unwrap();
    let rows = harness.store.query_audit(&AuditFilter::default()).await.unwrap();
    let calls: Vec<(&str, Option<&str>, Option<&str>)> = rows
        .iter()
        .filter(|row| row.tool.as_deref() == Some("rug_purge_records"))
        .map(|row| (row.kind.as_str(), row.verdict.as_deref(), row.outcome.as_deref()))
        .collect();
    assert_eq!(
        calls,
        [("call", Some("confirm"), Some("timed_out")), ("call", Some("confirm"), Some("declined"))],
        "each call on purge_records was put to a person and has one row saying why it was not made"
    );
}

// ---------------------------------------------------------------------------------------------------------------
// 2. A rug pull through list_changed on a pinned upstream

/// Starts a pinned rug-pull upstream once so every tool is proposed, approves every proposal (as `toolgate pins
/// approve` would), then starts the gateway under test on the same store: every tool now matches its pin.
pub(crate) async fn pinned_and_approved(log: &FixtureLog, pins: PinSpec, timeout: Duration) -> Harness {
    let mut guardrails = standard(timeout);
    guardrails.pins = pins;
    pinned_and_approved_with(log, guardrails).await
}

/// [`pinned_and_approved`] with any guardrails.
pub(crate) async fn pinned_and_approved_with(log: &FixtureLog, guardrails: GuardrailSpec) -> Harness {
    let first = Harness::start(vec![rug("rug", log, TrustLevel::Pinned)], guardrails.clone()).await;
    let mut client = first.client(Elicit::None).await;
    let listed = client.tools().await;
    match guardrails.pins.quarantine {
        Quarantine::Hide => assert!(listed.is_empty(), "a pinned upstream's unreviewed tools are hidden: {listed:#?}"),
        // Listed (as far as the policy shows them), and nothing a person has not reviewed is believed.
        Quarantine::ConfirmOnly => {
            for tool in &listed {
                let record = &tool["_meta"][META_KEY];
                assert_eq!((&record["trust"], &record["quarantined"]), (&json!("untrusted"), &json!(true)), "{tool}");
            }
        }
    }
    let pending = first.store.pins().list_pending().await.unwrap();
    assert_eq!(pending.len(), 4, "every new tool waits for review: {pending:#?}");
    let reviewer = first.other_handle().await;
    for change in &pending {
        let proposed = &change.proposed;
        reviewer
            .pins()
            .approve_pending(&proposed.upstream, &proposed.tool, &proposed.fingerprint.whole, "tester")
            .await
            .unwrap();
    }
    first.gateway.shutdown().await;
    let gateway = start_gateway(vec![rug("rug", log, TrustLevel::Pinned)], guardrails, &first.store).await;
    Harness { gateway, store: first.store, state: first.state }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rug_pull_through_list_changed_is_quarantined_until_approved_and_tightening_is_accepted() {
    let log = FixtureLog::new();
    let harness = pinned_and_approved(&log, PinSpec::default(), Duration::from_secs(2)).await;
    let mut client = harness.client(Elicit::Accept).await;
    let tools = client.tools().await;
    assert_eq!(names(&tools).len(), 4, "every approved tool is listed: {:?}", names(&tools));
    let update = client.tool("rug_update_record").await.unwrap();
    assert_eq!(update["annotations"]["readOnlyHint"], json!(false));
    assert_eq!(update["_meta"][META_KEY]["rules"]["readOnlyHint"], "declared-trusted");

    // The rug pull: update_record now claims to be read-only.
    let response = client.call(json!("pull"), "rug_pull", json!({"change": "relax"})).await;
    assert_eq!(text(&response), "changed: relax", "{response}");
    let tools =
        wait_tools(&mut client, "update_record quarantined", |tools| !names(tools).contains(&"rug_update_record"))
            .await;
    assert!(names(&tools).contains(&"rug_read_records"), "only the changed tool is quarantined: {:?}", names(&tools));
    let hidden = client.call(json!("hidden"), "rug_update_record", json!({"id": 1})).await;
    let unknown = client.call(json!("unknown"), "rug_no_such_tool", json!({"id": 1})).await;
    assert!(is_error(&hidden), "{hidden}");
    assert_eq!(
        hidden["result"].to_string().replace("rug_update_record", "NAME"),
        unknown["result"].to_string().replace("rug_no_such_tool", "NAME"),
        "a quarantined tool answers exactly like an unknown one"
    );
    assert_eq!(fixture_called(&log, "update_record"), 0, "the changed tool never reached the upstream");
    let pending = harness.store.pins().pending("rug", "update_record").await.unwrap().expect("the change is pending");
    assert!(
        pending.changes.iter().any(|(field, _)| field == "annotations.readOnlyHint"),
        "the pending change names the hint: {:?}",
        pending.changes
    );
    assert_eq!(pending.proposed.definition["annotations"]["readOnlyHint"], json!(true));

    // A person approves the change; once the upstream lists again the tool is back, as approved.
    harness.approve_pin("rug", "update_record", &pending.proposed.fingerprint.whole).await;
    client.call(json!("relist"), "rug_pull", json!({"change": "none"})).await;
    let tools =
        wait_tools(&mut client, "update_record back", |tools| names(tools).contains(&"rug_update_record")).await;
    let update = tools.iter().find(|tool| tool["name"] == "rug_update_record").unwrap();
    assert_eq!(update["annotations"]["readOnlyHint"], json!(true), "the approved definition is the one exposed");
    let response = client.call(json!("after"), "rug_update_record", json!({"id": 1})).await;
    assert_eq!(text(&response), "called update_record", "{response}");

    // An edited description is a change too.
    client.call(json!("describe"), "rug_pull", json!({"change": "describe"})).await;
    wait_tools(&mut client, "update_record quarantined again", |tools| !names(tools).contains(&"rug_update_record"))
        .await;
    let pending = harness.store.pins().pending("rug", "update_record").await.unwrap().expect("pending again");
    assert!(pending.changes.iter().any(|(field, _)| field == "description"), "{:?}", pending.changes);

    // Tightening (read_records no longer read-only) is accepted without quarantine and recorded.
    client.call(json!("tighten"), "rug_pull", json!({"change": "tighten"})).await;
    let tools = wait_tools(&mut client, "read_records tightened", |tools| {
        tools
            .iter()
            .any(|tool| tool["name"] == "rug_read_records" && tool["annotations"]["readOnlyHint"] == json!(false))
    })
    .await;
    assert!(names(&tools).contains(&"rug_read_records"));
    let pin = harness.store.pins().get("rug", "read_records").await.unwrap().expect("read_records is pinned");
    assert_eq!(
        pin.snapshot.definition["annotations"]["readOnlyHint"],
        json!(false),
        "the tightened definition is pinned"
    );
    assert!(pin.approved_by.contains("tightening"), "recorded as a tightening: {}", pin.approved_by);
    assert!(harness.store.pins().pending("rug", "read_records").await.unwrap().is_none());
    harness.store.audit().flush().await.unwrap();
    let listings = harness
        .store
        .query_audit(&AuditFilter { kind: Some(AuditKind::Listing), ..AuditFilter::default() })
        .await
        .unwrap();
    assert!(
        listings.iter().any(|row| row
            .detail
            .as_ref()
            .is_some_and(|detail| detail["acceptedTightening"] == json!(["read_records"]))),
        "the accepted tightening is in the audit log: {listings:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_quarantine_confirm_a_rug_pulled_tool_stays_listed_untrusted_and_every_call_needs_a_person() {
    let log = FixtureLog::new();
    let harness =
        pinned_and_approved(&log, PinSpec { quarantine: Quarantine::ConfirmOnly }, Duration::from_secs(2)).await;
    let mut unasked = harness.client(Elicit::None).await;
    // Before the pull, the closed-world idempotent write is simply allowed.
    let response = unasked.call(json!(1), "rug_update_record", json!({"id": 1})).await;
    assert_eq!(text(&response), "called update_record", "{response}");
    let seen = list_changes(&unasked);
    unasked.call(json!("pull"), "rug_pull", json!({"change": "relax"})).await;
    wait_list_changes(&mut unasked, seen).await;
    assert!(harness.store.pins().pending("rug", "update_record").await.unwrap().is_some(), "the change is pending");
    // The new, unreviewed read-only claim is not believed: nobody pinned it, so the upstream's trust does not cover it.
    let update = unasked.tool("rug_update_record").await.expect("listed under confirm quarantine");
    assert_eq!(update["_meta"][META_KEY]["quarantined"], json!(true), "{update}");
    assert_eq!(update["annotations"]["readOnlyHint"], json!(false), "{update}");
    assert_eq!(update["_meta"][META_KEY]["trust"], "untrusted", "{update}");
    assert_eq!(update["_meta"][META_KEY]["rules"]["readOnlyHint"], "declared-relaxing-rejected", "{update}");

    // Nobody answers: refused at the timeout.
    let response = unasked.call(json!(2), "rug_update_record", json!({"id": 2})).await;
    assert!(is_error(&response), "{response}");
    assert_eq!(fixture_called(&log, "update_record"), 1, "only the call before the pull reached the upstream");

    // A person asked through elicitation, and told why.
    let mut asked = harness.client(Elicit::Accept).await;
    let response = asked.call(json!(3), "rug_update_record", json!({"id": 3})).await;
    assert_eq!(text(&response), "called update_record", "{response}");
    assert_eq!(asked.elicitations.len(), 1);
    let message = asked.elicitations[0]["params"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("pinned"), "the question says the definition changed: {message}");

    // Once a person pins the new definition, it is believed as pinned definitions are.
    let pending = harness.store.pins().pending("rug", "update_record").await.unwrap().expect("pending");
    harness.approve_pin("rug", "update_record", &pending.proposed.fingerprint.whole).await;
    let tools = wait_tools(&mut unasked, "update_record pinned", |tools| {
        tools.iter().any(|tool| tool["name"] == "rug_update_record" && tool["_meta"][META_KEY]["quarantined"].is_null())
    })
    .await;
    let update = tools.iter().find(|tool| tool["name"] == "rug_update_record").unwrap();
    assert_eq!(update["annotations"]["readOnlyHint"], json!(true), "{update}");
    assert_eq!(update["_meta"][META_KEY]["rules"]["readOnlyHint"], "declared-trusted", "{update}");
    let response = unasked.call(json!(4), "rug_update_record", json!({"id": 4})).await;
    assert_eq!(text(&response), "called update_record", "a pinned read-only tool is simply allowed: {response}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_read_only_mode_a_rug_pulled_tool_that_newly_claims_read_only_stays_hidden() {
    let log = FixtureLog::new();
    let mut guardrails = standard(Duration::from_secs(2));
    guardrails.pins = PinSpec { quarantine: Quarantine::ConfirmOnly };
    guardrails.policy = policy(json!({"mode": "read-only"}));
    let harness = pinned_and_approved_with(&log, guardrails).await;
    let mut client = harness.client(Elicit::Accept).await;
    let tools = client.tools().await;
    assert!(names(&tools).contains(&"rug_pull"), "pinned read-only tools are listed: {:?}", names(&tools));
    assert!(!names(&tools).contains(&"rug_update_record"), "a write is hidden in read-only mode");

    // The rug pull: update_record now claims to be read-only. Its new definition is unreviewed, so the claim does
    // not count and read-only mode keeps hiding it: not listed, not in the safety prompt, unknown when called.
    let seen = list_changes(&client);
    client.call(json!("pull"), "rug_pull", json!({"change": "relax"})).await;
    wait_list_changes(&mut client, seen).await;
    let pending = harness.store.pins().pending("rug", "update_record").await.unwrap().expect("the change is pending");
    assert_eq!(pending.proposed.definition["annotations"]["readOnlyHint"], json!(true), "the pull happened");
    assert_looks_unknown(&mut client, "rug_update_record", json!({"id": 1})).await;
    let prompt = client.request(json!("prompt"), "prompts/get", json!({"name": "toolgate_safety"})).await;
    assert!(prompt["result"]["messages"].is_array(), "{prompt}");
    assert!(!prompt.to_string().contains("rug_update_record"), "the safety prompt names it: {prompt}");
    assert!(client.elicitations.is_empty(), "nobody was asked about a hidden tool");
    assert_eq!(fixture_called(&log, "update_record"), 0, "the write never reached the upstream");

    // A person pins the new definition: from then on it is believed, and read-only tools are listed.
    harness.approve_pin("rug", "update_record", &pending.proposed.fingerprint.whole).await;
    wait_tools(&mut client, "update_record pinned", |tools| names(tools).contains(&"rug_update_record")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deny_rule_on_destructive_still_denies_a_pinned_destructive_tool_whose_new_definition_claims_otherwise() {
    let log = FixtureLog::new();
    let mut guardrails = standard(Duration::from_secs(2));
    guardrails.pins = PinSpec { quarantine: Quarantine::ConfirmOnly };
    guardrails.policy =
        policy(json!({"rule": [{"id": "no-destruction", "effect": "deny", "match": {"destructive": true}}]}));
    let harness = pinned_and_approved_with(&log, guardrails).await;

    // The definition a person reviewed said what purge_records does: destructive, not read-only. The upstream
    // now lists it as read-only (so not destructive) and relists.
    let pin = harness.store.pins().get("rug", "purge_records").await.unwrap().expect("purge_records is pinned");
    let mut reviewed = pin.snapshot.definition.clone();
    reviewed["annotations"] = json!({"readOnlyHint": false, "destructiveHint": true});
    let reviewed = ToolDefinition::from_value(reviewed).unwrap();
    let declared = normalize_annotations(&reviewed).declared;
    let effective = resolve_hints(&HintOverrides::default(), &declared, None);
    let snapshot = ToolSnapshot::new("rug", &reviewed, &effective).unwrap();
    harness.other_handle().await.pins().upsert(&snapshot, "tester").await.unwrap();
    let mut client = harness.client(Elicit::Accept).await;
    let seen = list_changes(&client);
    client.call(json!("relist"), "rug_pull", json!({"change": "none"})).await;
    wait_list_changes(&mut client, seen).await;
    let pending = harness.store.pins().pending("rug", "purge_records").await.unwrap().expect("the change is pending");
    assert!(
        pending.changes.iter().any(|(field, _)| field == "annotations.destructiveHint"),
        "the new definition drops the destructive hint: {:?}",
        pending.changes
    );

    let purge = client.tool("rug_purge_records").await.expect("listed under confirm quarantine");
    assert_eq!(purge["annotations"]["destructiveHint"], json!(true), "{purge}");
    assert_eq!(purge["annotations"]["readOnlyHint"], json!(false), "{purge}");
    let response = client.call(json!(1), "rug_purge_records", json!({})).await;
    assert!(is_error(&response), "{response}");
    assert!(text(&response).contains("refused"), "the deny rule decides: {response}");
    assert!(client.elicitations.is_empty(), "a denied call is not put to a person");
    assert_eq!(fixture_called(&log, "purge_records"), 0, "the deleting tool was never called");
}

// ---------------------------------------------------------------------------------------------------------------
// 3. Two upstreams shadowing a tool name

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approved_pin_change_is_released_without_waiting_for_another_listing() {
    let log = FixtureLog::new();
    let harness = pinned_and_approved(&log, PinSpec::default(), Duration::from_secs(2)).await;
    let mut client = harness.client(Elicit::None).await;
    client.call(json!("pull"), "rug_pull", json!({"change": "relax"})).await;
    wait_tools(&mut client, "update_record quarantined", |tools| !names(tools).contains(&"rug_update_record")).await;
    let pending = harness.store.pins().pending("rug", "update_record").await.unwrap().expect("pending");
    // `toolgate pins approve` from another process; the upstream does not list again.
    harness.approve_pin("rug", "update_record", &pending.proposed.fingerprint.whole).await;
    wait_tools(&mut client, "update_record released by the approval", |tools| {
        names(tools).contains(&"rug_update_record")
    })
    .await;
}
