//! The audit queue is not a shared hostage (issue 17): calls stuck at one upstream hold no place in the audit
//! writer's queue while they wait, so calls to another upstream are answered, and audited, as usual.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::time::Duration;

use serde_json::json;
use toolgate_spec::GuardrailSpec;
use toolgate_store::{AuditFilter, AuditKind, Store, StoreOptions};

use support::{Client, GUARD, text_of, upstream};

/// The audit queue's capacity in this test: far fewer places than calls left hanging.
const CAPACITY: usize = 8;
const STUCK: usize = 4 * CAPACITY;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_stuck_at_one_upstream_do_not_refuse_calls_to_another_on_the_audit_queue() {
    let state = tempfile::tempdir().unwrap();
    let database = state.path().join("toolgate.db");
    let options = StoreOptions {
        journal: true,
        audit_queue_capacity: CAPACITY,
        audit_queue_wait: Duration::from_millis(200),
        ..StoreOptions::default()
    };
    let store = Store::open_file(&database, options).await.unwrap();
    let stuck = upstream("stuck", "tool-faults", Duration::from_secs(120), None);
    let healthy = upstream("healthy", "tool-faults", Duration::from_secs(30), None);
    let guardrails = GuardrailSpec { policy: toolgate_core::policy::PolicySpec::permissive(), ..Default::default() };
    let gateway = support::start_guarded(vec![stuck, healthy], guardrails, Some(store.clone())).await;

    let stuck_client = Client::connect(&gateway).await;
    for n in 0..STUCK {
        stuck_client.start_call(json!(format!("hang-{n}")), "stuck_hang", json!({"text": format!("hang {n}")}));
    }
    // Wait until the queue's worth of calls is journaled (forwarded and waiting upstream).
    let journal = state.path().join(format!("toolgate.db.journal-{}", std::process::id()));
    let started = std::time::Instant::now();
    while std::fs::read_to_string(&journal).unwrap_or_default().lines().count() < CAPACITY {
        assert!(started.elapsed() < GUARD, "the stuck calls were never forwarded");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    let mut client = Client::connect(&gateway).await;
    for n in 0..20 {
        let response = client.call(json!(n), "healthy_echo", json!({"text": format!("echo {n}")})).await;
        assert_eq!(text_of(&response), format!("echo {n}"), "a call to the healthy upstream failed: {response}");
    }
    store.audit().flush().await.unwrap();
    let filter = AuditFilter { upstream: Some("healthy".into()), kind: Some(AuditKind::Call), ..Default::default() };
    let rows = store.query_audit(&filter).await.unwrap();
    assert_eq!(rows.len(), 20, "every answered call has its row");
    assert!(rows.iter().all(|row| row.outcome.as_deref() == Some("ok")), "{rows:?}");
    assert_eq!(store.audit().stats().rejected, 0, "nothing was refused for lack of room");
    drop(stuck_client);
    gateway.shutdown().await;
}
