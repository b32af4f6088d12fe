//! Raw JSON-RPC connections to MCP servers, as a client: the upstream side of toolgate.
//!
//! Messages stay `serde_json::Value` from the wire to the caller: nothing is parsed into typed SDK models, so
//! fields toolgate does not know survive (see `shared/dependencies.md` §0). Two transports carry them:
//! [`Endpoint::Stdio`] (a child process, one JSON object per line) and [`Endpoint::Http`] (Streamable HTTP, JSON or
//! SSE replies, `Mcp-Session-Id`). [`Connection::connect`] spawns or dials, runs `initialize`, and then serves
//! requests with timeouts, size limits and clear errors that say whether the upstream or the network failed.
//!
//! ```no_run
//! # async fn example() -> Result<(), toolgate_upstream::UpstreamError> {
//! use toolgate_upstream::{Connection, ConnectOptions, Endpoint};
//! let endpoint = Endpoint::stdio("npx", ["-y", "@modelcontextprotocol/server-everything"]);
//! let connection = Connection::connect(&endpoint, ConnectOptions::default()).await?;
//! let tools = connection.list_all(toolgate_upstream::ListKind::Tools).await?;
//! println!("{} tools", tools.len());
//! connection.close().await;
//! # Ok(()) }
//! ```
//!
//! This crate must not decide anything about annotations or policy; it only moves messages.

mod connection;
mod credentials;
mod endpoint;
mod error;
mod events;
pub mod framing;
mod http;
mod initialize_outcome;
pub mod jsonrpc;
mod modern;
mod started;
mod stdio;
mod token_exchange;
mod transport;

pub use connection::{Connection, ListKind, Listed, PendingRequest, into_result};
pub use credentials::{TokenFailure, TokenSource};
pub use endpoint::{ConnectOptions, SUPPORTED_PROTOCOL_VERSIONS};
pub use error::{FaultSide, UpstreamError};
pub use events::{EventSink, Responder};
pub use initialize_outcome::InitializeOutcome;
pub use modern::{MODERN_PROTOCOL_VERSION, MODERN_REQUEST_META_KEYS, without_modern_result_envelope};
pub use token_exchange::{ExchangeCounts, MAX_CACHED_CALLERS, OnBehalf, TokenExchanger};
pub use toolgate_spec::Endpoint;
