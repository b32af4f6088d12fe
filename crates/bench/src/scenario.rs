//! The scenarios of `toolgate-bench run`, each measuring the direct path and the path through toolgate with the
//! same client code, one after the other in the same run.
//!
//! 1. `stdio`: the client spawns the upstream, or `toolgate serve -- <bench> upstream`; 1 and 8 calls in flight.
//! 2. `http`: one session to `<bench> upstream --http`, or to `toolgate serve --listen` fronting the stdio upstream
//!    (`toolgate/stdio`) or the HTTP upstream (`toolgate/http`, `--upstream-url`); 1 and 8 calls in flight, each
//!    in-flight call on its own keep-alive connection.
//! 3. `http-sessions`: many sessions, several calls in flight in each, for a fixed number of calls: throughput.
//! 5. `sandbox`: a toolgate on stdio fronting one stdio upstream, plain and sandboxed (mode strict): start time to
//!    the first answered call, and latency per call (with the direct path for reference).
//! 6. `mixed`: 2026-07-28 one-request calls beside legacy sessions on one toolgate: both kinds at once, then each
//!    alone, latency and calls/s per kind (not in the default set).
//! 7. `fleet` (`fleet.rs`): one toolgate against three behind HAProxy, many sessions.
//! 4. memory: a toolgate with five upstreams (one when `--config` is not available) and many open sessions, each
//!    having made a call: `VmRSS`/`VmHWM` from `/proc`.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crate::BoxError;
use crate::client::{HttpConn, StdioClient, call_line, check_echo, modern_call_line, modern_echo_tool};
use crate::procs::{self, Proc, Scratch};
use crate::report::{Memory, Row, SandboxStarts, Stats};

/// How long one call may take before it counts as failed (a lost response must not hang the run).
const CALL_TIMEOUT: Duration = Duration::from_secs(10);

/// What to run.
#[derive(Debug, Clone)]
pub(crate) struct Plan {
    pub(crate) bench: PathBuf,
    pub(crate) toolgate: PathBuf,
    pub(crate) calls: usize,
    pub(crate) warmup: usize,
    /// Alternating rounds each measurement is split into.
    pub(crate) rounds: usize,
    pub(crate) in_flight: Vec<usize>,
    pub(crate) sessions: usize,
    pub(crate) session_in_flight: usize,
    pub(crate) many_calls: usize,
    pub(crate) memory_sessions: usize,
    pub(crate) memory_upstreams: usize,
    pub(crate) payload: String,
}

/// One caller: a shared stdio client, one HTTP connection inside a session, or one HTTP connection sending
/// 2026-07-28 requests (no session: each call stands alone).
enum Worker {
    Stdio(Arc<StdioClient>),
    Http { conn: HttpConn, session: Arc<SessionRef> },
    Modern { conn: HttpConn, next_id: u64 },
}

/// An HTTP session shared by its connections: its id, and its request ids (unique within the session).
struct SessionRef {
    id: String,
    next_id: AtomicU64,
}

impl Worker {
    /// One `tools/call` of the echo tool, checked; a call unanswered after [`CALL_TIMEOUT`] is an error.
    async fn call(&mut self, tool: &str, text: &str) -> Result<(), BoxError> {
        match tokio::time::timeout(CALL_TIMEOUT, self.call_once(tool, text)).await {
            Ok(result) => result,
            Err(_) => {
                if let Worker::Http { conn, .. } | Worker::Modern { conn, .. } = self {
                    conn.reconnect().await?;
                }
                Err(format!("no response within {} s", CALL_TIMEOUT.as_secs()).into())
            }
        }
    }

    async fn call_once(&mut self, tool: &str, text: &str) -> Result<(), BoxError> {
        let reply = match self {
            Worker::Stdio(client) => {
                let id = client.next_id();
                client.request(id, call_line(id, tool, text)).await?
            }
            Worker::Http { conn, session } => {
                let id = session.next_id.fetch_add(1, Ordering::Relaxed);
                conn.request(Some(&session.id), id, call_line(id, tool, text)).await?
            }
            Worker::Modern { conn, next_id } => {
                *next_id += 1;
                let id = *next_id;
                conn.request_modern(id, "tools/call", Some(tool), modern_call_line(id, tool, text)).await?
            }
        };
        check_echo(reply, text)
    }
}

