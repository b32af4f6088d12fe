//! `toolgate-bench`: how much latency, throughput and memory toolgate costs, measured against the direct path in
//! the same run with the same client.
//!
//! `toolgate-bench upstream [--http ADDR]` is a minimal, fast MCP server with one `echo` tool; `toolgate-bench run`
//! starts upstreams and toolgates, drives them with one async client, and prints a table (or JSON with `--json`);
//! `--only fleet` compares one toolgate with three behind HAProxy; `toolgate-bench crash` kills a loaded toolgate with SIGKILL round after round and counts the audit rows kept;
//! `toolgate-bench soak` offers a steady rate for minutes and reads toolgate's memory and latency as it goes.
//! See docs/benchmarks.md for what each scenario measures and the figures from the project's machine.

mod client;
mod crash;
mod fleet;
mod procs;
mod report;
mod scenario;
mod soak;
mod upstream;

use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{Parser, Subcommand, ValueEnum};

use crate::procs::Scratch;
use crate::report::{Meta, Report};
use crate::scenario::Plan;

/// The error type of the whole binary: every failure ends up as a message.
pub(crate) type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Benchmark toolgate against direct MCP connections.
#[derive(Debug, Parser)]
#[command(name = "toolgate-bench", version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Serve a minimal MCP server with one `echo` tool, on stdio or (with --http) Streamable HTTP at /mcp.
    Upstream {
        /// Serve Streamable HTTP on this address (port 0 picks one; the first stdout line says which).
        #[arg(long, value_name = "ADDR")]
        http: Option<SocketAddr>,
    },
    /// Run the scenarios, direct and through toolgate, and print the results.
    Run(RunArgs),
    /// Kill a loaded toolgate with SIGKILL round after round, then check that every answered call has its audit row.
    Crash(CrashArgs),
    /// Offer a steady call rate for minutes and read toolgate's memory and latency every few seconds.
    Soak(SoakArgs),
}

#[derive(Debug, Clone, clap::Args)]
struct SoakArgs {
    /// The toolgate binary (default: `toolgate` next to this binary, else on PATH).
    #[arg(long, value_name = "PATH")]
    toolgate: Option<PathBuf>,
    /// Calls per second offered, in all.
    #[arg(long, value_name = "N", default_value_t = 200)]
    rate: u64,
    /// How long the load lasts.
    #[arg(long, value_name = "S", default_value_t = 600)]
    seconds: u64,
    /// HTTP sessions sharing the rate.
    #[arg(long, value_name = "N", default_value_t = 16)]
    sessions: usize,
    /// Stdio upstreams behind toolgate.
    #[arg(long, value_name = "N", default_value_t = 2)]
    upstreams: usize,
    /// Seconds between memory and latency readings.
    #[arg(long, value_name = "S", default_value_t = 30)]
    sample_seconds: u64,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Clone, clap::Args)]
