//! `toolgate audit`: the table and JSON lines with filters, and `audit verify` on an intact and a tampered log.

use serde_json::{Value, json};
use toolgate_core::decision::Verdict;
use toolgate_store::{AuditEntry, AuditKind};

use crate::support::{dir, fresh_state, tamper, toolgate_async};

async fn populate(store: &toolgate_store::Store) {
    let audit = store.audit();
    for (n, tool) in ["list_files", "delete_file", "list_files"].into_iter().enumerate() {
        let verdict = if tool == "delete_file" { Verdict::Confirm } else { Verdict::Allow };
        let decision = AuditEntry {
            session: Some("session-1".into()),
            upstream: Some("files".into()),
            tool: Some(tool.into()),
            verdict: Some(verdict),
            ..AuditEntry::new(AuditKind::Decision)
        };
        audit.record_durable(decision).await.expect("decision row");
        let result = AuditEntry {
            session: Some("session-1".into()),
            upstream: Some("files".into()),
            tool: Some(tool.into()),
            outcome: Some("ok".into()),
            duration_us: Some(1_500 + n as u64),
            args: Some(json!({"path": format!("/tmp/{n}")})),
            approval_id: (tool == "delete_file").then(|| "approval-1".to_owned()),
            ..AuditEntry::new(AuditKind::Result)
        };
        audit.record_durable(result).await.expect("result row");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn rows_filter_and_print_as_table_or_json_lines() {
    let (directory, store) = fresh_state().await;
    populate(&store).await;

    let all = toolgate_async(&["audit", "--state-dir", dir(&directory), "--json"]).await;
    assert_eq!(all.code, Some(0), "{all:?}");
    let rows: Vec<Value> = all.stdout.lines().map(|line| serde_json::from_str(line).expect("a JSON line")).collect();
    assert_eq!(rows.len(), 6);
    assert!(rows.iter().all(|row| row["hash"].as_str().is_some_and(|hash| hash.starts_with("sha256:"))));

    let filtered = toolgate_async(&[
        "audit",
        "--state-dir",
        dir(&directory),
        "--json",
        "--tool",
        "delete_*",
        "--kind",
        "result",
        "--since",
        "1h",
    ])
    .await;
    let rows: Vec<Value> = filtered.stdout.lines().map(|line| serde_json::from_str(line).expect("JSON")).collect();
    assert_eq!(rows.len(), 1, "{filtered:?}");
    assert_eq!(rows[0]["approval_id"], "approval-1");
    assert!(rows[0]["args"].is_null(), "arguments are kept as a digest only: {}", rows[0]);

    let confirms = toolgate_async(&["audit", "--state-dir", dir(&directory), "--verdict", "confirm"]).await;
    assert_eq!(confirms.code, Some(0), "{confirms:?}");
    assert!(confirms.stdout.contains("delete_file") && confirms.stdout.contains("1 row(s)"), "{}", confirms.stdout);
    for header in ["time (UTC)", "kind", "caller", "session", "upstream", "verdict", "outcome", "duration", "approval"]
    {
        assert!(confirms.stdout.contains(header), "{header}: {}", confirms.stdout);
    }

    let limited = toolgate_async(&["audit", "--state-dir", dir(&directory), "--limit", "2", "--json"]).await;
    let seqs: Vec<i64> = limited
        .stdout
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).unwrap()["seq"].as_i64().unwrap())
        .collect();
    assert_eq!(seqs, vec![5, 6]);

    let future = toolgate_async(&["audit", "--state-dir", dir(&directory), "--since", "2999-01-01T00:00:00Z"]).await;
    assert_eq!(future.stdout, "no audit rows match\n");
    let bad = toolgate_async(&["audit", "--state-dir", dir(&directory), "--since", "yesterday"]).await;
    assert_eq!(bad.code, Some(2), "{bad:?}");
    assert!(bad.stderr.contains("cannot read time \"yesterday\""), "{}", bad.stderr);
    store.close().await.expect("close");
}

#[tokio::test(flavor = "multi_thread")]
async fn verify_reports_an_intact_chain_then_the_changed_row() {
    let (directory, store) = fresh_state().await;
    populate(&store).await;
    let intact = toolgate_async(&["audit", "verify", "--state-dir", dir(&directory)]).await;
    assert_eq!((intact.code, intact.stdout.as_str()), (Some(0), "6 rows, chain intact (head seq 6)\n"), "{intact:?}");

    let database = store.path().to_path_buf();
    store.close().await.expect("close");
    tamper(&database, "UPDATE audit_log SET outcome = 'is_error' WHERE seq = 4").await;
    let broken = toolgate_async(&["audit", "verify", "--state-dir", dir(&directory)]).await;
    assert_eq!(broken.code, Some(1), "{broken:?}");
    assert_eq!(
        broken.stdout,
        "chain BROKEN after 3 intact rows: row 4: content does not match its hash (a column was changed)\n"
    );

    tamper(&database, "DELETE FROM audit_log WHERE seq = 2").await;
    let removed = toolgate_async(&["audit", "verify", "--state-dir", dir(&directory)]).await;
    assert_eq!(removed.code, Some(1), "{removed:?}");
    assert!(removed.stdout.contains("row 2 is missing"), "{}", removed.stdout);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_missing_database_is_an_error_not_a_new_file() {
    let directory = tempfile::tempdir().expect("tempdir");
    let run = toolgate_async(&["audit", "verify", "--state-dir", dir(&directory)]).await;
    assert_eq!(run.code, Some(2), "{run:?}");
    assert!(run.stderr.contains("no toolgate database at"), "{}", run.stderr);
    assert!(!directory.path().join("toolgate.db").exists());
}
