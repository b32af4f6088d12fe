//! What an upstream sends on its own: notifications and requests to the client side, delivered to whoever runs
//! the connection (the relay), with the id of toolgate's request they belong to when the transport knows it.
//!
//! Without an event sink, [`crate::Connection`] answers server requests conservatively itself (`ping`, empty
//! `roots/list`, method-not-found otherwise) and logs notifications.

use serde_json::Value;
use tokio::sync::mpsc;

use crate::error::UpstreamError;
use crate::jsonrpc;

/// Receives what a server sends on its own: notifications and requests to the client side, with toolgate's id of
/// the request whose HTTP response stream carried them (Streamable HTTP only), and the end of the connection.
///
/// Called synchronously, in arrival order, from the connection's reader: a notification is routed before the
/// response that follows it is delivered, so a client sees a call's progress and log lines before its result.
/// Implementations must not block: queue with `try_send`, or spawn for anything that waits.
pub trait EventSink: Send + Sync + 'static {
    /// A notification (progress, log message, list_changed, resources/updated...).
    fn notification(&self, message: Value, related: Option<u64>);
    /// A request to the client side (elicitation, sampling, roots); answer it through `responder`.
    fn request(&self, message: Value, related: Option<u64>, responder: Responder);
    /// The connection ended; nothing more follows.
    fn ended(&self, error: UpstreamError);
}

/// Answers one request the server sent.
#[derive(Debug)]
pub struct Responder {
    id: Value,
    outbound: mpsc::WeakSender<Value>,
}

impl Responder {
    pub(crate) fn new(id: Value, outbound: mpsc::WeakSender<Value>) -> Responder {
        Responder { id, outbound }
    }

    /// The server's id of the request being answered.
    pub fn request_id(&self) -> &Value {
        &self.id
    }

    /// Sends a success result.
    pub async fn respond(self, result: Value) {
        let message = jsonrpc::response(&self.id, result);
        self.send(message).await;
    }

    /// Sends a JSON-RPC error.
    pub async fn respond_error(self, code: i64, message: &str) {
        let message = jsonrpc::error_response(&self.id, code, message);
        self.send(message).await;
    }

    /// Sends a raw error object (`{code, message, data?}`) as received from a client.
    pub async fn respond_error_object(self, error: Value) {
        let message = serde_json::json!({"jsonrpc": "2.0", "id": self.id, "error": error});
        self.send(message).await;
    }

    async fn send(self, message: Value) {
        if let Some(sender) = self.outbound.upgrade() {
            let _ = sender.send(message).await;
        }
    }
}
