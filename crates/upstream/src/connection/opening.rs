//! How a connection opens its conversation with the server, in the era [`crate::ConnectOptions::era`] says:
//! `initialize` (legacy), `server/discover` (modern), or `server/discover` as a probe and then whichever the answer
//! says (auto). It only opens the conversation; requests, waits and the router stay in the parent module.

use std::sync::OnceLock;
use std::time::Instant;

use serde_json::{Value, json};

use super::{Connection, into_result};
use crate::endpoint::SUPPORTED_PROTOCOL_VERSIONS;
use crate::error::UpstreamError;
use crate::initialize_outcome::InitializeOutcome;
use crate::modern::{self, ProbeVerdict};

/// How a connection opens its conversation with the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Opening {
    /// `initialize` and a session.
    Legacy,
    /// `server/discover`, no session.
    Modern,
    /// `server/discover` as a probe, then whichever the answer says.
    Probe,
}

impl Connection {
    /// `initialize`, then `notifications/initialized`.
    pub(super) async fn open_legacy(&mut self, negotiated_version: &OnceLock<String>) -> Result<(), UpstreamError> {
        let outcome = self.handshake().await?;
        let _ = negotiated_version.set(outcome.protocol_version.clone());
        self.initialize = outcome;
        self.notify("notifications/initialized", None).await
    }

    /// `server/discover` on a connection that is to speak modern; any failure fails the connection.
    pub(super) async fn discover(&self) -> Result<InitializeOutcome, UpstreamError> {
        let result = self.discover_answer().await.and_then(into_result)?;
        modern::discover_outcome(result)
    }

    /// The whole answer to `server/discover`, within the initialize timeout.
    pub(super) async fn discover_answer(&self) -> Result<Value, UpstreamError> {
        let timeout = self.options.initialize_timeout;
        let deadline = Instant::now() + timeout;
        let params = modern::with_modern_envelope(None, &self.options.client_info, &self.options.capabilities);
        let pending = self.begin_raw_request("server/discover", Some(params), timeout, |_| {}, None).await?;
        self.wait_until(pending, deadline, timeout).await
    }

    /// The era probe: `server/discover` first, `initialize` on the same connection when the answer says legacy.
    /// Over HTTP the probe's version header comes from its own `_meta` (the HTTP transport's rule for modern
    /// requests), so a legacy session that follows never carries 2026-07-28.
    pub(super) async fn probe(&mut self, negotiated_version: &OnceLock<String>) -> Result<(), UpstreamError> {
        let answer = self.discover_answer().await;
        match modern::probe_verdict(answer) {
            ProbeVerdict::Modern(outcome) => {
                let _ = negotiated_version.set(modern::MODERN_PROTOCOL_VERSION.to_owned());
                tracing::info!(upstream = %self.options.name, "the server speaks 2026-07-28: no initialize");
                self.initialize = outcome;
                Ok(())
            }
            ProbeVerdict::Legacy => {
                tracing::debug!(upstream = %self.options.name, "the server answered the probe as a legacy server");
                self.open_legacy(negotiated_version).await
            }
            ProbeVerdict::Ended => Err(self
                .shared
                .ended()
                .unwrap_or(UpstreamError::Closed { detail: "the server ended the connection on the probe".into() })),
            ProbeVerdict::Failed(error) => Err(error),
        }
    }

    pub(super) async fn handshake(&self) -> Result<InitializeOutcome, UpstreamError> {
        let params = json!({
            "protocolVersion": self.options.protocol_version,
            "capabilities": self.options.capabilities,
            "clientInfo": self.options.client_info,
        });
        let deadline = Instant::now() + self.options.initialize_timeout;
        let pending = self.begin_request_within("initialize", Some(params), self.options.initialize_timeout).await?;
        let result = into_result(self.wait_until(pending, deadline, self.options.initialize_timeout).await?)?;
        let protocol_version = result
            .get("protocolVersion")
            .and_then(Value::as_str)
            .ok_or_else(|| UpstreamError::Protocol("the initialize result has no `protocolVersion`".into()))?
            .to_owned();
        if !SUPPORTED_PROTOCOL_VERSIONS.contains(&protocol_version.as_str()) {
            return Err(UpstreamError::UnsupportedProtocolVersion(protocol_version));
        }
        Ok(InitializeOutcome {
            protocol_version,
            server_info: result.get("serverInfo").cloned().unwrap_or(Value::Null),
            capabilities: result.get("capabilities").cloned().unwrap_or_else(|| json!({})),
            instructions: result.get("instructions").and_then(Value::as_str).map(str::to_owned),
            modern: false,
        })
    }
}
