//! Starting the transport an endpoint names, and what a started one hands the connection besides the common
//! [`Transport`]: how to end it politely ([`Closer`]) and, over HTTP, the poster that sends a request from the
//! caller's task ([`DirectPoster`]).
//!
//! The one module that knows both transports, above them, so `transport` stays the contract they share and names
//! neither. It only starts and closes: no JSON-RPC, no ids, no timeouts (the connection's).

use std::sync::Arc;

use toolgate_spec::Endpoint;

use crate::endpoint::ConnectOptions;
use crate::error::UpstreamError;
use crate::http::{DirectPoster, HttpCloser};
use crate::stdio::StdioCloser;
use crate::transport::{Behalves, PendingResponses, Transport};
use crate::{http, stdio};

/// A started transport with its transport-specific parts.
pub(crate) struct Started {
    /// What every transport gives the connection.
    pub(crate) transport: Transport,
    /// How to end it politely.
    pub(crate) closer: Closer,
    /// Posts requests without going through `outbound` (HTTP, once the session is initialized).
    pub(crate) direct: Option<DirectPoster>,
}

/// Spawns (stdio) or dials (HTTP) `endpoint`. `pending` and `behalves` are the connection's: the HTTP transport
/// answers a waiting request straight from a POST's plain JSON answer, and sends a caller's token on its request.
pub(crate) fn start(
    endpoint: &Endpoint,
    options: &ConnectOptions,
    pending: Arc<PendingResponses>,
    behalves: Arc<Behalves>,
) -> Result<Started, UpstreamError> {
    Ok(match endpoint {
        Endpoint::Stdio { .. } => {
            let (transport, closer) = stdio::start(endpoint, options)?;
            Started { transport, closer: Closer::Stdio(closer), direct: None }
        }
        Endpoint::Http { .. } => {
            let (transport, closer, direct) = http::start(endpoint, options, pending, behalves)?;
            Started { transport, closer: Closer::Http(closer), direct: Some(direct) }
        }
    })
}

/// The transport-specific part of a polite shutdown.
pub(crate) enum Closer {
    Stdio(StdioCloser),
    Http(HttpCloser),
}

impl Closer {
    pub(crate) async fn close(self) {
        match self {
            Closer::Stdio(closer) => closer.close().await,
            Closer::Http(closer) => closer.close().await,
        }
    }
}
