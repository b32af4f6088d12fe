//! The benchmark's MCP client: the same code drives the direct and the relayed path, so differences come from
//! what sits between client and server.
//!
//! Over stdio, [`StdioClient`] writes raw JSON-RPC lines to a child's stdin and matches the lines on its stdout to
//! waiting callers through an id → oneshot map, so any number of requests can be in flight. Over HTTP, each worker
//! owns one keep-alive HTTP/1.1 connection ([`HttpConn`], bare hyper) and all workers of a session share its
//! `Mcp-Session-Id`; a reply is read as JSON or, if a server chooses SSE, from the stream's `data:` lines.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::SendRequest;
use hyper::header::{ACCEPT, CONTENT_TYPE, HOST};
use hyper::{Method, Request, StatusCode};
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, BufWriter};
use tokio::process::{ChildStdin, ChildStdout};
use tokio::sync::{mpsc, oneshot};

use crate::BoxError;

/// The protocol version the client offers.
pub(crate) const PROTOCOL_VERSION: &str = "2025-11-25";
/// The session-less revision, spoken per request by the modern workers.
pub(crate) const MODERN_VERSION: &str = "2026-07-28";
const SESSION_HEADER: &str = "mcp-session-id";

type Pending = Arc<Mutex<HashMap<u64, oneshot::Sender<Value>>>>;

/// A JSON-RPC client over a child's stdin/stdout; cheap to share between tasks.
pub(crate) struct StdioClient {
    lines: mpsc::UnboundedSender<Vec<u8>>,
    pending: Pending,
    next_id: AtomicU64,
}

impl StdioClient {
    /// Starts the writer and reader tasks over the child's pipes.
    pub(crate) fn new(stdin: ChildStdin, stdout: ChildStdout) -> Arc<Self> {
        let (lines, receiver) = mpsc::unbounded_channel();
        let pending: Pending = Arc::default();
        tokio::spawn(write_lines(stdin, receiver));
        tokio::spawn(read_lines(stdout, pending.clone()));
        Arc::new(StdioClient { lines, pending, next_id: AtomicU64::new(1) })
    }

    /// Allocates a request id.
    pub(crate) fn next_id(&self) -> u64 {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }

    /// Sends a request serialized with `id` and waits for its response.
    pub(crate) async fn request(&self, id: u64, line: Vec<u8>) -> Result<Value, BoxError> {
        let (sender, receiver) = oneshot::channel();
        lock(&self.pending).insert(id, sender);
        if self.lines.send(line).is_err() {
            lock(&self.pending).remove(&id);
            return Err("the server's stdin is closed".into());
        }
        receiver.await.map_err(|_| "the server's stdout closed before the response".into())
    }

    /// Sends a notification.
    pub(crate) fn notify(&self, line: Vec<u8>) -> Result<(), BoxError> {
        self.lines.send(line).map_err(|_| "the server's stdin is closed".into())
    }

    /// `initialize`, `notifications/initialized`, then `tools/list`: returns the echo tool's name.
    pub(crate) async fn handshake(&self) -> Result<String, BoxError> {
        let id = self.next_id();
        let reply = self.request(id, initialize_line(id)).await?;
        result_of(reply)?;
        self.notify(initialized_line())?;
        let id = self.next_id();
        let reply = self.request(id, line(&json!({"jsonrpc": "2.0", "id": id, "method": "tools/list"}))).await?;
        echo_tool(&result_of(reply)?)
    }
}

fn lock(pending: &Pending) -> std::sync::MutexGuard<'_, HashMap<u64, oneshot::Sender<Value>>> {
    pending.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

async fn write_lines(stdin: ChildStdin, mut receiver: mpsc::UnboundedReceiver<Vec<u8>>) {
    let mut writer = BufWriter::with_capacity(1 << 16, stdin);
    while let Some(mut next) = receiver.recv().await {
        loop {
            if writer.write_all(&next).await.is_err() {
                return;
            }
            match receiver.try_recv() {
                Ok(more) => next = more,
                Err(_) => break,
            }
        }
        if writer.flush().await.is_err() {
            return;
        }
    }
}