/// Samples pooled over the rounds of one lane.
#[derive(Default)]
struct Sampled {
    samples: Vec<u64>,
    errors: usize,
    wall_s: f64,
    first_error: Option<String>,
    /// toolgate's CPU time and context switches over the timed phases (relayed lanes only).
    cpu_us: Option<u64>,
    switches: Option<u64>,
}

impl Sampled {
    fn stats(self) -> Stats {
        let mut stats = Stats::from_samples(self.samples, self.errors, self.wall_s, self.first_error);
        let per_call =
            |total: Option<u64>| total.filter(|_| stats.calls > 0).map(|total| total as f64 / stats.calls as f64);
        stats.toolgate_cpu_us_per_call = per_call(self.cpu_us);
        stats.toolgate_switches_per_call = per_call(self.switches);
        stats
    }
}

/// One path of a scenario, ready to measure: its workers (sessions stay open between rounds) and what it pooled.
pub(crate) struct Lane {
    path: &'static str,
    state: Result<Prepared, String>,
}

struct Prepared {
    workers: Vec<Worker>,
    tool: Arc<str>,
    /// toolgate's pid, for relayed lanes.
    pid: Option<u32>,
    warmed: bool,
    sampled: Sampled,
}

impl Lane {
    fn new(path: &'static str, prepared: Result<(Vec<Worker>, String, Option<u32>), BoxError>) -> Self {
        let state = prepared
            .map(|(workers, tool, pid)| Prepared {
                workers,
                tool: tool.into(),
                pid,
                warmed: false,
                sampled: Sampled::default(),
            })
            .map_err(|error| error.to_string());
        Lane { path, state }
    }

    fn take_pid(&mut self) -> Option<u32> {
        self.state.as_mut().ok().and_then(|prepared| prepared.pid.take())
    }

    fn set_pid(&mut self, pid: Option<u32>) {
        if let Ok(prepared) = &mut self.state {
            prepared.pid = pid;
        }
    }

    /// One round: the warm-up calls the first time, then `calls` timed calls.
    async fn round(&mut self, plan: &Plan, calls: usize) {
        let Ok(prepared) = &mut self.state else { return };
        let warmup = if prepared.warmed { 0 } else { plan.warmup };
        let workers = std::mem::take(&mut prepared.workers);
        match run_round(workers, &prepared.tool, &plan.payload, warmup, calls, prepared.pid).await {
            Ok((workers, sampled)) => {
                prepared.workers = workers;
                prepared.warmed = true;
                let pooled = &mut prepared.sampled;
                pooled.samples.extend(sampled.samples);
                pooled.errors += sampled.errors;
                pooled.wall_s += sampled.wall_s;
                pooled.first_error = pooled.first_error.take().or(sampled.first_error);
                pooled.cpu_us = add(pooled.cpu_us, sampled.cpu_us);
                pooled.switches = add(pooled.switches, sampled.switches);
            }
            Err(error) => self.state = Err(error.to_string()),
        }
    }

    /// The row of what was measured so far; the lane keeps its workers and starts pooling anew.
    fn take_row(&mut self, scenario: &str, sessions: usize, in_flight: usize) -> Row {
        let (stats, unavailable) = match &mut self.state {
            Ok(prepared) => (Some(std::mem::take(&mut prepared.sampled).stats()), None),
            Err(error) => (None, Some(error.clone())),
        };
        Row { scenario: scenario.to_owned(), path: self.path.to_owned(), sessions, in_flight, stats, unavailable }
    }

    pub(crate) fn row(self, scenario: &str, sessions: usize, in_flight: usize) -> Row {
        let (stats, unavailable) = match self.state {
            Ok(prepared) => (Some(prepared.sampled.stats()), None),
            Err(error) => (None, Some(error)),
        };
        Row { scenario: scenario.to_owned(), path: self.path.to_owned(), sessions, in_flight, stats, unavailable }
    }
}

fn add(total: Option<u64>, more: Option<u64>) -> Option<u64> {
    match (total, more) {
        (Some(total), Some(more)) => Some(total + more),
        (None, more) => more,
        (total, None) => total,
    }
}

