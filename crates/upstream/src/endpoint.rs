//! How to talk to an upstream server: the connection options, with the spec's defaults (the endpoint itself is
//! `toolgate_spec::Endpoint`, re-exported from the crate root).

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use toolgate_spec::{
    DEFAULT_INITIALIZE_TIMEOUT, DEFAULT_MAX_IN_FLIGHT, DEFAULT_MAX_MESSAGE_BYTES, DEFAULT_REQUEST_TIMEOUT, UpstreamEra,
};

use crate::credentials::TokenSource;
use crate::events::EventSink;
use crate::token_exchange::TokenExchanger;

/// Protocol versions toolgate speaks with upstreams, newest first (legacy, initialize-based era).
pub const SUPPORTED_PROTOCOL_VERSIONS: [&str; 4] = ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];

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
    /// Which era to speak: probed at connect, or fixed ([`crate::Connection::connect`]).
    pub era: UpstreamEra,
    /// toolgate's own OAuth token for an HTTP upstream, sent as `Authorization: Bearer` on every request; shared
    /// by the upstream's connections so a reconnect reuses the cached token.
    pub credentials: Option<Arc<TokenSource>>,
    /// For a token exchange upstream: exchanges the caller's token for each request sent on a caller's behalf
    /// ([`crate::Connection::begin_request_on_behalf`]), sent on that request instead of `credentials`' token.
    pub exchange: Option<Arc<TokenExchanger>>,
}

impl Default for ConnectOptions {
    fn default() -> Self {
        ConnectOptions {
            name: "upstream".into(),
            initialize_timeout: DEFAULT_INITIALIZE_TIMEOUT,
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
            max_message_bytes: DEFAULT_MAX_MESSAGE_BYTES,
            max_pages: 1000,
            protocol_version: SUPPORTED_PROTOCOL_VERSIONS[0].into(),
            client_info: json!({"name": "toolgate", "version": env!("CARGO_PKG_VERSION")}),
            capabilities: json!({}),
            events: None,
            max_in_flight: DEFAULT_MAX_IN_FLIGHT,
            era: UpstreamEra::default(),
            credentials: None,
            exchange: None,
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
            .field("era", &self.era)
            .field("credentials", &self.credentials)
            .field("exchange", &self.exchange)
            .finish_non_exhaustive()
    }
}
