//! One client session as the gateway sees it: what the client declared, its in-flight requests, the requests
//! toolgate sent it on an upstream's behalf, and the dispatch of every client message.
//!
//! Messages are taken in arrival order: notifications and responses are handled at once (so `initialized` or a
//! cancel is never overtaken), requests each get a task and may finish out of order. A session only ever sends to
//! its own client; nothing here writes bytes (the transport does).

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;
use toolgate_upstream::SUPPORTED_PROTOCOL_VERSIONS;
use toolgate_upstream::jsonrpc::{self, MessageKind, classify, codes};
use tracing::Instrument as _;

use crate::gateway::GatewayInner;
use crate::outbox::{Outbox, Undelivered};
use crate::session::{Caller, ClientBound, ClientSession};

/// A client request in flight: how to cancel it and where it went upstream.
pub(crate) struct InflightRequest {
    pub(crate) cancel: CancellationToken,
    pub(crate) upstream: Option<(usize, u64)>,
}

/// What the client declared at initialize.
#[derive(Default)]
struct Declared {
    capabilities: Value,
    protocol_version: Option<String>,
}

/// The state of one session shared by its handler tasks and the upstream routing.
pub(crate) struct SessionShared {
    pub(crate) id: String,
    outbox: Outbox,
    declared: Mutex<Declared>,
    initialized: AtomicBool,
    pub(crate) inflight: Mutex<HashMap<String, InflightRequest>>,
    server_requests: Mutex<HashMap<String, oneshot::Sender<Value>>>,
    next_server_request: AtomicU64,
    pub(crate) subscriptions: Mutex<HashSet<String>>,
    pub(crate) closed: CancellationToken,
    /// Who the transport authenticated.
    pub(crate) caller: Caller,
    /// An open-world tool's output has entered this session (possible exfiltration path for later writes).
    pub(crate) tainted: AtomicBool,
    /// Approval keys (tool and argument shape) a person said to remember for this session.
    pub(crate) remembered: Mutex<HashSet<String>>,
    /// Upstream requests relayed to this client and not answered yet, by (upstream, the upstream's request id), so
    /// the upstream's `notifications/cancelled` can reach the client.
    pub(crate) relayed: Mutex<HashMap<(usize, String), CancellationToken>>,
}

/// The key of a client request id in maps (its JSON text: `1` and `"1"` are different ids).
pub(crate) fn id_key(id: &Value) -> String {
    id.to_string()
}

impl SessionShared {
    pub(crate) fn new(id: String, outbox: Outbox, caller: Caller) -> SessionShared {
        SessionShared {
            caller,
            tainted: AtomicBool::new(false),
            remembered: Mutex::new(HashSet::new()),
            relayed: Mutex::new(HashMap::new()),
            id,
            outbox,
            declared: Mutex::new(Declared::default()),
            initialized: AtomicBool::new(false),
            inflight: Mutex::new(HashMap::new()),
            server_requests: Mutex::new(HashMap::new()),
            next_server_request: AtomicU64::new(1),
            subscriptions: Mutex::new(HashSet::new()),
            closed: CancellationToken::new(),
        }
    }

    pub(crate) fn is_initialized(&self) -> bool {
        self.initialized.load(Ordering::Acquire)
    }

    /// True when the client declared a capability (`"sampling"`, `"roots"`, `"elicitation"`).
    pub(crate) fn declares(&self, capability: &str) -> bool {
        self.declared
            .lock()
            .map(|declared| declared.capabilities.get(capability).is_some_and(|value| !value.is_null()))
            .unwrap_or(false)
    }

    /// True when the client can answer form-mode elicitation: it declared `elicitation` as an empty object (which
    /// means form, as before 2025-11-25 added modes) or with `form`. A client that declared only `url` cannot.
    pub(crate) fn declares_form_elicitation(&self) -> bool {
        self.declared
            .lock()
            .map(|declared| {
                declared
                    .capabilities
                    .get("elicitation")
                    .and_then(Value::as_object)
                    .is_some_and(|modes| modes.is_empty() || modes.contains_key("form"))
            })
            .unwrap_or(false)
    }

