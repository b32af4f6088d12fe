//! Several processes on one store, told apart by their heartbeats: an upstream dropped from one process's config
//! loses that process's inventory rows only; a process whose heartbeat went stale leaves the merged inventory; and a
//! live process lapses the approvals a stopped one left waiting, once each (two sweeping at once included), with
//! one audit row naming the stopped instance, and never an approval a person decided meanwhile. A ping (what
//! readiness asks) answers on both backends.

use std::time::Duration;

use serde_json::json;
use toolgate_store::{
    ApprovalDecision, ApprovalState, AuditFilter, HEARTBEAT_STALE, InventoryState, InventoryTool, Store, StoreOptions,
    ToolRisk,
};
use toolgate_test_support::pending_approval;

use crate::support::{Fresh, matrix, tamper};

fn as_instance(id: &str) -> StoreOptions {
    StoreOptions { instance_id: Some(id.to_owned()), ..StoreOptions::default() }
}

fn tool(upstream: &str, name: &str) -> InventoryTool {
    InventoryTool {
        upstream: upstream.into(),
        tool: name.into(),
        exposed_name: name.into(),
        title: name.into(),
        state: InventoryState::Visible,
        state_reason: None,
        hints: json!({}),
        annotations: json!({}),
        risk: ToolRisk { level: 0, category: "read".into() },
        findings: Vec::new(),
        access: Vec::new(),
        fingerprint: "sha256:ab".into(),
        updated_at: String::new(),
    }
}

async fn names(store: &Store) -> Vec<String> {
    store
        .inventory()
        .await
        .expect("inventory")
        .into_iter()
        .map(|tool| format!("{}/{}", tool.upstream, tool.tool))
        .collect()
}

matrix! {
#[tokio::test]
async fn inventory_is_retained_per_instance_and_merged_from_live_instances_only(kind) {
    let fresh = Fresh::new(kind);
    let first = fresh.open(as_instance("first")).await;
    let second = fresh.open(as_instance("second")).await;
    first.replace_inventory("notes", &[tool("notes", "read")]).await.expect("replace");
    first.replace_inventory("files", &[tool("files", "list")]).await.expect("replace");
    second.replace_inventory("notes", &[tool("notes", "read")]).await.expect("replace");

    // `files` left the second process's config, not the first's.
    second.retain_inventory(&["notes"]).await.expect("retain");
    let kept: Vec<(String, String)> = first
        .inventory_by_instance()
        .await
        .expect("by instance")
        .into_iter()
        .map(|(instance, tool)| (instance, format!("{}/{}", tool.upstream, tool.tool)))
        .collect();
    assert!(kept.contains(&("first".to_owned(), "files/list".to_owned())), "the first keeps its rows: {kept:?}");
    assert_eq!(names(&second).await, ["files/list", "notes/read"], "both are alive: merged");

    // The first process stops: once its heartbeat is stale, its tools leave the merged view.
    tamper(&fresh.raw().await, "UPDATE instance_heartbeats SET seen_us = 0 WHERE instance = 'first'").await;
    assert_eq!(names(&second).await, ["notes/read"], "a stopped process's tools are forgotten");
    assert_eq!(names(&first).await, ["files/list", "notes/read"], "a process always sees its own listing");
}
}

