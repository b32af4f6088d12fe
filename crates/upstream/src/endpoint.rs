//! Where an upstream server is and how to talk to it: the endpoint and the connection options.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::{Value, json};
use std::sync::Arc;

use crate::events::EventSink;

/// Protocol versions toolgate speaks with upstreams, newest first (legacy, initialize-based era).
pub const SUPPORTED_PROTOCOL_VERSIONS: [&str; 4] = ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];

/// How to reach an MCP server.
#[derive(Debug, Clone, PartialEq)]
pub enum Endpoint {
    /// A child process speaking newline-delimited JSON-RPC on stdin/stdout.
    Stdio {
        /// The program to run (looked up on `PATH` when not a path).
        program: String,
        /// Its arguments.
        args: Vec<String>,
        /// Extra environment variables.
        env: Vec<(String, String)>,
        /// Working directory, when not inherited.
        cwd: Option<PathBuf>,
    },
    /// A Streamable HTTP endpoint (one URL, POST per message).
    Http {
        /// The endpoint URL, e.g. `http://127.0.0.1:3001/mcp`.
        url: String,
        /// Extra headers sent with every request (e.g. an upstream's own credentials).
        headers: Vec<(String, String)>,
    },
}

impl Endpoint {
    /// A stdio endpoint from a program and its arguments.
    pub fn stdio<I, S>(program: impl Into<String>, args: I) -> Endpoint
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Endpoint::Stdio {
            program: program.into(),
            args: args.into_iter().map(Into::into).collect(),
            env: Vec::new(),
            cwd: None,
        }
    }

    /// A Streamable HTTP endpoint.
    pub fn http(url: impl Into<String>) -> Endpoint {
        Endpoint::Http { url: url.into(), headers: Vec::new() }
    }

    /// A short label for logs: the program name or the URL.
    pub fn label(&self) -> String {
        match self {
            Endpoint::Stdio { program, .. } => program.clone(),
            Endpoint::Http { url, .. } => url.clone(),
        }
    }
}

/// Limits and identity used for one connection.
#[derive(Clone)]
pub struct ConnectOptions {
    /// Name used to tag logs (the upstream's configured name).
    pub name: String,
    /// Time allowed for the initialize handshake.
    pub initialize_timeout: Duration,
    /// Time allowed for each later request.
    pub request_timeout: Duration,
    /// Largest accepted message, in bytes; a larger one fails the connection.
    pub max_message_bytes: usize,
    /// Most pages a paginated list may have before it is treated as a loop.
    pub max_pages: usize,
    /// The protocol version offered in `initialize`.
    pub protocol_version: String,
    /// `clientInfo` sent in `initialize`.
    pub client_info: Value,
    /// `capabilities` sent in `initialize`.
    pub capabilities: Value,
    /// Where server-initiated notifications and requests go; `None` answers them conservatively.
    pub events: Option<Arc<dyn EventSink>>,
    /// Most requests waiting for their answers at once; one more is refused at once
    /// ([`crate::UpstreamError::Saturated`]) rather than queued behind a server that does not keep up.
    pub max_in_flight: usize,
}

/// The default [`ConnectOptions::max_in_flight`]: above what a busy gateway sends one healthy server (the
/// benchmark's 64 sessions with 4 calls each), and small enough that a hung server holds a bounded number of callers.
pub const DEFAULT_MAX_IN_FLIGHT: usize = 512;

impl Default for ConnectOptions {
    fn default() -> Self {
        ConnectOptions {
            name: "upstream".into(),
            initialize_timeout: Duration::from_secs(30),
            request_timeout: Duration::from_secs(60),
            max_message_bytes: 16 * 1024 * 1024,
            max_pages: 1000,
            protocol_version: SUPPORTED_PROTOCOL_VERSIONS[0].into(),
            client_info: json!({"name": "toolgate", "version": env!("CARGO_PKG_VERSION")}),
            capabilities: json!({}),
            events: None,
            max_in_flight: DEFAULT_MAX_IN_FLIGHT,
        }
    }
}

impl std::fmt::Debug for ConnectOptions {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("ConnectOptions")
            .field("name", &self.name)
            .field("initialize_timeout", &self.initialize_timeout)
            .field("request_timeout", &self.request_timeout)
            .field("max_message_bytes", &self.max_message_bytes)
            .field("protocol_version", &self.protocol_version)
            .field("events", &self.events.is_some())
            .field("max_in_flight", &self.max_in_flight)
            .finish_non_exhaustive()
    }
}
