//! A client connection to one MCP server: the initialize handshake, requests with ids and timeouts, paginated
//! lists, and a polite close.
//!
//! Requests get toolgate's own integer ids; responses are matched back through a pending map, and a response that
//! arrives after its request timed out is dropped. Requests the server sends to us are answered conservatively
//! (`ping`, empty `roots/list`, method-not-found otherwise) until a relay routes them to a downstream client.
//! When the transport ends, every pending request fails with the same error, which says why.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

use crate::endpoint::{ConnectOptions, Endpoint, SUPPORTED_PROTOCOL_VERSIONS};
use crate::error::UpstreamError;
use crate::jsonrpc::{self, MessageKind, classify, codes};
use crate::transport::{Closer, Diagnostics, Inbound, Transport};
use crate::{http, stdio};

type PendingMap = HashMap<u64, oneshot::Sender<Result<Value, UpstreamError>>>;

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
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
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
    pending: Mutex<PendingMap>,
    ended: Mutex<Option<UpstreamError>>,
    diagnostics: Arc<Diagnostics>,
}

impl Shared {
    fn ended(&self) -> Option<UpstreamError> {
        self.ended.lock().ok().and_then(|guard| guard.clone())
    }

    fn take_pending(&self, id: u64) -> Option<oneshot::Sender<Result<Value, UpstreamError>>> {
        self.pending.lock().ok().and_then(|mut pending| pending.remove(&id))
    }
}

/// An initialized connection to one MCP server.
pub struct Connection {
    outbound: mpsc::Sender<Value>,
    shared: Arc<Shared>,
    next_id: AtomicU64,
    closer: Closer,
    reader: JoinHandle<()>,
    initialize: InitializeOutcome,
    options: ConnectOptions,
}

