//! A client connection to one MCP server: the initialize handshake, requests with ids and timeouts, cancellation,
//! paginated lists, server-initiated messages, and a polite close.
//!
//! Requests get toolgate's own integer ids; responses are matched back through a pending map, and a response that
//! arrives after its request timed out or was cancelled is dropped. Server-initiated messages go to the event sink
//! given in [`ConnectOptions::events`], or are answered conservatively here. When the transport ends, every pending
//! request fails with the same error, which says why. A `Connection` is shared (`&self` everywhere).
//!
//! A server that stops keeping up must not hold its callers: at most [`ConnectOptions::max_in_flight`] requests wait
//! for answers at once (one more is refused at once with [`UpstreamError::Saturated`]); queueing a request for the
//! transport counts against the request's own time ([`Connection::begin_request_within`]); and a cancellation
//! notice is only ever queued when there is room, never waited for (a full queue drops it and counts the drop).

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use serde_json::{Value, json};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc, oneshot};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use toolgate_spec::{Endpoint, UpstreamEra};

use crate::endpoint::ConnectOptions;
use crate::error::UpstreamError;
use crate::events::{EventSink, Responder};
use crate::http::DirectPoster;
use crate::initialize_outcome::InitializeOutcome;
use crate::jsonrpc::{self, MessageKind, classify, codes};
use crate::modern;
use crate::started::{self, Closer, Started};
use crate::token_exchange::OnBehalf;
use crate::transport::{Behalves, Diagnostics, Inbound, InboundStream, PendingResponses, ResponseSender, Transport};

mod opening;
use opening::Opening;

/// What [`Connection::list_at_most`] read.
#[derive(Debug, Clone, PartialEq)]
pub struct Listed {
    /// The items of every page read, in order.
    pub items: Vec<Value>,
    /// The server offered more pages, not asked for because enough items (or bytes) had arrived.
    pub unread_pages: bool,
}

/// The four paginated list methods.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ListKind {
    /// `tools/list` -> `tools`.
    Tools,
    /// `prompts/list` -> `prompts`.
    Prompts,
    /// `resources/list` -> `resources`.
    Resources,
    /// `resources/templates/list` -> `resourceTemplates`.
    ResourceTemplates,
}

impl ListKind {
    /// Every list, in a fixed order.
    pub const ALL: [ListKind; 4] =
        [ListKind::Tools, ListKind::Prompts, ListKind::Resources, ListKind::ResourceTemplates];

    /// The JSON-RPC method.
    pub fn method(self) -> &'static str {
        match self {
            ListKind::Tools => "tools/list",
            ListKind::Prompts => "prompts/list",
            ListKind::Resources => "resources/list",
            ListKind::ResourceTemplates => "resources/templates/list",
        }
    }

    /// The key of the item array in the result.
    pub fn result_key(self) -> &'static str {
        match self {
            ListKind::Tools => "tools",
            ListKind::Prompts => "prompts",
            ListKind::Resources => "resources",
            ListKind::ResourceTemplates => "resourceTemplates",
        }
    }
}

struct Shared {
    pending: Arc<PendingResponses>,
    /// The callers of requests not yet posted (a token exchange upstream over HTTP only).
    behalves: Arc<Behalves>,
    ended: Mutex<Option<UpstreamError>>,
    diagnostics: Arc<Diagnostics>,
    /// One permit per request that may wait for its answer ([`ConnectOptions::max_in_flight`]).
    in_flight: Arc<Semaphore>,
    max_in_flight: usize,
    /// Set by the first refusal for saturation and cleared by the next accepted request, so each episode is
    /// logged once rather than once per refused call.
    saturated: AtomicBool,
    /// `notifications/cancelled` dropped because the transport's queue was full.
    cancels_dropped: AtomicU64,
}

impl Shared {
    fn ended(&self) -> Option<UpstreamError> {
        self.ended.lock().ok().and_then(|guard| guard.clone())
    }