/// Measures two lanes at the same time, `calls` each, in `rounds` rounds. toolgate's CPU is not sampled: in one
/// process serving both, it could not be told apart per lane.
async fn measure_together(first: &mut Lane, second: &mut Lane, plan: &Plan, calls: usize) {
    let pids = [first.take_pid(), second.take_pid()];
    let per_round = calls.div_ceil(plan.rounds);
    let mut left = calls;
    while left > 0 {
        let now = per_round.min(left);
        tokio::join!(first.round(plan, now), second.round(plan, now));
        left -= now;
    }
    first.set_pid(pids[0]);
    second.set_pid(pids[1]);
}

/// Measures every lane in `rounds` alternating rounds, so slow phases of a shared machine hit every path alike.
async fn measure_lanes(lanes: &mut [Lane], plan: &Plan, calls: usize) {
    let per_round = calls.div_ceil(plan.rounds);
    let mut left = calls;
    while left > 0 {
        let now = per_round.min(left);
        for lane in lanes.iter_mut() {
            lane.round(plan, now).await;
        }
        left -= now;
    }
}

/// Runs `warmup` calls spread over the workers, then `calls` timed calls; `pid` is toolgate's, if relayed.
async fn run_round(
    workers: Vec<Worker>,
    tool: &Arc<str>,
    text: &str,
    warmup: usize,
    calls: usize,
    pid: Option<u32>,
) -> Result<(Vec<Worker>, Sampled), BoxError> {
    let text: Arc<str> = text.into();
    let per_worker = warmup.div_ceil(workers.len().max(1));
    let mut tasks = Vec::new();
    for mut worker in workers {
        let (tool, text) = (tool.clone(), text.clone());
        tasks.push(tokio::spawn(async move {
            for _ in 0..per_worker {
                worker.call(&tool, &text).await?;
            }
            Ok::<_, BoxError>(worker)
        }));
    }
    let mut workers = Vec::new();
    for task in tasks {
        workers.push(task.await??);
    }
    let counter = Arc::new(AtomicUsize::new(0));
    let before = pid.map(|pid| (procs::cpu_us(pid), procs::context_switches(pid)));
    let started = Instant::now();
    let mut tasks = Vec::new();
    for mut worker in workers {
        let (tool, text, counter) = (tool.clone(), text.clone(), counter.clone());
        tasks.push(tokio::spawn(async move {
            let mut samples = Vec::with_capacity(calls);
            let mut errors = 0;
            let mut first_error = None;
            while counter.fetch_add(1, Ordering::Relaxed) < calls {
                let start = Instant::now();
                match worker.call(&tool, &text).await {
                    Ok(()) => samples.push(u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX)),
                    Err(error) => {
                        errors += 1;
                        first_error.get_or_insert_with(|| error.to_string());
                    }
                }
            }
            (worker, samples, errors, first_error)
        }));
    }
    let mut sampled = Sampled { samples: Vec::with_capacity(calls), ..Sampled::default() };
    let mut workers = Vec::new();
    for task in tasks {
        let (worker, samples, errors, first_error) = task.await?;
        workers.push(worker);
        sampled.samples.extend(samples);
        sampled.errors += errors;
        sampled.first_error = sampled.first_error.take().or(first_error);
    }
    sampled.wall_s = started.elapsed().as_secs_f64();
    if let (Some(pid), Some((cpu, switches))) = (pid, before) {
        sampled.cpu_us = cpu.zip(procs::cpu_us(pid)).map(|(before, after)| after.saturating_sub(before));
        sampled.switches =
            switches.zip(procs::context_switches(pid)).map(|(before, after)| after.saturating_sub(before));
    }
    Ok((workers, sampled))
}

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|item| (*item).to_owned()).collect()
}

