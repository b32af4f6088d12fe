//! The `toolgate` command: parse arguments, set up logging on stderr, run one command, map the outcome to an exit
//! code (0 clean, 1 findings at or above the chosen level, 2 usage or connection errors).
//!
//! Wiring only: commands live in `commands/`, output formats in `render/`, and all judgement in `toolgate-core`.

mod cli;
mod commands;
mod descriptors;
mod evidence;
mod manifests;
mod render;
mod report;
mod state;
mod store_location;
mod target;
mod telemetry;
mod view;

use std::process::ExitCode;

use clap::Parser;

use crate::cli::{Cli, Command};

/// How a command ended, as the process exit code says it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// Nothing to report at or above the chosen level.
    Clean,
    /// Findings at or above the chosen level.
    Findings,
}

/// mimalloc instead of the system allocator: relaying a call allocates and frees small JSON values across the
/// runtime's threads, which glibc's malloc served with arena locking and consolidation (a quarter of the gateway's
/// CPU under load, `perf`); see ARCHITECTURE.md for the measurement.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// The runtime's worker threads. `serve` relays calls on every CPU it may use, and at least two (`--workers`
/// overrides): it had two workers whatever the machine, so one gateway stopped growing past about four cores
/// (docs/benchmarks.md, "throughput against cores"); on one CPU two workers measured faster than one. One-shot
/// commands do one thing at a time: two suffice.
fn workers(cli: &Cli) -> usize {
    match &cli.command {
        Command::Serve(args) => args
            .workers
            .map(usize::from)
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(2, std::num::NonZeroUsize::get).max(2)),
        _ => 2,
    }
}

fn main() -> ExitCode {
    // A sandbox's port guard (toolgate-sandbox) runs before anything else starts: it restricts this process and
    // execs the sandbox's next program, so no runtime or logger of toolgate's lives on in the sandbox.
    let mut args = std::env::args_os();
    if args.nth(1).is_some_and(|arg| arg == toolgate_sandbox::PORT_GUARD_ARG) {
        let error = toolgate_sandbox::run_port_guard(args);
        eprintln!("toolgate: {}", toolgate_core::display::escape(&error.to_string()));
        return ExitCode::from(126);
    }
    let cli = Cli::parse();
    // A running gateway reports upstream starts, failures and their stderr by default; one-shot commands stay quiet.
    let baseline = u8::from(matches!(cli.command, Command::Serve(_)));
    let telemetry = init_logging(cli.verbose.max(baseline));
    let runtime = match tokio::runtime::Builder::new_multi_thread().worker_threads(workers(&cli)).enable_all().build() {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("toolgate: cannot start the async runtime: {error}");
            return ExitCode::from(2);
        }
    };
    // The command runs as a task on the runtime's workers, not on this thread: `block_on` would poll it here, and
    // every wake-up between it (reading stdin, for `serve` on stdio) and the tasks it feeds would cross threads.
    let result = runtime.block_on(async {
        match tokio::spawn(run(cli)).await {
            Ok(result) => result,
            Err(error) => Err(anyhow::anyhow!("the command stopped abnormally: {error}")),
        }
    });
    // Children and sockets are closed by the commands; don't wait for stray blocking tasks.
    runtime.shutdown_timeout(std::time::Duration::from_secs(1));
    telemetry.shutdown();
    match result {
        Ok(Outcome::Clean) => ExitCode::SUCCESS,
        Ok(Outcome::Findings) => ExitCode::from(1),
        Err(error) => {
            // An error can carry an upstream's words (a failed handshake, a reason): one escaped line.
            eprintln!("toolgate: {}", toolgate_core::display::escape(&format!("{error:#}")));
            ExitCode::from(2)
        }
    }
}

async fn run(cli: Cli) -> anyhow::Result<Outcome> {
    match cli.command {
        Command::Inspect(args) => commands::inspect::run(args).await,
        Command::Lint(args) => commands::lint::run(args).await,
        Command::Infer(args) => commands::infer::run(args),
        Command::Serve(args) => commands::serve::run(args).await,
        Command::Status(args) => commands::status::run(args),
        Command::CheckConfig(args) => commands::config::check(args),
        Command::Import(args) => commands::config::import(args),
        Command::Audit(args) => commands::audit::run(args).await,
        Command::Approvals(args) => commands::approvals::run(args).await,
        Command::Pins(args) => commands::pins::run(args).await,
        Command::Manifest(args) => commands::manifest::run(args).await,
        Command::Prompt(args) => commands::prompt::run(args).await,
        Command::Verify(args) => commands::verify::run(args).await,
        Command::DemoServer => {
            toolgate_demo::serve_stdio().await?;
            Ok(Outcome::Clean)
        }
    }
}

fn init_logging(verbose: u8) -> telemetry::Telemetry {
    let default_level = match verbose {
        0 => "warn",
        1 => "info",
        _ => "debug",
    };
    telemetry::init(default_level)
}

#[cfg(test)]
mod tests {
    use clap::Parser as _;

    use super::workers;
    use crate::cli::Cli;

    fn parsed(args: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("toolgate").chain(args.iter().copied()))
    }

    #[test]
    fn serve_runs_a_worker_per_cpu_at_least_two_unless_told() -> Result<(), clap::Error> {
        let cpus = std::thread::available_parallelism().map_or(2, std::num::NonZeroUsize::get);
        let default = parsed(&["serve", "--", "server"])?;
        assert_eq!(workers(&default), cpus.max(2));
        let told = parsed(&["serve", "--workers", "3", "--", "server"])?;
        assert_eq!(workers(&told), 3);
        let one_shot = parsed(&["status"])?;
        assert_eq!(workers(&one_shot), 2);
        for bad in ["0", "-1", "many", "1025"] {
            assert!(parsed(&["serve", "--workers", bad, "--", "server"]).is_err(), "--workers {bad}");
        }
        Ok(())
    }
}
