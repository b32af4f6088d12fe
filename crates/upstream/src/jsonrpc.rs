//! JSON-RPC 2.0 message shapes on raw JSON: classify what arrived and build what to send.
//!
//! Pure functions over `serde_json::Value`; no IO. Ids toolgate allocates are integers; ids from the peer are kept
//! as the raw JSON value they were sent as.

use serde_json::{Value, json};

/// About how many bytes `value` takes as compact JSON: exact for strings without escapes, close otherwise; never
/// serializes (so a bound on it costs no copy of what it bounds).
pub fn approximate_bytes(value: &Value) -> usize {
    match value {
        Value::Null | Value::Bool(_) => 5,
        Value::Number(_) => 12,
        Value::String(text) => text.len() + 2,
        Value::Array(items) => items.iter().map(approximate_bytes).sum::<usize>() + items.len() + 2,
        Value::Object(members) => {
            members.iter().map(|(key, member)| key.len() + 4 + approximate_bytes(member)).sum::<usize>() + 2
        }
    }
}

/// What kind of JSON-RPC message a value is.
#[derive(Debug, Clone, PartialEq)]
pub enum MessageKind<'a> {
    /// A request: `method` and `id`.
    Request {
        /// The request id as sent.
        id: &'a Value,
        /// The method.
        method: &'a str,
    },
    /// A notification: `method`, no `id`.
    Notification {
        /// The method.
        method: &'a str,
    },
    /// A response: `id` and `result` or `error`.
    Response {
        /// The id it answers.
        id: &'a Value,
    },
    /// Anything else; the reason says what is missing.
    Invalid(&'static str),
}

/// Classifies a JSON value as a JSON-RPC message.
pub fn classify(message: &Value) -> MessageKind<'_> {
    let Some(object) = message.as_object() else {
        return MessageKind::Invalid("a JSON-RPC message must be an object");
    };
    if object.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return MessageKind::Invalid("missing `\"jsonrpc\": \"2.0\"`");
    }
    match (object.get("method"), object.get("id")) {
        (Some(Value::String(method)), Some(id)) if is_valid_id(id) => MessageKind::Request { id, method },
        (Some(Value::String(method)), None) => MessageKind::Notification { method },
        (Some(_), _) => MessageKind::Invalid("`method` must be a string and `id` a string or number"),
        (None, Some(id)) if object.contains_key("result") || object.contains_key("error") => {
            MessageKind::Response { id }
        }
        (None, _) => MessageKind::Invalid("neither a request, a notification nor a response"),
    }
}

fn is_valid_id(id: &Value) -> bool {
    matches!(id, Value::String(_)) || id.as_i64().is_some() || id.as_u64().is_some()
}

/// A request with an integer id.
pub fn request(id: u64, method: &str, params: Option<Value>) -> Value {
    match params {
        Some(params) => json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}),
        None => json!({"jsonrpc": "2.0", "id": id, "method": method}),
    }
}

/// A notification.
pub fn notification(method: &str, params: Option<Value>) -> Value {
    match params {
        Some(params) => json!({"jsonrpc": "2.0", "method": method, "params": params}),
        None => json!({"jsonrpc": "2.0", "method": method}),
    }
}

/// A success response.
pub fn response(id: &Value, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

/// An error response.
pub fn error_response(id: &Value, code: i64, message: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
}

/// JSON-RPC error codes used by MCP.
pub mod codes {
    /// Invalid JSON was received.
    pub const PARSE_ERROR: i64 = -32700;
    /// The message is not a valid request.
    pub const INVALID_REQUEST: i64 = -32600;
    /// The method does not exist or is not available.
    pub const METHOD_NOT_FOUND: i64 = -32601;
    /// Invalid method parameters (also: unknown tool, invalid cursor).
    pub const INVALID_PARAMS: i64 = -32602;
    /// Internal error.
    pub const INTERNAL_ERROR: i64 = -32603;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifies_every_shape() {
        assert!(matches!(classify(&request(1, "ping", None)), MessageKind::Request { method: "ping", .. }));
        assert!(matches!(classify(&notification("x", None)), MessageKind::Notification { method: "x" }));
        assert!(matches!(classify(&response(&json!(1), json!({}))), MessageKind::Response { .. }));
        assert!(matches!(classify(&json!({"jsonrpc": "2.0", "id": null, "method": "m"})), MessageKind::Invalid(_)));
        assert!(matches!(classify(&json!({"id": 1, "result": {}})), MessageKind::Invalid(_)));
        assert!(matches!(classify(&json!([1])), MessageKind::Invalid(_)));
    }
}