matrix! {
#[tokio::test]
async fn a_live_process_lapses_what_a_stopped_one_left_waiting_once_with_one_audit_row(kind) {
    let fresh = Fresh::new(kind);
    let dead = fresh.open(as_instance("dead")).await;
    let live = fresh.open(as_instance("live")).await;
    let other = fresh.open(as_instance("other")).await;
    let silent = fresh.open(as_instance("silent")).await;
    let arguments = json!({"path": "/tmp/a"});
    let waiting = pending_approval(&arguments, Duration::from_secs(300));
    let decided = pending_approval(&arguments, Duration::from_secs(300));
    let unknown = pending_approval(&arguments, Duration::from_secs(300));
    dead.approvals().create(&waiting).await.expect("create");
    dead.approvals().create(&decided).await.expect("create");
    silent.approvals().create(&unknown).await.expect("create");
    dead.heartbeat().await.expect("beat");
    live.heartbeat().await.expect("beat");

    assert_eq!(live.lapse_gone_instances(HEARTBEAT_STALE).await.expect("sweep"), 0, "a fresh heartbeat: alive");

    // The dead process's heartbeat freezes; a person denies one of its approvals before anyone sweeps.
    tamper(&fresh.raw().await, "UPDATE instance_heartbeats SET seen_us = 0 WHERE instance = 'dead'").await;
    live.approvals().decide(&decided.id, ApprovalDecision::Deny, "alice").await.expect("deny");
    let (a, b) = tokio::join!(
        live.lapse_gone_instances(HEARTBEAT_STALE),
        other.lapse_gone_instances(HEARTBEAT_STALE)
    );
    assert_eq!(a.expect("sweep") + b.expect("sweep"), 1, "two sweeping processes lapse it once");
    assert_eq!(live.lapse_gone_instances(HEARTBEAT_STALE).await.expect("sweep"), 0, "not lapsed twice");

    let record = live.approvals().get(&waiting.id).await.expect("get").expect("kept");
    assert_eq!(record.state, ApprovalState::Lapsed);
    assert!(record.lapsed_why.as_deref().is_some_and(|why| why.contains("heartbeat")), "{record:?}");
    let record = live.approvals().get(&decided.id).await.expect("get").expect("kept");
    assert_eq!((record.state, record.lapsed_why), (ApprovalState::Denied, None), "a decision stands");
    let record = live.approvals().get(&unknown.id).await.expect("get").expect("kept");
    assert_eq!(record.state, ApprovalState::Pending, "an instance that never beat is not taken for dead");

    live.audit().flush().await.expect("flush");
    other.audit().flush().await.expect("flush");
    let rows = live.query_audit(&AuditFilter::default()).await.expect("audit");
    let lapses: Vec<_> = rows.iter().filter(|row| row.outcome.as_deref() == Some("lapsed")).collect();
    assert_eq!(lapses.len(), 1, "one audit row per lapse: {lapses:?}");
    assert_eq!(lapses[0].approval_id.as_deref(), Some(waiting.id.as_str()));
    assert_eq!(lapses[0].detail.as_ref().map(|detail| detail["instance"].clone()), Some(json!("dead")));
}
}

matrix! {
#[tokio::test]
async fn a_ping_answers_while_the_store_is_open_and_fails_once_it_is_closed(kind) {
    let fresh = Fresh::new(kind);
    let store = fresh.open(as_instance("pinged")).await;
    store.ping().await.expect("an open store answers");
    let other = store.clone();
    store.close().await.expect("close");
    assert!(other.ping().await.is_err(), "a closed store does not answer");
}
}

/// Heartbeats carry the database's time, not the host's: processes on machines whose clocks disagree judge each
/// other alike. The database's clock is shadowed to run an hour ahead of this host (a `clock_timestamp()` found
/// before `pg_catalog`'s on this database's search path), so a beat stamped with the host's clock would look an
/// hour stale.
#[tokio::test]
async fn heartbeats_are_stamped_and_judged_on_the_databases_clock() {
    let fresh = Fresh::new(crate::support::Kind::Postgres);
    // Migrate first, with the ordinary search path, so every table lives in `public`.
    fresh.open(as_instance("migrator")).await.close().await.expect("close");
    let raw = fresh.raw().await;
    tamper(&raw, "CREATE SCHEMA skew").await;
    tamper(
        &raw,
        "CREATE FUNCTION skew.clock_timestamp() RETURNS timestamptz LANGUAGE sql \
         AS $$ SELECT pg_catalog.clock_timestamp() + interval '1 hour' $$",
    )
    .await;
    tamper(
        &raw,
        "DO $$ BEGIN EXECUTE format('ALTER DATABASE %I SET search_path = public, skew, pg_catalog', \
         current_database()); END $$",
    )
    .await;

    let ahead = fresh.open(as_instance("ahead")).await;
    let peer = fresh.open(as_instance("peer")).await;
    ahead.heartbeat().await.expect("beat");
    peer.heartbeat().await.expect("beat");
    let stamped = raw.count("SELECT seen_us FROM instance_heartbeats WHERE instance = 'ahead'").await;
    let host_now = i64::try_from(
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("after 1970").as_micros(),
    )
    .expect("fits");
    assert!(stamped > host_now + 50 * 60 * 1_000_000, "stamped {stamped}, host {host_now}: not the database's clock");

    // A peer that beat a moment ago is alive on the database's clock: its tools stay in the merged view and its
    // approvals are not lapsed.
    let waiting = pending_approval(&json!({}), Duration::from_secs(300));
    peer.approvals().create(&waiting).await.expect("create");
    peer.replace_inventory("notes", &[tool("notes", "read")]).await.expect("replace");
    assert_eq!(ahead.lapse_gone_instances(HEARTBEAT_STALE).await.expect("sweep"), 0, "the peer is alive");
    assert_eq!(names(&ahead).await, ["notes/read"], "the peer's tools are in the merged view");

    // A beat stamped with this host's clock (an hour behind the database) is an hour stale: judged gone.
    tamper(
        &raw,
        "UPDATE instance_heartbeats SET seen_us = (EXTRACT(EPOCH FROM pg_catalog.clock_timestamp()) * 1000000)::BIGINT \
         WHERE instance = 'peer'",
    )
    .await;
    assert_eq!(ahead.lapse_gone_instances(HEARTBEAT_STALE).await.expect("sweep"), 1, "judged on the database's clock");
    assert!(names(&ahead).await.is_empty(), "a stale peer leaves the merged view");
}

