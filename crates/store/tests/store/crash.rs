//! `kill -9` in the middle of a burst of durable writes: after reopening, the chain verifies and every row the
//! child reported as durable is there.
//!
//! The child is this test binary itself, run with `TOOLGATE_STORE_CRASH_CHILD` set to the database path: it runs
//! only [`crash_child_process`], which prints `durable <seq> <writer> <n>` after each `record_durable` returns.
//! Without the variable that function returns at once.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use toolgate_store::{AuditEntry, AuditFilter, AuditKind, Durability, Store, StoreOptions};

const CHILD_ENV: &str = "TOOLGATE_STORE_CRASH_CHILD";
const DURABILITY_ENV: &str = "TOOLGATE_STORE_CRASH_DURABILITY";
/// Durable rows the parent waits for before killing the child.
const KILL_AFTER: usize = 400;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_child_process() {
    let Some(path) = std::env::var_os(CHILD_ENV) else {
        return;
    };
    let durability = match std::env::var(DURABILITY_ENV).as_deref() {
        Ok("process") => Durability::ProcessCrash,
        _ => Durability::PowerLoss,
    };
    let options = StoreOptions { durability, ..StoreOptions::default() };
    let store = Store::open_file(std::path::Path::new(&path), options).await.expect("child open");
    let started = Instant::now();
    let mut writers = Vec::new();
    for writer in 0..4_u64 {
        let audit = store.audit();
        writers.push(tokio::spawn(async move {
            let mut n = 0_u64;
            // Bounded so that an orphaned child stops by itself.
            while started.elapsed() < Duration::from_secs(60) {
                let call = AuditEntry {
                    tool: Some(format!("tool_{writer}")),
                    detail: Some(serde_json::json!({"writer": writer, "n": n})),
                    ..AuditEntry::new(AuditKind::Call)
                };
                let receipt = audit.record_durable(call).await.expect("durable");
                let mut stdout = std::io::stdout().lock();
                writeln!(stdout, "durable {} {writer} {n}", receipt.seq).expect("stdout");
                stdout.flush().expect("flush");
                drop(stdout);
                // The result row goes through the queue, as the proxy's would.
                let _ =
                    audit.try_record(AuditEntry { outcome: Some("ok".into()), ..AuditEntry::new(AuditKind::Result) });
                n += 1;
            }
        }));
    }
    for writer in writers {
        writer.await.expect("writer");
    }
}

fn crash_and_check(durability: &str) {
    let directory = tempfile::tempdir().expect("tempdir");
    let path = directory.path().join("toolgate.db");
    let mut child = Command::new(std::env::current_exe().expect("test binary"))
        .args(["crash::crash_child_process", "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, &path)
        .env(DURABILITY_ENV, durability)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn child");
    let stdout = child.stdout.take().expect("child stdout");
    let mut reported = BTreeMap::new();
    let mut killed = false;
    for line in BufReader::new(stdout).lines() {
        let line = line.expect("child line");
        let fields: Vec<&str> = line.split_whitespace().collect();
        if let ["durable", seq, writer, n] = fields.as_slice() {
            let seq: i64 = seq.parse().expect("seq");
            reported.insert(seq, (writer.parse::<u64>().expect("writer"), n.parse::<u64>().expect("n")));
        }
        if !killed && reported.len() >= KILL_AFTER {
            // SIGKILL: no destructors, no flush, mid-burst.
            child.kill().expect("kill -9");
            killed = true;
        }
    }
    let status = child.wait().expect("wait child");
    assert!(killed, "the child stopped before reporting {KILL_AFTER} durable rows: {status:?}");

    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    runtime.block_on(async {
        let store = Store::open_file(&path, StoreOptions::default()).await.expect("reopen");
        let report = store.verify_audit().await.expect("verify");
        assert!(report.is_intact(), "chain broken after kill -9: {report:?}");
        let rows = store.query_audit(&AuditFilter::default()).await.expect("query");
        let by_seq: BTreeMap<i64, _> = rows.iter().map(|row| (row.seq, row)).collect();
        for (seq, (writer, n)) in &reported {
            let row = by_seq.get(seq).unwrap_or_else(|| panic!("durable row {seq} is missing after kill -9"));
            assert_eq!(row.detail, Some(serde_json::json!({"writer": writer, "n": n})), "row {seq}");
        }
        assert!(rows.len() >= reported.len());
        eprintln!(
            "kill -9 ({durability}) after {} durable rows reported (highest seq {:?}); {} rows after restart",
            reported.len(),
            reported.keys().next_back(),
            rows.len()
        );
    });
}

#[test]
fn kill_9_keeps_every_durable_row_with_synchronous_full() {
    crash_and_check("power");
}

#[test]
fn kill_9_keeps_every_durable_row_with_synchronous_normal() {
    crash_and_check("process");
}
