//! One client session's state: what the client declared, its in-flight requests, the requests toolgate sent it on
//! an upstream's behalf, its subscriptions, taint and remembered approvals, and its outbox.
//!
//! What arrives from the client is dispatched by `crate::intake`; this file only keeps the state and offers the
//! narrow ways to read and change it. A session only ever sends to its own client; nothing here writes bytes (the
//! transport does) or decides anything.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;
use toolgate_upstream::SUPPORTED_PROTOCOL_VERSIONS;

use crate::access::Viewer;
use crate::era::{ListenFilter, RequestEnvelope};
use crate::outbox::{Outbox, Undelivered};
use crate::session::{Caller, ClientBound};
use crate::state::caller_taint::CallerTaint;
use toolgate_spec::SubjectToken;
use toolgate_upstream::OnBehalf;

/// A client request in flight: how to cancel it, where it went upstream, and (a 2026-07-28 request) what it
/// declared for itself.
pub(crate) struct InflightRequest {
    pub(crate) cancel: CancellationToken,
    pub(crate) upstream: Option<(usize, u64)>,
    pub(crate) envelope: Option<Arc<RequestEnvelope>>,
}

/// One `subscriptions/listen` open on this session: the listen request's id (its subscription id) and what it
/// asked to hear, and the token that fires when one of its notifications found no room (its listener fell behind).
#[derive(Debug, Clone)]
pub(crate) struct Listen {
    pub(crate) id: Value,
    pub(crate) filter: ListenFilter,
    pub(crate) lagged: CancellationToken,
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
    inflight: Mutex<HashMap<String, InflightRequest>>,
    server_requests: Mutex<HashMap<String, oneshot::Sender<Value>>>,
    next_server_request: AtomicU64,
    pub(crate) subscriptions: Mutex<HashSet<String>>,
    /// The `subscriptions/listen` requests open on this session (one on an HTTP request's own session; any number
    /// on stdio, where every subscription shares the one channel).
    listens: Mutex<Vec<Listen>>,
    pub(crate) closed: CancellationToken,
    /// Who the transport authenticated.
    pub(crate) caller: Caller,
    /// The OAuth access token the caller presented last (the one it opened the session with, until a later
    /// request of the same caller presents a newer one), exchanged for a token exchange upstream's calls.
    subject_token: Mutex<Option<SubjectToken>>,
    /// An open-world tool's output has entered this session (possible exfiltration path for later writes).
    tainted: AtomicBool,
    /// The session of one 2026-07-28 request: its caller's taint, which outlives the session (see
    /// [`crate::state::caller_taint`]); `None` for a legacy or stdio session, whose taint is its own.
    caller_taint: Option<Arc<CallerTaint>>,
    /// Approval keys (tool and argument shape) a person said to remember for this session, each with the slot of
    /// the upstream it was given for: a reload that restarts the upstream (other command, arguments, environment)
    /// gives it a new slot, so what was approved for the old process is never remembered for the new one.
    pub(crate) remembered: Mutex<HashSet<(usize, String)>>,
    /// Upstream requests relayed to this client and not answered yet, by (upstream, the upstream's request id), so
    /// the upstream's `notifications/cancelled` can reach the client.
    pub(crate) relayed: Mutex<HashMap<(usize, String), CancellationToken>>,
    /// The 2026-07-28 requests of this session whose upstream call is bridged (`crate::bridge`), by client request
    /// id: where a legacy upstream's mid-call request for that call goes instead of the client. An entry outlives
    /// the request while its upstream call is held for a retry, marked held meanwhile ([`SessionShared::bridge_is_held`]).
    bridges: Mutex<HashMap<String, Bridge>>,
}

/// Where a bridged call's upstream requests go, and whether the call is held for its client's retry now.
struct Bridge {
    asks: mpsc::UnboundedSender<crate::state::held::UpstreamAsk>,
    held: Arc<AtomicBool>,
}

/// The key of a client request id in maps (its JSON text: `1` and `"1"` are different ids).
pub(crate) fn id_key(id: &Value) -> String {
    id.to_string()
}