/// Scenario 1: stdio, direct and through toolgate, at each in-flight level.
pub(crate) async fn stdio(plan: &Plan, scratch: &Scratch) -> Vec<Row> {
    let bench = plan.bench.to_string_lossy().into_owned();
    let direct = procs::spawn_stdio("upstream", &plan.bench, &strings(&["upstream"]), None).await;
    let via_args = vec!["serve".to_owned(), "--".to_owned(), bench, "upstream".to_owned()];
    let log = scratch.path("toolgate-stdio.log");
    let via = procs::spawn_stdio("toolgate serve (stdio)", &plan.toolgate, &via_args, Some(log)).await;
    let mut rows = Vec::new();
    for &in_flight in &plan.in_flight {
        let mut lanes: Vec<Lane> = [("direct", &direct), ("toolgate/stdio", &via)]
            .into_iter()
            .map(|(path, target)| {
                let prepared = match target {
                    Ok((proc, client, tool)) => {
                        let workers = (0..in_flight).map(|_| Worker::Stdio(client.clone())).collect();
                        let pid = (path != "direct").then(|| proc.pid()).flatten();
                        Ok((workers, tool.clone(), pid))
                    }
                    Err(error) => Err(error.to_string().into()),
                };
                Lane::new(path, prepared)
            })
            .collect();
        measure_lanes(&mut lanes, plan, plan.calls).await;
        rows.extend(lanes.into_iter().map(|lane| lane.row("stdio", 1, in_flight)));
    }
    for (proc, client, _) in [direct, via].into_iter().flatten() {
        drop(client);
        proc.finish().await;
    }
    rows
}

/// An HTTP endpoint to measure: its address, and toolgate's pid when it is toolgate.
struct HttpTarget {
    path: &'static str,
    addr: Result<SocketAddr, String>,
    toolgate_pid: Option<u32>,
}

