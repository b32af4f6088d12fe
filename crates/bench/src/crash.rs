//! `toolgate-bench crash`: `kill -9` of a loaded toolgate, again and again, then a count of what the audit log kept.
//!
//! The promise checked: every call a client saw answered has its audit row, the chain verifies, and a restarted
//! gateway serves again quickly. One `toolgate serve --config` with stdio upstreams (this binary's echo server) and
//! an HTTP listener is driven by `clients` keep-alive HTTP clients, each call with arguments no other call has. After
//! each round toolgate is killed with SIGKILL mid-burst and started again on the same state directory; clients
//! reconnect and open new sessions. At the end `toolgate audit --json` and `toolgate audit verify` (the real CLI)
//! read the log, and every answered call is looked up by its arguments (`[audit] arguments = "clear"`, so the
//! arguments themselves are the key; the digest mode is what production uses and hashes the same text).
//!
//! It measures; it asserts nothing. Only loopback addresses are used, and every child dies with its handle.

use std::collections::HashSet;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::{Value, json};

use crate::BoxError;
use crate::client::{HttpConn, call_line, result_of};
use crate::procs::{self, Proc, Scratch};

/// What a crash run is asked to do.
#[derive(Debug, Clone)]
pub(crate) struct CrashPlan {
    pub(crate) bench: PathBuf,
    pub(crate) toolgate: PathBuf,
    pub(crate) clients: usize,
    pub(crate) rounds: usize,
    pub(crate) round: Duration,
    pub(crate) upstreams: usize,
}

/// What a crash run found.
#[derive(Debug, Serialize)]
pub(crate) struct CrashReport {
    pub(crate) rounds: usize,
    pub(crate) clients: usize,
    pub(crate) upstreams: usize,
    /// Calls a client saw answered (a result, error results included: those were forwarded too).
    pub(crate) answered: usize,
    /// Calls that failed at the transport (the gateway died under them); they may or may not have a row.
    pub(crate) transport_failures: u64,
    /// `call` rows in the audit log.
    pub(crate) call_rows: usize,
    /// Answered calls without a row: must be 0.
    pub(crate) answered_without_row: usize,
    /// Up to 5 of them, for a look.
    pub(crate) missing_examples: Vec<String>,
    /// What `toolgate audit verify` printed, and whether it exited 0.
    pub(crate) verify: String,
    pub(crate) verify_ok: bool,
    /// From each restart's spawn until a call through it was answered, in milliseconds.
    pub(crate) restart_ms: Vec<u64>,
}

impl CrashReport {
    pub(crate) fn text(&self) -> String {
        format!(
            "crash: {} rounds of kill -9, {} clients, {} upstreams\n\
             answered calls:            {}\n\
             transport failures:        {}\n\
             call rows in the log:      {}\n\
             answered without a row:    {}{}\n\
             audit verify:              {} ({})\n\
             restart to first answer:   {:?} ms\n",
            self.rounds,
            self.clients,
            self.upstreams,
            self.answered,
            self.transport_failures,
            self.call_rows,
            self.answered_without_row,
            if self.missing_examples.is_empty() { String::new() } else { format!(" {:?}", self.missing_examples) },
            if self.verify_ok { "ok" } else { "FAILED" },
            self.verify.trim(),
            self.restart_ms,
        )
    }
}

/// Shared between the driving clients and the run.
#[derive(Default)]
struct Tally {
    answered: Mutex<Vec<String>>,
    transport_failures: AtomicU64,
    stop: AtomicBool,
    serial: AtomicU64,
}

pub(crate) async fn run(plan: &CrashPlan) -> Result<CrashReport, BoxError> {
    if plan.clients == 0 || plan.rounds == 0 || plan.upstreams == 0 {
        return Err("--clients, --rounds and --upstreams must be at least 1".into());
    }
    let scratch = Scratch::new()?;
    let state = scratch.path("state");
    std::fs::create_dir_all(&state)?;
    let addr = procs::free_addr()?;
    let config = scratch.path("gateway.toml");
    // Arguments kept in clear: they are the key that matches an answered call to its row.
    let text = crate::scenario::config_text(&plan.bench, plan.upstreams, addr)? + "\n[audit]\narguments = \"clear\"\n";
    std::fs::write(&config, text)?;
    let args = vec!["serve".to_owned(), "--config".to_owned(), config.to_string_lossy().into_owned()];

    let tally = Arc::new(Tally::default());
    let mut gateway = start(plan, &args, addr, &state, &scratch, 0).await?;
    let drivers: Vec<_> =
        (0..plan.clients).map(|client| tokio::spawn(drive(addr, client, Arc::clone(&tally)))).collect();

    let mut restart_ms = Vec::new();
    for round in 1..=plan.rounds {
        tokio::time::sleep(plan.round).await;
        gateway.kill().await;
        let started = Instant::now();
        gateway = start(plan, &args, addr, &state, &scratch, round).await?;
        wait_answering(addr).await?;
        restart_ms.push(u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX));
    }
    tokio::time::sleep(plan.round).await;
    tally.stop.store(true, Ordering::Relaxed);
    for driver in drivers {
        let _ = driver.await;
    }
    gateway.stop().await;

    let rows = audit_rows(&plan.toolgate, &state).await?;
    let (verify, verify_ok) = audit_verify(&plan.toolgate, &state).await?;
    let answered = tally.answered.lock().map(|list| list.clone()).unwrap_or_default();
    let missing: Vec<String> = answered.iter().filter(|text| !rows.contains(*text)).cloned().collect();
    Ok(CrashReport {
        rounds: plan.rounds,
        clients: plan.clients,
        upstreams: plan.upstreams,
        answered: answered.len(),
        transport_failures: tally.transport_failures.load(Ordering::Relaxed),
        call_rows: rows.len(),
        answered_without_row: missing.len(),
        missing_examples: missing.into_iter().take(5).collect(),
        verify,
        verify_ok,
        restart_ms,
    })
}

