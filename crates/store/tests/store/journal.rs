//! The audit journal: journaled rows reach the database and the journal empties; a dead process's journal is
//! recovered once at the next open (rows the database lacks are appended, the chain stays intact, nothing is
//! appended twice).

use std::io::Write;

use toolgate_store::{AuditFilter, Store, StoreOptions};

use crate::support::call_entry;

fn journaling() -> StoreOptions {
    StoreOptions { journal: true, ..StoreOptions::default() }
}

#[tokio::test]
async fn journaled_rows_are_committed_and_the_journal_empties() {
    let directory = tempfile::tempdir().unwrap();
    let database = directory.path().join("toolgate.db");
    let store = Store::open_file(&database, journaling()).await.unwrap();
    for n in 0..20 {
        store.audit().record_journaled(call_entry("write_file", n)).await.unwrap();
    }
    store.audit().flush().await.unwrap();
    let rows = store.query_audit(&AuditFilter::default()).await.unwrap();
    assert_eq!(rows.len(), 20);
    let journal = directory.path().join(format!("toolgate.db.journal-{}", std::process::id()));
    assert_eq!(std::fs::metadata(&journal).unwrap().len(), 0, "the journal is truncated once all rows are in");
    assert!(store.verify_audit().await.unwrap().is_intact());
}

#[tokio::test]
async fn a_dead_process_journal_is_recovered_once() {
    let directory = tempfile::tempdir().unwrap();
    let database = directory.path().join("toolgate.db");
    // A first gateway journals rows and commits them; copy its journal lines as a dead process's journal that
    // also holds two rows the database never got.
    let first = Store::open_file(&database, journaling()).await.unwrap();
    first.audit().record_journaled(call_entry("committed", 1)).await.unwrap();
    first.audit().flush().await.unwrap();
    first.close().await.unwrap();

    let dead_pid = 4_000_000_u32; // above pid_max: never a live process
    let orphan = directory.path().join(format!("toolgate.db.journal-{dead_pid}"));
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

    let second = Store::open_file(&database, journaling()).await.unwrap();
    let tools: Vec<String> =
        second.query_audit(&AuditFilter::default()).await.unwrap().into_iter().filter_map(|row| row.tool).collect();
    assert_eq!(tools, ["committed", "lost-1", "lost-2"]);
    assert!(second.verify_audit().await.unwrap().is_intact());
    assert!(!orphan.exists(), "a recovered journal is removed");
    second.close().await.unwrap();

    std::fs::write(&orphan, lines).unwrap();
    let third = Store::open_file(&database, journaling()).await.unwrap();
    assert_eq!(third.query_audit(&AuditFilter::default()).await.unwrap().len(), 3, "nothing is appended twice");
}

#[tokio::test]
async fn a_full_queue_refuses_a_journaled_row_and_journals_nothing() {
    let directory = tempfile::tempdir().unwrap();
    let database = directory.path().join("toolgate.db");
    let options = StoreOptions { audit_queue_capacity: 2, ..journaling() };
    let store = Store::open_file(&database, options).await.unwrap();
    // A current-thread test runtime: the writer cannot run until this task yields, so the queue fills.
    let mut refused = 0;
    for n in 0..5 {
        match store.audit().record_journaled(call_entry("write_file", n)).await {
            Ok(()) => {}
            Err(toolgate_store::StoreError::AuditQueueFull { capacity }) => {
                assert_eq!(capacity, 2);
                refused += 1;
            }
            Err(other) => panic!("unexpected {other}"),
        }
    }
    assert_eq!(refused, 3);
    let journal = directory.path().join(format!("toolgate.db.journal-{}", std::process::id()));
    let lines = std::fs::read_to_string(&journal).unwrap_or_default();
    assert_eq!(lines.lines().count(), 2, "only the accepted rows are journaled");
    store.audit().flush().await.unwrap();
    assert_eq!(store.query_audit(&AuditFilter::default()).await.unwrap().len(), 2);
}
