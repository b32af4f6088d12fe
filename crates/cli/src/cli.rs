//! Command-line syntax: every command, flag and help text of `toolgate`, and nothing else.

use std::path::PathBuf;

use clap::builder::{PossibleValuesParser, TypedValueParser};
use clap::{Args, Parser, Subcommand, ValueEnum};
use toolgate_core::decision::Verdict;
use toolgate_store::AuditKind;

/// toolgate: make MCP tool annotations true, explicit and enforced.
#[derive(Debug, Parser)]
#[command(name = "toolgate", version, about, propagate_version = true)]
pub(crate) struct Cli {
    /// More logging on stderr (-v info, -vv debug); TOOLGATE_LOG=FILTER overrides.
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
    /// Show the audit log, or check its hash chain (`audit verify`).
    Audit(AuditArgs),
    /// List, approve or deny calls waiting for a person's confirmation.
    Approvals(ApprovalsArgs),
    /// List tool pins, show a quarantined definition's changes, approve or reject it.
    Pins(PinsArgs),
    /// Create a signing key, sign a server's tool manifest, or verify one.
    Manifest(ManifestArgs),
    /// Run a server in an observing sandbox, call its tools and check their hints against what they did.
    ///
    /// Copies the working directory to a scratch tree, runs the server under bubblewrap (read-only root, the copy
    /// writable, no network) and strace, and stores what each tool did as verification records that `serve` uses.
    Verify(VerifyArgs),
    /// Print the safety prompt for a server's tools (how a model should use each one).
    ///
    /// Without a target, uses the bundled demo server.
    Prompt(PromptArgs),
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

/// Whose eyes a command looks through: an upstream of a config, or a trust level (`crate::view`).
#[derive(Debug, Args)]
pub(crate) struct ViewArgs {
    /// How far the server's declared hints are believed, as the upstream's `trust` setting in the config (default:
    /// the config's, else `untrusted`, the gateway's default).
    #[arg(long, value_enum)]
    pub(crate) trust: Option<TrustArg>,
    /// A toolgate config: show the tools as the gateway enforces them for `--upstream` (its trust and overrides; its
    /// command or URL unless one is given).
    #[arg(long, value_name = "FILE", requires = "upstream")]
    pub(crate) config: Option<PathBuf>,
    /// With `--config`: the upstream's configured name.
    #[arg(long, value_name = "NAME", requires = "config")]
    pub(crate) upstream: Option<String>,
    /// The state directory whose verification records (`toolgate verify`) are weighed as `serve` weighs them
    /// (default: as for `serve`).
    #[arg(long, value_name = "DIR")]
    pub(crate) state_dir: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub(crate) struct InspectArgs {
    #[command(flatten)]
    pub(crate) target: TargetArgs,
    #[command(flatten)]
    pub(crate) view: ViewArgs,
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
    #[command(flatten)]
    pub(crate) view: ViewArgs,
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
pub(crate) struct VerifyArgs {
    /// Output format.
    #[arg(long, value_enum, default_value_t = LintFormat::Text)]
    pub(crate) format: LintFormat,
    /// Lowest severity that makes the exit code 1 (every observed contradiction is an error).
    #[arg(long, value_enum, default_value_t = DenyLevel::Errors)]
    pub(crate) deny: DenyLevel,
    /// How many times each tool is called with the same arguments (2 or more sees whether a repeat changes state).
    #[arg(long, value_name = "N", default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..=10))]
    pub(crate) calls: u32,
    /// Also call the tools that do not declare readOnlyHint true (they write inside the scratch copy only).
    #[arg(long)]
    pub(crate) allow_writes: bool,
    /// Seconds allowed for starting the server, its listing and each call.
    #[arg(long, value_name = "SECONDS", default_value_t = 30)]
    pub(crate) timeout_per_call: u64,
    /// Seconds allowed for the whole run.
    #[arg(long, value_name = "SECONDS", default_value_t = 300)]
    pub(crate) timeout: u64,
    /// The working directory copied into the scratch tree (default: the current directory).
    #[arg(long, value_name = "DIR")]
    pub(crate) dir: Option<PathBuf>,
    /// An environment variable for the server (repeatable); nothing else of toolgate's environment is passed but
    /// PATH, HOME, LANG and TERM. `{scratch}` in the value stands for the scratch copy's path.
    #[arg(long = "env", value_name = "KEY=VALUE")]
    pub(crate) env: Vec<String>,
    /// The state directory the records are stored in (default: as for `serve`).
    #[arg(long, value_name = "DIR")]
    pub(crate) state_dir: Option<PathBuf>,
    /// A config file whose `[store]` names the store the records go to (a shared PostgreSQL database), so the
    /// `serve` of that config weighs them.
    #[arg(long, value_name = "FILE")]
    pub(crate) config: Option<PathBuf>,
    /// Do not store verification records.
    #[arg(long)]
    pub(crate) no_record: bool,
    /// The server command and its arguments, after `--`.
    #[arg(last = true, value_name = "CMD", required = true)]
    pub(crate) command: Vec<String>,
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
    #[arg(long, value_name = "SECONDS", default_value_t = toolgate_spec::DEFAULT_REQUEST_TIMEOUT.as_secs())]
    pub(crate) timeout: u64,
    /// The policy without a config file: `standard` (destructive and open-world writes need a person's
    /// approval) or `permissive` (every call is relayed; hints are still rewritten and calls audited).
    #[arg(long, value_enum, default_value_t = PolicyChoice::Standard)]
    pub(crate) policy: PolicyChoice,
    /// The state directory (default: $TOOLGATE_STATE_DIR, $XDG_STATE_HOME/toolgate or ~/.local/state/toolgate).
    #[arg(long, value_name = "DIR")]
    pub(crate) state_dir: Option<PathBuf>,
    /// Threads that relay calls (default: one per CPU this process may run on, as `taskset` or a container's CPU
    /// quota allows, and at least two).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=1024))]
    pub(crate) workers: Option<u16>,
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
    /// `warnings`: exit 1 when the file has warnings (a rule that matches no upstream, a public bind without
    /// callers, ...), as CI should; errors always exit 2.
    #[arg(long, value_enum, value_name = "LEVEL")]
    pub(crate) deny: Option<ConfigDeny>,
}

/// What `check-config --deny` fails on besides errors.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum ConfigDeny {
    /// Any warning.
    Warnings,
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

#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub(crate) struct AuditArgs {
    /// The state directory (default: $TOOLGATE_STATE_DIR, $XDG_STATE_HOME/toolgate or ~/.local/state/toolgate).
    #[arg(long, value_name = "DIR", global = true)]
    pub(crate) state_dir: Option<PathBuf>,
    /// A config file whose `[store]` names the store (a shared PostgreSQL database), as `serve --config` uses it.
    #[arg(long, value_name = "FILE", global = true)]
    pub(crate) config: Option<PathBuf>,
    #[command(subcommand)]
    pub(crate) action: Option<AuditAction>,
    /// Rows at or after this time: RFC 3339, or an age such as 30s, 10m, 2h, 1d, 1w.
    #[arg(long, value_name = "T", global = true)]
    pub(crate) since: Option<String>,
    /// Rows before this time: RFC 3339, or an age such as 30s, 10m, 2h, 1d, 1w.
    #[arg(long, value_name = "T", global = true)]
    pub(crate) until: Option<String>,
    /// Only tools matching this glob (`*`, `?`, `[...]`, case-sensitive).
    #[arg(long, value_name = "GLOB")]
    pub(crate) tool: Option<String>,
    /// Only rows with this verdict.
    #[arg(long, value_name = "V", value_parser = verdict_parser())]
    pub(crate) verdict: Option<Verdict>,
    /// Only rows of this kind.
    #[arg(long, value_name = "K", value_parser = kind_parser())]
    pub(crate) kind: Option<AuditKind>,
    /// Only rows written by this gateway instance (its `[store] instance_id`, or the id in its state directory).
    #[arg(long, value_name = "ID")]
    pub(crate) instance: Option<String>,
    /// Only the most recent N rows.
    #[arg(long, value_name = "N")]
    pub(crate) limit: Option<u32>,
    /// Print one JSON object per row (JSON lines).
    #[arg(long)]
    pub(crate) json: bool,
}

#[derive(Debug, Subcommand)]
pub(crate) enum AuditAction {
    /// Walk the hash chain: exit 0 when intact, 1 naming the first changed, inserted or removed row.
    ///
    /// Reads only: the database is opened read-only and journals of stopped gateways are counted, not recovered.
    /// After retention pruned rows the walk starts at the checkpoint.
    Verify {
        /// Verify exported JSON-lines files instead (in chain order, e.g. retention's export directory sorted by
        /// name), and that the database's checkpoint is their last row.
        #[arg(long, value_name = "FILE", num_args = 1..)]
        exported: Vec<PathBuf>,
    },
    /// Print rows (all columns, hashes included) as JSON lines for a log store; `--since` / `--until` select them.
    /// `audit verify --exported FILE` re-verifies such a file.
    Export,
}

/// `--verdict`: the policy's own verdict names, so the command line cannot drift from them.
fn verdict_parser() -> impl TypedValueParser<Value = Verdict> {
    PossibleValuesParser::new(Verdict::ALL.map(Verdict::as_str))
        .try_map(|name| name.parse::<Verdict>().map_err(|error| error.to_string()))
}

/// `--kind`: the audit log's own kind names.
fn kind_parser() -> impl TypedValueParser<Value = AuditKind> {
    PossibleValuesParser::new(AuditKind::ALL.map(AuditKind::as_str))
        .try_map(|name| AuditKind::parse(&name).ok_or_else(|| format!("unknown audit kind `{name}`")))
}

#[derive(Debug, Args)]
pub(crate) struct ApprovalsArgs {
    /// The state directory (default: $TOOLGATE_STATE_DIR, $XDG_STATE_HOME/toolgate or ~/.local/state/toolgate).
    #[arg(long, value_name = "DIR", global = true)]
    pub(crate) state_dir: Option<PathBuf>,
    /// A config file whose `[store]` names the store (a shared PostgreSQL database), as `serve --config` uses it.
    #[arg(long, value_name = "FILE", global = true)]
    pub(crate) config: Option<PathBuf>,
    #[command(subcommand)]
    pub(crate) action: ApprovalsAction,
}

#[derive(Debug, Subcommand)]
pub(crate) enum ApprovalsAction {
    /// Show the calls waiting for a decision.
    List {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Let one waiting call go ahead (once).
    Approve(DecideArgs),
    /// Refuse one waiting call.
    Deny(DecideArgs),
}

#[derive(Debug, Args)]
pub(crate) struct DecideArgs {
    /// The approval id, as `approvals list` shows it.
    #[arg(value_name = "ID")]
    pub(crate) id: String,
    /// Who decides (default: $USER).
    #[arg(long, value_name = "NAME")]
    pub(crate) by: Option<String>,
}

#[derive(Debug, Args)]
pub(crate) struct PinsArgs {
    /// The state directory (default: $TOOLGATE_STATE_DIR, $XDG_STATE_HOME/toolgate or ~/.local/state/toolgate).
    #[arg(long, value_name = "DIR", global = true)]
    pub(crate) state_dir: Option<PathBuf>,
    /// A config file whose `[store]` names the store (a shared PostgreSQL database), as `serve --config` uses it.
    #[arg(long, value_name = "FILE", global = true)]
    pub(crate) config: Option<PathBuf>,
    #[command(subcommand)]
    pub(crate) action: PinsAction,
}

#[derive(Debug, Subcommand)]
pub(crate) enum PinsAction {
    /// Show every pin and every definition waiting in quarantine.
    List {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Show what changed in a quarantined definition, field by field, and the fingerprint to approve.
    Diff(PinToolArgs),
    /// Pin the quarantined definition of a tool (`UPSTREAM TOOL`), or every waiting definition of one upstream
    /// (`--upstream NAME --all`), or only those whose declared hints inference agrees with and lint finds no error
    /// in (`--upstream NAME --agreeing`).
    Approve {
        /// The upstream's configured name.
        #[arg(value_name = "UPSTREAM", required_unless_present = "bulk_upstream")]
        upstream: Option<String>,
        /// The tool's name at the upstream (with --kind: the prompt's name, the resource's URI or the template's
        /// uriTemplate; none for instructions).
        #[arg(value_name = "TOOL")]
        tool: Option<String>,
        /// What kind of definition: tool, prompt, resource, resource_template or instructions.
        #[arg(long, value_name = "KIND", default_value = "tool", value_parser = parse_pin_kind,
              conflicts_with = "bulk_upstream")]
        kind: toolgate_store::PinKind,
        /// Pin the waiting definitions of this upstream (with `--all` or `--agreeing`).
        #[arg(long = "upstream", value_name = "NAME", conflicts_with_all = ["upstream", "tool", "fingerprint"])]
        bulk_upstream: Option<String>,
        /// With `--upstream`: every waiting definition.
        #[arg(long, requires = "bulk_upstream", conflicts_with = "agreeing")]
        all: bool,
        /// With `--upstream`: only the definitions that agree (declared hints the trust rule accepts, no lint error).
        #[arg(long, requires = "bulk_upstream")]
        agreeing: bool,
        /// The fingerprint shown by `pins diff` (default: the one pending now; give it to avoid approving a
        /// definition that changed while you looked).
        #[arg(long, value_name = "F")]
        fingerprint: Option<String>,
        /// Who approves (default: $USER).
        #[arg(long, value_name = "NAME")]
        by: Option<String>,
    },
    /// Drop the quarantined definition of a tool; the pin stays as it was.
    Reject {
        #[command(flatten)]
        tool: PinToolArgs,
        /// Who rejects (default: $USER).
        #[arg(long, value_name = "NAME")]
        by: Option<String>,
    },
}

#[derive(Debug, Args)]
pub(crate) struct PinToolArgs {
    /// The upstream's configured name.
    #[arg(value_name = "UPSTREAM")]
    pub(crate) upstream: String,
    /// The tool's name at the upstream (with --kind: the prompt's name, the resource's URI or the template's
    /// uriTemplate; none for instructions).
    #[arg(value_name = "TOOL")]
    pub(crate) tool: Option<String>,
    /// What kind of definition: tool, prompt, resource, resource_template or instructions.
    #[arg(long, value_name = "KIND", default_value = "tool", value_parser = parse_pin_kind)]
    pub(crate) kind: toolgate_store::PinKind,
}

impl PinToolArgs {
    /// The definition's name: the one given, or `instructions` for the instructions (an upstream has one).
    pub(crate) fn name(&self) -> &str {
        self.tool.as_deref().unwrap_or(toolgate_store::INSTRUCTIONS)
    }
}

fn parse_pin_kind(text: &str) -> Result<toolgate_store::PinKind, String> {
    toolgate_store::PinKind::parse(text).ok_or_else(|| {
        let names: Vec<&str> = toolgate_store::PinKind::ALL.iter().map(|kind| kind.as_str()).collect();
        format!("expected one of {}", names.join(", "))
    })
}

#[derive(Debug, Args)]
pub(crate) struct ManifestArgs {
    #[command(subcommand)]
    pub(crate) action: ManifestAction,
}

#[derive(Debug, Subcommand)]
pub(crate) enum ManifestAction {
    /// Create an Ed25519 signing key (a base64 seed, mode 0600) and print its public key.
    Keygen {
        /// Where to write the key; an existing file is never overwritten.
        #[arg(long, value_name = "KEYFILE")]
        out: PathBuf,
    },
    /// Sign the tool definitions a server lists now (without a target: the bundled demo server).
    Sign {
        /// The key file written by `manifest keygen`.
        #[arg(long, value_name = "KEYFILE")]
        key: PathBuf,
        #[command(flatten)]
        source: ToolsArgs,
        /// Write the manifest here instead of stdout.
        #[arg(long, value_name = "FILE")]
        out: Option<PathBuf>,
    },
    /// Check a manifest's signature and compare it with the tools a server lists now (without a target: the
    /// bundled demo server). Exit 1 when the signature fails or a tool was added, removed or changed.
    Verify {
        /// An accepted signer: the base64 public key, or a file holding it (repeat for several).
        #[arg(long = "public-key", value_name = "KEY", required = true)]
        public_keys: Vec<String>,
        /// The manifest file.
        #[arg(value_name = "MANIFEST")]
        manifest: PathBuf,
        #[command(flatten)]
        source: ToolsArgs,
    },
}

/// Where the tools come from: a saved list or a live server.
#[derive(Debug, Clone, Args)]
pub(crate) struct ToolsArgs {
    /// A saved `tools/list` result (the result object, the whole response, or a bare array of tools).
    #[arg(long, value_name = "FILE", conflicts_with_all = ["url", "command"])]
    pub(crate) tools: Option<PathBuf>,
    #[command(flatten)]
    pub(crate) target: TargetArgs,
}

#[derive(Debug, Args)]
pub(crate) struct PromptArgs {
    #[command(flatten)]
    pub(crate) source: ToolsArgs,
    #[command(flatten)]
    pub(crate) view: ViewArgs,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum TrustArg {
    /// Declarations may only tighten, unless inference confidently agrees (the gateway's default).
    Untrusted,
    /// Declarations win (a pinned upstream).
    Pinned,
    /// Declarations win (a verified upstream).
    Verified,
}

impl TrustArg {
    /// The core's trust level.
    pub(crate) fn level(self) -> toolgate_core::trust::TrustLevel {
        use toolgate_core::trust::TrustLevel;
        match self {
            TrustArg::Untrusted => TrustLevel::Untrusted,
            TrustArg::Pinned => TrustLevel::Pinned,
            TrustArg::Verified => TrustLevel::Verified,
        }
    }
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
