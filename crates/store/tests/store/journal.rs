//! The audit journal: journaled rows reach the database and the journal empties; a dead process's journal is
//! recovered once at the next open (rows the database lacks are appended, the chain stays intact, nothing is
//! appended twice); a journal is a dead process's when its lock is free, whatever its pid.

use std::io::Write;

use std::time::{Duration, Instant};

use toolgate_store::{ArgumentRedaction, AuditEntry, AuditFilter, AuditKind, Store, StoreOptions};

use crate::support::{Fresh, call_entry, matrix};

fn journaling() -> StoreOptions {
    StoreOptions { journal: true, ..StoreOptions::default() }
}

matrix! {
#[tokio::test]
async fn journaled_rows_are_committed_and_the_journal_empties(kind) {
    let place = Fresh::new(kind);
    let store = place.open(journaling()).await;
    for n in 0..20 {
        store.audit().record_journaled(call_entry("write_file", n)).await.unwrap().finish("ok", n);
    }
    store.audit().flush().await.unwrap();
    let rows = store.query_audit(&AuditFilter::default()).await.unwrap();
    assert_eq!(rows.len(), 20);
    let journal = format!("{}.journal-{}", place.journal_base().display(), std::process::id());
    assert_eq!(std::fs::metadata(&journal).unwrap().len(), 0, "the journal is truncated once all rows are in");
    assert!(store.verify_audit().await.unwrap().is_intact());
}
}

matrix! {
#[tokio::test]
async fn a_dead_process_journal_is_recovered_once(kind) {
    let place = Fresh::new(kind);
    let directory = &place.directory;
    // A first gateway journals rows and commits them; copy its journal lines as a dead process's journal that
    // also holds two rows the database never got.
    let first = place.open(journaling()).await;
    first.audit().record_journaled(call_entry("committed", 1)).await.unwrap().finish("ok", 1);
    first.audit().flush().await.unwrap();
    first.close().await.unwrap();

    let dead_pid = 4_000_000_u32; // above pid_max: never a live process
    let orphan = std::path::PathBuf::from(format!("{}.journal-{dead_pid}", place.journal_base().display()));
    // Two rows the database never got, as journal lines (`{"id", "row"}`; the chain fields are refilled on append).
    let scratch = Store::open_file(&directory.path().join("scratch.db"), StoreOptions::default()).await.unwrap();
    scratch.audit().record_durable(call_entry("lost-1", 2)).await.unwrap();
    scratch.audit().record_durable(call_entry("lost-2", 3)).await.unwrap();
    let lost = scratch.query_audit(&AuditFilter::default()).await.unwrap();
    scratch.close().await.unwrap();
    let mut lines = String::new();
    for (n, row) in lost.iter().enumerate() {
        lines.push_str(&serde_json::json!({"id": format!("dead-{n}"), "row": row}).to_string());
        lines.push('\n');
    }
    let mut file = std::fs::File::create(&orphan).unwrap();
    file.write_all(lines.as_bytes()).unwrap();
    // A torn last line, as a crash mid-write leaves it, is skipped.
    file.write_all(b"{\"id\":\"torn").unwrap();
    drop(file);

    let second = place.open(journaling()).await;
    let tools: Vec<String> =
        second.query_audit(&AuditFilter::default()).await.unwrap().into_iter().filter_map(|row| row.tool).collect();
    assert_eq!(tools, ["committed", "lost-1", "lost-2"]);
    let outcomes: Vec<Option<String>> =
        second.query_audit(&AuditFilter::default()).await.unwrap().into_iter().map(|row| row.outcome).collect();
    // A recovered row says its outcome was not recorded, not that the call never finished.
    assert_eq!(outcomes, [Some("ok".into()), Some("not_recorded".into()), Some("not_recorded".into())]);
    assert!(second.verify_audit().await.unwrap().is_intact());
    assert!(!orphan.exists(), "a recovered journal is removed");
    second.close().await.unwrap();

    std::fs::write(&orphan, lines).unwrap();
    let third = place.open(journaling()).await;
    assert_eq!(third.query_audit(&AuditFilter::default()).await.unwrap().len(), 3, "nothing is appended twice");
}
}

