//! The contract between a downstream transport (stdio, Streamable HTTP) and the gateway.
//!
//! A transport opens one [`ClientSession`] per client session through a [`SessionFactory`], hands it every message
//! the client sends ([`ClientSession::deliver`]), and writes out every [`ClientBound`] message the gateway
//! produces. `ClientBound` says where a message belongs, so Streamable HTTP can put a response and the
//! notifications and requests that belong to a client request on that request's SSE stream, and the rest on the
//! GET stream. Transports know nothing of MCP methods beyond what their framing needs (initialize, session ids).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::Value;
use tokio::sync::mpsc;

// Who is on the other end of a session: part of this contract, defined with the spec's listeners.
pub use toolgate_spec::Caller;

/// A message from the gateway to the client, with where it belongs.
#[derive(Debug, Clone, PartialEq)]
pub enum ClientBound {
    /// The response to the client's request `request_id`; nothing more belongs to that request afterwards.
    Response {
        /// The client's id of the request answered.
        request_id: Value,
        /// The JSON-RPC response.
        message: Value,
    },
    /// A notification or request sent while the client's request `request_id` is in flight and about it
    /// (progress, log lines, an elicitation for a tool call).
    Related {
        /// The client's id of the request it belongs to.
        request_id: Value,
        /// The JSON-RPC notification or request.
        message: Value,
    },
    /// A message tied to no request (list_changed, resources/updated, server-wide log lines).
    Unsolicited(Value),
}

/// Which transport a session arrived on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TransportKind {
    /// stdin/stdout of toolgate's own process.
    Stdio,
    /// Streamable HTTP.
    Http,
}

/// The gateway's half of one client session.
pub trait ClientSession: Send + Sync {
    /// The session's id (also the `Mcp-Session-Id` on HTTP): unguessable, never used as authentication.
    fn id(&self) -> &str;

    /// Hands one client message (request, notification or response) to the gateway. Messages are handled in
    /// arrival order; requests may complete out of order.
    fn deliver(&self, message: Value);

    /// Hands one 2026-07-28 request to the gateway with the `Mcp-Param-*` headers it arrived with (names
    /// lowercased, in order, repeats kept), which the gateway checks against the called tool's schema. A transport
    /// without headers (stdio) calls [`ClientSession::deliver`]: there is nothing to compare.
    fn deliver_with_param_headers(&self, message: Value, param_headers: Vec<(String, String)>) {
        let _ = param_headers;
        self.deliver(message);
    }

    /// The protocol version agreed at `initialize`, once the gateway has answered it.
    fn protocol_version(&self) -> Option<String>;

    /// Ends the session: in-flight requests are cancelled upstream, nothing more is sent.
    fn close(&self);

    /// A later request of the session's own caller presented this OAuth access token (perhaps a refreshed one):
    /// the session exchanges it from now on for a token exchange upstream. A transport without tokens never calls
    /// it; a fake session may ignore it.
    fn present_token(&self, token: &toolgate_spec::SubjectToken) {
        let _ = token;
    }

    /// The count of bytes the transport holds for this client after taking messages from the session's receiver
    /// (per-request streams, a GET stream, a backlog): the gateway counts them against the same budget as its own
    /// queue, so one client's bytes are bounded however the transport stores them. A session with no budget (a
    /// transport test's fake) returns a detached count.
    fn held_bytes(&self) -> HeldBytes {
        HeldBytes::default()
    }
}

/// Bytes (estimated) a transport holds for one client, shared with the gateway's queue toward it.
#[derive(Debug, Clone, Default)]
pub struct HeldBytes(Arc<AtomicUsize>);

impl HeldBytes {
    /// Counts `bytes` as held until the returned guard is dropped.
    pub fn hold(&self, bytes: usize) -> Held {
        self.0.fetch_add(bytes, Ordering::AcqRel);
        Held { count: self.clone(), bytes }
    }

    /// The bytes held now.
    pub fn get(&self) -> usize {
        self.0.load(Ordering::Acquire)
    }
}

/// Bytes counted in a [`HeldBytes`] while this lives; travels with the message it stands for.
#[derive(Debug)]
pub struct Held {
    count: HeldBytes,
    bytes: usize,
}

impl Drop for Held {
    fn drop(&mut self) {
        self.count.0.fetch_sub(self.bytes, Ordering::AcqRel);
    }
}

/// Why a transport turned a client away before any session could handle it (counted by the gateway's metrics).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Refusal {
    /// The caller already had `max_sessions_per_caller` sessions, none of them idle.
    SessionsPerCaller,
    /// The listener already had `max_sessions` sessions, none of them idle long enough to evict.
    SessionsTotal,
    /// The listener already had `max_connections` connections open.
    ConnectionLimit,
    /// The process ran out of file descriptors while accepting a connection.
    DescriptorLimit,
}

impl Refusal {
    /// The metric label of this refusal.
    pub fn label(self) -> &'static str {
        match self {
            Refusal::SessionsPerCaller => "per_caller",
            Refusal::SessionsTotal => "total",
            Refusal::ConnectionLimit => "connection_limit",
            Refusal::DescriptorLimit => "fd_limit",
        }
    }
}

/// Opens sessions; the gateway implements it, and transport tests may use a small fake.
pub trait SessionFactory: Send + Sync + 'static {
    /// Opens a new session for an authenticated caller and returns it with the receiver of everything it will
    /// send to the client.
    fn open_session(
        &self,
        transport: TransportKind,
        caller: Caller,
    ) -> (Box<dyn ClientSession>, mpsc::Receiver<ClientBound>);

    /// Opens the session of one 2026-07-28 request of `caller`: as [`SessionFactory::open_session`], but what
    /// the session learns about its caller that must outlive it (its taint) is kept for the caller. A fake
    /// factory may open a plain session.
    fn open_request_session(
        &self,
        transport: TransportKind,
        caller: Caller,
    ) -> (Box<dyn ClientSession>, mpsc::Receiver<ClientBound>) {
        self.open_session(transport, caller)
    }

    /// Counts a client the transport turned away; a fake factory may ignore it.
    fn count_refusal(&self, refusal: Refusal) {
        let _ = refusal;
    }

    /// Records a request refused at authentication: `caller` when the token named a valid identity (one lacking
    /// scopes), `reason` (a stable name such as `expired`) and the peer's address (`remote`, which bounds how many
    /// rows a flood writes), and counts it by reason. A fake factory may ignore it.
    fn record_authentication_refusal(
        &self,
        caller: Option<&Caller>,
        reason: &'static str,
        remote: Option<std::net::IpAddr>,
    ) {
        let _ = (caller, reason, remote);
    }
}