    fn ended_or_stopped(&self) -> UpstreamError {
        self.ended().unwrap_or(UpstreamError::Closed { detail: "the transport stopped".into() })
    }

    fn take_pending(&self, id: u64) -> Option<ResponseSender> {
        self.pending.take(id)
    }
}

/// A request registered in the pending map whose message is not queued yet: dropped (the caller gave up while
/// waiting for room in the queue), it takes its entry back, so nothing waits for an answer to a message never sent.
struct Registration<'a> {
    shared: &'a Shared,
    id: u64,
    armed: bool,
}

impl Drop for Registration<'_> {
    fn drop(&mut self) {
        if self.armed {
            self.shared.take_pending(self.id);
            self.shared.behalves.take(self.id);
        }
    }
}

/// A request sent to the server whose response has not been awaited yet.
#[derive(Debug)]
pub struct PendingRequest {
    id: u64,
    method: String,
    receiver: oneshot::Receiver<Result<Value, UpstreamError>>,
    /// Its place among the requests in flight, given back when the request is answered, times out or is dropped.
    _permit: OwnedSemaphorePermit,
}

impl PendingRequest {
    /// toolgate's id for the request on this connection.
    pub fn id(&self) -> u64 {
        self.id
    }
}

/// An initialized connection to one MCP server.
pub struct Connection {
    outbound: mpsc::Sender<Value>,
    direct: Option<DirectPoster>,
    shared: Arc<Shared>,
    next_id: AtomicU64,
    shutdown: CancellationToken,
    closer: Mutex<Option<Closer>>,
    reader: JoinHandle<()>,
    initialize: InitializeOutcome,
    options: ConnectOptions,
}

impl Connection {
    /// Starts the transport and opens the conversation in the era [`ConnectOptions::era`] says: legacy runs
    /// `initialize` and sends `notifications/initialized`; modern asks `server/discover`; auto asks
    /// `server/discover` first (`modern::probe_verdict`) and falls back to `initialize`, on the same connection
    /// when the server is still there, or on a new one when it ended the first (a server that exits on any request
    /// before `initialize`). The era found is the connection's for its life; a reconnect probes again.
    pub async fn connect(endpoint: &Endpoint, options: ConnectOptions) -> Result<Connection, UpstreamError> {
        match options.era {
            UpstreamEra::Legacy => Connection::start(endpoint, options, Opening::Legacy).await,
            UpstreamEra::Modern => Connection::start(endpoint, options, Opening::Modern).await,
            UpstreamEra::Auto => match Connection::start(endpoint, options.clone(), Opening::Probe).await {
                Err(UpstreamError::Closed { detail }) => {
                    tracing::info!(
                        upstream = %options.name,
                        %detail,
                        "the server ended the connection on server/discover; starting it again for initialize"
                    );
                    Connection::start(endpoint, options, Opening::Legacy).await
                }
                other => other,
            },
        }
    }