async fn read_lines(stdout: ChildStdout, pending: Pending) {
    let mut reader = BufReader::with_capacity(1 << 16, stdout);
    let mut line = Vec::with_capacity(4096);
    loop {
        line.clear();
        match reader.read_until(b'\n', &mut line).await {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        let Ok(message) = serde_json::from_slice::<Value>(&line) else { continue };
        if message.get("method").is_some() {
            continue;
        }
        let Some(id) = message.get("id").and_then(Value::as_u64) else { continue };
        if let Some(waiter) = lock(&pending).remove(&id) {
            let _ = waiter.send(message);
        }
    }
    lock(&pending).clear();
}

/// One keep-alive HTTP/1.1 connection to an MCP endpoint.
pub(crate) struct HttpConn {
    sender: SendRequest<Full<Bytes>>,
    addr: SocketAddr,
    host: String,
    path: String,
}

/// What a POST got back.
pub(crate) struct HttpReply {
    pub(crate) status: StatusCode,
    pub(crate) session: Option<String>,
    pub(crate) message: Option<Value>,
}

impl HttpConn {
    /// Opens a connection (with `TCP_NODELAY`) to `addr`; requests go to `path`.
    pub(crate) async fn connect(addr: SocketAddr, path: &str) -> Result<Self, BoxError> {
        let stream = tokio::net::TcpStream::connect(addr).await?;
        stream.set_nodelay(true)?;
        let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
        tokio::spawn(async move {
            let _ = connection.await;
        });
        Ok(HttpConn { sender, addr, host: addr.to_string(), path: path.to_owned() })
    }

    /// A fresh connection to the same endpoint (after a request was abandoned on this one).
    pub(crate) async fn reconnect(&mut self) -> Result<(), BoxError> {
        *self = HttpConn::connect(self.addr, &self.path).await?;
        Ok(())
    }

    /// POSTs one message; for a request (`id` given) returns the response whose id matches.
    pub(crate) async fn post(
        &mut self,
        session: Option<&str>,
        id: Option<u64>,
        body: Vec<u8>,
    ) -> Result<HttpReply, BoxError> {
        self.post_with(session, id, body, &[("mcp-protocol-version", PROTOCOL_VERSION)]).await
    }

    /// A 2026-07-28 request (no session; `_meta` in `body`) with its routing headers: the version, `Mcp-Method`
    /// and, when the method names something, `Mcp-Name`.
    pub(crate) async fn request_modern(
        &mut self,
        id: u64,
        method: &str,
        name: Option<&str>,
        body: Vec<u8>,
    ) -> Result<Value, BoxError> {
        let mut headers = vec![("mcp-protocol-version", MODERN_VERSION), ("mcp-method", method)];
        if let Some(name) = name {
            headers.push(("mcp-name", name));
        }
        let reply = self.post_with(None, Some(id), body, &headers).await?;
        match reply.message {
            Some(message) => Ok(message),
            None => Err(format!("HTTP {} instead of a response", reply.status).into()),
        }
    }

    async fn post_with(
        &mut self,
        session: Option<&str>,
        id: Option<u64>,
        body: Vec<u8>,
        headers: &[(&str, &str)],
    ) -> Result<HttpReply, BoxError> {
        let mut request = Request::builder()
            .method(Method::POST)
            .uri(self.path.as_str())
            .header(HOST, self.host.as_str())
            .header(ACCEPT, "application/json, text/event-stream")
            .header(CONTENT_TYPE, "application/json");
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        if let Some(session) = session {
            request = request.header(SESSION_HEADER, session);
        }
        let request = request.body(Full::new(Bytes::from(body)))?;
        self.sender.ready().await?;
        let response = self.sender.send_request(request).await?;
        let status = response.status();
        let header = |name| response.headers().get(name).and_then(|value| value.to_str().ok()).map(str::to_owned);
        let session = header(SESSION_HEADER);
        let sse = header(CONTENT_TYPE.as_str()).is_some_and(|kind| kind.starts_with("text/event-stream"));
        let body = response.into_body().collect().await?.to_bytes();
        let message = match id {
            Some(id) if status.is_success() => {
                Some(if sse { from_sse(&body, id)? } else { serde_json::from_slice(&body)? })
            }
            _ => None,
        };
        Ok(HttpReply { status, session, message })
    }

    /// A request that must succeed with a message.
    pub(crate) async fn request(&mut self, session: Option<&str>, id: u64, body: Vec<u8>) -> Result<Value, BoxError> {
        let reply = self.post(session, Some(id), body).await?;
        match reply.message {
            Some(message) => Ok(message),
            None => Err(format!("HTTP {} instead of a response", reply.status).into()),
        }
    }

    /// Opens a session: `initialize` (returns the session id), `notifications/initialized`, `tools/list` (returns the
    /// echo tool's name).
    pub(crate) async fn open_session(&mut self) -> Result<(String, String), BoxError> {
        let reply = self.post(None, Some(0), initialize_line(0)).await?;
        let Some(message) = reply.message else {
            return Err(format!("initialize got HTTP {}", reply.status).into());
        };
        result_of(message)?;
        let session = reply.session.ok_or("initialize was answered without an Mcp-Session-Id")?;
        let ack = self.post(Some(&session), None, initialized_line()).await?;
        if !ack.status.is_success() {
            return Err(format!("notifications/initialized got HTTP {}", ack.status).into());
        }
        let list = self.request(Some(&session), 1, line(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})));
        let tool = echo_tool(&result_of(list.await?)?)?;
        Ok((session, tool))
    }
}