impl SessionShared {
    pub(crate) fn new(id: String, outbox: Outbox, caller: Caller) -> SessionShared {
        SessionShared {
            subject_token: Mutex::new(caller.token.clone()),
            caller,
            tainted: AtomicBool::new(false),
            caller_taint: None,
            remembered: Mutex::new(HashSet::new()),
            relayed: Mutex::new(HashMap::new()),
            bridges: Mutex::new(HashMap::new()),
            id,
            outbox,
            declared: Mutex::new(Declared::default()),
            initialized: AtomicBool::new(false),
            inflight: Mutex::new(HashMap::new()),
            server_requests: Mutex::new(HashMap::new()),
            next_server_request: AtomicU64::new(1),
            subscriptions: Mutex::new(HashSet::new()),
            listens: Mutex::new(Vec::new()),
            closed: CancellationToken::new(),
        }
    }

    /// A later request of this session's caller (the transport checked it is the same one) presented `token`: the
    /// newest token is the one exchanged, since the one the session opened with may have expired since.
    pub(crate) fn present_token(&self, token: &SubjectToken) {
        if let Ok(mut current) = self.subject_token.lock() {
            *current = Some(token.clone());
        }
    }

    /// On whose behalf this session's requests go upstream: its caller and the token it presented last.
    pub(crate) fn on_behalf(&self) -> OnBehalf {
        let token = self.subject_token.lock().ok().and_then(|token| token.clone());
        OnBehalf { subject: self.caller.name.clone(), token }
    }

    /// Makes this the session of one request of a caller whose taint is `cell`: taint reaching it taints the
    /// caller, and the caller's taint is its own.
    pub(crate) fn with_caller_taint(mut self, cell: Option<Arc<CallerTaint>>) -> SessionShared {
        self.caller_taint = cell;
        self
    }

    pub(crate) fn is_initialized(&self) -> bool {
        self.initialized.load(Ordering::Acquire)
    }

    /// The client sent `notifications/initialized`.
    pub(crate) fn mark_initialized(&self) {
        self.initialized.store(true, Ordering::Release);
    }

    /// Text from an open-world source reached this session's client.
    pub(crate) fn taint(&self) {
        self.tainted.store(true, Ordering::Release);
        if let Some(caller) = &self.caller_taint {
            caller.taint();
        }
    }

    /// This session's taint, or (the session of one modern request) its caller's.
    pub(crate) fn is_tainted(&self) -> bool {
        self.tainted.load(Ordering::Acquire) || self.caller_taint.as_ref().is_some_and(|caller| caller.is_tainted())
    }