    async fn start(
        endpoint: &Endpoint,
        options: ConnectOptions,
        opening: Opening,
    ) -> Result<Connection, UpstreamError> {
        let pending = Arc::new(PendingResponses::default());
        let behalves = Arc::new(Behalves::default());
        let Started { transport, closer, direct } =
            started::start(endpoint, &options, Arc::clone(&pending), Arc::clone(&behalves))?;
        let Transport { outbound, inbound, diagnostics, negotiated_version, shutdown } = transport;
        let max_in_flight = options.max_in_flight.max(1);
        let shared = Arc::new(Shared {
            pending,
            behalves,
            ended: Mutex::new(None),
            diagnostics: Arc::clone(&diagnostics),
            in_flight: Arc::new(Semaphore::new(max_in_flight)),
            max_in_flight,
            saturated: AtomicBool::new(false),
            cancels_dropped: AtomicU64::new(0),
        });
        // While the probe runs, an end of the connection is the probe's answer, not news for the event sink (whose
        // owner would take the upstream for down while it is being started again).
        let probing = Arc::new(AtomicBool::new(opening == Opening::Probe));
        let router = Router {
            outbound: outbound.downgrade(),
            shared: Arc::clone(&shared),
            name: options.name.clone(),
            events: options.events.clone(),
            probing: Arc::clone(&probing),
        };
        let reader = tokio::spawn(router.run(inbound));
        let mut connection = Connection {
            outbound,
            direct,
            shared,
            next_id: AtomicU64::new(1),
            shutdown,
            closer: Mutex::new(Some(closer)),
            reader,
            initialize: InitializeOutcome {
                protocol_version: String::new(),
                server_info: Value::Null,
                capabilities: Value::Null,
                instructions: None,
                modern: false,
            },
            options,
        };
        let opened = match opening {
            Opening::Legacy => connection.open_legacy(&negotiated_version).await,
            Opening::Modern => {
                // Before the first request: over HTTP every modern request carries the version header.
                let _ = negotiated_version.set(modern::MODERN_PROTOCOL_VERSION.to_owned());
                connection.discover().await.map(|outcome| connection.initialize = outcome)
            }
            Opening::Probe => connection.probe(&negotiated_version).await,
        };
        probing.store(false, Ordering::Release);
        match opened {
            Ok(()) => Ok(connection),
            Err(error) => {
                connection.close().await;
                Err(error)
            }
        }
    }

    /// What the server said at initialize (or, for a modern upstream, at `server/discover`).
    pub fn initialize_outcome(&self) -> &InitializeOutcome {
        &self.initialize
    }

    /// The connection's options.
    pub fn options(&self) -> &ConnectOptions {
        &self.options
    }

    /// Why the connection ended, once it has.
    pub fn ended(&self) -> Option<UpstreamError> {
        self.shared.ended()
    }

    /// Sends a request and waits for its result (the `result` member), within the request timeout (queueing the
    /// request included).
    ///
    /// A JSON-RPC error answer becomes [`UpstreamError::Rpc`].
    pub async fn request(&self, method: &str, params: Option<Value>) -> Result<Value, UpstreamError> {
        let timeout = self.options.request_timeout;
        let deadline = Instant::now() + timeout;
        let pending = self.begin_request_within(method, params, timeout).await?;
        into_result(self.wait_until(pending, deadline, timeout).await?)
    }

    /// Waits for the answer until `deadline`; a timeout names the request's whole time (`timeout`), not the part of
    /// it that was left after queueing.
    async fn wait_until(
        &self,
        pending: PendingRequest,
        deadline: Instant,
        timeout: Duration,
    ) -> Result<Value, UpstreamError> {
        match self.wait(pending, deadline.saturating_duration_since(Instant::now())).await {
            Err(UpstreamError::Timeout { method, diagnostics, .. }) => {
                Err(UpstreamError::Timeout { method, after: timeout, diagnostics })
            }
            other => other,
        }
    }

    /// Sends a request and returns once it is on its way, waiting for room in the transport's queue at most the
    /// request timeout; [`Connection::wait`] gets the whole response message.
    pub async fn begin_request(&self, method: &str, params: Option<Value>) -> Result<PendingRequest, UpstreamError> {
        self.begin_request_within(method, params, self.options.request_timeout).await
    }

    /// Sends a request and returns once it is on its way; [`Connection::wait`] gets the whole response message.
    ///
    /// Refused at once with [`UpstreamError::Saturated`] when [`ConnectOptions::max_in_flight`] requests already
    /// wait for answers. Waits for room in the transport's queue at most `within` (a server that stops reading
    /// fills it), then fails with [`UpstreamError::SendTimeout`]: the request was not sent. Dropping the future
    /// while it waits sends nothing and leaves nothing behind.
    pub async fn begin_request_within(
        &self,
        method: &str,
        params: Option<Value>,
        within: Duration,
    ) -> Result<PendingRequest, UpstreamError> {
        self.begin_request_registered(method, params, within, |_| {}).await
    }