#[tokio::test]
async fn calls_in_flight_hold_no_place_in_the_queue() {
    let directory = tempfile::tempdir().unwrap();
    let options = StoreOptions { audit_queue_capacity: 2, audit_queue_wait: Duration::from_millis(50), ..journaling() };
    let store = Store::open_file(&directory.path().join("toolgate.db"), options).await.unwrap();
    // Far more calls in flight than the queue holds: none waits for a place (issue 17: stuck calls to one upstream
    // filled the queue and refused calls to every other).
    let mut in_flight = Vec::new();
    for n in 0..20 {
        in_flight.push(store.audit().record_journaled(call_entry("slow", n)).await.expect("admitted while others run"));
    }
    for (n, pending) in in_flight.into_iter().enumerate() {
        pending.finish("ok", n as u64);
    }
    store.audit().flush().await.unwrap();
    let rows = store.query_audit(&AuditFilter::default()).await.unwrap();
    assert_eq!(rows.len(), 20);
    assert!(rows.iter().all(|row| row.outcome.as_deref() == Some("ok")));
    assert_eq!(store.audit().stats().rejected, 0);
}

#[tokio::test]
async fn a_failing_writer_refuses_calls_naming_its_error_and_recovers_by_itself() {
    let directory = tempfile::tempdir().unwrap();
    let database = directory.path().join("toolgate.db");
    let wait = Duration::from_millis(50);
    let options = StoreOptions {
        audit_queue_capacity: 2,
        audit_queue_wait: wait,
        busy_timeout: Duration::from_millis(20),
        ..journaling()
    };
    let store = Store::open_file(&database, options).await.unwrap();
    // Another connection holds the write lock: every attempt of the writer fails ("database is locked").
    let raw = crate::support::raw_connection(&database).await;
    let mut blocker = raw.acquire().await.unwrap();
    sqlx::query("BEGIN IMMEDIATE").execute(&mut *blocker).await.unwrap();
    for n in 0..2 {
        store.audit().record_journaled(call_entry("write_file", n)).await.unwrap().finish("ok", n);
    }
    let refused = poll_refusal(&store).await;
    match refused {
        toolgate_store::StoreError::AuditWriterFailing { error, waiting } => {
            assert!(error.contains("locked"), "the refusal names the writer's error: {error}");
            assert_eq!(waiting, 2);
        }
        other => panic!("expected the writer's failure, got {other:?}"),
    }
    assert!(store.audit().stats().failing);
    let journal = directory.path().join(format!("toolgate.db.journal-{}", std::process::id()));
    let lines = std::fs::read_to_string(&journal).unwrap_or_default();
    assert_eq!(lines.lines().count(), 2, "a refused call is not journaled");

    // The lock goes away: the writer's next attempt succeeds without a restart, and calls are admitted again.
    sqlx::query("ROLLBACK").execute(&mut *blocker).await.unwrap();
    drop(blocker);
    let admitted = tokio::time::timeout(Duration::from_secs(30), async {
        loop {
            if let Ok(pending) = store.audit().record_journaled(call_entry("write_file", 3)).await {
                return pending;
            }
        }
    })
    .await
    .expect("the writer recovers by itself");
    admitted.finish("is_error", 3);
    store.audit().flush().await.unwrap();
    assert!(!store.audit().stats().failing);
    let rows = store.query_audit(&AuditFilter::default()).await.unwrap();
    let outcomes: Vec<_> = rows.iter().map(|row| (row.outcome.clone(), row.duration_us)).collect();
    assert_eq!(
        outcomes,
        [(Some("ok".into()), Some(0)), (Some("ok".into()), Some(1)), (Some("is_error".into()), Some(3))]
    );
    assert!(store.verify_audit().await.unwrap().is_intact());
}

/// Asks for places until the writer's failure shows (its first attempts run while the rows arrive).
async fn poll_refusal(store: &Store) -> toolgate_store::StoreError {
    let started = Instant::now();
    loop {
        match store.audit().record_journaled(call_entry("refused", 99)).await {
            Err(error @ toolgate_store::StoreError::AuditWriterFailing { .. }) => return error,
            Err(toolgate_store::StoreError::AuditQueueFull { .. }) => {}
            Err(other) => panic!("unexpected error {other:?}"),
            Ok(pending) => panic!("admitted while the writer fails: {pending:?}"),
        }
        assert!(started.elapsed() < Duration::from_secs(60), "the writer never reported its failure");
    }
}

