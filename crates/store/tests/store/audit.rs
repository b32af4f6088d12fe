//! The audit log: chain verification, tamper detection with the right message, redaction, the bounded queue,
//! concurrent writers (tasks and two handles on one store), and queries; each on SQLite and on PostgreSQL.

use std::time::{Duration, SystemTime};

use toolgate_core::decision::{Reason, Verdict};
use toolgate_store::{
    ArgumentRedaction, AuditEntry, AuditFilter, AuditKind, AuditQueueError, ChainBreakKind, Store, StoreOptions,
    digest_arguments,
};

use crate::support::{Fresh, Kind, Raw, call_entry, fresh_store, matrix, tamper};

async fn store_with_rows(kind: Kind, rows: u64) -> (Fresh, Store) {
    let (directory, store) = fresh_store(kind, StoreOptions::default()).await;
    let audit = store.audit();
    for n in 0..rows {
        audit.try_record(call_entry("read_file", n)).expect("queue");
    }
    audit.flush().await.expect("flush");
    (directory, store)
}

/// A connection holding the lock every append needs.
enum WriteLock {
    Sqlite(sqlx::pool::PoolConnection<sqlx::Sqlite>),
    Postgres(sqlx::pool::PoolConnection<sqlx::Postgres>),
}

async fn hold_write_lock(raw: &Raw) -> WriteLock {
    match raw {
        Raw::Sqlite(pool) => {
            let mut lock = pool.acquire().await.expect("connection");
            sqlx::query("BEGIN IMMEDIATE").execute(&mut *lock).await.expect("write lock");
            WriteLock::Sqlite(lock)
        }
        Raw::Postgres(pool) => {
            let mut lock = pool.acquire().await.expect("connection");
            sqlx::query("SELECT pg_advisory_lock($1)")
                .bind(0x746f_6f6c_6761_7465_i64)
                .execute(&mut *lock)
                .await
                .expect("chain lock");
            WriteLock::Postgres(lock)
        }
    }
}

async fn release_write_lock(lock: WriteLock) {
    match lock {
        WriteLock::Sqlite(mut lock) => {
            sqlx::query("ROLLBACK").execute(&mut *lock).await.expect("release");
        }
        WriteLock::Postgres(mut lock) => {
            sqlx::query("SELECT pg_advisory_unlock($1)")
                .bind(0x746f_6f6c_6761_7465_i64)
                .execute(&mut *lock)
                .await
                .expect("release");
        }
    }
}

async fn first_break(store: &Store) -> (i64, ChainBreakKind, String) {
    let report = store.verify_audit().await.expect("verify");
    let found = report.first_break.expect("a break");
    (found.seq, found.kind.clone(), found.to_string())
}

matrix! {
#[tokio::test]
async fn an_untouched_chain_verifies(kind) {
    let (_directory, store) = store_with_rows(kind, 10).await;
    let report = store.verify_audit().await.expect("verify");
    assert!(report.is_intact(), "{report:?}");
    assert_eq!(report.rows_checked, 10);
    assert_eq!(report.head.map(|(seq, _)| seq), Some(10));
    let rows = store.query_audit(&AuditFilter::default()).await.expect("query");
    assert_eq!(rows.iter().map(|row| row.seq).collect::<Vec<_>>(), (1..=10).collect::<Vec<_>>());
    assert_eq!(rows[0].prev_hash, toolgate_store::GENESIS_HASH);
    assert!(rows.windows(2).all(|pair| pair[1].prev_hash == pair[0].hash));
}
}

matrix! {
#[tokio::test]
async fn an_empty_log_verifies(kind) {
    let (_directory, store) = fresh_store(kind, StoreOptions::default()).await;
    let report = store.verify_audit().await.expect("verify");
    assert!(report.is_intact());
    assert_eq!(report.rows_checked, 0);
}
}

matrix! {
#[tokio::test]
async fn a_changed_column_is_detected(kind) {
    let (directory, store) = store_with_rows(kind, 10).await;
    let raw = directory.raw().await;
    tamper(&raw, "UPDATE audit_log SET tool = 'delete_file' WHERE seq = 4").await;
    let (seq, kind, message) = first_break(&store).await;
    assert_eq!((seq, kind), (4, ChainBreakKind::HashMismatch));
    assert_eq!(message, "row 4: content does not match its hash (a column was changed)");
}
}

