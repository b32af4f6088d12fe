//! A scripted Streamable HTTP server for the transport's tests: raw HTTP/1.1 over loopback, keep-alive, answers
//! chosen per request by the test's script (JSON, an empty status, SSE events, or no answer at all).
//!
//! It records every request as `VERB method` and can be stopped: the port closes and every open connection (a
//! held SSE stream, a request left unanswered) is dropped, as when a server process dies. Test-only; it parses
//! only what toolgate sends.

use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;

/// One request as the script sees it.
pub(super) struct Request {
    /// `POST`, `GET` or `DELETE`.
    pub(super) verb: String,
    /// The JSON-RPC method of a POST, empty otherwise.
    pub(super) method: String,
    /// The JSON-RPC id of a POST (`Null` for a notification or a response).
    pub(super) id: Value,
    /// The `Mcp-Session-Id` header, when sent.
    pub(super) session: Option<String>,
    /// The `Last-Event-ID` header, when sent.
    pub(super) last_event_id: Option<String>,
}

/// What the server answers.
pub(super) enum Reply {
    /// A JSON body (or none, when `Null`) with this status, and `Mcp-Session-Id` when given.
    Json { status: u16, body: Value, session: Option<&'static str> },
    /// An SSE stream with these messages, the event ids `first_id`, `first_id + 1`, ...; `hold_open` keeps it
    /// open until the server stops.
    Events { messages: Vec<Value>, hold_open: bool, first_id: u64 },
    /// No answer: the request waits until the server stops.
    Silence,
}

impl Reply {
    pub(super) fn status(status: u16) -> Reply {
        Reply::Json { status, body: Value::Null, session: None }
    }

    pub(super) fn result(request: &Request, result: Value) -> Reply {
        Reply::Json { status: 200, body: json!({"jsonrpc": "2.0", "id": request.id, "result": result}), session: None }
    }
}

type Script = dyn Fn(&Request) -> Reply + Send + Sync;

/// A running scripted server.
pub(super) struct TestServer {
    /// `http://127.0.0.1:PORT/mcp`.
    pub(super) url: String,
    seen: Arc<Mutex<Vec<String>>>,
    stop: CancellationToken,
}

impl TestServer {
    /// Binds a loopback port and serves `script` until [`TestServer::stop`] or drop.
    pub(super) async fn start(script: impl Fn(&Request) -> Reply + Send + Sync + 'static) -> std::io::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let url = format!("http://{}/mcp", listener.local_addr()?);
        let seen = Arc::new(Mutex::new(Vec::new()));
        let stop = CancellationToken::new();
        let script: Arc<Script> = Arc::new(script);
        let (accept_seen, accept_stop) = (Arc::clone(&seen), stop.clone());
        tokio::spawn(async move {
            loop {
                let accepted = tokio::select! {
                    () = accept_stop.cancelled() => return,
                    accepted = listener.accept() => accepted,
                };
                let Ok((stream, _)) = accepted else { return };
                let (script, seen, stop) = (Arc::clone(&script), Arc::clone(&accept_seen), accept_stop.clone());
                tokio::spawn(async move {
                    tokio::select! {
                        () = stop.cancelled() => {}
                        _ = serve_connection(stream, script, seen, stop.clone()) => {}
                    }
                });
            }
        });
        Ok(TestServer { url, seen, stop })
    }

    /// Every request so far, as `VERB method`.
    pub(super) fn seen(&self) -> Vec<String> {
        self.seen.lock().map(|seen| seen.clone()).unwrap_or_default()
    }

    /// Closes the port and drops every open connection.
    pub(super) fn stop(&self) {
        self.stop.cancel();
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// The usual answers: `initialize` opens session `s1`, notifications and responses get 202, DELETE 200, and
/// anything else `None` (for the test's own script to decide).
pub(super) fn handshake(request: &Request) -> Option<Reply> {
    match (request.verb.as_str(), request.method.as_str()) {
        ("POST", "initialize") => {
            let result = json!({"protocolVersion": "2025-11-25", "capabilities": {}, "serverInfo": {"name": "t"}});
            Some(Reply::Json {
                status: 200,
                body: json!({"jsonrpc": "2.0", "id": request.id, "result": result}),
                session: Some("s1"),
            })
        }
        ("POST", _) if request.id.is_null() => Some(Reply::status(202)),
        ("DELETE", _) => Some(Reply::status(200)),
        _ => None,
    }
}

async fn serve_connection(
    stream: TcpStream,
    script: Arc<Script>,
    seen: Arc<Mutex<Vec<String>>>,
    stop: CancellationToken,
) -> std::io::Result<()> {
    let mut stream = BufReader::new(stream);
    loop {
        let mut request_line = String::new();
        if stream.read_line(&mut request_line).await? == 0 {
            return Ok(());
        }
        let (mut length, mut session, mut last_event_id) = (0, None, None);
        loop {
            let mut header = String::new();
            stream.read_line(&mut header).await?;
            let header = header.trim_end();
            if header.is_empty() {
                break;
            }
            if let Some((name, value)) = header.split_once(':') {
                if name.eq_ignore_ascii_case("content-length") {
                    length = value.trim().parse().unwrap_or(0);
                } else if name.eq_ignore_ascii_case("mcp-session-id") {
                    session = Some(value.trim().to_owned());
                } else if name.eq_ignore_ascii_case("last-event-id") {
                    last_event_id = Some(value.trim().to_owned());
                }
            }
        }
        let mut body = vec![0u8; length];
        stream.read_exact(&mut body).await?;
        let message: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        let request = Request {
            verb: request_line.split(' ').next().unwrap_or_default().to_owned(),
            method: message["method"].as_str().unwrap_or_default().to_owned(),
            id: message.get("id").cloned().unwrap_or(Value::Null),
            session,
            last_event_id,
        };
        if let Ok(mut seen) = seen.lock() {
            seen.push(format!("{} {}", request.verb, request.method).trim_end().to_owned());
        }
        let writer = stream.get_mut();
        match script(&request) {
            Reply::Json { status, body, session } => {
                let body = if body.is_null() { String::new() } else { body.to_string() };
                let session = session.map(|id| format!("Mcp-Session-Id: {id}\r\n")).unwrap_or_default();
                let head = format!(
                    "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\n{session}Content-Length: {}\r\n\r\n",
                    body.len()
                );
                writer.write_all(head.as_bytes()).await?;
                writer.write_all(body.as_bytes()).await?;
            }
            Reply::Events { messages, hold_open, first_id } => {
                // No length: the body ends when the connection closes.
                let head = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n";
                writer.write_all(head.as_bytes()).await?;
                for (id, message) in (first_id..).zip(messages) {
                    writer.write_all(format!("id: {id}\ndata: {message}\n\n").as_bytes()).await?;
                }
                writer.flush().await?;
                if hold_open {
                    stop.cancelled().await;
                }
                return Ok(());
            }
            Reply::Silence => {
                stop.cancelled().await;
                return Ok(());
            }
        }
    }
}
