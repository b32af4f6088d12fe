//! Measures the audit writer: rows per second through the queue (`try_record`, batched commits) and the cost of
//! `record_durable` alone and under concurrency, for SQLite's two durability settings in a temporary directory and
//! for PostgreSQL: the database `TOOLGATE_BENCH_POSTGRES_URL` names, else a throwaway local cluster with its default
//! durability (`fsync` on, synchronous commits), started from Debian's server binaries as the tests start theirs.
//!
//! `cargo run --release -p toolgate-store --example audit_throughput [rows]`. A measurement, not a test: it asserts
//! nothing and writes only under the system's temporary directory (and into the PostgreSQL database it is given).

use std::io::Write as _;
use std::time::{Duration, Instant};

use toolgate_store::{AuditEntry, AuditKind, Durability, PostgresTarget, Store, StoreError, StoreOptions};

/// Where the rows go.
#[derive(Debug, Clone)]
enum Backend {
    Sqlite(Durability),
    Postgres(String),
}

fn entry(n: u64) -> AuditEntry {
    AuditEntry {
        session: Some("session-1".into()),
        upstream: Some("files".into()),
        tool: Some("read_file".into()),
        outcome: Some("ok".into()),
        duration_us: Some(1234),
        args: Some(serde_json::json!({"path": format!("/tmp/file-{n}"), "recursive": false})),
        ..AuditEntry::new(AuditKind::Result)
    }
}

async fn open(backend: &Backend) -> Result<(tempfile::TempDir, Store), Box<dyn std::error::Error>> {
    let directory = tempfile::tempdir()?;
    let store = match backend {
        Backend::Sqlite(durability) => {
            let options = StoreOptions { durability: *durability, ..StoreOptions::default() };
            Store::open_file(&directory.path().join("toolgate.db"), options).await?
        }
        Backend::Postgres(url) => {
            Store::open_postgres(&PostgresTarget::new(url.clone()), directory.path(), StoreOptions::default()).await?
        }
    };
    Ok((directory, store))
}

async fn queued(backend: &Backend, rows: u64) -> Result<f64, Box<dyn std::error::Error>> {
    let (_directory, store) = open(backend).await?;
    let audit = store.audit();
    let started = Instant::now();
    for n in 0..rows {
        while audit.try_record(entry(n)).is_err() {
            tokio::task::yield_now().await;
        }
    }
    audit.flush().await?;
    Ok(rows as f64 / started.elapsed().as_secs_f64())
}

async fn durable_sequential(backend: &Backend, calls: usize) -> Result<Vec<Duration>, StoreError> {
    let (_directory, store) = open(backend).await.map_err(|error| StoreError::AuditWrite(error.to_string()))?;
    let audit = store.audit();
    let mut latencies = Vec::with_capacity(calls);
    for n in 0..calls {
        let started = Instant::now();
        audit.record_durable(entry(n as u64)).await?;
        latencies.push(started.elapsed());
    }
    latencies.sort();
    Ok(latencies)
}

async fn durable_concurrent(backend: &Backend, tasks: u64, each: u64) -> Result<f64, Box<dyn std::error::Error>> {
    let (_directory, store) = open(backend).await?;
    let started = Instant::now();
    let mut handles = Vec::new();
    for task in 0..tasks {
        let audit = store.audit();
        handles.push(tokio::spawn(async move {
            for n in 0..each {
                audit.record_durable(entry(task * each + n)).await?;
            }
            Ok::<_, StoreError>(())
        }));
    }
    for handle in handles {
        handle.await??;
    }
    Ok((tasks * each) as f64 / started.elapsed().as_secs_f64())
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let rows: u64 = std::env::args().nth(1).and_then(|text| text.parse().ok()).unwrap_or(50_000);
    // Kept alive while it is measured; stopped and removed when dropped.
    let mut cluster = None;
    let postgres_url = match std::env::var("TOOLGATE_BENCH_POSTGRES_URL") {
        Ok(url) => url,
        Err(_) => {
            cluster.insert(toolgate_test_support::postgres::PostgresCluster::start_new_durable()).fresh_database()
        }
    };
    let backends = [
        ("sqlite synchronous=FULL", Backend::Sqlite(Durability::PowerLoss)),
        ("sqlite synchronous=NORMAL", Backend::Sqlite(Durability::ProcessCrash)),
        ("postgres", Backend::Postgres(postgres_url)),
    ];
    let mut out = std::io::stdout().lock();
    for (name, backend) in &backends {
        let per_second = queued(backend, rows).await?;
        writeln!(out, "{name}: try_record, {rows} rows: {per_second:.0} rows/s")?;
        let latencies = durable_sequential(backend, 500).await?;
        let pick = |q: f64| latencies[((latencies.len() - 1) as f64 * q) as usize];
        writeln!(
            out,
            "{name}: record_durable, one at a time: p50 {:?}, p90 {:?}, p99 {:?}",
            pick(0.5),
            pick(0.9),
            pick(0.99)
        )?;
        let per_second = durable_concurrent(backend, 32, 200).await?;
        writeln!(out, "{name}: record_durable, 32 concurrent callers: {per_second:.0} rows/s")?;
    }
    drop(cluster);
    Ok(())
}