    /// [`Connection::begin_request_within`], calling `register` with the request's id before the request is sent.
    ///
    /// What the server sends about a request (progress, log lines, its own requests) can arrive before the send
    /// returns: a caller that routes such messages by the request's id registers the route here, or loses them.
    /// `register` runs at most once, and only when the request is about to be sent.
    ///
    /// The params get the era's envelope here, so no request leaves without it: a modern upstream's `_meta` gets
    /// the version, toolgate's `clientInfo` and the client capabilities (the caller's, when it put them there);
    /// a legacy upstream's loses the 2026-07-28 envelope keys a modern client sent toolgate.
    pub async fn begin_request_registered(
        &self,
        method: &str,
        params: Option<Value>,
        within: Duration,
        register: impl FnOnce(u64),
    ) -> Result<PendingRequest, UpstreamError> {
        self.begin_request_on_behalf(method, params, within, register, None).await
    }

    /// [`Connection::begin_request_registered`] on behalf of `caller` (`None`: on toolgate's own behalf).
    ///
    /// A token exchange upstream ([`ConnectOptions::exchange`]) gets the caller's exchanged token on this request
    /// alone, so callers sharing the upstream session never share a token; a caller without an OAuth access token
    /// is refused here with [`UpstreamError::NoCallerToken`] and nothing is sent. Any other upstream ignores the
    /// caller: its requests carry only its own credentials, and never the caller's token.
    pub async fn begin_request_on_behalf(
        &self,
        method: &str,
        params: Option<Value>,
        within: Duration,
        register: impl FnOnce(u64),
        caller: Option<&OnBehalf>,
    ) -> Result<PendingRequest, UpstreamError> {
        let caller = caller.filter(|_| self.options.exchange.is_some());
        if let Some(caller) = caller.filter(|caller| caller.token.is_none()) {
            return Err(crate::token_exchange::no_caller_token(self.options.exchange.as_deref(), caller));
        }
        let params = if self.initialize.modern {
            Some(modern::with_modern_envelope(params, &self.options.client_info, &self.options.capabilities))
        } else {
            modern::without_modern_envelope(params)
        };
        self.begin_raw_request(method, params, within, register, caller).await
    }