    /// What the access rules see of this session now (its caller's scopes, its taint, whether it sees app-only
    /// tools).
    pub(crate) fn viewer(&self) -> Viewer<'_> {
        Viewer { scopes: &self.caller.scopes, tainted: self.is_tainted(), apps: self.declares_apps() }
    }

    /// The protocol version agreed at initialize.
    pub(crate) fn protocol_version(&self) -> Option<String> {
        self.declared.lock().ok().and_then(|declared| declared.protocol_version.clone())
    }

    /// What the access rules see of this session for one request: a 2026-07-28 request's own capabilities
    /// (in its `params._meta`) decide what it declared, never the session's (on stdio one session carries both
    /// eras' requests).
    pub(crate) fn viewer_for(&self, params: &Value) -> Viewer<'_> {
        let apps = match RequestEnvelope::of(Some(params)) {
            Some(envelope) => envelope.capabilities.pointer("/extensions/io.modelcontextprotocol~1ui").is_some(),
            None => self.declares_apps(),
        };
        Viewer { scopes: &self.caller.scopes, tainted: self.is_tainted(), apps }
    }

    /// A client request arrived: it is in flight until [`SessionShared::end_request`] (or a cancel takes it). A
    /// 2026-07-28 request brings its `envelope`.
    pub(crate) fn begin_request(&self, id: &Value, cancel: CancellationToken, envelope: Option<RequestEnvelope>) {
        if let Ok(mut inflight) = self.inflight.lock() {
            inflight.insert(id_key(id), InflightRequest { cancel, upstream: None, envelope: envelope.map(Arc::new) });
        }
    }

    /// The envelope of the 2026-07-28 request `id` in flight; `None` for a legacy request (or one that ended).
    pub(crate) fn envelope_of(&self, id: &Value) -> Option<Arc<RequestEnvelope>> {
        self.inflight.lock().ok()?.get(&id_key(id))?.envelope.clone()
    }

    /// Bridges the upstream call of request `id`: the upstream's requests for it go to `asks`. Returns the call's
    /// held mark, which `crate::bridge` sets while the call is held for its retry.
    pub(crate) fn open_bridge(
        &self,
        id: &Value,
        asks: mpsc::UnboundedSender<crate::state::held::UpstreamAsk>,
    ) -> Arc<AtomicBool> {
        let held = Arc::new(AtomicBool::new(false));
        if let Ok(mut bridges) = self.bridges.lock() {
            bridges.insert(id_key(id), Bridge { asks, held: Arc::clone(&held) });
        }
        held
    }

    /// Where the upstream's requests for request `id` go, when its upstream call is bridged.
    pub(crate) fn bridge_of(&self, id: &Value) -> Option<mpsc::UnboundedSender<crate::state::held::UpstreamAsk>> {
        self.bridges.lock().ok()?.get(&id_key(id)).map(|bridge| bridge.asks.clone())
    }

    /// Whether request `id`'s bridged upstream call is held for its client's retry now (`state::routes` passes it
    /// over when it names a request by elimination).
    pub(crate) fn bridge_is_held(&self, id: &Value) -> bool {
        self.bridges
            .lock()
            .ok()
            .and_then(|bridges| bridges.get(&id_key(id)).map(|bridge| bridge.held.load(Ordering::Acquire)))
            .unwrap_or(false)
    }

    /// The bridged upstream call of request `id` ended.
    pub(crate) fn close_bridge(&self, id: &Value) {
        if let Ok(mut bridges) = self.bridges.lock() {
            bridges.remove(&id_key(id));
        }
    }

    /// Opens a `subscriptions/listen` on this session.
    pub(crate) fn add_listen(&self, listen: Listen) {
        if let Ok(mut listens) = self.listens.lock() {
            listens.push(listen);
        }
    }

    /// Closes the listen opened by request `id`; returns its filter.
    pub(crate) fn remove_listen(&self, id: &Value) -> Option<ListenFilter> {
        let mut listens = self.listens.lock().ok()?;
        let position = listens.iter().position(|listen| listen.id == *id)?;
        Some(listens.remove(position).filter)
    }

    /// The listens open on this session now.
    pub(crate) fn listens(&self) -> Vec<Listen> {
        self.listens.lock().map(|listens| listens.clone()).unwrap_or_default()
    }

    /// True when this session wants `resources/updated` for `uri`: a legacy subscription or a listen's.
    pub(crate) fn wants_resource(&self, uri: &str) -> bool {
        self.wants_resource_by_listen(uri)
            || self.subscriptions.lock().map(|subscriptions| subscriptions.contains(uri)).unwrap_or(false)
    }

    /// True when this session holds a legacy `resources/subscribe` of `uri`.
    pub(crate) fn has_legacy_subscription(&self, uri: &str) -> bool {
        self.subscriptions.lock().map(|subscriptions| subscriptions.contains(uri)).unwrap_or(false)
    }

    /// True when a listen of this session wants `resources/updated` for `uri`.
    pub(crate) fn wants_resource_by_listen(&self, uri: &str) -> bool {
        self.listens
            .lock()
            .map(|listens| listens.iter().any(|listen| listen.filter.resource_uris.contains(uri)))
            .unwrap_or(false)
    }

    /// Hands a notification toolgate sends on its own (a `list_changed`, a `resources/updated`) to every listen of
    /// this session that asked for its type (for `resources/updated`, its URI), as a message of that listen
    /// request tagged with its id; returns how many listens took it. A listen whose copy finds no room is marked
    /// lagged (it ends with an error: a listener must never trust a stream that silently lost an update) and is
    /// offered nothing more.
    pub(crate) fn offer_to_listens(&self, message: &Value) -> usize {
        let method = message.get("method").and_then(Value::as_str).unwrap_or_default();
        let uri = message.pointer("/params/uri").and_then(Value::as_str);
        let mut taken = 0;
        for listen in self.listens() {
            let wanted = match (method, uri) {
                ("notifications/resources/updated", Some(uri)) => listen.filter.resource_uris.contains(uri),
                _ => listen.filter.wants_list_changed(method),
            };
            if !wanted || listen.lagged.is_cancelled() {
                continue;
            }
            if self.offer_related(listen.id.clone(), crate::era::tagged(message.clone(), &listen.id)) {
                taken += 1;
            } else {
                listen.lagged.cancel();
            }
        }
        taken
    }

    /// A client request was answered.
    pub(crate) fn end_request(&self, id: &Value) {
        if let Ok(mut inflight) = self.inflight.lock() {
            inflight.remove(&id_key(id));
        }
    }

    /// Takes a request the client cancelled out of the in-flight set.
    pub(crate) fn take_request(&self, id: &Value) -> Option<InflightRequest> {
        self.inflight.lock().ok().and_then(|mut inflight| inflight.remove(&id_key(id)))
    }

    /// Notes which upstream request a client request became, so the client's cancel reaches it.
    pub(crate) fn set_request_upstream(&self, id: &Value, upstream: usize, upstream_id: u64) {
        if let Ok(mut inflight) = self.inflight.lock()
            && let Some(request) = inflight.get_mut(&id_key(id))
        {
            request.upstream = Some((upstream, upstream_id));
        }
    }

    /// Hands the client's response to the request of toolgate's it answers; false when no request waits for it.
    pub(crate) fn answer_server_request(&self, id: &Value, message: Value) -> bool {
        match self.server_requests.lock().ok().and_then(|mut pending| pending.remove(&id_key(id))) {
            Some(waiter) => {
                let _ = waiter.send(message);
                true
            }
            None => false,
        }
    }

    /// The capabilities the client declared at initialize (`{}` before, and for a modern request's session).
    pub(crate) fn declared_capabilities(&self) -> Value {
        self.declared.lock().map(|declared| declared.capabilities.clone()).unwrap_or_else(|_| json!({}))
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
        self.declared_for("elicitation/create", &json!({}))
    }

    /// True when the client declared URL-mode elicitation (2025-11-25).
    pub(crate) fn declares_url_elicitation(&self) -> bool {
        self.declared_for("elicitation/create", &crate::era::url_mode())
    }

    /// Whether what the client declared at initialize covers the request `method` with `params` (`crate::era::declares`).
    fn declared_for(&self, method: &str, params: &Value) -> bool {
        self.declared.lock().is_ok_and(|declared| crate::era::declares(&declared.capabilities, method, params))
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
    /// dropped (counted, logged once) rather than buffered without bound; false then. Called in arrival order, so
    /// it stays ahead of the response.
    pub(crate) fn offer_related(&self, request_id: Value, message: Value) -> bool {
        self.outbox.offer(&self.id, ClientBound::Related { request_id, message })
    }

    /// Sends a message tied to no request; dropped (with a log line) when the client is not reading.
    pub(crate) fn send_unsolicited(&self, message: Value) {
        let _ = self.outbox.offer(&self.id, ClientBound::Unsolicited(message));
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

    /// What the outbox holds for this client, for the transport's budget.
    pub(crate) fn held_bytes(&self) -> crate::session::HeldBytes {
        self.outbox.held()
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

impl SessionShared {
    /// Records what the client declared at initialize; returns the protocol version toolgate answers with.
    pub(crate) fn accept_initialize(&self, params: &Value) -> String {
        let requested = params.get("protocolVersion").and_then(Value::as_str).unwrap_or_default();
        let version =
            if SUPPORTED_PROTOCOL_VERSIONS.contains(&requested) { requested } else { SUPPORTED_PROTOCOL_VERSIONS[0] };
        if let Ok(mut declared) = self.declared.lock() {
            declared.capabilities = params.get("capabilities").cloned().unwrap_or_else(|| json!({}));
            declared.protocol_version = Some(version.to_owned());
        }
        version.to_owned()
    }
}
