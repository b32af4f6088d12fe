//! A client session as the gateway sees it: every message its client sends, dispatched in arrival order.
//!
//! Notifications and responses are handled at once (so `initialized` or a cancel is never overtaken), requests each
//! get a task (and a span) and may finish out of order; [`crate::methods`] answers them. The session's state lives
//! in [`crate::state::session`]; nothing here writes bytes (the transport does).

use std::sync::Arc;

use serde_json::Value;
use tokio_util::sync::CancellationToken;
use toolgate_upstream::jsonrpc::{self, MessageKind, classify, codes};
use tracing::Instrument as _;

use crate::session::ClientSession;
use crate::state::session::SessionShared;
use crate::state::shared::Shared;

/// The gateway's [`ClientSession`] implementation.
pub(crate) struct GatewaySession {
    gateway: Arc<Shared>,
    shared: Arc<SessionShared>,
}

impl GatewaySession {
    pub(crate) fn new(gateway: Arc<Shared>, shared: Arc<SessionShared>) -> GatewaySession {
        GatewaySession { gateway, shared }
    }
}

impl ClientSession for GatewaySession {
    fn id(&self) -> &str {
        &self.shared.id
    }

    fn deliver(&self, message: Value) {
        self.dispatch(message, None);
    }

    fn deliver_with_param_headers(&self, message: Value, param_headers: Vec<(String, String)>) {
        self.dispatch(message, Some(param_headers));
    }

    fn protocol_version(&self) -> Option<String> {
        self.shared.protocol_version()
    }

    fn held_bytes(&self) -> crate::session::HeldBytes {
        self.shared.held_bytes()
    }

    fn present_token(&self, token: &toolgate_spec::SubjectToken) {
        self.shared.present_token(token);
    }

    fn close(&self) {
        self.shared.close();
        self.gateway.forget_session(&self.shared.id);
        crate::methods::drop_subscriptions(&self.gateway, &self.shared);
    }
}

impl GatewaySession {
    /// Dispatches one client message; a modern request that came over HTTP brings its `Mcp-Param-*` headers.
    fn dispatch(&self, message: Value, param_headers: Option<Vec<(String, String)>>) {
        if self.shared.closed.is_cancelled() {
            return;
        }
        match classify(&message) {
            MessageKind::Request { id, method } => {
                let id = id.clone();
                let method = method.to_owned();
                let cancel = CancellationToken::new();
                let envelope = crate::era::RequestEnvelope::of(message.get("params"));
                self.shared.begin_request(&id, cancel.clone(), envelope);
                let gateway = Arc::clone(&self.gateway);
                let session = Arc::clone(&self.shared);
                // One span per request, whatever the transport; `tools/call` records its tool, upstream, verdict
                // and outcome on it (`call`). Debug: off unless the log or the span exporter asks for it.
                let span = tracing::debug_span!(
                    "mcp.request",
                    session = %session.id,
                    method = %method,
                    request_id = %id,
                    tool = tracing::field::Empty,
                    upstream = tracing::field::Empty,
                    verdict = tracing::field::Empty,
                    outcome = tracing::field::Empty,
                );
                let handler = async move {
                    let params = match message {
                        Value::Object(mut object) => object.remove("params"),
                        _ => None,
                    };
                    // Handlers watch `cancel` themselves, so their cleanup always runs.
                    let response = if crate::era::is_modern(params.as_ref()) {
                        // A 2026-07-28 request: its own checks first, then the same handler as a legacy
                        // session's, then the modern envelope.
                        let checked = crate::era::check_body(&method, params.as_ref()).and_then(|()| {
                            check_param_headers(&gateway, &session, &method, params.as_ref(), param_headers.as_deref())
                        });
                        match checked {
                            Err(error) => Some(error.response(&id)),
                            Ok(()) => {
                                let uri = params.as_ref().and_then(|params| params.get("uri"));
                                let uri = uri.and_then(Value::as_str).map(str::to_owned);
                                crate::methods::handle_request(&gateway, &session, &id, &method, params, &cancel)
                                    .await
                                    .map(|response| crate::era::envelope(response, &method, uri.as_deref()))
                            }
                        }
                    } else {
                        crate::methods::handle_request(&gateway, &session, &id, &method, params, &cancel).await
                    };
                    session.end_request(&id);
                    // A cancelled request gets no response (the client asked us not to send one).
                    if let Some(response) = response
                        && !cancel.is_cancelled()
                    {
                        session.respond(id, response).await;
                    }
                };
                tokio::spawn(handler.instrument(span));
            }
            MessageKind::Notification { method } => self.on_notification(method, &message),
            MessageKind::Response { id } => {
                let id = id.clone();
                if !self.shared.answer_server_request(&id, message) {
                    tracing::debug!(session = %self.shared.id, %id, "dropping a response to no request of ours");
                }
            }
            MessageKind::Invalid(reason) => {
                let id = message.get("id").cloned().unwrap_or(Value::Null);
                let response =
                    jsonrpc::error_response(&id, codes::INVALID_REQUEST, &format!("invalid request: {reason}"));
                let session = Arc::clone(&self.shared);
                tokio::spawn(async move { session.respond(id, response).await });
            }
        }
    }

    fn on_notification(&self, method: &str, message: &Value) {
        match method {
            "notifications/initialized" => self.shared.mark_initialized(),
            "notifications/cancelled" => {
                let Some(request_id) = message.pointer("/params/requestId") else { return };
                if let Some(request) = self.shared.take_request(request_id) {
                    // Upstream first, with the client's reason: the handler's own cleanup then finds nothing to do.
                    if let Some((upstream, upstream_id)) = request.upstream {
                        let reason = message
                            .pointer("/params/reason")
                            .and_then(Value::as_str)
                            .unwrap_or("cancelled by the client");
                        crate::relay::cancel_upstream(&self.gateway, upstream, upstream_id, reason);
                    }
                    request.cancel.cancel();
                }
            }
            "notifications/roots/list_changed" => {
                for runtime in self.gateway.upstreams.live() {
                    if let Some(connection) = runtime.connection() {
                        tokio::spawn(async move {
                            let _ = connection.notify("notifications/roots/list_changed", None).await;
                        });
                    }
                }
            }
            _ => tracing::debug!(session = %self.shared.id, %method, "ignoring a client notification"),
        }
    }
}

/// A modern `tools/call`'s `Mcp-Param-*` headers against the called tool's `x-mcp-header` properties, as this
/// session sees the tool (-32020 on a disagreement). Only over HTTP (`param_headers` is `None` on stdio, which has
/// no headers); a name that leads to no tool is left to the call, which answers it as unknown.
fn check_param_headers(
    gateway: &Shared,
    session: &SessionShared,
    method: &str,
    params: Option<&Value>,
    param_headers: Option<&[(String, String)]>,
) -> Result<(), crate::era::EraError> {
    let (Some(headers), Some(params), "tools/call") = (param_headers, params, method) else { return Ok(()) };
    let name = params.get("name").and_then(Value::as_str).unwrap_or_default();
    let Some(tool) = crate::access::resolve(&gateway.catalog(), &session.viewer_for(params), name) else {
        return Ok(());
    };
    let schema = tool.definition.get("inputSchema").unwrap_or(&Value::Null);
    let arguments = params.get("arguments").unwrap_or(&Value::Null);
    crate::mcp_headers::check_param_headers(schema, arguments, headers).map_err(|why| crate::era::EraError {
        code: crate::era::HEADER_MISMATCH,
        message: format!("header mismatch: {why}"),
        data: None,
    })
}