matrix! {
#[tokio::test]
async fn a_changed_json_column_is_detected(kind) {
    let (directory, store) = store_with_rows(kind, 5).await;
    let raw = directory.raw().await;
    tamper(&raw, "UPDATE audit_log SET detail = '{\"note\": \"hi\"}' WHERE seq = 2").await;
    assert_eq!(first_break(&store).await.1, ChainBreakKind::HashMismatch);
    tamper(&raw, "UPDATE audit_log SET detail = 'not json' WHERE seq = 2").await;
    let (seq, kind, message) = first_break(&store).await;
    assert_eq!(seq, 2);
    assert!(matches!(kind, ChainBreakKind::Unreadable { .. }), "{message}");
}
}

matrix! {
#[tokio::test]
async fn a_removed_row_is_detected(kind) {
    let (directory, store) = store_with_rows(kind, 10).await;
    let raw = directory.raw().await;
    tamper(&raw, "DELETE FROM audit_log WHERE seq = 5").await;
    let (seq, kind, message) = first_break(&store).await;
    assert_eq!((seq, kind), (6, ChainBreakKind::Missing { first: 5, last: 5 }));
    assert_eq!(message, "row 5 is missing: the log jumps from 4 to 6 (row removed)");
}
}

matrix! {
#[tokio::test]
async fn removed_rows_at_the_start_and_the_end_are_detected(kind) {
    let (directory, store) = store_with_rows(kind, 10).await;
    let raw = directory.raw().await;
    tamper(&raw, "DELETE FROM audit_log WHERE seq >= 9").await;
    let (seq, kind, message) = first_break(&store).await;
    assert_eq!((seq, kind), (8, ChainBreakKind::EndsBeforeHead { head_seq: 10 }));
    assert_eq!(message, "the log ends at row 8 but its recorded head is row 10: rows at the end were removed");
    tamper(&raw, "DELETE FROM audit_log WHERE seq <= 2").await;
    let (seq, kind, _) = first_break(&store).await;
    assert_eq!((seq, kind), (3, ChainBreakKind::Missing { first: 1, last: 2 }));
}
}

matrix! {
#[tokio::test]
async fn an_inserted_row_is_detected(kind) {
    let (directory, store) = store_with_rows(kind, 5).await;
    let raw = directory.raw().await;
    // Appended by hand, linked to the real last row, but not through the store.
    tamper(
        &raw,
        "INSERT INTO audit_log (seq, time, kind, tool, prev_hash, hash) \
         SELECT 6, time, 'call', 'delete_file', hash, 'sha256:made-up' FROM audit_log WHERE seq = 5",
    )
    .await;
    let (seq, kind, message) = first_break(&store).await;
    assert_eq!((seq, kind), (6, ChainBreakKind::PastHead { head_seq: 5 }));
    assert_eq!(message, "row 6 follows the recorded head (row 5): rows were appended outside the store");
    // Slipped in before the first row.
    tamper(&raw, "DELETE FROM audit_log WHERE seq = 6").await;
    tamper(
        &raw,
        "INSERT INTO audit_log (seq, time, kind, prev_hash, hash) SELECT 0, time, 'call', prev_hash, hash \
         FROM audit_log WHERE seq = 1",
    )
    .await;
    let (seq, kind, message) = first_break(&store).await;
    assert_eq!((seq, kind), (0, ChainBreakKind::OutOfSequence { expected: 1 }));
    assert_eq!(message, "row 0 is out of sequence where row 1 was expected (row inserted)");
}
}

matrix! {
#[tokio::test]
async fn a_replaced_row_shows_as_a_broken_link(kind) {
    let (directory, store) = store_with_rows(kind, 5).await;
    let raw = directory.raw().await;
    // Row 3 replaced by a self-consistent row that does not link to row 2.
    tamper(&raw, "UPDATE audit_log SET prev_hash = 'sha256:other' WHERE seq = 3").await;
    let (seq, kind, message) = first_break(&store).await;
    assert_eq!((seq, kind), (3, ChainBreakKind::PrevHashMismatch));
    assert!(message.contains("prev_hash does not match the hash of row 2"), "{message}");
}
}

