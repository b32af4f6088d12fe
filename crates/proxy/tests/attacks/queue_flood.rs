//! A flood of calls needing approval cannot bury a real one (issue 10): past the per-session and per-caller caps
//! a call is refused with an `isError` and an audit row instead of being queued, another caller keeps its own
//! places, and a decided approval gives its place back.

use std::time::Duration;

use serde_json::json;
use toolgate_core::trust::TrustLevel;
use toolgate_proxy::session::Caller;
use toolgate_spec::{GatewaySpec, Limits};
use toolgate_store::{ApprovalDecision, AuditFilter, AuditKind};

use crate::harness::*;
use crate::support::{FixtureLog, start_spec};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_past_the_pending_approval_caps_are_refused_and_audited_instead_of_queued() {
    let log = FixtureLog::new();
    let state = tempfile::tempdir().unwrap();
    let store = crate::support::gateway_store(state.path()).await;
    let limits =
        Limits { max_pending_approvals_per_session: 2, max_pending_approvals_per_caller: 3, ..Limits::default() };
    let spec = GatewaySpec {
        upstreams: vec![rug("rug", &log, TrustLevel::Untrusted)],
        stdio: None,
        http: None,
        limits,
        guardrails: standard(Duration::from_secs(30)),
        source: None,
        sandbox: Default::default(),
    };
    let gateway = start_spec(spec, Some(store.clone())).await;

    // One session fills its places; the next call is refused at once, not queued behind them.
    let mut flooder = Client::connect_with(&gateway, Elicit::None).await;
    for n in 0..2 {
        flooder.start_call(json!(n), "rug_purge_records", json!({"n": n}));
        wait_pending(&store, "rug_purge_records", &json!({"n": n})).await;
    }
    let refused = flooder.call(json!(10), "rug_purge_records", json!({"n": 10})).await;
    assert!(is_error(&refused), "{refused}");
    assert!(text(&refused).contains("this session already has 2 approvals waiting"), "{refused}");

    // The same caller's other session has one place left of the caller's three.
    let mut second = Client::connect_with(&gateway, Elicit::None).await;
    second.start_call(json!(1), "rug_purge_records", json!({"n": 20}));
    wait_pending(&store, "rug_purge_records", &json!({"n": 20})).await;
    let refused = second.call(json!(2), "rug_purge_records", json!({"n": 21})).await;
    assert!(text(&refused).contains("this caller already has 3 approvals waiting"), "{refused}");

    // Another caller is not affected.
    let bob = Caller::named("bob", Vec::new());
    let other = Client::connect_as(&gateway, bob, Elicit::None, json!({})).await;
    other.start_call(json!(1), "rug_purge_records", json!({"n": 30}));
    wait_pending(&store, "rug_purge_records", &json!({"n": 30})).await;

    let pending = store.approvals().list_pending().await.unwrap();
    assert_eq!(pending.len(), 4, "only what fits was queued: {pending:#?}");
    assert_eq!(fixture_called(&log, "purge_records"), 0);
    store.audit().flush().await.unwrap();
    let rows = store.query_audit(&AuditFilter { kind: Some(AuditKind::Call), ..AuditFilter::default() }).await.unwrap();
    let full: Vec<_> = rows.iter().filter(|row| row.outcome.as_deref() == Some("queue_full")).collect();
    assert_eq!(full.len(), 2, "each refusal is audited, as the call's one row: {rows:#?}");
    assert!(full.iter().all(|row| row.verdict.as_deref() == Some("confirm") && row.detail.is_some()), "{full:#?}");

    // A decision gives the place back.
    let first = wait_pending(&store, "rug_purge_records", &json!({"n": 0})).await;
    store.approvals().decide(&first.approval.id, ApprovalDecision::Deny, "tester").await.unwrap();
    assert!(is_error(&flooder.response(&json!(0)).await));
    flooder.start_call(json!(40), "rug_purge_records", json!({"n": 40}));
    wait_pending(&store, "rug_purge_records", &json!({"n": 40})).await;
}
