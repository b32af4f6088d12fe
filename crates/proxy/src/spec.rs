//! The gateway's lowered configuration: what the runtime runs from.
//!
//! Built once from a config file or the command line (by `toolgate-config` or the CLI) and never parsed again;
//! nothing here knows TOML or JSON config syntax. Secrets (bearer tokens) are already resolved into headers.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use toolgate_core::HintOverrides;
use toolgate_core::policy::PolicySpec;
use toolgate_core::trust::{DEFAULT_MIN_CONFIDENCE, TrustLevel};
use toolgate_upstream::Endpoint;

use crate::session::Caller;

/// Everything the gateway needs to run.
#[derive(Debug, Clone)]
pub struct GatewaySpec {
    /// The upstream servers, in configuration order (which also breaks name-collision ties).
    pub upstreams: Vec<UpstreamSpec>,
    /// Serve MCP on stdin/stdout.
    pub stdio: Option<StdioListenerSpec>,
    /// Serve MCP over Streamable HTTP.
    pub http: Option<HttpListenerSpec>,
    /// Limits that apply to every session.
    pub limits: Limits,
    /// Policy, confirmation, pinning, results, retries, audit and callers.
    pub guardrails: GuardrailSpec,
    /// The config file this came from, for messages (`None` for command-line setups).
    pub source: Option<PathBuf>,
}

impl GatewaySpec {
    /// Every identity a session can have: the stdio listener's, then each configured HTTP caller, or `anonymous`
    /// for an HTTP listener without callers (or when no listener is configured at all).
    pub fn identities(&self) -> Vec<Caller> {
        let mut identities: Vec<Caller> = self
            .stdio
            .iter()
            .map(|stdio| Caller { name: stdio.identity.clone(), scopes: stdio.scopes.clone() })
            .collect();
        identities.extend(
            self.guardrails
                .callers
                .iter()
                .map(|caller| Caller { name: caller.name.clone(), scopes: caller.scopes.clone() }),
        );
        let anonymous_http = self.http.is_some() && self.guardrails.callers.is_empty();
        if anonymous_http || identities.is_empty() {
            identities.push(Caller::anonymous());
        }
        identities
    }
}

/// One upstream MCP server.
#[derive(Debug, Clone)]
pub struct UpstreamSpec {
    /// Unique name (`[A-Za-z0-9_-]`, at most 32 characters), used in logs, status and default prefixes.
    pub name: String,
    /// How to reach it (stdio command or Streamable HTTP URL with its own headers).
    pub endpoint: Endpoint,
    /// How its tool and prompt names are exposed.
    pub prefix: Prefix,
    /// Per-tool hint overrides, keyed by the upstream's own tool name; they always win.
    pub overrides: BTreeMap<String, HintOverrides>,
    /// Time allowed for `initialize`.
    pub initialize_timeout: Duration,
    /// Time allowed for each request (a `tools/call` included), queueing it for the upstream included.
    pub request_timeout: Duration,
    /// Most requests waiting for its answers at once; one more is refused at once with an error naming the
    /// upstream and the limit (`toolgate_upstream::DEFAULT_MAX_IN_FLIGHT` by default).
    pub max_in_flight: usize,
    /// How far its declared hints are believed.
    pub trust: UpstreamTrust,
}

#[cfg(test)]
impl UpstreamSpec {
    /// An upstream that is never started (`true` over stdio), unprefixed, untrusted, for the unit tests of the
    /// code that lists, exposes and selects its tools.
    pub(crate) fn unstarted(name: &str) -> UpstreamSpec {
        UpstreamSpec {
            name: name.into(),
            endpoint: toolgate_upstream::Endpoint::stdio("true", Vec::<String>::new()),
            prefix: Prefix::None,
            overrides: BTreeMap::new(),
            initialize_timeout: Duration::from_secs(1),
            request_timeout: Duration::from_secs(1),
            max_in_flight: toolgate_upstream::DEFAULT_MAX_IN_FLIGHT,
            trust: UpstreamTrust::default(),
        }
    }
}

