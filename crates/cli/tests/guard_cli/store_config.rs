//! `[store]` in `--config FILE`: the state commands reach the PostgreSQL store a gateway writes to, not the state
//! directory's SQLite file, and a password in the file is refused with its position.

use std::time::Duration;

use serde_json::json;
use toolgate_store::{ApprovalWait, AuditEntry, AuditKind, PostgresTarget, Store, StoreOptions};
use toolgate_test_support::pending_approval;
use toolgate_test_support::postgres::PostgresCluster;

use crate::support::toolgate_async;

/// A config whose `[store]` names `url`; the upstream is never started by these commands.
fn config_with_store(directory: &std::path::Path, store: &str) -> std::path::PathBuf {
    let path = directory.join("gateway.toml");
    let text = format!("[[upstream]]\nname = \"files\"\ncommand = \"true\"\n\n[store]\n{store}\n");
    std::fs::write(&path, text).expect("config");
    path
}

#[tokio::test(flavor = "multi_thread")]
async fn the_state_commands_reach_the_postgres_store_of_the_config() {
    let url = PostgresCluster::shared().fresh_database();
    let gateway_state = tempfile::tempdir().expect("tempdir");
    let options = StoreOptions { instance_id: Some("gw-1".into()), ..StoreOptions::gateway() };
    let store = Store::open_postgres(&PostgresTarget::new(url.clone()), gateway_state.path(), options).await.unwrap();
    let request = pending_approval(&json!({"path": "/tmp/report.txt"}), Duration::from_secs(300));
    store.approvals().create(&request).await.expect("create");
    store.audit().record_durable(AuditEntry::new(AuditKind::Listing)).await.expect("row");

    // Another machine's state directory: only the config says where the store is.
    let elsewhere = tempfile::tempdir().expect("tempdir");
    let config = config_with_store(elsewhere.path(), &format!("url = \"{url}\"\ninstance_id = \"cli-1\""));
    let (config, state) = (config.to_str().unwrap(), elsewhere.path().join("state"));
    let state = state.to_str().unwrap();
    let list = toolgate_async(&["approvals", "list", "--config", config, "--state-dir", state]).await;
    assert_eq!(list.code, Some(0), "{list:?}");
    assert!(list.stdout.contains(request.id.as_str()), "{}", list.stdout);

    let approvals = store.approvals();
    let id = request.id.clone();
    let waiter = tokio::spawn(async move { approvals.wait(&id, Duration::from_secs(60)).await });
    let approve =
        toolgate_async(&["approvals", "approve", request.id.as_str(), "--config", config, "--state-dir", state]).await;
    assert_eq!(approve.code, Some(0), "{approve:?}");
    assert_eq!(waiter.await.unwrap().unwrap(), ApprovalWait::Approved { by: "tester".into() });

    let audit = toolgate_async(&["audit", "--json", "--config", config, "--state-dir", state]).await;
    assert_eq!(audit.code, Some(0), "{audit:?}");
    assert!(audit.stdout.contains(r#""instance":"gw-1""#), "rows name their writer: {}", audit.stdout);
    let others =
        toolgate_async(&["audit", "--json", "--instance", "gw-2", "--config", config, "--state-dir", state]).await;
    assert_eq!((others.code, others.stdout.trim()), (Some(0), ""), "{others:?}");
    let verify = toolgate_async(&["audit", "verify", "--config", config, "--state-dir", state]).await;
    assert_eq!(verify.code, Some(0), "{verify:?}");
    assert!(verify.stdout.contains("chain intact"), "{}", verify.stdout);

    let raw = sqlx::PgPool::connect(&url).await.unwrap();
    sqlx::query("UPDATE audit_log SET outcome = 'edited' WHERE seq = 1").execute(&raw).await.unwrap();
    let verify = toolgate_async(&["audit", "verify", "--config", config, "--state-dir", state]).await;
    assert_eq!(verify.code, Some(1), "{verify:?}");
    assert!(verify.stdout.contains("row 1: content does not match its hash"), "{}", verify.stdout);
    store.close().await.unwrap();
}

#[tokio::test]
async fn a_password_in_the_store_url_is_refused_with_its_position() {
    let directory = tempfile::tempdir().expect("tempdir");
    let config = config_with_store(directory.path(), "url = \"postgres://toolgate:s3cret@db/toolgate\"");
    let run = toolgate_async(&["audit", "--config", config.to_str().unwrap()]).await;
    assert_eq!(run.code, Some(2), "{run:?}");
    assert!(run.stderr.contains("gateway.toml:6:7: [store]: `url` holds a password"), "{}", run.stderr);
    assert!(!run.stderr.contains("s3cret"), "the password is never printed: {}", run.stderr);
}
