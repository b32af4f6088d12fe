//! The `toolgate` command: parse arguments, set up logging on stderr, run one command, map the outcome to an exit
//! code (0 clean, 1 findings at or above the chosen level, 2 usage or connection errors).
//!
//! Wiring only: commands live in `commands/`, output formats in `render/`, and all judgement in `toolgate-core`.

mod cli;
mod commands;
mod descriptors;
mod evidence;
mod instance;
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
    let runtime = match tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build() {
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