/// How far an upstream's declarations are believed.
#[derive(Debug, Clone, PartialEq)]
pub struct UpstreamTrust {
    /// `untrusted` (declared hints may only tighten), `pinned` or `verified`.
    pub level: TrustLevel,
    /// Least inference confidence that lets an untrusted upstream's relaxing declaration count.
    pub min_confidence: f32,
    /// For `verified`: the signed manifest of its tool definitions and the keys that may sign it.
    pub manifest: Option<ManifestSpec>,
    /// For `verified`: the tool fingerprints of a manifest whose signature was checked at start (by the CLI,
    /// which holds the crypto). A verified upstream's tool whose fingerprint is not here is treated as untrusted.
    pub verified_fingerprints: Option<std::collections::BTreeSet<String>>,
    /// Whether its prompts, resources and completions are open-world content (they taint the session that gets
    /// them). `None`: judged from its tools (open-world unless every tool is closed-world by its effective hints).
    pub open_world_content: Option<bool>,
}

impl Default for UpstreamTrust {
    fn default() -> Self {
        UpstreamTrust {
            level: TrustLevel::Untrusted,
            min_confidence: DEFAULT_MIN_CONFIDENCE,
            manifest: None,
            verified_fingerprints: None,
            open_world_content: None,
        }
    }
}

/// Where a verified upstream's signed manifest is and who may sign it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ManifestSpec {
    /// The manifest file (written by `toolgate manifest sign`).
    pub path: PathBuf,
    /// Ed25519 public keys (base64) accepted as signers.
    pub public_keys: Vec<String>,
}

/// Everything the guardrails need, lowered from config.
#[derive(Debug, Clone, Default)]
pub struct GuardrailSpec {
    /// Rules, mode, default profile and session taint (compiled once by the gateway).
    pub policy: PolicySpec,
    /// How a person confirms a call.
    pub confirmation: ConfirmationSpec,
    /// What happens to a pinned tool whose definition changed.
    pub pins: PinSpec,
    /// Post-processing of results.
    pub results: ResultSpec,
    /// Retries of safe calls after transport failures.
    pub retries: RetrySpec,
    /// The audit log.
    pub audit: AuditSpec,
    /// HTTP callers: bearer tokens or API keys (stored as SHA-256) and their scopes.
    pub callers: Vec<CallerSpec>,
    /// Which tools a client sees at most.
    pub selection: SelectionSpec,
}

/// How confirmations are asked.
#[derive(Debug, Clone, PartialEq)]
pub struct ConfirmationSpec {
    /// Ask by elicitation when the client declared it (else the approval queue), or always use the queue.
    pub via: ConfirmVia,
    /// How long a call waits for a person.
    pub timeout: Duration,
    /// How long an approval stays usable.
    pub approval_ttl: Duration,
    /// Offer "remember for this session" (same tool and argument shape).
    pub remember_for_session: bool,
}

impl Default for ConfirmationSpec {
    fn default() -> Self {
        ConfirmationSpec {
            via: ConfirmVia::ElicitationWhenAvailable,
            timeout: Duration::from_secs(120),
            approval_ttl: Duration::from_secs(300),
            remember_for_session: true,
        }
    }
}

/// The channel for confirmations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfirmVia {
    /// `elicitation/create` when the client declared form elicitation, else the approval queue.
    ElicitationWhenAvailable,
    /// Always the approval queue (`toolgate approvals`, the console).
    Queue,
}

/// Pinning behaviour.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PinSpec {
    /// A quarantined tool is hidden (default) or listed but confirm-only.
    pub quarantine: Quarantine,
}

/// What a quarantined tool looks like to clients.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Quarantine {
    /// Not listed; calling it looks like an unknown tool.
    #[default]
    Hide,
    /// Listed, but every call needs confirmation.
    ConfirmOnly,
}

/// Result post-processing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResultSpec {
    /// Text content beyond this many characters is truncated (with a flag in `_meta`).
    pub max_text_chars: usize,
    /// Remove `structuredContent` fields that the tool's `outputSchema` does not declare.
    pub strip_undeclared_structured: bool,
}

impl Default for ResultSpec {
    fn default() -> Self {
        ResultSpec { max_text_chars: 25_000, strip_undeclared_structured: false }
    }
}

/// Retries of calls that are safe to repeat.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetrySpec {
    /// Attempts in all (1 = no retry).
    pub max_attempts: u32,
    /// First backoff; doubles each time.
    pub initial_backoff: Duration,
}