#[tokio::test]
async fn a_call_row_reaches_the_database_once_with_its_outcome() {
    let directory = tempfile::tempdir().unwrap();
    let store = Store::open_file(&directory.path().join("toolgate.db"), journaling()).await.unwrap();
    let pending = store.audit().record_journaled(call_entry("write_file", 1)).await.unwrap();
    store.audit().flush().await.unwrap();
    assert!(store.query_audit(&AuditFilter::default()).await.unwrap().is_empty(), "not before the call ends");
    pending.finish("ok", 1234);
    // A call abandoned without an outcome still gets its row, saying so.
    drop(store.audit().record_journaled(call_entry("abandoned", 2)).await.unwrap());
    store.audit().flush().await.unwrap();
    let rows = store.query_audit(&AuditFilter::default()).await.unwrap();
    let summary: Vec<_> = rows.iter().map(|row| (row.kind.as_str(), row.tool.clone(), row.outcome.clone())).collect();
    assert_eq!(
        summary,
        [
            ("call", Some("write_file".into()), Some("ok".into())),
            ("call", Some("abandoned".into()), Some("abandoned".into()))
        ]
    );
    assert_eq!(rows[0].duration_us, Some(1234));
    assert!(store.verify_audit().await.unwrap().is_intact());
}

#[tokio::test]
async fn a_long_call_does_not_keep_one_journal_growing() {
    let directory = tempfile::tempdir().unwrap();
    let options = StoreOptions { redaction: ArgumentRedaction::Clear, ..journaling() };
    let store = Store::open_file(&directory.path().join("toolgate.db"), options).await.unwrap();
    let big = |tool: &str| AuditEntry {
        tool: Some(tool.into()),
        args: Some(serde_json::json!({"content": "x".repeat(1 << 20)})),
        ..AuditEntry::new(AuditKind::Call)
    };
    let journals = || {
        let mut names: Vec<String> = std::fs::read_dir(directory.path())
            .unwrap()
            .filter_map(Result::ok)
            .map(|entry| entry.file_name().to_string_lossy().into_owned())
            .filter(|name| name.contains(".journal-") && !name.ends_with(".lock"))
            .collect();
        names.sort();
        names
    };
    let long = store.audit().record_journaled(big("long")).await.unwrap();
    for n in 0..12 {
        store.audit().record_journaled(big(&format!("short-{n}"))).await.unwrap().finish("ok", 1);
        store.audit().flush().await.unwrap();
    }
    let base = format!("toolgate.db.journal-{}", std::process::id());
    let files = journals();
    assert!(files.contains(&base), "the file holding the long call's row stays: {files:?}");
    assert!(files.len() <= 2, "emptied files are removed: {files:?}");
    let size = |name: &str| std::fs::metadata(directory.path().join(name)).map(|meta| meta.len()).unwrap_or(0);
    assert!(files.iter().map(|name| size(name)).sum::<u64>() < 8 << 20, "journals stay bounded: {files:?}");
    long.finish("ok", 1);
    store.audit().flush().await.unwrap();
    let files = journals();
    assert!(files.iter().all(|name| size(name) == 0), "every journaled row is in: {files:?}");
    assert!(!files.contains(&base), "the long call's file is removed once its row is in: {files:?}");
    assert_eq!(store.query_audit(&AuditFilter::default()).await.unwrap().len(), 13);
}

