//! One upstream server as configured: where it is, how its names are exposed and how far it is believed.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::Duration;

use toolgate_core::HintOverrides;
use toolgate_core::trust::{DEFAULT_MIN_CONFIDENCE, Observation, TrustLevel};

use crate::{
    DEFAULT_INITIALIZE_TIMEOUT, DEFAULT_MAX_IN_FLIGHT, DEFAULT_REQUEST_TIMEOUT, Endpoint, SandboxSpec,
    UpstreamCredentials,
};

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
    /// upstream and the limit ([`DEFAULT_MAX_IN_FLIGHT`] by default).
    pub max_in_flight: usize,
    /// How far its declared hints are believed.
    pub trust: UpstreamTrust,
    /// How its process is confined (stdio upstreams only).
    pub sandbox: SandboxSpec,
    /// Which protocol era toolgate speaks to it: probed at each connect, or fixed.
    pub era: UpstreamEra,
    /// OAuth credentials toolgate obtains for it (HTTP upstreams only); `None` sends only its configured headers.
    pub credentials: Option<UpstreamCredentials>,
}

/// Which protocol era toolgate speaks to an upstream (`era = "auto" | "modern" | "legacy"` in the config file).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum UpstreamEra {
    /// Probed at each connect (`server/discover` first): modern when the server answers it, legacy otherwise,
    /// including a server that ends the connection on a request before `initialize` (it is started again).
    Auto,
    /// 2026-07-28: no `initialize`; `server/discover`, then every request carries its own `_meta`.
    Modern,
    /// The `initialize` handshake and a session (2024-11-05 to 2025-11-25), with no probe: the default, because
    /// the probe costs every legacy upstream a round trip at start (and a second start for a server that exits
    /// on a request before `initialize`).
    #[default]
    Legacy,
}

impl UpstreamSpec {
    /// An upstream with the documented defaults: unprefixed, no overrides, the default timeouts and in-flight
    /// limit, untrusted, unsandboxed (the config file's default is its own: `toolgate-config`).
    pub fn new(name: impl Into<String>, endpoint: Endpoint) -> UpstreamSpec {
        UpstreamSpec {
            name: name.into(),
            endpoint,
            prefix: Prefix::None,
            overrides: BTreeMap::new(),
            initialize_timeout: DEFAULT_INITIALIZE_TIMEOUT,
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
            max_in_flight: DEFAULT_MAX_IN_FLIGHT,
            trust: UpstreamTrust::default(),
            sandbox: SandboxSpec::default(),
            era: UpstreamEra::default(),
            credentials: None,
        }
    }
}

/// How an upstream's tool and prompt names are exposed to clients.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Prefix {
    /// Names as the upstream gives them (single upstream, or MCP Apps that call tools by their own names).
    None,
    /// `<prefix>_<name>`, sanitized to `[A-Za-z0-9_-]` and kept within 64 characters.
    With(String),
    /// The only upstream, passed through as it is: its names exactly as it gives them, its URIs unchanged, and no
    /// name of toolgate's own beside them (no `toolgate_safety` prompt), so a client sees the upstream's own
    /// namespace (`passthrough = true`; the config refuses it beside another upstream).
    Passthrough,
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
    pub verified_fingerprints: Option<BTreeSet<String>>,
    /// What `toolgate verify` saw its tools do, by tool fingerprint: the newest verification record of each
    /// definition for this upstream's command, loaded from the state store by the CLI at start. Evidence for the
    /// trust rule whatever the level (`toolgate_core::trust::resolve_trusted_hints_observed`).
    pub observations: BTreeMap<String, Observation>,
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
            observations: BTreeMap::new(),
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