impl Default for RetrySpec {
    fn default() -> Self {
        RetrySpec { max_attempts: 3, initial_backoff: Duration::from_millis(200) }
    }
}

/// The audit log.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AuditSpec {
    /// Store call arguments in clear instead of as digests.
    pub arguments_in_clear: bool,
    /// Prune rows older than this many days (`None`: keep them).
    pub keep_days: Option<u64>,
    /// Prune the oldest rows while the database uses more than this many bytes (`None`: no limit).
    pub max_bytes: Option<u64>,
    /// Export rows here (JSON lines) before they are pruned.
    pub export_dir: Option<std::path::PathBuf>,
}

/// One HTTP caller identity.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallerSpec {
    /// Its name (in the audit log).
    pub name: String,
    /// `sha256:<hex>` of its bearer token or API key; the secret itself is never stored.
    pub token_sha256: String,
    /// Its scopes.
    pub scopes: Vec<String>,
}

/// Tool-selection profile.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SelectionSpec {
    /// At most this many tools are listed.
    pub max_tools: Option<usize>,
    /// Destructive tools are not listed.
    pub exclude_destructive: bool,
    /// Tool name globs always listed (before the maximum applies).
    pub always_include: Vec<String>,
}

/// How an upstream's tool and prompt names are exposed to clients.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Prefix {
    /// Names as the upstream gives them (single upstream, or MCP Apps that call tools by their own names).
    None,
    /// `<prefix>_<name>`, sanitized to `[A-Za-z0-9_-]` and kept within 64 characters.
    With(String),
}

/// Serving on stdin/stdout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StdioListenerSpec {
    /// The identity stdio callers get.
    pub identity: String,
    /// The scopes stdio callers get.
    pub scopes: Vec<String>,
}

/// Serving Streamable HTTP.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpListenerSpec {
    /// Address to bind; loopback unless configured otherwise.
    pub bind: SocketAddr,
    /// The MCP endpoint path, e.g. `/mcp`.
    pub path: String,
    /// Extra `Origin` values accepted besides loopback origins (`http://localhost:*`, `http://127.0.0.1:*`).
    pub allowed_origins: Vec<String>,
    /// Extra `Host` values accepted besides loopback hosts (DNS-rebinding protection).
    pub allowed_hosts: Vec<String>,
}

/// Limits that apply to every session and every upstream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Largest message accepted from a client or an upstream, in bytes.
    pub max_message_bytes: usize,
    /// Most concurrent client sessions (HTTP).
    pub max_sessions: usize,
    /// Most concurrent HTTP sessions of one caller; when reached, that caller's least recently used idle session
    /// is closed to make room, and without an idle one the new session is refused.
    pub max_sessions_per_caller: usize,
    /// An HTTP session unused for this long is closed.
    pub session_idle_timeout: Duration,
    /// Most tools served from one upstream; the rest of its listing is dropped (logged, in its status and in
    /// `toolgate_upstream_tools_dropped`). Each tool costs memory in the catalog and the inventory.
    pub max_tools_per_upstream: usize,
    /// Most concurrent HTTP connections; more are answered 503 and closed (`serve` lowers it to what the file
    /// descriptor limit allows).
    pub max_connections: usize,
    /// A connection must send a request's headers within this long (also how long an idle keep-alive connection
    /// is kept).
    pub header_read_timeout: Duration,
    /// Most approvals one session may have waiting for a person; beyond it a call needing one is refused.
    pub max_pending_approvals_per_session: usize,
    /// Most approvals one caller may have waiting for a person, over all its sessions.
    pub max_pending_approvals_per_caller: usize,
    /// Most bytes (estimated) queued toward one client that is not reading; past it notifications are dropped
    /// and responses wait (a minute at most, then the session is closed).
    pub max_client_queue_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_message_bytes: 16 * 1024 * 1024,
            max_sessions: 1024,
            max_sessions_per_caller: 1024,
            session_idle_timeout: Duration::from_secs(30 * 60),
            max_tools_per_upstream: 1000,
            max_connections: 4096,
            header_read_timeout: Duration::from_secs(10),
            max_pending_approvals_per_session: 16,
            max_pending_approvals_per_caller: 64,
            max_client_queue_bytes: 16 * 1024 * 1024,
        }
    }
}
