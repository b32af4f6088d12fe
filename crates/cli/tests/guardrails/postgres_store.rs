//! `toolgate serve` with `[store] url_env` naming a PostgreSQL database: the gateway keeps its inventory and its
//! audit rows there (each naming the configured instance), writes no SQLite database in its state directory, and
//! `toolgate audit verify --config FILE` checks that chain.

use serde_json::json;
use toolgate_store::{AuditFilter, AuditKind, PostgresTarget, Store, StoreOptions};
use toolgate_test_support::postgres::PostgresCluster;

use crate::support::{HANG_GUARD, HttpSession, Setup, start_serve, toolgate};

#[test]
fn serve_keeps_its_state_in_the_postgres_database_its_config_names() {
    let url = PostgresCluster::shared().fresh_database();
    let setup = Setup::demo("[store]\nurl_env = \"TOOLGATE_TEST_STORE_URL\"\ninstance_id = \"gw-test\"\n");
    let serve = start_serve(&setup, &[("TOOLGATE_TEST_STORE_URL", &url)]);
    let mut session = HttpSession::open(&serve.authority, &[]).expect("initialize");
    let answer = session.request("tools/call", json!({"name": "list_notes", "arguments": {}})).expect("call");
    assert!(answer.get("result").is_some(), "{answer}");

    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let reader = tempfile::tempdir().unwrap();
    let store = runtime
        .block_on(Store::open_postgres(&PostgresTarget::new(url.clone()), reader.path(), StoreOptions::default()))
        .unwrap();
    let started = std::time::Instant::now();
    let calls = loop {
        let filter = AuditFilter { kind: Some(AuditKind::Call), ..AuditFilter::default() };
        let calls = runtime.block_on(store.query_audit(&filter)).unwrap();
        if !calls.is_empty() {
            break calls;
        }
        assert!(started.elapsed() < HANG_GUARD, "the call's row never reached PostgreSQL");
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    assert!(calls[0].tool.as_deref().is_some_and(|tool| tool.ends_with("list_notes")), "{calls:#?}");
    assert!(calls.iter().all(|row| row.instance.as_deref() == Some("gw-test")), "{calls:#?}");
    assert!(!runtime.block_on(store.inventory()).unwrap().is_empty(), "the inventory is in PostgreSQL too");
    assert!(!setup.state().join(toolgate_store::DATABASE_FILE).exists(), "no SQLite database beside it");
    assert!(runtime.block_on(store.verify_audit()).unwrap().is_intact());
    runtime.block_on(store.close()).unwrap();
    drop(serve);

    let config = setup.config.to_string_lossy().into_owned();
    let verify = toolgate(&["audit", "verify", "--config", &config, "--state-dir", &setup.state_arg()]);
    // The state commands read `url_env` from their own environment: without it, they say so with its position.
    assert_eq!(verify.code, Some(2), "{verify:?}");
    assert!(verify.stderr.contains("`url_env`: the variable TOOLGATE_TEST_STORE_URL is not set"), "{}", verify.stderr);
}

/// `toolgate verify --config FILE` stores its records in the database `[store]` names, where the `serve` of that
/// config reads its evidence, not in a state directory no gateway reads.
#[test]
fn verify_stores_its_records_where_the_config_keeps_the_state() {
    let url = PostgresCluster::shared().fresh_database();
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path().join("work");
    std::fs::create_dir(&work).unwrap();
    std::fs::write(work.join("notes.txt"), "buy milk\n").unwrap();
    let argv = toolgate_test_support::liar().argv();
    let config = dir.path().join("gateway.toml");
    let text = format!(
        "[[upstream]]\nname = \"liar\"\ncommand = {:?}\nargs = [{:?}]\n\n[store]\nurl = \"{url}\"\n",
        argv[0], argv[1]
    );
    std::fs::write(&config, text).unwrap();
    let state = dir.path().join("state");
    let (config, state_arg, work) = (
        config.to_string_lossy().into_owned(),
        state.to_string_lossy().into_owned(),
        work.to_string_lossy().into_owned(),
    );
    let mut args = vec!["verify", "--format", "json", "--allow-writes", "--config", &config, "--state-dir", &state_arg];
    args.extend(["--dir", &work, "--"]);
    args.extend(argv.iter().map(String::as_str));
    let run = toolgate(&args);
    assert_eq!(run.code, Some(1), "the liar is caught: {run:?}");

    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let stored: i64 = runtime.block_on(async {
        let pool = sqlx::PgPool::connect(&url).await.unwrap();
        sqlx::query_scalar("SELECT count(*) FROM verification").fetch_one(&pool).await.unwrap()
    });
    assert!(stored > 0, "the records are in PostgreSQL");
    assert!(!state.join(toolgate_store::DATABASE_FILE).exists(), "and not in the state directory");
}