    /// Sends a request with its params exactly as given (see [`Connection::begin_request_registered`]).
    async fn begin_raw_request(
        &self,
        method: &str,
        params: Option<Value>,
        within: Duration,
        register: impl FnOnce(u64),
        caller: Option<&OnBehalf>,
    ) -> Result<PendingRequest, UpstreamError> {
        if let Some(error) = self.shared.ended() {
            return Err(error);
        }
        let permit = self.take_in_flight_permit()?;
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (sender, receiver) = oneshot::channel();
        self.shared.pending.insert(id, sender);
        if let Some(caller) = caller {
            self.shared.behalves.insert(id, caller.clone());
        }
        let mut registration = Registration { shared: &self.shared, id, armed: true };
        // The router may have ended the connection (and failed every pending request) since the check above: this
        // request would then wait for its timeout, so it is taken back (by the registration) and refused.
        if let Some(error) = self.shared.ended() {
            return Err(error);
        }
        register(id);
        let pending = |registration: &mut Registration<'_>, receiver, permit| {
            registration.armed = false;
            PendingRequest { id, method: method.to_owned(), receiver, _permit: permit }
        };
        let mut request = jsonrpc::request(id, method, params);
        if let Some(direct) = &self.direct {
            match direct.post(request, within) {
                Ok(()) => return Ok(pending(&mut registration, receiver, permit)),
                Err(queued) => request = queued,
            }
        }
        match tokio::time::timeout(within, self.outbound.send(request)).await {
            Ok(Ok(())) => Ok(pending(&mut registration, receiver, permit)),
            Ok(Err(_)) => Err(self.shared.ended_or_stopped()),
            Err(_) => Err(UpstreamError::SendTimeout { method: method.to_owned(), after: within }),
        }
    }

    /// A place among the requests in flight, or the refusal that says the connection is saturated. The first
    /// refusal of an episode is logged as a warning, and the first request accepted after it as its end.
    fn take_in_flight_permit(&self) -> Result<OwnedSemaphorePermit, UpstreamError> {
        let shared = &self.shared;
        match Arc::clone(&shared.in_flight).try_acquire_owned() {
            Ok(permit) => {
                if shared.saturated.load(Ordering::Relaxed) && shared.saturated.swap(false, Ordering::Relaxed) {
                    tracing::info!(upstream = %self.options.name, "upstream accepts requests again");
                }
                Ok(permit)
            }
            Err(_) => {
                let limit = shared.max_in_flight;
                if !shared.saturated.swap(true, Ordering::Relaxed) {
                    tracing::warn!(
                        upstream = %self.options.name,
                        max_in_flight = limit,
                        "upstream saturated: every place for a request in flight is taken; refusing more at once"
                    );
                }
                Err(UpstreamError::Saturated { limit })
            }
        }
    }

    /// Requests waiting for their answers now.
    pub fn in_flight(&self) -> usize {
        self.shared.max_in_flight.saturating_sub(self.shared.in_flight.available_permits())
    }

    /// The most requests that may wait for their answers at once.
    pub fn max_in_flight(&self) -> usize {
        self.shared.max_in_flight
    }

    /// `notifications/cancelled` dropped since the connection opened because the transport's queue was full.
    pub fn cancel_notices_dropped(&self) -> u64 {
        self.shared.cancels_dropped.load(Ordering::Relaxed)
    }

    /// Waits for the response to a request (the whole message: `result` or `error`), within `timeout`.
    ///
    /// On timeout the request is cancelled upstream and a late response is dropped.
    pub async fn wait(&self, pending: PendingRequest, timeout: Duration) -> Result<Value, UpstreamError> {
        let PendingRequest { id, method, receiver, _permit } = pending;
        match tokio::time::timeout(timeout, receiver).await {
            Ok(Ok(outcome)) => outcome,
            // The sender went away: either the connection ended, or the request was cancelled (its entry taken).
            Ok(Err(_)) => Err(self.shared.ended().unwrap_or(UpstreamError::Cancelled)),
            Err(_) => {
                self.cancel_soon(id, "toolgate: request timed out");
                Err(UpstreamError::Timeout { method, after: timeout, diagnostics: self.shared.diagnostics.describe() })
            }
        }
    }

    /// Cancels a pending request: `notifications/cancelled` goes upstream (when there is room) and a late
    /// response is dropped. Never waits; see [`Connection::cancel_soon`].
    pub async fn cancel(&self, id: u64, reason: &str) {
        self.cancel_soon(id, reason);
    }

    /// Cancels a pending request without waiting: the pending entry is taken at once (so a late response is
    /// dropped and a second cancel is a no-op) and `notifications/cancelled` is queued if the transport's queue has
    /// room. A full queue means the server is not reading what it is sent, so the notice could not reach it soon
    /// anyway: it is dropped and counted ([`Connection::cancel_notices_dropped`]) rather than waited for, which
    /// would hold the caller (or a task per notice) until the server reads again. Returns whether the request was
    /// still pending.
    pub fn cancel_soon(&self, id: u64, reason: &str) -> bool {
        if self.shared.take_pending(id).is_none() {
            return false;
        }
        let params = json!({"requestId": id, "reason": reason});
        let message = jsonrpc::notification("notifications/cancelled", Some(params));
        if let Err(mpsc::error::TrySendError::Full(_)) = self.outbound.try_send(message) {
            let dropped = self.shared.cancels_dropped.fetch_add(1, Ordering::Relaxed) + 1;
            // One warning per 1,000 drops at most: under a hung server every timed-out call drops one.
            if dropped % 1000 == 1 {
                tracing::warn!(
                    upstream = %self.options.name,
                    dropped,
                    "notifications/cancelled dropped: the upstream is not reading its input"
                );
            }
        }
        true
    }

    /// Sends a notification.
    pub async fn notify(&self, method: &str, params: Option<Value>) -> Result<(), UpstreamError> {
        self.outbound.send(jsonrpc::notification(method, params)).await.map_err(|_| self.shared.ended_or_stopped())
    }

    /// Lists every item of a paginated list, following `nextCursor` until it is absent.
    ///
    /// Cursors are opaque and passed back unchanged; a repeated cursor or more than `max_pages` pages is a
    /// protocol violation rather than an endless loop.
    pub async fn list_all(&self, kind: ListKind) -> Result<Vec<Value>, UpstreamError> {
        self.list_at_most(kind, usize::MAX).await.map(|listed| listed.items)
    }

    /// Like [`Connection::list_all`], but asks for no further page once `max_items` items arrived, so what a
    /// server lists beyond them is never fetched or held (the last page read is kept whole).
    pub async fn list_at_most(&self, kind: ListKind, max_items: usize) -> Result<Listed, UpstreamError> {
        self.list_within(kind, max_items, usize::MAX).await
    }

    /// Like [`Connection::list_at_most`], and also asks for no further page once the items read take `max_bytes`
    /// (estimated, [`crate::jsonrpc::approximate_bytes`]): a server paging without end through large items costs
    /// at most one page beyond the bound, never `max_pages` of them.
    pub async fn list_within(
        &self,
        kind: ListKind,
        max_items: usize,
        max_bytes: usize,
    ) -> Result<Listed, UpstreamError> {
        let mut items = Vec::new();
        let mut bytes = 0usize;
        let mut cursor: Option<String> = None;
        let mut seen_cursors = HashSet::new();
        for _ in 0..self.options.max_pages {
            let params = cursor.as_ref().map(|cursor| json!({"cursor": cursor}));
            let result = self.request(kind.method(), params).await?;
            match result.get(kind.result_key()) {
                Some(Value::Array(page)) => {
                    bytes = bytes.saturating_add(page.iter().map(crate::jsonrpc::approximate_bytes).sum());
                    items.extend(page.iter().cloned());
                }
                _ => {
                    return Err(UpstreamError::Protocol(format!(
                        "the `{}` result has no `{}` array",
                        kind.method(),
                        kind.result_key()
                    )));
                }
            }
            match result.get("nextCursor") {
                Some(Value::String(next)) => {
                    if !seen_cursors.insert(next.clone()) {
                        return Err(UpstreamError::Protocol(format!(
                            "`{}` returned cursor {next:?} twice (pagination loop)",
                            kind.method()
                        )));
                    }
                    if items.len() >= max_items || bytes >= max_bytes {
                        return Ok(Listed { items, unread_pages: true });
                    }
                    cursor = Some(next.clone());
                }
                Some(Value::Null) | None => return Ok(Listed { items, unread_pages: false }),
                Some(_) => return Err(UpstreamError::Protocol("`nextCursor` must be a string".into())),
            }
        }
        Err(UpstreamError::Protocol(format!("`{}` did not end within {} pages", kind.method(), self.options.max_pages)))
    }

    /// Ends the connection politely (stdio: close stdin, SIGTERM, SIGKILL; HTTP: DELETE the session).
    ///
    /// Pending and later requests fail; calling it twice is harmless.
    pub async fn close(&self) {
        self.shutdown.cancel();
        let closer = self.closer.lock().ok().and_then(|mut closer| closer.take());
        if let Some(closer) = closer {
            closer.close().await;
        }
        self.reader.abort();
    }
}