/// A number no double holds (`1e400`, kept by serde_json's `arbitrary_precision`) once had no canonical text: the
/// writer stored the row anyway, `verify` then reported a break on it, and a dead process's journal holding one
/// made every `Store::open` fail.
#[tokio::test]
async fn rows_with_numbers_beyond_a_double_verify_and_recover() {
    let directory = tempfile::tempdir().unwrap();
    let database = directory.path().join("toolgate.db");
    let huge: serde_json::Value = serde_json::from_str(r#"{"x": 1e400, "y": -2E+999}"#).unwrap();
    // Arguments in clear, so the row holds them and `verify` canonicalizes them again.
    let clear = StoreOptions { redaction: ArgumentRedaction::Clear, ..journaling() };
    let first = Store::open_file(&database, clear.clone()).await.unwrap();
    let entry = AuditEntry { args: Some(huge.clone()), ..call_entry("huge-live", 1) };
    first.audit().record_journaled(entry).await.unwrap().finish("ok", 1);
    first.audit().flush().await.unwrap();
    assert!(first.verify_audit().await.unwrap().is_intact(), "a row with 1e400 in its arguments verifies");
    first.close().await.unwrap();

    // A dead process's journal with such a row and an ordinary one after it.
    let scratch = Store::open_file(&directory.path().join("scratch.db"), StoreOptions::default()).await.unwrap();
    scratch.audit().record_durable(call_entry("huge-lost", 2)).await.unwrap();
    scratch.audit().record_durable(call_entry("plain-lost", 3)).await.unwrap();
    let lost = scratch.query_audit(&AuditFilter::default()).await.unwrap();
    scratch.close().await.unwrap();
    let mut lines = String::new();
    for (n, mut row) in lost.into_iter().enumerate() {
        if n == 0 {
            row.args = Some(huge.clone());
        }
        lines.push_str(&serde_json::json!({"id": format!("dead-{n}"), "row": row}).to_string());
        lines.push('\n');
    }
    assert!(lines.contains("1e+400"), "{lines}");
    std::fs::write(directory.path().join("toolgate.db.journal-4000001"), lines).unwrap();

    let second = Store::open_file(&database, clear).await.unwrap();
    let rows = second.query_audit(&AuditFilter::default()).await.unwrap();
    let tools: Vec<&str> = rows.iter().filter_map(|row| row.tool.as_deref()).collect();
    assert_eq!(tools, ["huge-live", "huge-lost", "plain-lost"]);
    assert_eq!(rows[1].args.as_ref().map(|args| args["x"].to_string()), Some("1e+400".to_owned()));
    assert!(second.verify_audit().await.unwrap().is_intact(), "recovered rows verify");
}

#[tokio::test]
async fn a_call_put_to_a_person_has_one_row_however_it_ends() {
    let directory = tempfile::tempdir().unwrap();
    let store = Store::open_file(&directory.path().join("toolgate.db"), journaling()).await.unwrap();
    let audit = store.audit();
    // Refused: the row journaled as the person was asked, completed with why.
    let refused = audit.record_waiting(call_entry("refused", 1)).await.unwrap();
    assert!(refused.is_waiting());
    refused.finish_with("declined", 10, Some(serde_json::json!({"reason": "the user declined"})));
    // Approved: the same row, journaled again as forwarded with the approval, completed with the call's outcome.
    let mut approved = audit.record_waiting(call_entry("approved", 2)).await.unwrap();
    let with_approval = AuditEntry { approval_id: Some("approval-1".into()), ..call_entry("approved", 2) };
    approved.forwarding(with_approval).unwrap();
    assert!(!approved.is_waiting());
    approved.finish("ok", 20);
    // Lost while it waited (its task ended): not forwarded, and the row says so.
    drop(audit.record_waiting(call_entry("lost", 3)).await.unwrap());
    audit.flush().await.unwrap();
    let rows = store.query_audit(&AuditFilter::default()).await.unwrap();
    let summary: Vec<_> = rows
        .iter()
        .map(|row| (row.kind.as_str(), row.tool.as_deref(), row.outcome.as_deref(), row.approval_id.as_deref()))
        .collect();
    assert_eq!(
        summary,
        [
            ("call", Some("refused"), Some("declined"), None),
            ("call", Some("approved"), Some("ok"), Some("approval-1")),
            ("call", Some("lost"), Some("unanswered"), None),
        ]
    );
    assert_eq!(rows[0].detail, Some(serde_json::json!({"reason": "the user declined"})));
    assert!(store.verify_audit().await.unwrap().is_intact());
    let journal = directory.path().join(format!("toolgate.db.journal-{}", std::process::id()));
    assert_eq!(std::fs::metadata(&journal).unwrap().len(), 0, "every line, the superseded one too, is released");

    // A store without a journal cannot record a call: two rows, or a row nowhere durable, are both wrong.
    let plain = Store::open_file(&directory.path().join("plain.db"), StoreOptions::default()).await.unwrap();
    assert!(matches!(
        plain.audit().record_journaled(call_entry("x", 4)).await,
        Err(toolgate_store::StoreError::NoAuditJournal)
    ));
    assert!(matches!(
        plain.audit().record_waiting(call_entry("x", 5)).await,
        Err(toolgate_store::StoreError::NoAuditJournal)
    ));
}

#[tokio::test]
async fn a_crash_while_a_call_waits_for_a_person_recovers_its_row_as_unanswered_unless_it_was_forwarded() {
    let directory = tempfile::tempdir().unwrap();
    let database = directory.path().join("toolgate.db");
    let store = Store::open_file(&database, journaling()).await.unwrap();
    let asked = store.audit().record_waiting(call_entry("asked", 1)).await.unwrap();
    let mut approved = store.audit().record_waiting(call_entry("approved", 2)).await.unwrap();
    approved.forwarding(call_entry("approved", 2)).unwrap();
    // What a crash leaves: the rows in the journal, never completed.
    std::mem::forget(asked);
    std::mem::forget(approved);
    store.close().await.unwrap();
    let live = directory.path().join(format!("toolgate.db.journal-{}", std::process::id()));
    let text = std::fs::read_to_string(&live).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 3, "two waiting lines and the approved call's forwarded one: {text}");
    // As a dead process left them, the approved call's two lines in two files (the journal moved on meanwhile).
    let dead = directory.path().join("toolgate.db.journal-4000000");
    std::fs::write(&dead, format!("{}\n{}\n", lines[0], lines[1])).unwrap();
    std::fs::write(directory.path().join("toolgate.db.journal-4000000.1"), format!("{}\n", lines[2])).unwrap();
    std::fs::remove_file(&live).unwrap();

    let reopened = Store::open_file(&database, journaling()).await.unwrap();
    let rows = reopened.query_audit(&AuditFilter::default()).await.unwrap();
    let summary: Vec<_> = rows.iter().map(|row| (row.tool.as_deref(), row.outcome.as_deref())).collect();
    assert_eq!(summary, [(Some("asked"), Some("unanswered")), (Some("approved"), Some("not_recorded"))]);
    assert!(reopened.verify_audit().await.unwrap().is_intact());
}

