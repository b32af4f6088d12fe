//! The audit log's `listing` rows: every tools listing of every upstream has exactly one (at start, after a
//! `list_changed` that changed it, after a reconnect), whatever its trust, with the tool count and each tool's
//! fingerprint; the
//! gateway's periodic re-check of a quarantine adds a row only when the quarantine changed, so a tool waiting for a
//! person does not flood the log.
//!
//! An in-process gateway with a state store in front of `misbehave.py --mode rug-pull`. Waits are hang guards or
//! observation windows; no test asserts how long anything took.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::time::Duration;

use serde_json::{Value, json};
use toolgate_core::policy::PolicySpec;
use toolgate_core::trust::TrustLevel;
use toolgate_proxy::Gateway;
use toolgate_spec::GuardrailSpec;
use toolgate_store::{AuditFilter, AuditKind, AuditRow, Store};

use support::{Client, GUARD, start_guarded, upstream};

/// Long enough for several of the gateway's once-a-second quarantine re-checks.
const SEVERAL_RECHECKS: Duration = Duration::from_secs(4);

/// A gateway with a store in front of one rug-pull upstream named `rug` with this trust.
async fn start(trust: TrustLevel) -> (Gateway, Store, tempfile::TempDir) {
    let state = tempfile::tempdir().unwrap();
    let store = support::gateway_store(state.path()).await;
    let mut rug = upstream("rug", "rug-pull", Duration::from_secs(20), None);
    rug.trust.level = trust;
    // Every call allowed: the test calls the control tool `rug_pull`, which no person is there to confirm.
    let guardrails = GuardrailSpec { policy: PolicySpec::permissive(), ..GuardrailSpec::default() };
    let gateway = start_guarded(vec![rug], guardrails, Some(store.clone())).await;
    (gateway, store, state)
}

/// The `listing` rows about `rug` so far, oldest first.
async fn listing_rows(store: &Store) -> Vec<AuditRow> {
    store.audit().flush().await.unwrap();
    let filter = AuditFilter { kind: Some(AuditKind::Listing), upstream: Some("rug".into()), ..AuditFilter::default() };
    store.query_audit(&filter).await.unwrap()
}

fn detail(row: &AuditRow) -> &Value {
    row.detail.as_ref().unwrap_or_else(|| panic!("a listing row without detail: {row:?}"))
}

/// Polls the listing rows until there are at least `count`, within the hang guard.
async fn wait_rows(store: &Store, count: usize) -> Vec<AuditRow> {
    let deadline = tokio::time::Instant::now() + GUARD;
    loop {
        let rows = listing_rows(store).await;
        if rows.len() >= count {
            return rows;
        }
        assert!(tokio::time::Instant::now() < deadline, "never saw {count} listing rows: {rows:#?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The names in a row's `quarantined` list.
fn quarantined(row: &AuditRow) -> Vec<&str> {
    detail(row)["quarantined"].as_array().unwrap().iter().filter_map(Value::as_str).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quarantine_waiting_for_a_person_adds_no_listing_rows_until_a_decision_changes_it() {
    let (gateway, store, state) = start(TrustLevel::Pinned).await;
    let rows = listing_rows(&store).await;
    assert_eq!(rows.len(), 1, "one listing row at start: {rows:#?}");
    assert_eq!(detail(&rows[0])["trigger"], "start");
    assert_eq!(quarantined(&rows[0]), ["purge_records", "read_records", "rug_pull", "update_record"]);

    // Every tool is new, so every tool waits for a person; the gateway re-checks once a second meanwhile.
    tokio::time::sleep(SEVERAL_RECHECKS).await;
    let rows = listing_rows(&store).await;
    assert_eq!(rows.len(), 1, "re-checks that find nothing new write nothing: {rows:#?}");

    // A person pins one tool (as `toolgate pins approve` would, from another process): the re-check releases it
    // and the audit log says so, once.
    let reviewer = Store::open(state.path()).await.unwrap();
    let pending = reviewer.pins().pending("rug", "read_records").await.unwrap().expect("read_records is pending");
    reviewer
        .pins()
        .approve_pending("rug", "read_records", &pending.proposed.fingerprint.whole, "tester")
        .await
        .unwrap();
    let mut client = Client::connect(&gateway).await;
    let deadline = tokio::time::Instant::now() + GUARD;
    while client.tool("rug_read_records").await.is_none() {
        assert!(tokio::time::Instant::now() < deadline, "the approved tool was never released");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let rows = listing_rows(&store).await;
    assert_eq!(rows.len(), 2, "the released tool adds one row: {rows:#?}");
    assert_eq!(detail(&rows[1])["trigger"], "recheck");
    assert_eq!(quarantined(&rows[1]), ["purge_records", "rug_pull", "update_record"]);

    tokio::time::sleep(SEVERAL_RECHECKS).await;
    assert_eq!(listing_rows(&store).await.len(), 2, "the rest still wait, and still write nothing");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_listing_of_an_untrusted_upstream_has_one_row_with_the_fingerprints_the_client_sees() {
    let (gateway, store, _state) = start(TrustLevel::Untrusted).await;
    let mut client = Client::connect(&gateway).await;
    let rows = listing_rows(&store).await;
    assert_eq!(rows.len(), 1, "one listing row at start: {rows:#?}");
    assert_eq!(detail(&rows[0])["trigger"], "start");
    assert_eq!(detail(&rows[0])["tools"], json!(4));
    let fingerprint_seen = |tool: &Value| tool["_meta"]["toolgate/annotations"]["fingerprint"].clone();
    let before = client.tool("rug_update_record").await.expect("update_record is listed");
    assert_eq!(detail(&rows[0])["fingerprints"]["update_record"], fingerprint_seen(&before), "{rows:#?}");
    assert_eq!(detail(&rows[0])["fingerprints"].as_object().map(|map| map.len()), Some(4), "{rows:#?}");

    // The upstream edits a description and sends list_changed: one re-listing, one row.
    let response = client.call(json!(1), "rug_pull", json!({"change": "describe"})).await;
    assert_eq!(response["result"]["content"][0]["text"], "changed: describe", "{response}");
    let rows = wait_rows(&store, 2).await;
    let deadline = tokio::time::Instant::now() + GUARD;
    let after = loop {
        let tool = client.tool("rug_update_record").await.expect("update_record is listed");
        if tool["description"] != before["description"] {
            break tool;
        }
        assert!(tokio::time::Instant::now() < deadline, "the edited description never reached the client");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(listing_rows(&store).await.len(), 2, "exactly one row for the list_changed: {rows:#?}");
    assert_eq!(detail(&rows[1])["trigger"], "list_changed");
    assert_eq!(detail(&rows[1])["tools"], json!(4));
    assert_eq!(detail(&rows[1])["fingerprints"]["update_record"], fingerprint_seen(&after), "{rows:#?}");
    assert_ne!(fingerprint_seen(&after), fingerprint_seen(&before));
}