/// Splits a response message into its result, or its error as [`UpstreamError::Rpc`].
pub fn into_result(message: Value) -> Result<Value, UpstreamError> {
    if let Some(error) = message.get("error") {
        return Err(UpstreamError::Rpc {
            method: String::new(),
            code: error.get("code").and_then(Value::as_i64).unwrap_or(codes::INTERNAL_ERROR),
            message: error.get("message").and_then(Value::as_str).unwrap_or("(no message)").to_owned(),
        });
    }
    match message {
        Value::Object(mut object) => Ok(object.remove("result").unwrap_or(Value::Null)),
        _ => Err(UpstreamError::Protocol("a response is not an object".into())),
    }
}

/// Delivers what the transport received: responses to their pending requests, the rest to the event sink.
struct Router {
    outbound: mpsc::WeakSender<Value>,
    shared: Arc<Shared>,
    name: String,
    events: Option<Arc<dyn EventSink>>,
    /// Set while the era probe runs ([`Connection::connect`]).
    probing: Arc<AtomicBool>,
}

impl Router {
    async fn run(self, mut inbound: InboundStream) {
        while let Some(item) = inbound.next().await {
            match item {
                Inbound::Message { message, related } => {
                    let related = related.as_ref().and_then(Value::as_u64);
                    self.route_message(message, related).await;
                }
                Inbound::RequestFailed { id, error } => {
                    if let Some(sender) = id.as_u64().and_then(|id| self.shared.take_pending(id)) {
                        let _ = sender.send(Err(error));
                    }
                }
                Inbound::Ended(error) => {
                    self.end(error).await;
                    return;
                }
            }
        }
        self.end(UpstreamError::Closed { detail: "the transport stopped".into() }).await;
    }