matrix! {
#[tokio::test]
async fn arguments_are_digested_unless_clear_is_configured(kind) {
    let args = serde_json::json!({"b": 1, "a": "x"});
    let entry = AuditEntry { args: Some(args.clone()), ..AuditEntry::new(AuditKind::Call) };
    let (_directory, store) = fresh_store(kind, StoreOptions::default()).await;
    store.audit().record_durable(entry.clone()).await.expect("record");
    let rows = store.query_audit(&AuditFilter::default()).await.expect("query");
    assert_eq!(rows[0].args, None);
    assert_eq!(rows[0].args_digest.as_deref(), Some(digest_arguments(&args).as_str()));
    assert!(rows[0].args_digest.as_deref().is_some_and(|digest| digest.starts_with("sha256:")));

    let clear = StoreOptions { redaction: ArgumentRedaction::Clear, ..StoreOptions::default() };
    let (_directory, store) = fresh_store(kind, clear).await;
    store.audit().record_durable(entry).await.expect("record");
    let rows = store.query_audit(&AuditFilter::default()).await.expect("query");
    assert_eq!(rows[0].args, Some(args));
    assert!(store.verify_audit().await.expect("verify").is_intact());
}
}

matrix! {
#[tokio::test]
async fn a_full_queue_is_reported_not_dropped(kind) {
    let options = StoreOptions { audit_queue_capacity: 4, audit_batch_max: 8, ..StoreOptions::default() };
    let (directory, store) = fresh_store(kind, options).await;
    // Another connection holds the write lock (on PostgreSQL, the chain's advisory lock), as a second process
    // might: the writer takes at most one batch and waits for the lock, so the queue fills.
    let raw = directory.raw().await;
    let lock = hold_write_lock(&raw).await;
    let audit = store.audit();
    let tried = 200;
    let mut accepted = 0;
    let mut refused = 0;
    for n in 0..tried {
        match audit.try_record(call_entry("read_file", n)) {
            Ok(()) => accepted += 1,
            Err(AuditQueueError::Full { capacity }) => {
                assert_eq!(capacity, 4);
                refused += 1;
            }
            Err(other) => panic!("unexpected {other}"),
        }
    }
    // The queue's 4 places plus at most the first wake-up's entry and one batch the writer holds.
    assert!((4..=4 + 1 + 8).contains(&accepted), "accepted {accepted}");
    assert_eq!(accepted + refused, tried);
    assert_eq!(audit.stats().rejected, refused);
    release_write_lock(lock).await;
    audit.flush().await.expect("flush");
    assert_eq!(store.query_audit(&AuditFilter::default()).await.expect("query").len() as u64, accepted);
    assert_eq!(audit.stats().written, accepted);
    assert!(audit.try_record(call_entry("read_file", 999)).is_ok());
}
}

matrix! {
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_writers_keep_one_chain(kind) {
    let (directory, store) = fresh_store(kind, StoreOptions::default()).await;
    // A second handle on the same file, as a second gateway process would have.
    let other = directory.open(StoreOptions::default()).await;
    let mut tasks = Vec::new();
    for writer in 0..8_u64 {
        let audit = if writer % 2 == 0 { store.audit() } else { other.audit() };
        tasks.push(tokio::spawn(async move {
            for n in 0..50 {
                let entry = call_entry(&format!("tool_{writer}"), n);
                if n % 5 == 0 {
                    audit.record_durable(entry).await.expect("durable");
                } else {
                    while audit.try_record(entry.clone()).is_err() {
                        tokio::time::sleep(Duration::from_millis(1)).await;
                    }
                }
            }
            audit.flush().await.expect("flush");
        }));
    }
    for task in tasks {
        task.await.expect("task");
    }
    let report = store.verify_audit().await.expect("verify");
    assert!(report.is_intact(), "{report:?}");
    assert_eq!(report.rows_checked, 400);
}
}