impl Connection {
    /// Starts the transport, runs `initialize` and sends `notifications/initialized`.
    pub async fn connect(endpoint: &Endpoint, options: ConnectOptions) -> Result<Connection, UpstreamError> {
        let transport = match endpoint {
            Endpoint::Stdio { .. } => stdio::start(endpoint, &options)?,
            Endpoint::Http { .. } => http::start(endpoint, &options)?,
        };
        let Transport { outbound, inbound, diagnostics, negotiated_version, closer } = transport;
        let shared = Arc::new(Shared {
            pending: Mutex::new(HashMap::new()),
            ended: Mutex::new(None),
            diagnostics: Arc::clone(&diagnostics),
        });
        let reader =
            tokio::spawn(route_inbound(inbound, outbound.downgrade(), Arc::clone(&shared), options.name.clone()));
        let mut connection = Connection {
            outbound,
            shared,
            next_id: AtomicU64::new(1),
            closer,
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
        let result = self.request_within("initialize", Some(params), self.options.initialize_timeout).await?;
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

    /// Sends a request and waits for its result (the `result` member), within the request timeout.
    pub async fn request(&self, method: &str, params: Option<Value>) -> Result<Value, UpstreamError> {
        self.request_within(method, params, self.options.request_timeout).await
    }

    async fn request_within(
        &self,
        method: &str,
        params: Option<Value>,
        timeout: std::time::Duration,
    ) -> Result<Value, UpstreamError> {
        if let Some(error) = self.shared.ended() {
            return Err(error);
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (sender, receiver) = oneshot::channel();
        if let Ok(mut pending) = self.shared.pending.lock() {
            pending.insert(id, sender);
        }
        if self.outbound.send(jsonrpc::request(id, method, params)).await.is_err() {
            self.shared.take_pending(id);
            return Err(self
                .shared
                .ended()
                .unwrap_or(UpstreamError::Closed { detail: "the transport stopped".into() }));
        }
        match tokio::time::timeout(timeout, receiver).await {
            Ok(Ok(Ok(message))) => into_result(method, message),
            Ok(Ok(Err(error))) => Err(error),
            Ok(Err(_)) => {
                Err(self.shared.ended().unwrap_or(UpstreamError::Closed { detail: "the transport stopped".into() }))
            }
            Err(_) => {
                self.shared.take_pending(id);
                let cancel = json!({"requestId": id, "reason": "toolgate: request timed out"});
                let _ = self.outbound.try_send(jsonrpc::notification("notifications/cancelled", Some(cancel)));
                Err(UpstreamError::Timeout {
                    method: method.to_owned(),
                    after: timeout,
                    diagnostics: self.shared.diagnostics.describe(),
                })
            }
        }
    }

    /// Sends a notification.
    pub async fn notify(&self, method: &str, params: Option<Value>) -> Result<(), UpstreamError> {
        self.outbound.send(jsonrpc::notification(method, params)).await.map_err(|_| {
            self.shared.ended().unwrap_or(UpstreamError::Closed { detail: "the transport stopped".into() })
        })
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
    pub async fn close(self) {
        let Connection { outbound, closer, reader, .. } = self;
        drop(outbound);
        closer.close().await;
        reader.abort();
    }
}

fn into_result(method: &str, message: Value) -> Result<Value, UpstreamError> {
    if let Some(error) = message.get("error") {
        return Err(UpstreamError::Rpc {
            method: method.to_owned(),
            code: error.get("code").and_then(Value::as_i64).unwrap_or(codes::INTERNAL_ERROR),
            message: error.get("message").and_then(Value::as_str).unwrap_or("(no message)").to_owned(),
        });
    }
    match message {
        Value::Object(mut object) => Ok(object.remove("result").unwrap_or(Value::Null)),
        _ => Err(UpstreamError::Protocol("a response is not an object".into())),
    }
}

async fn route_inbound(
    mut inbound: mpsc::Receiver<Inbound>,
    outbound: mpsc::WeakSender<Value>,
    shared: Arc<Shared>,
    name: String,
) {
    while let Some(item) = inbound.recv().await {
        match item {
            Inbound::Message(message) => route_message(message, &outbound, &shared, &name).await,
            Inbound::RequestFailed { id, error } => {
                if let Some(sender) = id.as_u64().and_then(|id| shared.take_pending(id)) {
                    let _ = sender.send(Err(error));
                }
            }
            Inbound::Ended(error) => {
                tracing::warn!(upstream = %name, %error, "upstream connection ended");
                if let Ok(mut ended) = shared.ended.lock() {
                    *ended = Some(error.clone());
                }
                let pending: PendingMap =
                    shared.pending.lock().map(|mut map| std::mem::take(&mut *map)).unwrap_or_default();
                for (_, sender) in pending {
                    let _ = sender.send(Err(error.clone()));
                }
                return;
            }
        }
    }
}

async fn route_message(message: Value, outbound: &mpsc::WeakSender<Value>, shared: &Shared, name: &str) {
    match classify(&message) {
        MessageKind::Response { id } => match id.as_u64().and_then(|id| shared.take_pending(id)) {
            Some(sender) => {
                let _ = sender.send(Ok(message));
            }
            None => {
                tracing::debug!(upstream = %name, %id, "dropping a response to no pending request (late or unknown)")
            }
        },
        MessageKind::Request { id, method } => {
            let reply = match method {
                "ping" => jsonrpc::response(id, json!({})),
                "roots/list" => jsonrpc::response(id, json!({"roots": []})),
                _ => jsonrpc::error_response(id, codes::METHOD_NOT_FOUND, "toolgate does not relay this request here"),
            };
            if let Some(sender) = outbound.upgrade() {
                let _ = sender.send(reply).await;
            }
        }
        MessageKind::Notification { method } => {
            if method == "notifications/message" {
                let params = message.get("params").cloned().unwrap_or(Value::Null);
                tracing::info!(upstream = %name, %params, "upstream log message");
            } else {
                tracing::debug!(upstream = %name, %method, "upstream notification");
            }
        }
        MessageKind::Invalid(reason) => {
            shared.diagnostics.record_non_json(&message.to_string());
            tracing::warn!(upstream = %name, %reason, "upstream sent an invalid JSON-RPC message; ignored");
        }
    }
}
