//! What only a shared PostgreSQL store has to survive: the server restarting while calls are made (calls whose row
//! cannot be recorded are refused, naming why, and service resumes by itself once the server is back), and several
//! processes (instances) writing one chain; plus the instance id every backend stamps on rows and approvals, and
//! the lapse of a restarted gateway's approvals; and a pool of one beside the change listener.

use std::time::Duration;

use toolgate_store::{
    ApprovalState, AuditFilter, PendingApproval, PostgresTarget, Store, StoreError, StoreOptions, digest_arguments,
};
use toolgate_test_support::postgres::PostgresCluster;

use crate::support::{Fresh, call_entry, matrix};

fn pending(expires_in: Duration) -> PendingApproval {
    toolgate_test_support::pending_approval(&serde_json::json!({"path": "/tmp/a"}), expires_in)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_postgres_restart_refuses_calls_that_cannot_be_recorded_then_service_resumes_by_itself() {
    // A cluster of this test's own: it is stopped and started under the store.
    let cluster = PostgresCluster::start_new();
    let target =
        PostgresTarget { acquire_timeout: Duration::from_millis(500), ..PostgresTarget::new(cluster.fresh_database()) };
    let directory = tempfile::tempdir().unwrap();
    let options = StoreOptions {
        journal: true,
        audit_queue_capacity: 2,
        audit_queue_wait: Duration::from_millis(50),
        ..StoreOptions::default()
    };
    let store = Store::open_postgres(&target, directory.path(), options).await.unwrap();
    store.audit().record_journaled(call_entry("before", 0)).await.unwrap().finish("ok", 0);
    store.audit().flush().await.unwrap();

    cluster.stop();
    // A person's decision and a queued approval need the database now: refused, with the driver's reason.
    let refused = store.approvals().create(&pending(Duration::from_secs(60))).await;
    assert!(matches!(refused, Err(StoreError::Database(_))), "{refused:?}");
    // Calls already journaled are kept (the journal holds their rows) until the writer's queue is full of them;
    // after that a call is refused, naming the writer's error, rather than forwarded without a row.
    for n in 1..=2 {
        store.audit().record_journaled(call_entry("during", n)).await.unwrap().finish("ok", n);
    }
    let started = std::time::Instant::now();
    let failure = loop {
        match store.audit().record_journaled(call_entry("refused", 99)).await {
            Err(error @ StoreError::AuditWriterFailing { .. }) => break error,
            Err(StoreError::AuditQueueFull { .. }) => {}
            Err(other) => panic!("unexpected error {other:?}"),
            Ok(pending) => panic!("admitted while the store is unreachable: {pending:?}"),
        }
        assert!(started.elapsed() < Duration::from_secs(60), "the writer never reported its failure");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert!(failure.to_string().contains("the audit writer is failing"), "{failure}");
    assert!(store.audit().stats().failing);

    cluster.start();
    // No restart of the store: the pool reconnects and the writer's next attempt succeeds.
    let admitted = tokio::time::timeout(Duration::from_secs(60), async {
        loop {
            if let Ok(pending) = store.audit().record_journaled(call_entry("after", 3)).await {
                return pending;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await
    .expect("service resumes by itself");
    admitted.finish("ok", 3);
    store.audit().flush().await.unwrap();
    let tools: Vec<String> =
        store.query_audit(&AuditFilter::default()).await.unwrap().into_iter().filter_map(|row| row.tool).collect();
    assert_eq!(tools, ["before", "during", "during", "after"], "every admitted call has its row, once");
    assert!(store.verify_audit().await.unwrap().is_intact());
    store.approvals().create(&pending(Duration::from_secs(60))).await.expect("approvals work again");
    store.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn several_instances_append_to_one_chain_and_every_row_names_its_writer() {
    let fresh = Fresh::new(crate::support::Kind::Postgres);
    let mut stores = Vec::new();
    for index in 0..3 {
        let options = StoreOptions { instance_id: Some(format!("gw-{index}")), ..StoreOptions::default() };
        // Each instance keeps its own state directory (its id and journals), as separate machines would.
        let state = tempfile::tempdir().unwrap();
        let target = fresh.postgres.clone().unwrap();
        stores.push((Store::open_postgres(&target, state.path(), options).await.unwrap(), state));
    }
    let mut tasks = Vec::new();
    for (index, (store, _)) in stores.iter().enumerate() {
        let audit = store.audit();
        tasks.push(tokio::spawn(async move {
            for n in 0..40 {
                let entry = call_entry(&format!("tool_{index}"), n);
                if n % 4 == 0 {
                    audit.record_durable(entry).await.unwrap();
                } else {
                    while audit.try_record(entry.clone()).is_err() {
                        tokio::time::sleep(Duration::from_millis(1)).await;
                    }
                }
            }
            audit.flush().await.unwrap();
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    let report = stores[1].0.verify_audit().await.unwrap();
    assert!(report.is_intact(), "{report:?}");
    assert_eq!(report.rows_checked, 120);
    let rows = stores[2].0.query_audit(&AuditFilter::default()).await.unwrap();
    for row in &rows {
        let writer = row.tool.as_deref().and_then(|tool| tool.strip_prefix("tool_")).unwrap_or_default();
        assert_eq!(row.instance.as_deref(), Some(format!("gw-{writer}").as_str()), "row {}", row.seq);
    }
    let one = AuditFilter { instance: Some("gw-1".into()), ..AuditFilter::default() };
    let written_by_one = stores[0].0.query_audit(&one).await.unwrap();
    assert_eq!(written_by_one.len(), 40);
    assert!(written_by_one.iter().all(|row| row.tool.as_deref().is_some_and(|tool| tool.starts_with("tool_1"))));
}

matrix! {
/// A restarted gateway lapses the approvals its previous run queued (their calls are gone); another instance's
/// approvals, and every row already written, are left alone. A changed instance id is a changed row.
#[tokio::test]
async fn a_restarted_instance_lapses_its_own_approvals_only(kind) {
    let fresh = Fresh::new(kind);
    let first = fresh.open(StoreOptions { journal: true, ..StoreOptions::default() }).await;
    let instance = first.instance().unwrap().to_owned();
    let mine = pending(Duration::from_secs(600));
    first.approvals().create(&mine).await.unwrap();
    first.audit().record_durable(call_entry("read_file", 1)).await.unwrap();
    // Another gateway's approval in the same store.
    let other = match &fresh.postgres {
        Some(target) => {
            let state = tempfile::tempdir().unwrap();
            let options = StoreOptions { instance_id: Some("gw-other".into()), ..StoreOptions::default() };
            Some((Store::open_postgres(target, state.path(), options).await.unwrap(), state))
        }
        None => None,
    };
    let theirs = pending(Duration::from_secs(600));
    if let Some((store, _)) = &other {
        store.approvals().create(&theirs).await.unwrap();
    }
    first.close().await.unwrap();

    // The same state directory again: the same instance id, and its waiting approval lapses.
    let restarted = fresh.open(StoreOptions { journal: true, ..StoreOptions::default() }).await;
    assert_eq!(restarted.instance(), Some(instance.as_str()), "stable across restarts");
    let record = restarted.approvals().get(&mine.id).await.unwrap().unwrap();
    assert_eq!(record.state, ApprovalState::Lapsed);
    assert!(record.lapsed_why.unwrap_or_default().contains("restarted"));
    let refused = restarted.approvals().consume(&mine.id, "sha256:tool", &digest_arguments(&serde_json::json!({"path": "/tmp/a"}))).await;
    assert!(refused.is_err(), "a lapsed approval cannot be used");
    if other.is_some() {
        let record = restarted.approvals().get(&theirs.id).await.unwrap().unwrap();
        assert_eq!(record.state, ApprovalState::Pending, "another instance's approval is its own");
    }
    let rows = restarted.query_audit(&AuditFilter::default()).await.unwrap();
    assert_eq!(rows[0].instance.as_deref(), Some(instance.as_str()));
    let raw = fresh.raw().await;
    crate::support::tamper(&raw, "UPDATE audit_log SET instance = 'gw-forged' WHERE seq = 1").await;
    let report = restarted.verify_audit().await.unwrap();
    assert_eq!(report.first_break.map(|found| found.kind), Some(toolgate_store::ChainBreakKind::HashMismatch));
}
}

/// Appends of several processes are serialized in the database, not merely caught by the primary key: decisions
/// recorded at the same moment on three processes (each its own transaction, with no retry) all succeed, in one
/// chain.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn decisions_recorded_at_once_on_several_instances_all_join_one_chain() {
    let fresh = Fresh::new(crate::support::Kind::Postgres);
    let target = fresh.postgres.clone().unwrap();
    let mut stores = Vec::new();
    for index in 0..3 {
        let state = tempfile::tempdir().unwrap();
        let options = StoreOptions { instance_id: Some(format!("gw-{index}")), ..StoreOptions::default() };
        stores.push((Store::open_postgres(&target, state.path(), options).await.unwrap(), state));
    }
    let mut tasks = Vec::new();
    for (index, (store, _)) in stores.iter().enumerate() {
        for n in 0..20 {
            let store = store.clone();
            tasks.push(tokio::spawn(async move {
                let decision = toolgate_store::PinDecision::Approved;
                store.record_pin_decision("files", &format!("tool_{index}_{n}"), "sha256:ab", decision, "alice").await
            }));
        }
    }
    for task in tasks {
        task.await.unwrap().expect("every decision is recorded");
    }
    let report = stores[0].0.verify_audit().await.unwrap();
    assert!(report.is_intact(), "{report:?}");
    assert_eq!(report.rows_checked, 60);
}

matrix! {
/// Processes sharing a store keep their own views of the inventory side by side; the merged view has each tool once,
/// as the process that wrote it last saw it, and an upstream dropped from the config leaves every view.
#[tokio::test]
async fn each_instance_keeps_its_inventory_view_and_the_merged_one_has_each_tool_once(kind) {
    let fresh = Fresh::new(kind);
    let one = fresh.open(StoreOptions { instance_id: Some("gw-1".into()), ..StoreOptions::default() }).await;
    let two = fresh.open(StoreOptions { instance_id: Some("gw-2".into()), ..StoreOptions::default() }).await;
    let tool = |name: &str, title: &str| toolgate_store::InventoryTool {
        upstream: "files".into(),
        tool: name.into(),
        exposed_name: name.into(),
        title: title.into(),
        state: toolgate_store::InventoryState::Visible,
        state_reason: None,
        hints: serde_json::json!({}),
        annotations: serde_json::json!({}),
        risk: toolgate_store::ToolRisk { level: 1, category: "read".into() },
        findings: Vec::new(),
        access: Vec::new(),
        fingerprint: "sha256:ab".into(),
        updated_at: String::new(),
    };
    one.replace_inventory("files", &[tool("read", "Read (one)"), tool("list", "List")]).await.unwrap();
    tokio::time::sleep(Duration::from_millis(5)).await;
    two.replace_inventory("files", &[tool("read", "Read (two)")]).await.unwrap();
    let views: Vec<(String, String)> = one
        .inventory_by_instance()
        .await
        .unwrap()
        .into_iter()
        .map(|(instance, tool)| (instance, tool.title))
        .collect();
    let expected = [("gw-1", "Read (one)"), ("gw-1", "List"), ("gw-2", "Read (two)")];
    assert_eq!(views, expected.map(|(instance, title)| (instance.to_owned(), title.to_owned())));
    let merged: Vec<String> = two.inventory().await.unwrap().into_iter().map(|tool| tool.title).collect();
    assert_eq!(merged, ["Read (two)", "List"], "each tool once, the newest listing's, in listing order");
    // An upstream dropped from one process's config leaves that process's view only (the other's config may
    // still name it).
    two.retain_inventory(&["mail"]).await.unwrap();
    let left: Vec<String> =
        one.inventory_by_instance().await.unwrap().into_iter().map(|(instance, _)| instance).collect();
    assert_eq!(left, ["gw-1", "gw-1"], "gone from gw-2's view only");
}
}

/// The change listener holds a connection of its own, outside the pool: a pool of one still serves every write
/// while the feed listens, and a decision made by another process still reaches a waiter by notification.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pool_of_one_serves_writes_while_the_feed_listens() {
    let url = PostgresCluster::shared().fresh_database();
    let target =
        PostgresTarget { max_connections: 1, acquire_timeout: Duration::from_secs(3), ..PostgresTarget::new(&url) };
    let (here, there) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let slow = StoreOptions { approval_poll_interval: Duration::from_secs(600), ..StoreOptions::default() };
    let gateway = Store::open_postgres(&target, here.path(), slow.clone()).await.unwrap();
    let console = Store::open_postgres(&PostgresTarget::new(&url), there.path(), slow).await.unwrap();
    // Long enough for the listener to connect (it takes a pooled connection without the fix).
    tokio::time::sleep(Duration::from_millis(1500)).await;
    for n in 0..3 {
        gateway.approvals().create(&pending(Duration::from_secs(600))).await.expect("a write while the feed listens");
        gateway.audit().record_durable(call_entry("write", n)).await.expect("an audit row while the feed listens");
    }

    let request = pending(Duration::from_secs(600));
    gateway.approvals().create(&request).await.expect("create");
    let waiting = {
        let approvals = gateway.approvals();
        let id = request.id.clone();
        tokio::spawn(async move { approvals.wait(&id, Duration::from_secs(20)).await })
    };
    tokio::time::sleep(Duration::from_millis(500)).await;
    console.approvals().decide(&request.id, toolgate_store::ApprovalDecision::Approve, "alice").await.expect("decide");
    let outcome = tokio::time::timeout(Duration::from_secs(15), waiting).await;
    let outcome = outcome.expect("the notification ended the wait").expect("task").expect("wait");
    assert_eq!(outcome, toolgate_store::ApprovalWait::Approved { by: "alice".into() });
}

/// Two machines told the same instance id on one database (each with its own state directory, so no file lock sees
/// the other): the second is refused, naming the id, while the first runs; once the first has stopped, the id is
/// free again. The local file lock alone let both run as one instance.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_machine_with_the_same_instance_id_is_refused_while_the_first_runs() {
    let target = PostgresTarget::new(PostgresCluster::shared().fresh_database());
    let (first_dir, second_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let as_twin = || StoreOptions { journal: true, instance_id: Some("twin".to_owned()), ..StoreOptions::default() };
    let first = Store::open_postgres(&target, first_dir.path(), as_twin()).await.unwrap();
    let second = Store::open_postgres(&target, second_dir.path(), as_twin()).await;
    match second {
        Err(error @ StoreError::InstanceClaimed { .. }) => {
            assert!(error.to_string().contains("\"twin\""), "the refusal names the id: {error}");
        }
        other => panic!("a second process ran as the same instance: {other:?}"),
    }
    let other = StoreOptions { journal: true, instance_id: Some("other".to_owned()), ..StoreOptions::default() };
    let beside = Store::open_postgres(&target, second_dir.path(), other).await.expect("another id runs beside it");
    first.close().await.unwrap();
    let again = Store::open_postgres(&target, second_dir.path(), as_twin()).await.expect("the id is free again");
    again.close().await.unwrap();
    beside.close().await.unwrap();
}
