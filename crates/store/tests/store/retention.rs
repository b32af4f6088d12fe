//! Retention: pruning by age and by size keeps `verify` green from the checkpoint, a change after the checkpoint
//! (or to it) is still found, and exported segments re-verify and chain into the database's checkpoint. A
//! row with an old time appended after recent ones (journal recovery) does not prune them. A
//! read-only open verifies without writing and reports what journals hold that the database lacks.

use std::time::{Duration, SystemTime};

use toolgate_store::{
    AuditEntry, AuditFilter, AuditKind, AuditRow, ChainBreakKind, Retention, Store, StoreOptions, verify_rows,
};

use crate::support::{Fresh, Kind, matrix, raw_connection, tamper};

const DAY: Duration = Duration::from_secs(86_400);

/// What `verify` must report for one tampering.
type Expected = fn(&ChainBreakKind) -> bool;

async fn store_with(kind: Kind, retention: Retention) -> (Fresh, Store) {
    let fresh = Fresh::new(kind);
    let store = fresh.open(StoreOptions { retention, ..StoreOptions::default() }).await;
    (fresh, store)
}

async fn write_rows(store: &Store, count: u64, age: Duration) {
    for n in 0..count {
        let entry = AuditEntry {
            time: Some(SystemTime::now() - age),
            tool: Some(format!("tool-{n}")),
            detail: Some(serde_json::json!({"n": n, "pad": "x".repeat(400)})),
            ..AuditEntry::new(AuditKind::Listing)
        };
        store.audit().try_record(entry).unwrap();
    }
    store.audit().flush().await.unwrap();
}

fn read_export(path: &std::path::Path) -> Vec<AuditRow> {
    std::fs::read_to_string(path).unwrap().lines().map(|line| serde_json::from_str(line).unwrap()).collect()
}

matrix! {
#[tokio::test]
async fn pruning_by_age_keeps_the_chain_verifiable_and_exports_what_it_pruned(kind) {
    let export = tempfile::tempdir().unwrap();
    let retention =
        Retention { keep: Some(DAY), export_dir: Some(export.path().to_path_buf()), ..Retention::default() };
    let (_directory, store) = store_with(kind, retention).await;
    write_rows(&store, 30, 3 * DAY).await;
    write_rows(&store, 10, Duration::ZERO).await;

    let report = store.prune_audit().await.unwrap();
    assert_eq!(report.rows, 30);
    let checkpoint = report.checkpoint.clone().expect("a checkpoint");
    assert_eq!(checkpoint.seq, 30);
    assert_eq!(store.query_audit(&AuditFilter::default()).await.unwrap().len(), 10);
    let verified = store.verify_audit().await.unwrap();
    assert!(verified.is_intact(), "{verified:?}");
    assert_eq!(verified.rows_checked, 10);
    assert_eq!(verified.checkpoint, Some((30, checkpoint.hash.clone())));

    // The exported rows re-verify from the genesis hash and end at the checkpoint: that is what anchors it.
    let exported: Vec<AuditRow> = report.exported.iter().flat_map(|path| read_export(path)).collect();
    assert_eq!(exported.len(), 30);
    let replay = verify_rows(&exported, None);
    assert!(replay.is_intact(), "{replay:?}");
    assert_eq!(replay.head, Some((checkpoint.seq, checkpoint.hash.clone())));
    // A changed exported line does not.
    let mut changed = exported.clone();
    changed[4].tool = Some("edited".into());
    assert_eq!(verify_rows(&changed, None).first_break.map(|found| found.kind), Some(ChainBreakKind::HashMismatch));

    // Nothing more is old enough; new rows continue the chain from the checkpoint.
    assert_eq!(store.prune_audit().await.unwrap().rows, 0);
    write_rows(&store, 3, Duration::ZERO).await;
    assert!(store.verify_audit().await.unwrap().is_intact());
}
}

