//! A client connection to one MCP server: the initialize handshake, requests with ids and timeouts, cancellation,
//! paginated lists, server-initiated messages, and a polite close.
//!
//! Requests get toolgate's own integer ids; responses are matched back through a pending map, and a response that
//! arrives after its request timed out or was cancelled is dropped. Server-initiated messages go to the event sink
//! given in [`ConnectOptions::events`], or are answered conservatively here. When the transport ends, every pending
//! request fails with the same error, which says why. A `Connection` is shared (`&self` everywhere).

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::endpoint::{ConnectOptions, Endpoint, SUPPORTED_PROTOCOL_VERSIONS};
use crate::error::UpstreamError;
use crate::events::{EventSink, Responder};
use crate::http::DirectPoster;
use crate::jsonrpc::{self, MessageKind, classify, codes};
use crate::transport::{Closer, Diagnostics, Inbound, InboundStream, PendingResponses, ResponseSender, Transport};
use crate::{http, stdio};

/// What the server said in its `initialize` result.
#[derive(Debug, Clone, PartialEq)]
pub struct InitializeOutcome {
    /// The negotiated protocol version.
    pub protocol_version: String,
    /// `serverInfo` (name, version, title...), raw.
    pub server_info: Value,
    /// The server's `capabilities`, raw.
    pub capabilities: Value,
    /// The server's `instructions`, if any.
    pub instructions: Option<String>,
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
    ended: Mutex<Option<UpstreamError>>,
    diagnostics: Arc<Diagnostics>,
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

/// A request sent to the server whose response has not been awaited yet.
#[derive(Debug)]
pub struct PendingRequest {
    id: u64,
    method: String,
    receiver: oneshot::Receiver<Result<Value, UpstreamError>>,
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
    /// Starts the transport, runs `initialize` and sends `notifications/initialized`.
    pub async fn connect(endpoint: &Endpoint, options: ConnectOptions) -> Result<Connection, UpstreamError> {
        let pending = Arc::new(PendingResponses::default());
        let transport = match endpoint {
            Endpoint::Stdio { .. } => stdio::start(endpoint, &options)?,
            Endpoint::Http { .. } => http::start(endpoint, &options, Arc::clone(&pending))?,
        };
        let Transport { outbound, inbound, diagnostics, negotiated_version, shutdown, closer, direct } = transport;
        let shared = Arc::new(Shared { pending, ended: Mutex::new(None), diagnostics: Arc::clone(&diagnostics) });
        let router = Router {
            outbound: outbound.downgrade(),
            shared: Arc::clone(&shared),
            name: options.name.clone(),
            events: options.events.clone(),
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
            },
            options,
        };
        match connection.handshake().await {
            Ok(outcome) => {
                let _ = negotiated_version.set(outcome.protocol_version.clone());
                connection.initialize = outcome;
                connection.notify("notifications/initialized", None).await?;
                Ok(connection)
            }
            Err(error) => {
                connection.close().await;
                Err(error)
            }
        }
    }

    async fn handshake(&self) -> Result<InitializeOutcome, UpstreamError> {
        let params = json!({
            "protocolVersion": self.options.protocol_version,
            "capabilities": self.options.capabilities,
            "clientInfo": self.options.client_info,
        });
        let pending = self.begin_request("initialize", Some(params)).await?;
        let result = into_result(self.wait(pending, self.options.initialize_timeout).await?)?;
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
        })
    }

    /// What the server said at initialize.
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

    /// Sends a request and waits for its result (the `result` member), within the request timeout.
    ///
    /// A JSON-RPC error answer becomes [`UpstreamError::Rpc`].
    pub async fn request(&self, method: &str, params: Option<Value>) -> Result<Value, UpstreamError> {
        let pending = self.begin_request(method, params).await?;
        into_result(self.wait(pending, self.options.request_timeout).await?)
    }

    /// Sends a request and returns at once; [`Connection::wait`] gets the whole response message.
    pub async fn begin_request(&self, method: &str, params: Option<Value>) -> Result<PendingRequest, UpstreamError> {
        if let Some(error) = self.shared.ended() {
            return Err(error);
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (sender, receiver) = oneshot::channel();
        self.shared.pending.insert(id, sender);
        // The router may have ended the connection (and failed every pending request) since the check above: this
        // request would then wait for its timeout, so it is taken back and refused with the reason.
        if let Some(error) = self.shared.ended() {
            self.shared.take_pending(id);
            return Err(error);
        }
        let mut request = jsonrpc::request(id, method, params);
        if let Some(direct) = &self.direct {
            match direct.post(request) {
                Ok(()) => return Ok(PendingRequest { id, method: method.to_owned(), receiver }),
                Err(queued) => request = queued,
            }
        }
        if self.outbound.send(request).await.is_err() {
            self.shared.take_pending(id);
            return Err(self.shared.ended_or_stopped());
        }
        Ok(PendingRequest { id, method: method.to_owned(), receiver })
    }

    /// Waits for the response to a request (the whole message: `result` or `error`), within `timeout`.
    ///
    /// On timeout the request is cancelled upstream and a late response is dropped.
    pub async fn wait(&self, pending: PendingRequest, timeout: Duration) -> Result<Value, UpstreamError> {
        let PendingRequest { id, method, receiver } = pending;
        match tokio::time::timeout(timeout, receiver).await {
            Ok(Ok(outcome)) => outcome,
            // The sender went away: either the connection ended, or the request was cancelled (its entry taken).
            Ok(Err(_)) => Err(self.shared.ended().unwrap_or(UpstreamError::Cancelled)),
            Err(_) => {
                self.cancel(id, "toolgate: request timed out").await;
                Err(UpstreamError::Timeout { method, after: timeout, diagnostics: self.shared.diagnostics.describe() })
            }
        }
    }

    /// Cancels a pending request: `notifications/cancelled` goes upstream and a late response is dropped.
    pub async fn cancel(&self, id: u64, reason: &str) {
        if self.shared.take_pending(id).is_some() {
            let params = json!({"requestId": id, "reason": reason});
            let _ = self.outbound.send(jsonrpc::notification("notifications/cancelled", Some(params))).await;
        }
    }

    /// Cancels a pending request without waiting: the pending entry is taken at once (so a late response is
    /// dropped and a second cancel is a no-op) and `notifications/cancelled` is queued. Returns whether the request
    /// was still pending.
    pub fn cancel_soon(&self, id: u64, reason: &str) -> bool {
        if self.shared.take_pending(id).is_none() {
            return false;
        }
        let params = json!({"requestId": id, "reason": reason});
        let message = jsonrpc::notification("notifications/cancelled", Some(params));
        if let Err(mpsc::error::TrySendError::Full(message)) = self.outbound.try_send(message) {
            let outbound = self.outbound.clone();
            tokio::spawn(async move {
                let _ = outbound.send(message).await;
            });
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
        let mut items = Vec::new();
        let mut cursor: Option<String> = None;
        let mut seen_cursors = HashSet::new();
        for _ in 0..self.options.max_pages {
            let params = cursor.as_ref().map(|cursor| json!({"cursor": cursor}));
            let result = self.request(kind.method(), params).await?;
            match result.get(kind.result_key()) {
                Some(Value::Array(page)) => items.extend(page.iter().cloned()),
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
                    cursor = Some(next.clone());
                }
                Some(Value::Null) | None => return Ok(items),
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
        if let Some(events) = &self.events {
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