struct CrashArgs {
    /// The toolgate binary (default: `toolgate` next to this binary, else on PATH).
    #[arg(long, value_name = "PATH")]
    toolgate: Option<PathBuf>,
    /// HTTP clients calling all the time.
    #[arg(long, value_name = "N", default_value_t = 16)]
    clients: usize,
    /// How many times toolgate is killed.
    #[arg(long, value_name = "N", default_value_t = 5)]
    rounds: usize,
    /// Milliseconds of load before each kill.
    #[arg(long, value_name = "MS", default_value_t = 3000)]
    round_ms: u64,
    /// Stdio upstreams behind toolgate.
    #[arg(long, value_name = "N", default_value_t = 2)]
    upstreams: usize,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Scenario {
    /// Stdio, direct vs through toolgate.
    Stdio,
    /// One HTTP session, and many HTTP sessions (throughput).
    Http,
    /// toolgate's memory with several upstreams and many sessions.
    Memory,
    /// A sandboxed stdio upstream's start time and added latency per call (not in the default set).
    Sandbox,
    /// 2026-07-28 one-request calls beside legacy HTTP sessions on one toolgate, together and alone (not in the
    /// default set).
    Mixed,
    /// Many HTTP sessions through one toolgate and through three behind HAProxy (not in the default set).
    Fleet,
}

#[derive(Debug, Clone, clap::Args)]
struct RunArgs {
    /// The toolgate binary (default: `toolgate` next to this binary, else on PATH).
    #[arg(long, value_name = "PATH")]
    toolgate: Option<PathBuf>,
    /// Timed calls per measurement.
    #[arg(long, value_name = "N", default_value_t = 20_000)]
    calls: usize,
    /// Untimed calls before each measurement.
    #[arg(long, value_name = "N", default_value_t = 2_000)]
    warmup: usize,
    /// Split each measurement into this many rounds, alternating direct and relayed paths.
    #[arg(long, value_name = "N", default_value_t = 5)]
    rounds: usize,
    /// Calls in flight in the single-session measurements.
    #[arg(long, value_name = "N,..", value_delimiter = ',', default_values_t = [1, 8])]
    in_flight: Vec<usize>,
    /// HTTP sessions in the throughput measurement.
    #[arg(long, value_name = "N", default_value_t = 64)]
    sessions: usize,
    /// Calls in flight per session in the throughput measurement.
    #[arg(long, value_name = "N", default_value_t = 4)]
    session_in_flight: usize,
    /// Timed calls in the throughput measurement.
    #[arg(long, value_name = "N", default_value_t = 100_000)]
    many_calls: usize,
    /// Open HTTP sessions in the memory measurement.
    #[arg(long, value_name = "N", default_value_t = 100)]
    memory_sessions: usize,
    /// Upstreams in the memory measurement (more than one needs `toolgate serve --config`).
    #[arg(long, value_name = "N", default_value_t = 5)]
    memory_upstreams: usize,
    /// Bytes of text each echo call sends (and gets back).
    #[arg(long, value_name = "BYTES", default_value_t = 64)]
    payload: usize,
    /// Run only these scenarios.
    #[arg(long, value_enum, value_delimiter = ',', default_values_t = [Scenario::Stdio, Scenario::Http, Scenario::Memory])]
    only: Vec<Scenario>,
    /// Print the report as JSON instead of a table.
    #[arg(long)]
    json: bool,
}

fn main() -> Result<(), BoxError> {
    let cli = Cli::parse();
    match cli.command {
        Command::Upstream { http: None } => upstream::serve_stdio(),
        Command::Upstream { http: Some(addr) } => runtime()?.block_on(upstream::serve_http(addr)),
        Command::Crash(args) => {
            let bench = std::env::current_exe()?;
            let plan = crash::CrashPlan {
                toolgate: toolgate_binary(&bench, args.toolgate.clone()),
                bench,
                clients: args.clients,
                rounds: args.rounds,
                round: std::time::Duration::from_millis(args.round_ms),
                upstreams: args.upstreams,
            };
            let report = runtime()?.block_on(crash::run(&plan))?;
            print_report(&report, args.json, &report.text())
        }
        Command::Soak(args) => {
            let bench = std::env::current_exe()?;
            let plan = soak::SoakPlan {
                toolgate: toolgate_binary(&bench, args.toolgate.clone()),
                bench,
                rate: args.rate,
                duration: std::time::Duration::from_secs(args.seconds),
                sessions: args.sessions,
                upstreams: args.upstreams,
                sample: std::time::Duration::from_secs(args.sample_seconds),
            };
            let report = runtime()?.block_on(soak::run(&plan))?;
            print_report(&report, args.json, &report.text())
        }
        Command::Run(args) => {
            let report = runtime()?.block_on(run(args.clone()))?;
            print_report(&report, args.json, &report.table())
        }
    }
}

/// Prints a report as pretty JSON, or as its text.
fn print_report(report: &impl serde::Serialize, json: bool, text: &str) -> Result<(), BoxError> {
    let mut stdout = std::io::stdout().lock();
    if json {
        serde_json::to_writer_pretty(&mut stdout, report)?;
        writeln!(stdout)?;
    } else {
        write!(stdout, "{text}")?;
    }
    Ok(())
}

fn runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread().enable_all().build()
}

