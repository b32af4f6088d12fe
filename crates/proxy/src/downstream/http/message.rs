//! JSON-RPC framing of one POST body: read it within the size limit, parse it, and tell a request (with its id
//! and method) from a notification or a response.
//!
//! Only what the transport needs: the method is read to spot `initialize`, never interpreted otherwise. Batches
//! (JSON arrays) are refused: no supported protocol version allows them.

use std::time::Duration;

use axum::body::Body;
use axum::http::header::CONTENT_LENGTH;
use axum::http::{HeaderMap, StatusCode};
use bytes::{Bytes, BytesMut};
use futures::StreamExt;
use serde_json::Value;

use super::checks::{INVALID_REQUEST, PARSE_ERROR, Rejection, TRANSPORT_ERROR};

/// What a client message is, as far as framing cares.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Incoming {
    /// A request: it gets an answer on this POST.
    Request {
        /// The client's id (a string or a number).
        id: Value,
        /// The method name.
        method: String,
    },
    /// A notification or a response to a server request: 202, no body.
    NotificationOrResponse,
}

/// Reads the body, refusing (413) one larger than `limit` without holding more than `limit` bytes, and (408, closing
/// the connection) one that has not fully arrived within `timeout`: the header-read timeout ends when the headers
/// are in, and a client trickling a body a byte at a time must not hold a connection slot for as long as it likes.
pub(super) async fn read_body(
    headers: &HeaderMap,
    body: Body,
    limit: usize,
    timeout: Duration,
) -> Result<Bytes, Rejection> {
    tokio::time::timeout(timeout, read_within(headers, body, limit)).await.unwrap_or_else(|_| {
        let mut rejection = Rejection::new(
            StatusCode::REQUEST_TIMEOUT,
            TRANSPORT_ERROR,
            format!(
                "request timeout: the body did not arrive within {} seconds ([limits] header_read_timeout_seconds)",
                timeout.as_secs()
            ),
        );
        rejection.close = true;
        Err(rejection)
    })
}

async fn read_within(headers: &HeaderMap, body: Body, limit: usize) -> Result<Bytes, Rejection> {
    let too_large = || {
        Rejection::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            TRANSPORT_ERROR,
            format!("payload too large: a message may have at most {limit} bytes"),
        )
    };
    let declared = headers.get(CONTENT_LENGTH).and_then(|value| value.to_str().ok()?.trim().parse::<u64>().ok());
    if declared.is_some_and(|length| length > limit as u64) {
        return Err(too_large());
    }
    let mut chunks = body.into_data_stream();
    let mut buffer = BytesMut::new();
    while let Some(chunk) = chunks.next().await {
        let chunk = chunk
            .map_err(|_| Rejection::new(StatusCode::BAD_REQUEST, TRANSPORT_ERROR, "bad request: unreadable body"))?;
        if buffer.len().saturating_add(chunk.len()) > limit {
            return Err(too_large());
        }
        buffer.extend_from_slice(&chunk);
    }
    Ok(buffer.freeze())
}

/// Parses one JSON-RPC message and classifies it.
pub(super) fn parse(bytes: &[u8]) -> Result<(Value, Incoming), Rejection> {
    let invalid = |message: &str| Rejection::new(StatusCode::BAD_REQUEST, INVALID_REQUEST, message);
    let message: Value = serde_json::from_slice(bytes)
        .map_err(|_| Rejection::new(StatusCode::BAD_REQUEST, PARSE_ERROR, "parse error: the body is not valid JSON"))?;
    let object = match &message {
        Value::Object(object) => object,
        Value::Array(_) => return Err(invalid("invalid request: batching is not supported")),
        _ => return Err(invalid("invalid request: expected a JSON-RPC message object")),
    };
    if object.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Err(invalid("invalid request: jsonrpc must be \"2.0\""));
    }
    let id = object.get("id");
    let id_ok = |id: &Value| id.is_string() || id.is_number();
    let incoming = match (object.get("method"), id) {
        (Some(Value::String(method)), Some(id)) if id_ok(id) => {
            Incoming::Request { id: id.clone(), method: method.clone() }
        }
        (Some(Value::String(_)), None) => Incoming::NotificationOrResponse,
        (None, Some(id)) if id_ok(id) && (object.contains_key("result") || object.contains_key("error")) => {
            Incoming::NotificationOrResponse
        }
        _ => return Err(invalid("invalid request: not a JSON-RPC request, notification or response")),
    };
    Ok((message, incoming))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code(body: &str) -> Option<i64> {
        parse(body.as_bytes()).err().map(|rejection| rejection.code)
    }

    #[test]
    fn classifies_and_rejects() {
        assert_eq!(code("{"), Some(PARSE_ERROR));
        assert_eq!(code("[]"), Some(INVALID_REQUEST));
        assert_eq!(code("3"), Some(INVALID_REQUEST));
        assert_eq!(code(r#"{"jsonrpc":"1.0","id":1,"method":"x"}"#), Some(INVALID_REQUEST));
        assert_eq!(code(r#"{"jsonrpc":"2.0","id":null,"method":"x"}"#), Some(INVALID_REQUEST));
        assert_eq!(code(r#"{"jsonrpc":"2.0","id":1}"#), Some(INVALID_REQUEST));
        assert_eq!(code(r#"{"jsonrpc":"2.0","method":7}"#), Some(INVALID_REQUEST));
        let request = parse(br#"{"jsonrpc":"2.0","id":"a","method":"initialize"}"#).map(|(_, incoming)| incoming);
        assert_eq!(request, Ok(Incoming::Request { id: Value::from("a"), method: "initialize".into() }));
        for body in [r#"{"jsonrpc":"2.0","method":"n"}"#, r#"{"jsonrpc":"2.0","id":3,"result":{}}"#] {
            assert_eq!(parse(body.as_bytes()).map(|(_, incoming)| incoming), Ok(Incoming::NotificationOrResponse));
        }
    }
}