matrix! {
#[tokio::test]
async fn a_late_row_with_an_old_time_does_not_carry_the_recent_rows_before_it_away(kind) {
    let retention = Retention { keep: Some(DAY), ..Retention::default() };
    let (_directory, store) = store_with(kind, retention).await;
    write_rows(&store, 5, 3 * DAY).await;
    write_rows(&store, 10, Duration::ZERO).await;
    // What journal recovery (or a clock stepped back) does: a row with an old time at a higher seq.
    write_rows(&store, 1, 3 * DAY).await;
    write_rows(&store, 2, Duration::ZERO).await;

    let report = store.prune_audit().await.unwrap();
    // Only the old rows before the first recent one go; the recent ones, and the late old row among them, stay.
    assert_eq!(report.rows, 5);
    assert_eq!(report.checkpoint.expect("a checkpoint").seq, 5);
    assert_eq!(store.query_audit(&AuditFilter::default()).await.unwrap().len(), 13);
    assert!(store.verify_audit().await.unwrap().is_intact());
}
}

matrix! {
#[tokio::test]
async fn a_change_after_the_checkpoint_or_to_it_is_still_found(kind) {
    let retention = Retention { keep: Some(DAY), ..Retention::default() };
    let cases: [(&'static str, Expected); 4] = [
        ("UPDATE audit_log SET tool = 'edited' WHERE seq = 8", |kind| *kind == ChainBreakKind::HashMismatch),
        ("DELETE FROM audit_log WHERE seq = 6", |kind| matches!(kind, ChainBreakKind::Missing { first: 6, last: 6 })),
        ("DELETE FROM audit_checkpoint", |kind| matches!(kind, ChainBreakKind::Missing { first: 1, last: 5 })),
        ("UPDATE audit_checkpoint SET hash = 'sha256:00'", |kind| *kind == ChainBreakKind::PrevHashMismatch),
    ];
    for (statement, expected) in cases {
        let (directory, store) = store_with(kind, retention.clone()).await;
        write_rows(&store, 5, 3 * DAY).await;
        write_rows(&store, 5, Duration::ZERO).await;
        assert_eq!(store.prune_audit().await.unwrap().rows, 5);
        assert!(store.verify_audit().await.unwrap().is_intact());
        let raw = directory.raw().await;
        tamper(&raw, statement).await;
        let report = store.verify_audit().await.unwrap();
        let found = report.first_break.unwrap_or_else(|| panic!("{statement}: not detected"));
        assert!(expected(&found.kind), "{statement}: {found:?}");
    }
}
}

#[tokio::test]
async fn pruning_by_size_brings_the_database_under_its_limit() {
    let retention = Retention { max_bytes: Some(256 * 1024), ..Retention::default() };
    let (directory, store) = store_with(Kind::Sqlite, retention).await;
    write_rows(&store, 2_000, Duration::ZERO).await;
    let report = store.prune_audit().await.unwrap();
    assert!(report.rows > 0, "nothing pruned: {report:?}");
    assert!(store.verify_audit().await.unwrap().is_intact());
    let raw = raw_connection(&directory.database()).await;
    let pages: i64 = sqlx::query_scalar("PRAGMA page_count").fetch_one(&raw).await.unwrap();
    let free: i64 = sqlx::query_scalar("PRAGMA freelist_count").fetch_one(&raw).await.unwrap();
    let size: i64 = sqlx::query_scalar("PRAGMA page_size").fetch_one(&raw).await.unwrap();
    assert!((pages - free) * size <= 256 * 1024, "{} bytes in use", (pages - free) * size);
}

#[tokio::test]
async fn a_read_only_verify_writes_nothing_and_reports_unrecovered_journal_rows() {
    let directory = tempfile::tempdir().unwrap();
    let database = directory.path().join("toolgate.db");
    let store = Store::open_file(&database, StoreOptions::default()).await.unwrap();
    write_rows(&store, 3, Duration::ZERO).await;
    let rows = store.query_audit(&AuditFilter::default()).await.unwrap();
    store.close().await.unwrap();
    // A dead process's journal holding one row the database has and one it lacks.
    let orphan = directory.path().join("toolgate.db.journal-4000000");
    let mut lost = rows[2].clone();
    lost.tool = Some("lost".into());
    let lines = [&rows[2], &lost]
        .iter()
        .enumerate()
        .map(|(n, row)| serde_json::json!({"id": format!("dead-{n}"), "row": row}).to_string() + "\n")
        .collect::<String>();
    std::fs::write(&orphan, lines).unwrap();

    let reader = Store::open_read_only(&database).await.unwrap();
    assert!(reader.verify_audit().await.unwrap().is_intact());
    let backlog = reader.journal_backlog().await.unwrap();
    assert_eq!((backlog.files, backlog.rows, backlog.torn_lines), (1, 1, 0));
    assert!(reader.audit().record_durable(AuditEntry::new(AuditKind::Listing)).await.is_err(), "read-only");
    drop(reader);
    assert!(orphan.exists(), "verify leaves the journal for a real open to recover");
    let store = Store::open_file(&database, StoreOptions::default()).await.unwrap();
    assert_eq!(store.query_audit(&AuditFilter::default()).await.unwrap().len(), 4);
}

matrix! {
#[tokio::test]
async fn repeated_reasons_and_hints_are_stored_once_and_read_back_whole(kind) {
    let (directory, store) = store_with(kind, Retention::default()).await;
    let reasons = vec![toolgate_core::decision::Reason {
        rule: "allow-all".into(),
        detail: "configured rule `allow-all` (allow) matched every call".into(),
    }];
    for n in 0..50_u64 {
        let entry = AuditEntry {
            tool: Some("write_file".into()),
            verdict: Some(toolgate_core::decision::Verdict::Allow),
            reasons: reasons.clone(),
            args: Some(serde_json::json!({"n": n})),
            ..AuditEntry::new(AuditKind::Call)
        };
        store.audit().try_record(entry).unwrap();
    }
    store.audit().flush().await.unwrap();
    let raw = directory.raw().await;
    let texts = raw.count("SELECT count(*) FROM audit_text").await;
    assert_eq!(texts, 1, "one stored text for fifty rows");
    let inline = raw.count("SELECT count(*) FROM audit_log WHERE reasons IS NOT NULL").await;
    assert_eq!(inline, 0);
    let rows = store.query_audit(&AuditFilter { text: Some("matched every".into()), ..AuditFilter::default() }).await;
    let rows = rows.unwrap();
    assert_eq!(rows.len(), 50, "the free-text filter searches the stored reasons");
    assert_eq!(rows[0].reasons.as_ref().and_then(|reasons| reasons[0]["rule"].as_str()), Some("allow-all"));
    assert!(store.verify_audit().await.unwrap().is_intact());
    tamper(&raw, "UPDATE audit_text SET text = '[{\"detail\":\"edited\",\"rule\":\"allow-all\"}]'").await;
    let report = store.verify_audit().await.unwrap();
    assert_eq!(report.first_break.map(|found| found.kind), Some(ChainBreakKind::HashMismatch));
}
}

#[tokio::test]
async fn a_read_only_open_of_an_older_schema_says_so_and_writes_nothing() {
    let directory = tempfile::tempdir().unwrap();
    let database = directory.path().join("toolgate.db");
    let store = Store::open_file(&database, StoreOptions::default()).await.unwrap();
    write_rows(&store, 2, Duration::ZERO).await;
    store.close().await.unwrap();
    // As a database last opened by the previous release: its newest migration not applied yet.
    let raw = raw_connection(&database).await;
    let newest: i64 = sqlx::query_scalar("SELECT max(version) FROM _sqlx_migrations").fetch_one(&raw).await.unwrap();
    sqlx::query("DELETE FROM _sqlx_migrations WHERE version = ?").bind(newest).execute(&raw).await.unwrap();
    // Migration numbers have gaps (one is another change's), so the previous one is read, not computed.
    let previous: i64 = sqlx::query_scalar("SELECT max(version) FROM _sqlx_migrations").fetch_one(&raw).await.unwrap();
    raw.close().await;

    let Err(error) = Store::open_read_only(&database).await else { panic!("an older schema opened read-only") };
    let message = error.to_string();
    assert!(message.contains(&format!("schema version {previous}")), "{message}");
    assert!(message.contains("toolgate audit"), "says how to migrate it: {message}");
    let raw = raw_connection(&database).await;
    let after: i64 = sqlx::query_scalar("SELECT max(version) FROM _sqlx_migrations").fetch_one(&raw).await.unwrap();
    assert_eq!(after, previous, "a read-only open migrates nothing");
}