    async fn end(&self, error: UpstreamError) {
        tracing::warn!(upstream = %self.name, %error, "upstream connection ended");
        if let Ok(mut ended) = self.shared.ended.lock() {
            *ended = Some(error.clone());
        }
        let pending = self.shared.pending.take_all();
        for (_, sender) in pending {
            let _ = sender.send(Err(error.clone()));
        }
        if let Some(events) = &self.events
            && !self.probing.load(Ordering::Acquire)
        {
            events.ended(error);
        }
    }

    async fn route_message(&self, message: Value, related: Option<u64>) {
        match classify(&message) {
            MessageKind::Response { id } => match id.as_u64().and_then(|id| self.shared.take_pending(id)) {
                Some(sender) => {
                    let _ = sender.send(Ok(message));
                }
                None => tracing::debug!(upstream = %self.name, %id, "dropping a response to no pending request"),
            },
            MessageKind::Request { id, method } => {
                let responder = Responder::new(id.clone(), self.outbound.clone());
                match &self.events {
                    Some(events) => events.request(message, related, responder),
                    None => answer_alone(method, responder).await,
                }
            }
            MessageKind::Notification { method } => match &self.events {
                Some(events) => events.notification(message, related),
                None if method == "notifications/message" => {
                    let params = message.get("params").cloned().unwrap_or(Value::Null);
                    tracing::info!(upstream = %self.name, %params, "upstream log message");
                }
                None => tracing::debug!(upstream = %self.name, %method, "upstream notification"),
            },
            MessageKind::Invalid(reason) => {
                self.shared.diagnostics.record_non_json(&message.to_string());
                tracing::warn!(upstream = %self.name, %reason, "upstream sent an invalid JSON-RPC message; ignored");
            }
        }
    }
}

/// Answers a server request when nobody relays it: `ping`, an empty `roots/list`, method-not-found otherwise.
async fn answer_alone(method: &str, responder: Responder) {
    match method {
        "ping" => responder.respond(json!({})).await,
        "roots/list" => responder.respond(json!({"roots": []})).await,
        _ => responder.respond_error(codes::METHOD_NOT_FOUND, "toolgate does not relay this request here").await,
    }
}