async fn run(args: RunArgs) -> Result<Report, BoxError> {
    let bench = std::env::current_exe()?;
    let toolgate = toolgate_binary(&bench, args.toolgate);
    if args.calls == 0 || args.in_flight.contains(&0) || args.sessions == 0 || args.session_in_flight == 0 {
        return Err("--calls, --in-flight, --sessions and --session-in-flight must be at least 1".into());
    }
    let plan = Plan {
        bench,
        toolgate: toolgate.clone(),
        calls: args.calls,
        warmup: args.warmup,
        rounds: args.rounds.max(1),
        in_flight: args.in_flight,
        sessions: args.sessions,
        session_in_flight: args.session_in_flight,
        many_calls: args.many_calls.max(1),
        memory_sessions: args.memory_sessions,
        memory_upstreams: args.memory_upstreams.max(1),
        payload: "x".repeat(args.payload),
    };
    let meta = Meta {
        command: std::env::args().collect::<Vec<_>>().join(" "),
        toolgate: toolgate.display().to_string(),
        cpus: std::thread::available_parallelism().map_or(1, usize::from),
        cpus_online: cpus_online(),
        cpu_model: cpu_model(),
        load_average_at_start: load_average(),
        load_average_at_end: String::new(),
        calls: plan.calls,
        warmup: plan.warmup,
        rounds: plan.rounds,
        many_calls: plan.many_calls,
        payload_bytes: args.payload,
    };
    let scratch = Scratch::new()?;
    let mut report = Report {
        meta,
        rows: Vec::new(),
        comparisons: Vec::new(),
        memory: None,
        memory_unavailable: None,
        sandbox_starts: None,
        sandbox_unavailable: None,
    };
    if args.only.contains(&Scenario::Stdio) {
        report.rows.extend(scenario::stdio(&plan, &scratch).await);
    }
    if args.only.contains(&Scenario::Http) {
        report.rows.extend(scenario::http(&plan, &scratch).await);
    }
    if args.only.contains(&Scenario::Memory) {
        match scenario::memory(&plan, &scratch).await {
            Ok(memory) => report.memory = Some(memory),
            Err(error) => report.memory_unavailable = Some(error.to_string()),
        }
    }
    if args.only.contains(&Scenario::Mixed) {
        report.rows.extend(scenario::mixed(&plan, &scratch).await);
    }
    if args.only.contains(&Scenario::Fleet) {
        report.rows.extend(fleet::fleet(&plan, &scratch).await);
    }
    if args.only.contains(&Scenario::Sandbox) {
        match scenario::sandbox(&plan, &scratch).await {
            Ok((rows, starts)) => {
                report.rows.extend(rows);
                report.sandbox_starts = Some(starts);
            }
            Err(error) => report.sandbox_unavailable = Some(error.to_string()),
        }
    }
    report.compare();
    report.meta.load_average_at_end = load_average();
    Ok(report)
}

/// The toolgate to measure: the one given, else `toolgate` next to this binary, else on PATH.
fn toolgate_binary(bench: &std::path::Path, given: Option<PathBuf>) -> PathBuf {
    given.unwrap_or_else(|| {
        let sibling = bench.with_file_name("toolgate");
        if sibling.exists() { sibling } else { PathBuf::from("toolgate") }
    })
}

fn load_average() -> String {
    let text = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    text.split_whitespace().take(3).collect::<Vec<_>>().join(" ")
}

/// Processors the machine has (`available_parallelism` counts only those this process may run on: `taskset`).
fn cpus_online() -> usize {
    let info = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    info.lines().filter(|line| line.starts_with("processor")).count()
}

fn cpu_model() -> String {
    let info = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    info.lines()
        .find_map(|line| line.strip_prefix("model name"))
        .map(|rest| rest.trim_start_matches([' ', '\t', ':']).trim().to_owned())
        .unwrap_or_else(|| "unknown CPU".to_owned())
}