    /// True when the client declared URL-mode elicitation (2025-11-25).
    pub(crate) fn declares_url_elicitation(&self) -> bool {
        self.declared
            .lock()
            .map(|declared| declared.capabilities.pointer("/elicitation/url").is_some())
            .unwrap_or(false)
    }

    /// True when the client declared the MCP Apps extension (it may see app-only tools).
    pub(crate) fn declares_apps(&self) -> bool {
        self.declared
            .lock()
            .map(|declared| declared.capabilities.pointer("/extensions/io.modelcontextprotocol~1ui").is_some())
            .unwrap_or(false)
    }

    /// Sends the response to a client request (waits when the client is slow; a client that reads nothing for
    /// [`crate::outbox::STALL_TIMEOUT`] loses its session).
    pub(crate) async fn respond(&self, request_id: Value, message: Value) {
        self.deliver_or_close(ClientBound::Response { request_id, message }).await;
    }

    async fn deliver_or_close(&self, bound: ClientBound) {
        if self.outbox.send(bound).await == Err(Undelivered::Stalled) {
            tracing::warn!(session = %self.id, "closing the session: its client has read nothing for a minute");
            self.close();
        }
    }

    /// Sends a message that belongs to the client request `request_id`, or on its own without one (waits when the
    /// client is slow).
    async fn send_for(&self, request_id: Option<Value>, message: Value) {
        let bound = match request_id {
            Some(request_id) => ClientBound::Related { request_id, message },
            None => ClientBound::Unsolicited(message),
        };
        self.deliver_or_close(bound).await;
    }

    /// Queues a notification that belongs to the client request `request_id` (progress, log lines) without
    /// waiting: when the client is not reading and its queue is full (in messages or bytes), the notification is
    /// dropped (counted, logged once) rather than buffered without bound. Called in arrival order, so it stays ahead of the response.
    pub(crate) fn offer_related(&self, request_id: Value, message: Value) {
        self.outbox.offer(&self.id, ClientBound::Related { request_id, message });
    }

    /// Sends a message tied to no request; dropped (with a log line) when the client is not reading.
    pub(crate) fn send_unsolicited(&self, message: Value) {
        self.outbox.offer(&self.id, ClientBound::Unsolicited(message));
    }

    /// Sends a request to the client within its request `request_id` and waits for the answer (a whole
    /// response message), or `None` when the session closed first.
    pub(crate) async fn ask_client(
        &self,
        request_id: Value,
        method: &str,
        params: Option<Value>,
        timeout: std::time::Duration,
    ) -> Option<Value> {
        self.ask_client_until(Some(request_id), method, params, timeout, &CancellationToken::new()).await
    }

    /// [`SessionShared::ask_client`] that gives up when `cancel` fires: the client is told with
    /// `notifications/cancelled` for toolgate's id of the request, and its late answer is dropped. Without a
    /// `request_id` the request is sent on its own (for HTTP clients: on the GET stream).
    pub(crate) async fn ask_client_until(
        &self,
        request_id: Option<Value>,
        method: &str,
        params: Option<Value>,
        timeout: std::time::Duration,
        cancel: &CancellationToken,
    ) -> Option<Value> {
        let our_id = format!("toolgate-{}", self.next_server_request.fetch_add(1, Ordering::Relaxed));
        let (sender, receiver) = oneshot::channel();
        if let Ok(mut pending) = self.server_requests.lock() {
            pending.insert(id_key(&Value::String(our_id.clone())), sender);
        }
        let mut message = json!({"jsonrpc": "2.0", "id": our_id, "method": method});
        if let Some(params) = params {
            message["params"] = params;
        }
        self.send_for(request_id.clone(), message).await;
        let answer = tokio::select! {
            () = self.closed.cancelled() => None,
            () = cancel.cancelled() => {
                let params = json!({"requestId": our_id, "reason": "the server cancelled its request"});
                let notice = json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": params});
                self.send_for(request_id, notice).await;
                None
            }
            answer = tokio::time::timeout(timeout, receiver) => answer.ok().and_then(Result::ok),
        };
        if answer.is_none()
            && let Ok(mut pending) = self.server_requests.lock()
        {
            pending.remove(&id_key(&Value::String(our_id)));
        }
        answer
    }

    /// The bytes (estimated) queued for this client now, wherever they wait.
    pub(crate) fn queued_bytes(&self) -> usize {
        self.outbox.queued_bytes()
    }