/// Starts the HTTP upstream and the two toolgates in front of it (stdio and HTTP upstreams).
async fn http_targets(plan: &Plan, scratch: &Scratch, tag: &str) -> (Vec<HttpTarget>, Vec<Proc>) {
    let mut procs = Vec::new();
    let mut targets = Vec::new();
    let upstream = procs::spawn_http_upstream(&plan.bench).await;
    let upstream_url = match &upstream {
        Ok((_, addr)) => Ok(format!("http://{addr}/mcp")),
        Err(error) => Err(error.to_string()),
    };
    targets.push(HttpTarget {
        path: "direct",
        addr: upstream.as_ref().map(|(_, addr)| *addr).map_err(ToString::to_string),
        toolgate_pid: None,
    });
    if let Ok((proc, _)) = upstream {
        procs.push(proc);
    }
    let bench = plan.bench.to_string_lossy().into_owned();
    let relays: [(&'static str, Result<Vec<String>, String>); 2] = [
        ("toolgate/stdio", Ok(vec!["--".to_owned(), bench, "upstream".to_owned()])),
        ("toolgate/http", upstream_url.map(|url| vec!["--upstream-url".to_owned(), url])),
    ];
    for (path, extra) in relays {
        let started = match (extra, procs::free_addr()) {
            (Ok(extra), Ok(addr)) => {
                let mut args = vec!["serve".to_owned(), "--listen".to_owned(), addr.to_string()];
                args.extend(extra);
                let log = scratch.path(&format!("toolgate-{tag}-{}.log", path.replace('/', "-")));
                procs::spawn_listening(&format!("toolgate serve --listen ({path})"), &plan.toolgate, &args, addr, log)
                    .await
                    .map(|proc| (proc, addr))
                    .map_err(|error| error.to_string())
            }
            (Err(error), _) => Err(format!("no HTTP upstream: {error}")),
            (_, Err(error)) => Err(error.to_string()),
        };
        match started {
            Ok((proc, addr)) => {
                targets.push(HttpTarget { path, addr: Ok(addr), toolgate_pid: proc.pid() });
                procs.push(proc);
            }
            Err(error) => targets.push(HttpTarget { path, addr: Err(error), toolgate_pid: None }),
        }
    }
    (targets, procs)
}

/// Opens `sessions` sessions with `in_flight` connections each; returns the workers and the echo tool's name.
async fn http_workers(addr: SocketAddr, sessions: usize, in_flight: usize) -> Result<(Vec<Worker>, String), BoxError> {
    let mut workers = Vec::with_capacity(sessions * in_flight);
    let mut tool = String::new();
    for _ in 0..sessions {
        let mut first = HttpConn::connect(addr, "/mcp").await?;
        let (session, name) = first.open_session().await?;
        tool = name;
        let session = Arc::new(SessionRef { id: session, next_id: AtomicU64::new(2) });
        workers.push(Worker::Http { conn: first, session: session.clone() });
        for _ in 1..in_flight {
            let conn = HttpConn::connect(addr, "/mcp").await?;
            workers.push(Worker::Http { conn, session: session.clone() });
        }
    }
    Ok((workers, tool))
}

/// Lanes for every HTTP target, each with `sessions` sessions of `in_flight` connections.
async fn http_lanes(targets: &[HttpTarget], sessions: usize, in_flight: usize) -> Vec<Lane> {
    let targets: Vec<_> =
        targets.iter().map(|target| (target.path, target.addr.clone(), target.toolgate_pid)).collect();
    http_lanes_at(&targets, sessions, in_flight).await
}

/// Lanes for `(path, address, toolgate's pid)` targets, each with `sessions` sessions of `in_flight` connections.
pub(crate) async fn http_lanes_at(
    targets: &[(&'static str, Result<SocketAddr, String>, Option<u32>)],
    sessions: usize,
    in_flight: usize,
) -> Vec<Lane> {
    let mut lanes = Vec::new();
    for (path, addr, pid) in targets {
        let prepared = match addr {
            Ok(addr) => http_workers(*addr, sessions, in_flight).await.map(|(workers, tool)| (workers, tool, *pid)),
            Err(error) => Err(error.clone().into()),
        };
        lanes.push(Lane::new(path, prepared));
    }
    lanes
}

/// Measures `lanes` in alternating rounds (for scenarios in other files).
pub(crate) async fn measure(lanes: &mut [Lane], plan: &Plan, calls: usize) {
    measure_lanes(lanes, plan, calls).await;
}

/// Scenarios 2 and 3: one session at each in-flight level, then many sessions.
pub(crate) async fn http(plan: &Plan, scratch: &Scratch) -> Vec<Row> {
    let mut rows = Vec::new();
    let (targets, procs) = http_targets(plan, scratch, "http").await;
    for &in_flight in &plan.in_flight {
        let mut lanes = http_lanes(&targets, 1, in_flight).await;
        measure_lanes(&mut lanes, plan, plan.calls).await;
        rows.extend(lanes.into_iter().map(|lane| lane.row("http", 1, in_flight)));
    }
    let mut lanes = http_lanes(&targets, plan.sessions, plan.session_in_flight).await;
    measure_lanes(&mut lanes, plan, plan.many_calls).await;
    rows.extend(lanes.into_iter().map(|lane| lane.row("http-sessions", plan.sessions, plan.session_in_flight)));
    for proc in procs {
        proc.stop().await;
    }
    rows
}

/// Scenario 6 (`mixed`): one toolgate fronting the stdio upstream serves legacy sessions (`--sessions` sessions,
/// `--session-in-flight` connections each) and 2026-07-28 one-request calls (as many connections, no session, each
/// call with its `_meta` and routing headers): both at once (`mixed-together`, each kind timed while the other
/// runs), then each alone in alternating rounds (`mixed-alone`), `--many-calls` calls per kind and measurement.
pub(crate) async fn mixed(plan: &Plan, scratch: &Scratch) -> Vec<Row> {
    let (sessions, in_flight) = (plan.sessions, plan.session_in_flight);
    let started = async {
        let addr = procs::free_addr()?;
        let bench = plan.bench.to_string_lossy().into_owned();
        let args = strings(&["serve", "--listen", &addr.to_string(), "--", &bench, "upstream"]);
        let log = scratch.path("toolgate-mixed.log");
        let proc = procs::spawn_listening("toolgate serve --listen (mixed)", &plan.toolgate, &args, addr, log).await?;
        Ok::<_, BoxError>((proc, addr))
    }
    .await;
    let (proc, addr) = match started {
        Ok(started) => started,
        Err(error) => {
            let unavailable = |path: &'static str| Lane::new(path, Err(error.to_string().into()));
            return vec![
                unavailable("legacy").row("mixed", sessions, in_flight),
                unavailable("modern").row("mixed", sessions, in_flight),
            ];
        }
    };
    let pid = proc.pid();
    let legacy = http_workers(addr, sessions, in_flight).await.map(|(workers, tool)| (workers, tool, pid));
    let modern = modern_workers(addr, sessions * in_flight).await.map(|(workers, tool)| (workers, tool, pid));
    let (mut legacy, mut modern) = (Lane::new("legacy", legacy), Lane::new("modern", modern));
    measure_together(&mut legacy, &mut modern, plan, plan.many_calls).await;
    let mut rows = vec![
        legacy.take_row("mixed-together", sessions, in_flight),
        modern.take_row("mixed-together", sessions, in_flight),
    ];
    let mut lanes = [legacy, modern];
    measure_lanes(&mut lanes, plan, plan.many_calls).await;
    rows.extend(lanes.into_iter().map(|lane| lane.row("mixed-alone", sessions, in_flight)));
    proc.stop().await;
    rows
}

/// `count` connections sending 2026-07-28 calls; returns them and the echo tool's name.
async fn modern_workers(addr: SocketAddr, count: usize) -> Result<(Vec<Worker>, String), BoxError> {
    let mut workers = Vec::with_capacity(count);
    let mut tool = String::new();
    for index in 0..count {
        let mut conn = HttpConn::connect(addr, "/mcp").await?;
        if index == 0 {
            tool = modern_echo_tool(&mut conn).await?;
        }
        workers.push(Worker::Modern { conn, next_id: 1 });
    }
    Ok((workers, tool))
}

/// Whether this toolgate accepts `serve --config FILE`.
async fn supports_config(toolgate: &Path) -> bool {
    let help = tokio::process::Command::new(toolgate).args(["serve", "--help"]).output().await;
    help.is_ok_and(|output| String::from_utf8_lossy(&output.stdout).contains("--config"))
}

/// A gateway config with `upstreams` stdio upstreams and an HTTP listener on `addr`.
pub(crate) fn config_text(bench: &Path, upstreams: usize, addr: SocketAddr) -> Result<String, BoxError> {
    let command = serde_json::to_string(&bench.to_string_lossy())?;
    let mut text = String::new();
    for n in 1..=upstreams {
        text.push_str(&format!("[[upstream]]\nname = \"bench{n}\"\ncommand = {command}\nargs = [\"upstream\"]\n\n"));
    }
    text.push_str(&format!("[listen.http]\nbind = \"{addr}\"\npath = \"/mcp\"\n"));
    Ok(text)
}

/// Scenario 4: toolgate's memory with several upstreams and many open sessions, each having made a call.
pub(crate) async fn memory(plan: &Plan, scratch: &Scratch) -> Result<Memory, BoxError> {
    let addr = procs::free_addr()?;
    let bench = plan.bench.to_string_lossy().into_owned();
    let (args, upstreams, how) = if plan.memory_upstreams > 1 && supports_config(&plan.toolgate).await {
        let path = scratch.path("gateway.toml");
        std::fs::write(&path, config_text(&plan.bench, plan.memory_upstreams, addr)?)?;
        let args = vec!["serve".to_owned(), "--config".to_owned(), path.to_string_lossy().into_owned()];
        (args, plan.memory_upstreams, format!("serve --config with {} stdio upstreams", plan.memory_upstreams))
    } else {
        let args = vec!["serve".to_owned(), "--listen".to_owned(), addr.to_string(), "--".to_owned(), bench];
        let how = if plan.memory_upstreams > 1 {
            "this toolgate has no `serve --config`, so one stdio upstream from the command line"
        } else {
            "one stdio upstream from the command line"
        };
        (args, 1, how.to_owned())
    };
    let log = scratch.path("toolgate-memory.log");
    let proc = procs::spawn_listening("toolgate serve (memory)", &plan.toolgate, &args, addr, log).await?;
    let pid = proc.pid().ok_or("toolgate exited")?;
    let result = async {
        let (idle_rss_kib, _) = procs::memory_kib(pid)?;
        let (mut workers, tool) = http_workers(addr, plan.memory_sessions, 1).await?;
        for worker in &mut workers {
            worker.call(&tool, &plan.payload).await?;
        }
        let (rss_kib, hwm_kib) = procs::memory_kib(pid)?;
        drop(workers);
        Ok::<_, BoxError>(Memory { upstreams, sessions: plan.memory_sessions, idle_rss_kib, rss_kib, hwm_kib, how })
    }
    .await;
    proc.stop().await;
    result
}

/// How many times each kind of toolgate is started for [`SandboxStarts`].
const SANDBOX_STARTS: usize = 5;

/// The config of a toolgate on stdio fronting `<bench> upstream`, sandboxed (mode strict) or not.
fn sandbox_config(scratch: &Scratch, bench: &Path, sandboxed: bool) -> Result<PathBuf, BoxError> {
    let name = if sandboxed { "sandboxed.toml" } else { "plain.toml" };
    let path = scratch.path(name);
    let sandbox = if sandboxed { "[upstream.sandbox]\nmode = \"strict\"\n" } else { "" };
    let text = format!(
        "[[upstream]]\nname = \"echo\"\ncommand = {:?}\nargs = [\"upstream\"]\n{sandbox}\n[listen.stdio]\n",
        bench.to_string_lossy()
    );
    std::fs::write(&path, text)?;
    Ok(path)
}

/// Scenario 5: the cost of a sandbox: start time to the first answered call, and latency per call through toolgate
/// with the upstream plain and sandboxed (and direct, for reference), in the same run.
pub(crate) async fn sandbox(plan: &Plan, scratch: &Scratch) -> Result<(Vec<Row>, SandboxStarts), BoxError> {
    let configs = [sandbox_config(scratch, &plan.bench, false)?, sandbox_config(scratch, &plan.bench, true)?];
    let args = |config: &Path| vec!["serve".to_owned(), "--config".to_owned(), config.to_string_lossy().into_owned()];
    let mut starts = SandboxStarts::default();
    for round in 0..SANDBOX_STARTS {
        for (index, config) in configs.iter().enumerate() {
            let log = scratch.path(&format!("toolgate-sandbox-start-{round}-{index}.log"));
            let started = Instant::now();
            let (proc, client, tool) =
                procs::spawn_stdio("toolgate serve (start)", &plan.toolgate, &args(config), Some(log)).await?;
            let id = client.next_id();
            check_echo(client.request(id, call_line(id, &tool, "start")).await?, "start")?;
            let elapsed = started.elapsed().as_secs_f64() * 1000.0;
            if index == 0 {
                starts.plain_ms.push(elapsed)
            } else {
                starts.sandboxed_ms.push(elapsed)
            }
            drop(client);
            proc.finish().await;
        }
    }
    let direct = procs::spawn_stdio("upstream", &plan.bench, &strings(&["upstream"]), None).await;
    let plain = procs::spawn_stdio(
        "toolgate (plain upstream)",
        &plan.toolgate,
        &args(&configs[0]),
        Some(scratch.path("toolgate-plain.log")),
    )
    .await;
    let sandboxed = procs::spawn_stdio(
        "toolgate (sandboxed upstream)",
        &plan.toolgate,
        &args(&configs[1]),
        Some(scratch.path("toolgate-sandboxed.log")),
    )
    .await;
    let mut rows = Vec::new();
    for &in_flight in &plan.in_flight {
        let mut lanes: Vec<Lane> =
            [("direct", &direct), ("toolgate/stdio", &plain), ("toolgate/sandboxed", &sandboxed)]
                .into_iter()
                .map(|(path, target)| {
                    let prepared = match target {
                        Ok((proc, client, tool)) => {
                            let workers = (0..in_flight).map(|_| Worker::Stdio(client.clone())).collect();
                            let pid = (path != "direct").then(|| proc.pid()).flatten();
                            Ok((workers, tool.clone(), pid))
                        }
                        Err(error) => Err(error.to_string().into()),
                    };
                    Lane::new(path, prepared)
                })
                .collect();
        measure_lanes(&mut lanes, plan, plan.calls).await;
        rows.extend(lanes.into_iter().map(|lane| lane.row("sandbox", 1, in_flight)));
    }
    for (proc, client, _) in [direct, plain, sandboxed].into_iter().flatten() {
        drop(client);
        proc.finish().await;
    }
    Ok((rows, starts))
}
