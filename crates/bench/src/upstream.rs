//! `toolgate-bench upstream`: a deliberately small and fast MCP server with one tool, `echo`.
//!
//! It answers `initialize`, `ping`, `tools/list` and `tools/call` and ignores notifications, on raw `serde_json`
//! values with no SDK, so that its own cost per call stays far below what is being measured (the relay's). Over
//! stdio it is a synchronous loop on one thread: one compact JSON object per line, flushed when no more input is
//! buffered. With `--http ADDR` it serves Streamable HTTP at `/mcp` on axum, answering every request with JSON
//! (never SSE), issuing an `Mcp-Session-Id` at `initialize` and requiring it afterwards; its first stdout line is
//! `listening on ADDR` so a parent can learn the port.

use std::io::{BufRead, BufReader, BufWriter, Write};
use std::net::SocketAddr;
use std::os::fd::AsFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::header::CONTENT_TYPE;
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::serve::ListenerExt;
use serde_json::{Value, json};

use crate::BoxError;

/// The protocol versions this server accepts as offered; anything else gets a counter-offer of the newest.
const VERSIONS: &[&str] = &["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"];
const SESSION_HEADER: &str = "mcp-session-id";

/// Serves MCP on stdin/stdout until stdin closes.
pub(crate) fn serve_stdio() -> Result<(), BoxError> {
    // Own handles on fds 0 and 1 so the buffers are ours: `buffer()` tells whether more input is already here.
    let input = std::fs::File::from(std::io::stdin().as_fd().try_clone_to_owned()?);
    let output = std::fs::File::from(std::io::stdout().as_fd().try_clone_to_owned()?);
    let mut reader = BufReader::with_capacity(1 << 16, input);
    let mut writer = BufWriter::with_capacity(1 << 16, output);
    let mut line = Vec::with_capacity(4096);
    loop {
        line.clear();
        if reader.read_until(b'\n', &mut line)? == 0 {
            break;
        }
        if let Ok(message) = serde_json::from_slice::<Value>(&line)
            && let Some(reply) = handle(&message)
        {
            serde_json::to_writer(&mut writer, &reply)?;
            writer.write_all(b"\n")?;
        }
        if reader.buffer().is_empty() {
            writer.flush()?;
        }
    }
    writer.flush()?;
    Ok(())
}

/// Serves Streamable HTTP at `http://ADDR/mcp` until killed; prints `listening on ADDR` first.
pub(crate) async fn serve_http(addr: SocketAddr) -> Result<(), BoxError> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let local = listener.local_addr()?;
    {
        let mut stdout = std::io::stdout().lock();
        writeln!(stdout, "listening on {local}")?;
        stdout.flush()?;
    }
    let state = Arc::new(AtomicU64::new(1));
    let router = Router::new().route("/mcp", post(post_message).get(no_stream).delete(end_session)).with_state(state);
    let listener = listener.tap_io(|stream| {
        let _ = stream.set_nodelay(true);
    });
    axum::serve(listener, router).await?;
    Ok(())
}

async fn post_message(State(next_session): State<Arc<AtomicU64>>, headers: HeaderMap, body: Bytes) -> Response {
    let Ok(message) = serde_json::from_slice::<Value>(&body) else {
        return (StatusCode::BAD_REQUEST, "body is not JSON").into_response();
    };
    let initialize = message.get("method").and_then(Value::as_str) == Some("initialize");
    if !initialize && !headers.contains_key(SESSION_HEADER) {
        return (StatusCode::BAD_REQUEST, "missing Mcp-Session-Id").into_response();
    }
    let Some(reply) = handle(&message) else {
        return StatusCode::ACCEPTED.into_response();
    };
    let body = match serde_json::to_vec(&reply) {
        Ok(body) => body,
        Err(_) => return StatusCode::INTERNAL_SERVER_ERROR.into_response(),
    };
    let mut response =
        (StatusCode::OK, [(CONTENT_TYPE, HeaderValue::from_static("application/json"))], body).into_response();
    if initialize {
        let id = format!("bench-{:016x}", next_session.fetch_add(1, Ordering::Relaxed));
        if let Ok(value) = HeaderValue::from_str(&id) {
            response.headers_mut().insert(SESSION_HEADER, value);
        }
    }
    response
}

/// This server sends nothing unsolicited, so it offers no GET stream (which the spec allows with 405).
async fn no_stream() -> StatusCode {
    StatusCode::METHOD_NOT_ALLOWED
}

async fn end_session() -> StatusCode {
    StatusCode::OK
}

/// The reply to one message, or `None` for notifications and responses.
fn handle(message: &Value) -> Option<Value> {
    let id = message.get("id")?;
    let method = message.get("method").and_then(Value::as_str)?;
    let params = message.get("params");
    let result = match method {
        "initialize" => {
            let offered = params.and_then(|params| params.get("protocolVersion")).and_then(Value::as_str);
            let version = offered.filter(|offered| VERSIONS.contains(offered)).unwrap_or("2025-11-25");
            json!({
                "protocolVersion": version,
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "toolgate-bench-upstream", "version": env!("CARGO_PKG_VERSION")},
            })
        }
        "ping" => json!({}),
        "tools/list" => json!({"tools": [{
            "name": "get_echo",
            "title": "Get echo",
            "description": "Gets the given text back unchanged; reads nothing else and changes nothing.",
            "inputSchema": {
                "type": "object",
                "properties": {"text": {"type": "string", "description": "The text to return."}},
                "required": ["text"],
            },
            "annotations": {"readOnlyHint": true, "destructiveHint": false, "idempotentHint": true, "openWorldHint": false},
        }]}),
        "tools/call" => {
            let name = params.and_then(|params| params.get("name")).and_then(Value::as_str);
            if name != Some("get_echo") {
                return Some(error(id, -32602, "unknown tool"));
            }
            let text = params
                .and_then(|params| params.get("arguments"))
                .and_then(|arguments| arguments.get("text"))
                .and_then(Value::as_str)
                .unwrap_or_default();
            json!({"content": [{"type": "text", "text": text}], "isError": false})
        }
        _ => return Some(error(id, -32601, "method not found")),
    };
    Some(json!({"jsonrpc": "2.0", "id": id, "result": result}))
}

fn error(id: &Value, code: i64, message: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn echoes_and_ignores_notifications() {
        let call = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
            "params": {"name": "get_echo", "arguments": {"text": "hi"}}});
        let reply = handle(&call).unwrap_or_default();
        assert_eq!(reply["id"], 7);
        assert_eq!(reply["result"]["content"][0]["text"], "hi");
        assert!(handle(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"})).is_none());
        let unknown = handle(&json!({"jsonrpc": "2.0", "id": 1, "method": "nope"})).unwrap_or_default();
        assert_eq!(unknown["error"]["code"], -32601);
    }

    #[test]
    fn counter_offers_unknown_versions() {
        let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": "1999"}});
        let reply = handle(&init).unwrap_or_default();
        assert_eq!(reply["result"]["protocolVersion"], "2025-11-25");
    }
}