/// The first SSE `data:` payload that is the response with this id.
fn from_sse(body: &[u8], id: u64) -> Result<Value, BoxError> {
    let text = std::str::from_utf8(body)?;
    for data in text.lines().filter_map(|line| line.strip_prefix("data:")) {
        let data = data.trim();
        if data.is_empty() {
            continue;
        }
        let message: Value = serde_json::from_str(data)?;
        if message.get("id").and_then(Value::as_u64) == Some(id) && message.get("method").is_none() {
            return Ok(message);
        }
    }
    Err("the SSE stream ended without the response".into())
}

fn line(message: &Value) -> Vec<u8> {
    let mut line = serde_json::to_vec(message).unwrap_or_default();
    line.push(b'\n');
    line
}

fn initialize_line(id: u64) -> Vec<u8> {
    line(&json!({"jsonrpc": "2.0", "id": id, "method": "initialize", "params": {
        "protocolVersion": PROTOCOL_VERSION,
        "capabilities": {},
        "clientInfo": {"name": "toolgate-bench", "version": env!("CARGO_PKG_VERSION")},
    }}))
}

fn initialized_line() -> Vec<u8> {
    line(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
}

/// A `tools/call` of `tool` with `{"text": text}`, as one line.
pub(crate) fn call_line(id: u64, tool: &str, text: &str) -> Vec<u8> {
    line(
        &json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": tool, "arguments": {"text": text}}}),
    )
}

/// The `_meta` every 2026-07-28 request carries.
fn modern_meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": MODERN_VERSION,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "toolgate-bench", "version": env!("CARGO_PKG_VERSION")},
    })
}

/// A 2026-07-28 `tools/call` of `tool` with `{"text": text}`, as one line.
pub(crate) fn modern_call_line(id: u64, tool: &str, text: &str) -> Vec<u8> {
    line(&json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                 "params": {"name": tool, "arguments": {"text": text}, "_meta": modern_meta()}}))
}

/// The echo tool's name as a 2026-07-28 `tools/list` on `conn` shows it.
pub(crate) async fn modern_echo_tool(conn: &mut HttpConn) -> Result<String, BoxError> {
    let body = line(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": modern_meta()}}));
    let list = conn.request_modern(1, "tools/list", None, body).await?;
    echo_tool(&result_of(list)?)
}

/// A response's `result`, or its error as an error.
pub(crate) fn result_of(mut message: Value) -> Result<Value, BoxError> {
    if let Some(error) = message.get("error") {
        return Err(format!("JSON-RPC error: {error}").into());
    }
    match message.get_mut("result") {
        Some(result) => Ok(result.take()),
        None => Err(format!("not a response: {message}").into()),
    }
}

/// Checks a `tools/call` response: a result, not `isError`, with the text echoed back.
pub(crate) fn check_echo(message: Value, text: &str) -> Result<(), BoxError> {
    let result = result_of(message)?;
    if result.get("isError").and_then(Value::as_bool) == Some(true) {
        return Err(format!("the tool failed: {result}").into());
    }
    let echoed = result.pointer("/content/0/text").and_then(Value::as_str);
    if echoed != Some(text) {
        return Err(format!("unexpected result: {result}").into());
    }
    Ok(())
}

/// The name of the listed tool that is the echo tool (`echo`, or `PREFIX_echo` behind a gateway).
fn echo_tool(list: &Value) -> Result<String, BoxError> {
    let tools = list.get("tools").and_then(Value::as_array).ok_or("tools/list result without tools")?;
    tools
        .iter()
        .filter_map(|tool| tool.get("name").and_then(Value::as_str))
        .find(|name| *name == "echo" || name.ends_with("_echo") || name.ends_with(".echo"))
        .map(str::to_owned)
        .ok_or_else(|| format!("no echo tool in {list}").into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_response_in_an_sse_body() {
        let body =
            b"id: 1\ndata:\n\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\"}\n\n\
data: {\"jsonrpc\":\"2.0\",\"id\":5,\"result\":{}}\n\n";
        let message = from_sse(body, 5).unwrap_or_default();
        assert_eq!(message["id"], 5);
        assert!(from_sse(body, 6).is_err());
    }

    #[test]
    fn checks_echo_results() {
        let good = json!({"jsonrpc": "2.0", "id": 1, "result": {"content": [{"type": "text", "text": "x"}]}});
        assert!(check_echo(good, "x").is_ok());
        let failed = json!({"jsonrpc": "2.0", "id": 1, "result": {"content": [], "isError": true}});
        assert!(check_echo(failed, "x").is_err());
        let error = json!({"jsonrpc": "2.0", "id": 1, "error": {"code": -1, "message": "no"}});
        assert!(check_echo(error, "x").is_err());
    }

    #[test]
    fn finds_prefixed_echo_tools() {
        let list = json!({"tools": [{"name": "other"}, {"name": "u3_echo"}]});
        assert_eq!(echo_tool(&list).unwrap_or_default(), "u3_echo");
    }
}