matrix! {
#[tokio::test]
async fn queries_filter_by_time_tool_and_verdict(kind) {
    let (_directory, store) = fresh_store(kind, StoreOptions::default()).await;
    let audit = store.audit();
    let start = toolgate_store::parse_rfc3339("2026-01-01T00:00:00Z").expect("time");
    let reason = Reason { rule: "destructive-confirm".into(), detail: "destructiveHint true (declared)".into() };
    for (minute, tool, verdict) in
        [(0, "read_file", Verdict::Allow), (1, "delete_file", Verdict::Confirm), (2, "delete_dir", Verdict::Deny)]
    {
        let entry = AuditEntry {
            time: Some(start + Duration::from_secs(60 * minute)),
            tool: Some(tool.into()),
            verdict: Some(verdict),
            reasons: vec![reason.clone()],
            ..AuditEntry::new(AuditKind::Decision)
        };
        audit.record_durable(entry).await.expect("record");
    }
    let tools = |rows: Vec<toolgate_store::AuditRow>| rows.into_iter().filter_map(|row| row.tool).collect::<Vec<_>>();
    let query = |filter: AuditFilter| {
        let store = store.clone();
        async move { store.query_audit(&filter).await.expect("query") }
    };
    let since = AuditFilter { since: Some(start + Duration::from_secs(60)), ..AuditFilter::default() };
    assert_eq!(tools(query(since).await), ["delete_file", "delete_dir"]);
    let glob = AuditFilter { tool_glob: Some("delete_*".into()), ..AuditFilter::default() };
    assert_eq!(tools(query(glob).await), ["delete_file", "delete_dir"]);
    let verdict = AuditFilter { verdict: Some(Verdict::Deny), ..AuditFilter::default() };
    assert_eq!(tools(query(verdict).await), ["delete_dir"]);
    let last = AuditFilter { limit: Some(2), ..AuditFilter::default() };
    assert_eq!(tools(query(last).await), ["delete_file", "delete_dir"]);
    let rows = query(AuditFilter::default()).await;
    assert_eq!(rows[0].time, "2026-01-01T00:00:00.000000Z");
    assert_eq!(
        rows[0].reasons,
        Some(serde_json::json!([{"rule": "destructive-confirm", "detail": "destructiveHint true (declared)"}]))
    );
    let none_yet = AuditFilter { since: Some(SystemTime::now()), ..AuditFilter::default() };
    assert!(query(none_yet).await.is_empty());
}
}

matrix! {
#[tokio::test]
async fn queries_filter_by_upstream_caller_kind_and_free_text_combined(kind) {
    let (_directory, store) = fresh_store(kind, StoreOptions::default()).await;
    let audit = store.audit();
    let caller = |identity: &str| Some(toolgate_store::Caller { identity: Some(identity.into()), ..Default::default() });
    let rows = [
        ("files", "delete_file", "alice", AuditKind::Decision, Some("ok"), "policy says confirm"),
        ("files", "read_file", "bob", AuditKind::Decision, Some("ok"), "read-only"),
        ("mail", "send_mail", "alice", AuditKind::Result, Some("Timeout"), "external"),
        // Characters LIKE would treat as wildcards are matched literally.
        ("mail", "100%_done", "carol", AuditKind::Result, None, "x"),
    ];
    for (upstream, tool, who, kind, outcome, detail) in rows {
        let entry = AuditEntry {
            upstream: Some(upstream.into()),
            tool: Some(tool.into()),
            caller: caller(who),
            session: Some(format!("session-of-{who}")),
            outcome: outcome.map(str::to_owned),
            reasons: vec![Reason { rule: "r".into(), detail: detail.into() }],
            ..AuditEntry::new(kind)
        };
        audit.record_durable(entry).await.expect("record");
    }
    let tools = |filter: AuditFilter| {
        let store = store.clone();
        async move {
            let rows = store.query_audit(&filter).await.expect("query");
            rows.into_iter().filter_map(|row| row.tool).collect::<Vec<_>>()
        }
    };
    let check = |filter: AuditFilter, expected: &'static [&'static str]| {
        let run = tools(filter.clone());
        async move { assert_eq!(run.await, expected, "{filter:?}") }
    };
    check(AuditFilter { upstream: Some("mail".into()), ..AuditFilter::default() }, &["send_mail", "100%_done"]).await;
    check(AuditFilter { caller: Some("alice".into()), ..AuditFilter::default() }, &["delete_file", "send_mail"]).await;
    check(AuditFilter { kind: Some(AuditKind::Result), ..AuditFilter::default() }, &["send_mail", "100%_done"]).await;
    // Free text: tool, upstream, session, caller, outcome, reasons; ASCII case-insensitive.
    let text = |needle: &str| AuditFilter { text: Some(needle.into()), ..AuditFilter::default() };
    check(text("FILE"), &["delete_file", "read_file"]).await;
    check(text("timeout"), &["send_mail"]).await;
    check(text("session-of-bob"), &["read_file"]).await;
    check(text("carol"), &["100%_done"]).await;
    check(text("READ-ONLY"), &["read_file"]).await;
    check(text("%"), &["100%_done"]).await;
    check(text("_"), &["delete_file", "read_file", "send_mail", "100%_done"]).await;
    check(text("' OR 1=1 --"), &[]).await;
    // Combined: every condition must hold.
    let combined = AuditFilter {
        caller: Some("alice".into()),
        upstream: Some("files".into()),
        text: Some("confirm".into()),
        ..AuditFilter::default()
    };
    check(combined, &["delete_file"]).await;
    let none = AuditFilter { caller: Some("bob".into()), upstream: Some("mail".into()), ..AuditFilter::default() };
    check(none, &[]).await;
}
}
