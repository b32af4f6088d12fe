//! Command-line syntax: every command, flag and help text of `toolgate`, and nothing else.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

/// toolgate: make MCP tool annotations true, explicit and enforced.
#[derive(Debug, Parser)]
#[command(name = "toolgate", version, about, propagate_version = true)]
pub(crate) struct Cli {
    /// More logging on stderr (-v info, -vv debug); TOOLGATE_LOG=<filter> overrides.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub(crate) verbose: u8,
    #[command(subcommand)]
    pub(crate) command: Command,
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Connect to an MCP server and show every tool's declared, inferred and effective hints.
    ///
    /// Without a target, inspects the bundled demo server.
    Inspect(InspectArgs),
    /// Check a server's tool annotations against toolgate's lint rules (for CI).
    Lint(LintArgs),
    /// Infer hints for each tool of a JSONL corpus (one JSON object per input line).
    Infer(InferArgs),
    /// Run the gateway: front MCP servers, emit explicit annotations, relay everything else.
    ///
    /// Without arguments, serves the bundled demo server over HTTP on a loopback port it prints.
    Serve(ServeArgs),
    /// Show the running gateways and the state of each upstream.
    Status(StatusArgs),
    /// Validate a config file without running anything; prints what would run.
    CheckConfig(CheckConfigArgs),
    /// Convert a Claude Desktop or VS Code MCP config into toolgate's TOML (printed on stdout).
    Import(ImportArgs),
    /// Run the bundled demo MCP server on stdio.
    #[command(hide = true)]
    DemoServer,
}

/// Where the tools come from.
#[derive(Debug, Clone, Args)]
pub(crate) struct TargetArgs {
    /// A Streamable HTTP endpoint, e.g. http://127.0.0.1:3001/mcp.
    #[arg(long, value_name = "URL", conflicts_with = "command")]
    pub(crate) url: Option<String>,
    /// Seconds to wait for the server's answers (initialize and each list page).
    #[arg(long, value_name = "SECONDS", default_value_t = 30)]
    pub(crate) timeout: u64,
    /// Largest accepted message from the server, in MiB.
    #[arg(long, value_name = "MIB", default_value_t = 16)]
    pub(crate) max_message_mib: usize,
    /// The server command and its arguments, after `--`.
    #[arg(last = true, value_name = "CMD")]
    pub(crate) command: Vec<String>,
}

#[derive(Debug, Args)]
pub(crate) struct InspectArgs {
    #[command(flatten)]
    pub(crate) target: TargetArgs,
    /// Print JSON for programs instead of a table.
    #[arg(long)]
    pub(crate) json: bool,
    /// When to colour the table.
    #[arg(long, value_enum, default_value_t = ColorChoice::Auto)]
    pub(crate) color: ColorChoice,
}

#[derive(Debug, Args)]
pub(crate) struct LintArgs {
    #[command(flatten)]
    pub(crate) target: TargetArgs,
    /// A saved `tools/list` result (the result object, the whole response, or a bare array of tools).
    #[arg(long, value_name = "FILE", conflicts_with_all = ["url", "command"])]
    pub(crate) tools: Option<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = LintFormat::Text)]
    pub(crate) format: LintFormat,
    /// Lowest severity that makes the exit code 1.
    #[arg(long, value_enum, default_value_t = DenyLevel::Errors)]
    pub(crate) deny: DenyLevel,
    /// When to colour text output.
    #[arg(long, value_enum, default_value_t = ColorChoice::Auto)]
    pub(crate) color: ColorChoice,
}

#[derive(Debug, Args)]
pub(crate) struct ServeArgs {
    /// A toolgate config file (TOML); see docs/config.md.
    #[arg(long, short, value_name = "FILE", conflicts_with_all = ["upstream_url", "command", "listen"])]
    pub(crate) config: Option<std::path::PathBuf>,
    /// Serve Streamable HTTP on this address (loopback unless you say otherwise); without it, a command-line
    /// upstream is served on stdio.
    #[arg(long, value_name = "ADDR")]
    pub(crate) listen: Option<std::net::SocketAddr>,
    /// Front one Streamable HTTP upstream.
    #[arg(long, value_name = "URL", conflicts_with = "command")]
    pub(crate) upstream_url: Option<String>,
    /// Seconds allowed for each upstream request.
    #[arg(long, value_name = "SECONDS", default_value_t = 60)]
    pub(crate) timeout: u64,
    /// The policy without a config file: `standard` (destructive and open-world writes need a person's
    /// approval) or `permissive` (every call is relayed; hints are still rewritten and calls audited).
    #[arg(long, value_enum, default_value_t = PolicyChoice::Standard)]
    pub(crate) policy: PolicyChoice,
    /// The state directory (default: $TOOLGATE_STATE_DIR, $XDG_STATE_HOME/toolgate or ~/.local/state/toolgate).
    #[arg(long, value_name = "DIR")]
    pub(crate) state_dir: Option<PathBuf>,
    /// The upstream command and its arguments, after `--`.
    #[arg(last = true, value_name = "CMD")]
    pub(crate) command: Vec<String>,
}

#[derive(Debug, Args)]
pub(crate) struct StatusArgs {
    /// The state directory (default: $TOOLGATE_STATE_DIR, $XDG_STATE_HOME/toolgate or ~/.local/state/toolgate).
    #[arg(long, value_name = "DIR")]
    pub(crate) state_dir: Option<PathBuf>,
    /// Print JSON.
    #[arg(long)]
    pub(crate) json: bool,
}

#[derive(Debug, Args)]
pub(crate) struct CheckConfigArgs {
    /// The config file to check.
    #[arg(value_name = "FILE")]
    pub(crate) file: PathBuf,
}

#[derive(Debug, Args)]
pub(crate) struct ImportArgs {
    /// `claude_desktop_config.json`, a VS Code `mcp.json` or `settings.json`.
    #[arg(value_name = "PATH")]
    pub(crate) path: PathBuf,
}

#[derive(Debug, Args)]
pub(crate) struct InferArgs {
    /// A JSONL file shaped like the corpus (`server`, `name`, `title`, `description`, `input_schema`).
    #[arg(long, value_name = "FILE.jsonl")]
    pub(crate) corpus: PathBuf,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum PolicyChoice {
    /// Read-only and additive writes allowed; destructive and open-world writes confirmed.
    Standard,
    /// Every call allowed.
    Permissive,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum LintFormat {
    Text,
    Json,
    Sarif,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum DenyLevel {
    /// Notes, warnings and errors fail.
    Notes,
    /// Warnings and errors fail.
    Warnings,
    /// Only errors fail.
    Errors,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum ColorChoice {
    Auto,
    Always,
    Never,
}

impl ColorChoice {
    /// Whether to colour output written to stdout.
    pub(crate) fn enabled(self) -> bool {
        use std::io::IsTerminal;
        match self {
            ColorChoice::Always => true,
            ColorChoice::Never => false,
            ColorChoice::Auto => std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none(),
        }
    }
}