async fn start(
    plan: &CrashPlan,
    args: &[String],
    addr: SocketAddr,
    state: &Path,
    scratch: &Scratch,
    round: usize,
) -> Result<Proc, BoxError> {
    let log = scratch.path(&format!("toolgate-crash-{round}.log"));
    procs::spawn_listening_in(&format!("toolgate serve (crash round {round})"), &plan.toolgate, args, addr, log, state)
        .await
}

/// Waits until a fresh session gets an answered call (the upstreams are ready), within a minute.
async fn wait_answering(addr: SocketAddr) -> Result<(), BoxError> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let attempt = async {
            let mut conn = HttpConn::connect(addr, "/mcp").await?;
            let (session, tool) = conn.open_session().await?;
            let reply = conn.request(Some(&session), 2, call_line(2, &tool, "restart-probe")).await?;
            result_of(reply).map(|_| ())
        };
        match attempt.await {
            Ok(()) => return Ok(()),
            Err(error) if Instant::now() > deadline => return Err(format!("no answer after a restart: {error}").into()),
            Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
        }
    }
}

/// One client: a session, then calls with unique arguments until stopped; reconnects after any failure.
async fn drive(addr: SocketAddr, client: usize, tally: Arc<Tally>) {
    while !tally.stop.load(Ordering::Relaxed) {
        let Ok(mut conn) = HttpConn::connect(addr, "/mcp").await else {
            tokio::time::sleep(Duration::from_millis(20)).await;
            continue;
        };
        let Ok((session, _)) = conn.open_session().await else {
            tokio::time::sleep(Duration::from_millis(20)).await;
            continue;
        };
        let Ok(tools) = echo_tools(&mut conn, &session).await else { continue };
        let Some(tool) = tools.get(client % tools.len().max(1)).cloned() else { continue };
        while !tally.stop.load(Ordering::Relaxed) {
            let serial = tally.serial.fetch_add(1, Ordering::Relaxed);
            let text = format!("crash-c{client}-n{serial}");
            match conn.request(Some(&session), serial + 10, call_line(serial + 10, &tool, &text)).await {
                Ok(reply) if reply.get("result").is_some() => {
                    if let Ok(mut answered) = tally.answered.lock() {
                        answered.push(text);
                    }
                }
                Ok(_) => {}
                Err(_) => {
                    tally.transport_failures.fetch_add(1, Ordering::Relaxed);
                    break;
                }
            }
        }
    }
}

/// Every echo tool the session lists (one per upstream), sorted.
async fn echo_tools(conn: &mut HttpConn, session: &str) -> Result<Vec<String>, BoxError> {
    let line = serde_json::to_vec(&json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list"}))?;
    let list = result_of(conn.request(Some(session), 3, line).await?)?;
    let mut names: Vec<String> = list
        .get("tools")
        .and_then(Value::as_array)
        .map(|tools| {
            tools
                .iter()
                .filter_map(|tool| tool.get("name").and_then(Value::as_str))
                .filter(|name| name.ends_with("echo"))
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    Ok(names)
}

/// The `text` argument of every `call` row, read through `toolgate audit --json`.
async fn audit_rows(toolgate: &Path, state: &Path) -> Result<HashSet<String>, BoxError> {
    let output = tokio::process::Command::new(toolgate)
        .args(["audit", "--json", "--kind", "call", "--state-dir"])
        .arg(state)
        .output()
        .await?;
    if !output.status.success() {
        return Err(format!("toolgate audit failed: {}", String::from_utf8_lossy(&output.stderr)).into());
    }
    let mut texts = HashSet::new();
    for line in String::from_utf8_lossy(&output.stdout).lines() {
        let row: Value = serde_json::from_str(line)?;
        if let Some(text) = row.pointer("/args/text").and_then(Value::as_str) {
            texts.insert(text.to_owned());
        }
    }
    Ok(texts)
}

async fn audit_verify(toolgate: &Path, state: &Path) -> Result<(String, bool), BoxError> {
    let output =
        tokio::process::Command::new(toolgate).args(["audit", "verify", "--state-dir"]).arg(state).output().await?;
    let text = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    Ok((text, output.status.success()))
}