#[tokio::test]
async fn a_second_handle_in_the_same_process_leaves_the_journal_of_calls_in_flight_alone() {
    let directory = tempfile::tempdir().unwrap();
    let database = directory.path().join("toolgate.db");
    let gateway = Store::open_file(&database, journaling()).await.unwrap();
    let in_flight = gateway.audit().record_journaled(call_entry("in_flight", 1)).await.unwrap();
    // What `toolgate approvals` would open, here in the gateway's own process (as the tests do).
    let other = Store::open_file(&database, StoreOptions::default()).await.unwrap();
    in_flight.finish("ok", 1);
    gateway.audit().flush().await.unwrap();
    let rows = other.query_audit(&AuditFilter::default()).await.unwrap();
    let summary: Vec<_> = rows.iter().map(|row| (row.tool.as_deref(), row.outcome.as_deref())).collect();
    assert_eq!(summary, [(Some("in_flight"), Some("ok"))], "the call's row once, with its outcome");
}

matrix! {
#[tokio::test]
async fn a_journal_whose_lock_is_free_is_recovered_even_when_its_pid_is_alive(kind) {
    let place = Fresh::new(kind);
    let directory = &place.directory;
    // Pid 1 is always alive (another process reused the dead writer's pid); the journal's lock says who is gone.
    let orphan = std::path::PathBuf::from(format!("{}.journal-1", place.journal_base().display()));
    let scratch = Store::open_file(&directory.path().join("scratch.db"), StoreOptions::default()).await.unwrap();
    scratch.audit().record_durable(call_entry("lost", 1)).await.unwrap();
    let lost = scratch.query_audit(&AuditFilter::default()).await.unwrap();
    scratch.close().await.unwrap();
    let line = serde_json::json!({"id": "dead-0", "row": lost[0]}).to_string();
    std::fs::write(&orphan, format!("{line}\n")).unwrap();
    let lock = std::path::PathBuf::from(format!("{}.lock", orphan.display()));
    std::fs::write(&lock, "").unwrap();

    let store = place.open(journaling()).await;
    let tools: Vec<String> =
        store.query_audit(&AuditFilter::default()).await.unwrap().into_iter().filter_map(|row| row.tool).collect();
    assert_eq!(tools, ["lost"], "a free lock means its writer is gone, whatever its pid");
    assert!(!orphan.exists() && !lock.exists(), "the journal and its lock are removed once recovered");

    // A journal whose lock a live writer holds is left alone.
    let live_lock = std::fs::File::create(&lock).unwrap();
    live_lock.try_lock().unwrap();
    std::fs::write(&orphan, format!("{line}\n")).unwrap();
    let again = place.open(StoreOptions::default()).await;
    assert_eq!(again.query_audit(&AuditFilter::default()).await.unwrap().len(), 1, "a held journal is not taken");
    assert!(orphan.exists());
}
}
