//! Errors of upstream connections, each saying which side was at fault and whether a retry could help.
//!
//! Errors are `Clone` (io and HTTP errors are kept as text) because one transport failure fails every pending
//! request of a connection.

use std::time::Duration;

/// Who caused a failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultSide {
    /// The upstream server misbehaved (crashed, lied, sent garbage, answered with an error).
    Upstream,
    /// The network or the process boundary failed (spawn, connect, HTTP status).
    Transport,
    /// toolgate's own configuration or use of the connection.
    Local,
}

/// Why talking to an upstream MCP server failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum UpstreamError {
    /// The server command could not be started.
    #[error("cannot start `{program}`: {reason}")]
    Spawn {
        /// The program that was run.
        program: String,
        /// The operating system's reason.
        reason: String,
    },
    /// An HTTP request failed before a response arrived.
    #[error("cannot reach {url}: {reason}")]
    Connect {
        /// The endpoint URL.
        url: String,
        /// What failed.
        reason: String,
    },
    /// The HTTP endpoint answered with an unexpected status.
    #[error("{url} answered HTTP {status}{}", body_suffix(body))]
    HttpStatus {
        /// The endpoint URL.
        url: String,
        /// The status code.
        status: u16,
        /// The start of the response body, for context.
        body: String,
    },
    /// The connection ended: the process exited or closed stdout, or the HTTP session is gone.
    #[error("the server closed the connection: {detail}")]
    Closed {
        /// Exit status, last stderr lines, or what else is known.
        detail: String,
    },
    /// No answer within the timeout.
    #[error("no answer to `{method}` within {}{}", format_duration(*after), diagnostics_suffix(diagnostics))]
    Timeout {
        /// The request's method.
        method: String,
        /// The timeout that passed.
        after: Duration,
        /// What the server did instead (non-JSON output, stderr), if anything.
        diagnostics: String,
    },
    /// A message was larger than the configured limit.
    #[error("the server sent a message larger than the {limit}-byte limit")]
    MessageTooLarge {
        /// The limit in bytes.
        limit: usize,
    },
    /// The server broke the protocol (malformed response, pagination loop, missing fields).
    #[error("protocol violation: {0}")]
    Protocol(String),
    /// The server answered with a JSON-RPC error.
    #[error("the server answered `{method}` with error {code}: {message}")]
    Rpc {
        /// The request's method.
        method: String,
        /// The JSON-RPC error code.
        code: i64,
        /// The error message.
        message: String,
    },
    /// The server chose a protocol version toolgate does not speak.
    #[error("the server chose protocol version `{0}`, which toolgate does not support")]
    UnsupportedProtocolVersion(String),
    /// The endpoint description is unusable.
    #[error("invalid endpoint: {0}")]
    InvalidEndpoint(String),
    /// The request was cancelled by toolgate ([`crate::Connection::cancel_soon`]); its answer is dropped.
    #[error("the request was cancelled")]
    Cancelled,
    /// The connection already has its most requests in flight ([`crate::ConnectOptions::max_in_flight`]); this
    /// one was refused at once and never sent.
    #[error("{limit} requests are already in flight, the most allowed (`max_in_flight`); this one was not sent")]
    Saturated {
        /// The limit that was reached.
        limit: usize,
    },
    /// The gateway took the upstream out of service (a config reload removed it or restarted it with other
    /// settings) before or while the request waited; it is not retried against whatever replaced it.
    #[error("{0}")]
    Withdrawn(String),
    /// The request could not even be queued for sending within its time: the server is not reading what it is
    /// sent (a stopped or hung process). It was never sent.
    #[error("`{method}` could not be sent within {}: the server is not reading its input", format_duration(*after))]
    SendTimeout {
        /// The request's method.
        method: String,
        /// The time that passed.
        after: Duration,
    },
    /// toolgate could not obtain its own credentials for this upstream (the issuer is down or refused them), so
    /// nothing was sent: the call fails closed rather than going out without them.
    #[error("no upstream credentials from {issuer}: {reason}")]
    Credentials {
        /// The issuer asked.
        issuer: String,
        /// Why (never a token or a secret).
        reason: String,
    },
    /// The upstream takes each caller's own identity by token exchange, and this request's caller presented no
    /// OAuth access token to exchange (a static `[[caller]]` token, a stdio client): nothing was sent, since
    /// anyone else's credentials would misname the caller.
    #[error(
        "this upstream acts on each caller's behalf by token exchange, and caller `{caller}` presented no OAuth \
         access token to exchange (a static token or stdio); nothing was sent"
    )]
    NoCallerToken {
        /// The caller's name.
        caller: String,
    },
}

impl UpstreamError {
    /// Which side caused the failure.
    pub fn fault_side(&self) -> FaultSide {
        match self {
            UpstreamError::Spawn { .. }
            | UpstreamError::Connect { .. }
            | UpstreamError::HttpStatus { .. }
            | UpstreamError::Credentials { .. } => FaultSide::Transport,
            UpstreamError::InvalidEndpoint(_)
            | UpstreamError::Cancelled
            | UpstreamError::Withdrawn(_)
            | UpstreamError::NoCallerToken { .. } => FaultSide::Local,
            UpstreamError::Closed { .. }
            | UpstreamError::Timeout { .. }
            | UpstreamError::Saturated { .. }
            | UpstreamError::SendTimeout { .. }
            | UpstreamError::MessageTooLarge { .. }
            | UpstreamError::Protocol(_)
            | UpstreamError::Rpc { .. }
            | UpstreamError::UnsupportedProtocolVersion(_) => FaultSide::Upstream,
        }
    }

    /// True when the request may not have reached the server, or the server may not have acted on it.
    ///
    /// Whether a retry is *safe* also depends on the tool's hints; that is the caller's decision. A saturated
    /// connection is not transient in this sense: retrying at once would only add to the load it refused.
    pub fn is_transient(&self) -> bool {
        matches!(self, UpstreamError::Connect { .. } | UpstreamError::Timeout { .. } | UpstreamError::Closed { .. })
    }
}

fn body_suffix(body: &str) -> String {
    if body.is_empty() { String::new() } else { format!(": {body}") }
}

fn diagnostics_suffix(diagnostics: &str) -> String {
    if diagnostics.is_empty() { String::new() } else { format!("; {diagnostics}") }
}

fn format_duration(duration: Duration) -> String {
    if duration.subsec_millis() == 0 {
        format!("{}s", duration.as_secs())
    } else {
        format!("{}ms", duration.as_millis())
    }
}