    /// Cancels every in-flight request and stops the session.
    pub(crate) fn close(&self) {
        self.closed.cancel();
        if let Ok(inflight) = self.inflight.lock() {
            for request in inflight.values() {
                request.cancel.cancel();
            }
        }
    }
}

/// The gateway's [`ClientSession`] implementation.
pub(crate) struct GatewaySession {
    gateway: Arc<GatewayInner>,
    shared: Arc<SessionShared>,
}

impl GatewaySession {
    pub(crate) fn new(gateway: Arc<GatewayInner>, shared: Arc<SessionShared>) -> GatewaySession {
        GatewaySession { gateway, shared }
    }
}

impl ClientSession for GatewaySession {
    fn id(&self) -> &str {
        &self.shared.id
    }

    fn deliver(&self, message: Value) {
        if self.shared.closed.is_cancelled() {
            return;
        }
        match classify(&message) {
            MessageKind::Request { id, method } => {
                let id = id.clone();
                let method = method.to_owned();
                let cancel = CancellationToken::new();
                if let Ok(mut inflight) = self.shared.inflight.lock() {
                    inflight.insert(id_key(&id), InflightRequest { cancel: cancel.clone(), upstream: None });
                }
                let gateway = Arc::clone(&self.gateway);
                let session = Arc::clone(&self.shared);
                // One span per request, whatever the transport; `tools/call` records its tool, upstream, verdict
                // and outcome on it (`pipeline`). Debug: off unless the log or the span exporter asks for it.
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
                    let response =
                        crate::dispatch::handle_request(&gateway, &session, &id, &method, params, &cancel).await;
                    if let Ok(mut inflight) = session.inflight.lock() {
                        inflight.remove(&id_key(&id));
                    }
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
                let waiter =
                    self.shared.server_requests.lock().ok().and_then(|mut pending| pending.remove(&id_key(id)));
                match waiter {
                    Some(waiter) => {
                        let _ = waiter.send(message);
                    }
                    None => {
                        tracing::debug!(session = %self.shared.id, %id, "dropping a response to no request of ours")
                    }
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

    fn protocol_version(&self) -> Option<String> {
        self.shared.declared.lock().ok().and_then(|declared| declared.protocol_version.clone())
    }

    fn held_bytes(&self) -> crate::session::HeldBytes {
        self.shared.outbox.held()
    }

    fn close(&self) {
        self.shared.close();
        self.gateway.forget_session(&self.shared.id);
        crate::dispatch::drop_subscriptions(&self.gateway, &self.shared);
    }
}

impl GatewaySession {
    fn on_notification(&self, method: &str, message: &Value) {
        match method {
            "notifications/initialized" => self.shared.initialized.store(true, Ordering::Release),
            "notifications/cancelled" => {
                let Some(request_id) = message.pointer("/params/requestId") else { return };
                let cancelled =
                    self.shared.inflight.lock().ok().and_then(|mut inflight| inflight.remove(&id_key(request_id)));
                if let Some(request) = cancelled {
                    // Upstream first, with the client's reason: the handler's own cleanup then finds nothing to do.
                    if let Some((upstream, upstream_id)) = request.upstream {
                        let reason = message
                            .pointer("/params/reason")
                            .and_then(Value::as_str)
                            .unwrap_or("cancelled by the client");
                        crate::dispatch::cancel_upstream(&self.gateway, upstream, upstream_id, reason);
                    }
                    request.cancel.cancel();
                }
            }
            "notifications/roots/list_changed" => {
                for runtime in &self.gateway.upstreams {
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

/// Records what the client declared at initialize; returns the protocol version toolgate answers with.
pub(crate) fn accept_initialize(session: &SessionShared, params: &Value) -> String {
    let requested = params.get("protocolVersion").and_then(Value::as_str).unwrap_or_default();
    let version =
        if SUPPORTED_PROTOCOL_VERSIONS.contains(&requested) { requested } else { SUPPORTED_PROTOCOL_VERSIONS[0] };
    if let Ok(mut declared) = session.declared.lock() {
        declared.capabilities = params.get("capabilities").cloned().unwrap_or_else(|| json!({}));
        declared.protocol_version = Some(version.to_owned());
    }
    version.to_owned()
}
