//! How clients reach the gateway: the listeners, the identity a session has, and the limits every session obeys.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

use crate::DEFAULT_MAX_MESSAGE_BYTES;
use crate::oauth::{OAuthSpec, SubjectToken};

/// The HTTP listener's address when the configuration names none (loopback only).
pub const DEFAULT_BIND: SocketAddr = SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 8765);
/// The MCP endpoint path when the configuration names none.
pub const DEFAULT_HTTP_PATH: &str = "/mcp";
/// The stdio caller's identity when the configuration names none.
pub const DEFAULT_STDIO_IDENTITY: &str = "stdio";

/// Serving on stdin/stdout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StdioListenerSpec {
    /// The identity stdio callers get.
    pub identity: String,
    /// The scopes stdio callers get.
    pub scopes: Vec<String>,
}

impl StdioListenerSpec {
    /// The identity a stdio session has.
    pub fn caller(&self) -> Caller {
        Caller::named(self.identity.clone(), self.scopes.clone())
    }
}

impl Default for StdioListenerSpec {
    /// The default identity and no scopes.
    fn default() -> Self {
        StdioListenerSpec { identity: DEFAULT_STDIO_IDENTITY.to_owned(), scopes: Vec::new() }
    }
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
    /// OAuth 2.1 access tokens accepted besides the configured callers' static tokens (`None`: static only).
    pub oauth: Option<OAuthSpec>,
}

impl HttpListenerSpec {
    /// A listener on `bind` at the default path, accepting loopback origins and hosts only.
    pub fn new(bind: SocketAddr) -> HttpListenerSpec {
        HttpListenerSpec {
            bind,
            path: DEFAULT_HTTP_PATH.to_owned(),
            allowed_origins: Vec::new(),
            allowed_hosts: Vec::new(),
            oauth: None,
        }
    }
}

impl Default for HttpListenerSpec {
    /// The listener used when the configuration names none: [`DEFAULT_BIND`], [`DEFAULT_HTTP_PATH`].
    fn default() -> Self {
        HttpListenerSpec::new(DEFAULT_BIND)
    }
}

/// Who is on the other end of a session, as the transport authenticated it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Caller {
    /// The caller's configured name (`anonymous` when no callers are configured), or an OAuth token's subject.
    /// Sessions are bound to it: a session is found only by requests that authenticate with the same name.
    pub name: String,
    /// Its scopes.
    pub scopes: Vec<String>,
    /// A person-readable name (an OAuth token's `email` or `name`), for the console; `None`: the name says it.
    pub display: Option<String>,
    /// The OAuth access token this request presented (redacted when formatted), for a token exchange upstream.
    /// Never forwarded as is: the upstream side sends only its own credentials.
    pub token: Option<SubjectToken>,
}

impl Caller {
    /// A caller with no name and no scopes (an HTTP listener without configured callers).
    pub fn anonymous() -> Caller {
        Caller::named("anonymous", Vec::new())
    }

    /// A caller with a name and scopes, no display name and no token (a static caller, stdio).
    pub fn named(name: impl Into<String>, scopes: Vec<String>) -> Caller {
        Caller { name: name.into(), scopes, display: None, token: None }
    }
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
    /// Most prompts, resources and resource templates served from one upstream, each kind counted on its own; the
    /// rest of that kind's listing is dropped (logged, in its status and in `toolgate_upstream_list_items_dropped`).
    pub max_list_items_per_upstream: usize,
    /// Most bytes (estimated from the JSON) of one kind of an upstream's listing (its tools, its prompts, its
    /// resources, its templates); no further page is asked for past it, and the items beyond it are dropped like
    /// those beyond a count.
    pub max_listing_bytes_per_upstream: usize,
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
    /// Most requests from upstreams (sampling, elicitation, roots) relayed to one session and not answered yet;
    /// more are refused to the upstream with a JSON-RPC error.
    pub max_relayed_requests_per_session: usize,
    /// Most requests from one upstream relayed to clients and not answered yet, over all sessions.
    pub max_relayed_requests_per_upstream: usize,
    /// How long a 2026-07-28 call held for a legacy upstream's question waits for the client's retry before it is
    /// cancelled upstream (and its `requestState` opens no more).
    pub held_call_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_message_bytes: DEFAULT_MAX_MESSAGE_BYTES,
            max_sessions: 1024,
            max_sessions_per_caller: 1024,
            session_idle_timeout: Duration::from_secs(30 * 60),
            max_tools_per_upstream: 1000,
            max_list_items_per_upstream: 10_000,
            max_listing_bytes_per_upstream: 16 * 1024 * 1024,
            max_connections: 4096,
            header_read_timeout: Duration::from_secs(10),
            max_pending_approvals_per_session: 16,
            max_pending_approvals_per_caller: 64,
            max_client_queue_bytes: 16 * 1024 * 1024,
            max_relayed_requests_per_session: 16,
            max_relayed_requests_per_upstream: 64,
            held_call_timeout: Duration::from_secs(120),
        }
    }
}