matrix! {
/// A detached approval (a 2026-07-28 URL-mode confirmation: no call waits on it, the client retries on any process)
/// survives its process restarting and its heartbeat going stale, while a waiting one beside it lapses; another
/// process decides and uses it; it counts against its caller until then.
#[tokio::test]
async fn a_detached_approval_is_lapsed_by_no_restart_and_no_sweep(kind) {
    let fresh = Fresh::new(kind);
    let gateway = || StoreOptions { journal: true, instance_id: Some("first".into()), ..StoreOptions::default() };
    let first = fresh.open(gateway()).await;
    let live = fresh.open(as_instance("live")).await;
    let arguments = json!({"path": "/tmp/a"});
    let detached = pending_approval(&arguments, Duration::from_secs(300));
    let waiting = pending_approval(&arguments, Duration::from_secs(300));
    first.approvals().create_detached(&detached).await.expect("create");
    first.approvals().create(&waiting).await.expect("create");
    first.heartbeat().await.expect("beat");
    first.close().await.expect("close");
    // Another process queues one and stops without restarting.
    let gone = fresh.open(as_instance("gone")).await;
    let stranded = pending_approval(&arguments, Duration::from_secs(300));
    gone.approvals().create_detached(&stranded).await.expect("create");
    gone.heartbeat().await.expect("beat");

    // The process restarts: the call that waited is gone; the detached approval's client may still retry.
    let restarted = fresh.open(gateway()).await;
    let state = |store: &Store, id| {
        let (store, id): (Store, toolgate_store::ApprovalId) = (store.clone(), id);
        async move { store.approvals().get(&id).await.expect("get").expect("kept") }
    };
    assert_eq!(state(&restarted, waiting.id.clone()).await.state, ApprovalState::Lapsed);
    let record = state(&restarted, detached.id.clone()).await;
    assert_eq!((record.state, record.detached), (ApprovalState::Pending, true), "{record:?}");
    restarted.close().await.expect("close");

    // It stops for good: another process sweeps its stale heartbeat and leaves the detached approval alone.
    tamper(&fresh.raw().await, "UPDATE instance_heartbeats SET seen_us = 0 WHERE instance IN ('first', 'gone')").await;
    live.heartbeat().await.expect("beat");
    assert_eq!(live.lapse_gone_instances(HEARTBEAT_STALE).await.expect("sweep"), 0, "nothing of theirs waits there");
    let record = state(&live, stranded.id.clone()).await;
    assert_eq!(record.state, ApprovalState::Pending, "{record:?}");
    live.approvals().lapse(&stranded.id, "test: out of the count").await.expect("lapse");
    assert_eq!(live.approvals().count_detached_open("agent").await.expect("count"), 1);
    assert_eq!(live.approvals().count_detached_open("someone else").await.expect("count"), 0);
    live.approvals().decide(&detached.id, ApprovalDecision::Approve, "alice").await.expect("approve");
    let digest = toolgate_store::digest_arguments(&arguments);
    live.approvals().consume(&detached.id, "sha256:tool", &digest).await.expect("used on another process");
    assert_eq!(live.approvals().count_detached_open("agent").await.expect("count"), 0, "used: no longer open");
}
}
