//! The gateway's lowered configuration: what the runtime runs from.
//!
//! Built once from a config file or the command line (by `toolgate-config` or the CLI) and never parsed again;
//! nothing here knows TOML or JSON config syntax. Secrets (bearer tokens) are already resolved into headers.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use toolgate_core::HintOverrides;
use toolgate_upstream::Endpoint;

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
    /// The config file this came from, for messages (`None` for command-line setups).
    pub source: Option<PathBuf>,
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
    /// Time allowed for each request (a `tools/call` included).
    pub request_timeout: Duration,
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
    /// The identity stdio callers get (policy scopes, later).
    pub identity: String,
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

/// Limits that apply to every session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Largest message accepted from a client or an upstream, in bytes.
    pub max_message_bytes: usize,
    /// Most concurrent client sessions (HTTP).
    pub max_sessions: usize,
    /// An HTTP session unused for this long is closed.
    pub session_idle_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_message_bytes: 16 * 1024 * 1024,
            max_sessions: 1024,
            session_idle_timeout: Duration::from_secs(30 * 60),
        }
    }
}
