//! Header checks for the Streamable HTTP endpoint: DNS-rebinding protection (`Host`, `Origin`), media types
//! (`Content-Type`, `Accept`), `MCP-Protocol-Version` and `Mcp-Session-Id`, and the [`Rejection`] every failed
//! check turns into (an HTTP status with a JSON-RPC error body).
//!
//! Pure functions over headers: no IO, no session state, no logging of header values (an `Authorization`
//! header must never reach a log, so nothing here formats a header it was not asked about).

use axum::http::header::{ACCEPT, CONTENT_TYPE, HOST, ORIGIN};
use axum::http::{HeaderMap, HeaderValue, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use toolgate_core::rebinding::{host_allowed, origin_allowed};
use toolgate_spec::HttpListenerSpec;

use crate::era::{self, EraError};
use crate::mcp_headers::{PARAM_HEADER_PREFIX, decode_header_value};

/// The header that carries the session id.
pub(super) const SESSION_HEADER: &str = "mcp-session-id";
/// The header that carries the protocol version the client speaks.
pub(super) const VERSION_HEADER: &str = "mcp-protocol-version";
/// Versions of the legacy (initialize-based) era this transport serves, oldest first.
pub(super) const SUPPORTED_VERSIONS: [&str; 3] = ["2025-03-26", "2025-06-18", "2025-11-25"];
/// The version assumed when a client sends no `MCP-Protocol-Version` (what the spec says to assume).
pub(super) const DEFAULT_VERSION: &str = "2025-03-26";

/// JSON-RPC parse error.
pub(super) const PARSE_ERROR: i64 = -32700;
/// JSON-RPC invalid request.
pub(super) const INVALID_REQUEST: i64 = -32600;
/// JSON-RPC internal error.
pub(super) const INTERNAL_ERROR: i64 = -32603;
/// Transport-level failure (the code the reference SDKs use for HTTP rejections).
pub(super) const TRANSPORT_ERROR: i64 = -32000;
/// Unknown or expired session.
pub(super) const SESSION_NOT_FOUND: i64 = -32001;

/// A request the endpoint refuses: the status and the JSON-RPC error that explains it.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Rejection {
    pub(super) status: StatusCode,
    pub(super) code: i64,
    pub(super) message: String,
    /// Extra response headers (`Allow` on 405).
    pub(super) allow: Option<&'static str>,
    /// The `WWW-Authenticate` value to send (on 401, and 403 `insufficient_scope`).
    pub(super) challenge: Option<String>,
    /// Send `Retry-After` with this many seconds (on 503).
    pub(super) retry_after: Option<u64>,
    /// Send `Connection: close`, so the connection ends with this answer (a body that did not arrive in time).
    pub(super) close: bool,
    /// The refused request's id and the error's `data`, when the body was read far enough to know them (boxed:
    /// most rejections come before any body, and a `Rejection` travels in every `Err`).
    pub(super) echo: Option<Box<Echo>>,
}

/// What a rejection of a read request echoes: its id, and the error's `data` when the error defines one.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Echo {
    pub(super) id: Value,
    pub(super) data: Option<Value>,
}

impl Rejection {
    pub(super) fn new(status: StatusCode, code: i64, message: impl Into<String>) -> Self {
        Rejection {
            status,
            code,
            message: message.into(),
            allow: None,
            challenge: None,
            retry_after: None,
            close: false,
            echo: None,
        }
    }

    /// A modern request refused by one of the 2026-07-28 checks: 404 for a removed or unknown method, else 400,
    /// echoing the request's id.
    pub(super) fn era(id: &Value, error: &EraError) -> Self {
        let status = if error.is_not_found() { StatusCode::NOT_FOUND } else { StatusCode::BAD_REQUEST };
        let mut rejection = Rejection::new(status, error.code, error.message.clone());
        rejection.echo = Some(Box::new(Echo { id: id.clone(), data: error.data.clone() }));
        rejection
    }

    pub(super) fn method_not_allowed() -> Self {
        let mut rejection = Rejection::new(
            StatusCode::METHOD_NOT_ALLOWED,
            TRANSPORT_ERROR,
            "method not allowed: use POST, GET or DELETE",
        );
        rejection.allow = Some("GET, POST, DELETE");
        rejection
    }
}

impl IntoResponse for Rejection {
    fn into_response(self) -> Response {
        let mut error = json!({"code": self.code, "message": self.message});
        let Echo { id, data } = self.echo.map(|echo| *echo).unwrap_or(Echo { id: Value::Null, data: None });
        if let Some(data) = data {
            error["data"] = data;
        }
        let body = json!({"jsonrpc": "2.0", "id": id, "error": error}).to_string();
        let mut response = (self.status, [(CONTENT_TYPE, "application/json")], body).into_response();
        if let Some(allow) = self.allow {
            response.headers_mut().insert(header::ALLOW, HeaderValue::from_static(allow));
        }
        if let Some(seconds) = self.retry_after {
            response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(seconds));
        }
        if self.close {
            response.headers_mut().insert(header::CONNECTION, HeaderValue::from_static("close"));
        }
        if let Some(challenge) = self.challenge.and_then(|value| HeaderValue::from_str(&value).ok()) {
            response.headers_mut().insert(header::WWW_AUTHENTICATE, challenge);
        }
        response
    }
}

/// The error that stands in for a response when the session ended before the gateway answered request `id`.
pub(super) fn unanswered(id: &Value) -> Value {
    json!({
        "jsonrpc": "2.0",
        "id": id,
        "error": {"code": INTERNAL_ERROR, "message": "session closed before the request was answered"},
    })
}

/// Checks `Host` (always) and `Origin` (when present) against loopback and the configured extras.
pub(super) fn check_host_and_origin(headers: &HeaderMap, uri: &Uri, spec: &HttpListenerSpec) -> Result<(), Rejection> {
    let forbidden = |what: &str| Rejection::new(StatusCode::FORBIDDEN, TRANSPORT_ERROR, format!("forbidden: {what}"));
    let mut hosts = headers.get_all(HOST).iter();
    let host = match (hosts.next(), hosts.next()) {
        (Some(value), None) => value.to_str().ok(),
        (None, _) => uri.authority().map(|authority| authority.as_str()),
        (Some(_), Some(_)) => None,
    };
    if !host.is_some_and(|host| host_allowed(host, &spec.allowed_hosts)) {
        return Err(forbidden("host not allowed"));
    }
    let mut origins = headers.get_all(ORIGIN).iter();
    match (origins.next(), origins.next()) {
        (None, _) => Ok(()),
        (Some(origin), None) if origin.to_str().is_ok_and(|origin| origin_allowed(origin, &spec.allowed_origins)) => {
            Ok(())
        }
        _ => Err(forbidden("origin not allowed")),
    }
}

/// The media types listed in a header (`type/subtype`, lowercase, parameters dropped).
fn media_types(headers: &HeaderMap, name: header::HeaderName) -> Vec<String> {
    headers
        .get_all(name)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .map(|item| item.split(';').next().unwrap_or_default().trim().to_ascii_lowercase())
        .filter(|item| !item.is_empty())
        .collect()
}

/// POST bodies must be `application/json` (415 otherwise).
pub(super) fn check_content_type(headers: &HeaderMap) -> Result<(), Rejection> {
    if media_types(headers, CONTENT_TYPE) == ["application/json"] {
        Ok(())
    } else {
        Err(Rejection::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            TRANSPORT_ERROR,
            "unsupported media type: Content-Type must be application/json",
        ))
    }
}

/// `Accept` must list every one of `required` (406 otherwise).
pub(super) fn check_accept(headers: &HeaderMap, required: &[&str]) -> Result<(), Rejection> {
    let listed = media_types(headers, ACCEPT);
    if required.iter().all(|media| listed.iter().any(|item| item == media)) {
        Ok(())
    } else {
        Err(Rejection::new(
            StatusCode::NOT_ACCEPTABLE,
            TRANSPORT_ERROR,
            format!("not acceptable: Accept must list {}", required.join(" and ")),
        ))
    }
}

/// True when the client lists `text/event-stream` before `application/json` in `Accept`: it is then answered
/// with an SSE stream even when the response is the only message (the usual order gets the faster JSON answer).
pub(super) fn prefers_event_stream(headers: &HeaderMap) -> bool {
    let listed = media_types(headers, ACCEPT);
    let position = |media: &str| listed.iter().position(|item| item == media);
    matches!((position("text/event-stream"), position("application/json")), (Some(sse), Some(json)) if sse < json)
}

/// The `MCP-Protocol-Version` header: `None` when absent, the version when supported, 400 otherwise.
pub(super) fn protocol_version(headers: &HeaderMap) -> Result<Option<&'static str>, Rejection> {
    let Some(value) = headers.get(VERSION_HEADER) else {
        return Ok(None);
    };
    let value = value.to_str().unwrap_or_default().trim();
    SUPPORTED_VERSIONS.iter().find(|version| **version == value).map(|version| Some(*version)).ok_or_else(|| {
        Rejection::new(
            StatusCode::BAD_REQUEST,
            TRANSPORT_ERROR,
            format!("bad request: unsupported MCP-Protocol-Version (supported: {})", SUPPORTED_VERSIONS.join(", ")),
        )
    })
}

/// The header that names a modern request's method.
const METHOD_HEADER: &str = "mcp-method";
/// The header that names what a modern request addresses (a tool or prompt name, a resource URI).
const NAME_HEADER: &str = "mcp-name";

/// True when the `MCP-Protocol-Version` header names the modern revision (its body is then checked as modern even
/// without `_meta`, so a missing `_meta` is reported as such).
pub(super) fn names_modern_version(headers: &HeaderMap) -> bool {
    headers.get(VERSION_HEADER).is_some_and(|value| value.as_bytes() == era::MODERN_VERSION.as_bytes())
}

/// The 2026-07-28 header checks (after the `_meta` check, before the version check): `MCP-Protocol-Version` and
/// `Mcp-Method` must be present and agree with the body, `Mcp-Name` must agree with the name or URI the body
/// addresses (its `=?base64?...?=` form decoded first); each at most once; -32020 otherwise. The `Mcp-Param-*`
/// headers need the tool's schema: the gateway checks them ([`param_headers`] hands them over).
pub(super) fn check_modern_headers(headers: &HeaderMap, method: &str, params: Option<&Value>) -> Result<(), EraError> {
    let header = |name: &str| headers.get(name).map(|value| value.to_str().unwrap_or_default().trim());
    let mismatch = |what: &str| EraError {
        code: era::HEADER_MISMATCH,
        message: format!("header mismatch: {what} is missing or disagrees with the request body"),
        data: None,
    };
    // A repeated header would be read differently by a reader that takes the first and one that takes the last.
    for (name, shown) in
        [(VERSION_HEADER, "MCP-Protocol-Version"), (METHOD_HEADER, "Mcp-Method"), (NAME_HEADER, "Mcp-Name")]
    {
        if headers.get_all(name).iter().nth(1).is_some() {
            return Err(mismatch(shown));
        }
    }
    if header(VERSION_HEADER) != era::requested_version(params) {
        return Err(mismatch("MCP-Protocol-Version"));
    }
    if header(METHOD_HEADER) != Some(method) {
        return Err(mismatch("Mcp-Method"));
    }
    let key = match method {
        "tools/call" | "prompts/get" => Some("name"),
        "resources/read" => Some("uri"),
        _ => None,
    };
    let named = key.and_then(|key| params?.get(key)?.as_str());
    match (header(NAME_HEADER).map(decode_header_value), named) {
        (Some(Some(value)), Some(named)) if value == named => Ok(()),
        (None, None) => Ok(()),
        _ => Err(mismatch("Mcp-Name")),
    }
}

/// The request's `Mcp-Param-*` headers, names lowercased, in order, repeats kept (the gateway checks them against
/// the called tool's `x-mcp-header` properties). A value that is not visible ASCII is kept as read, lossily: it
/// can only disagree.
pub(super) fn param_headers(headers: &HeaderMap) -> Vec<(String, String)> {
    headers
        .iter()
        .filter(|(name, _)| name.as_str().starts_with(PARAM_HEADER_PREFIX))
        .map(|(name, value)| (name.as_str().to_owned(), String::from_utf8_lossy(value.as_bytes()).trim().to_owned()))
        .collect()
}

/// The `Mcp-Session-Id` header, when present and readable (a non-ASCII value can never name a session).
pub(super) fn session_id(headers: &HeaderMap) -> Result<Option<&str>, Rejection> {
    match headers.get(SESSION_HEADER) {
        None => Ok(None),
        Some(value) => match value.to_str() {
            Ok(id) => Ok(Some(id)),
            Err(_) => Err(session_not_found()),
        },
    }
}

/// 400: a request other than `initialize` without `Mcp-Session-Id`.
pub(super) fn session_missing() -> Rejection {
    Rejection::new(StatusCode::BAD_REQUEST, TRANSPORT_ERROR, "bad request: missing Mcp-Session-Id header")
}

/// 404: an unknown, expired or closed session.
pub(super) fn session_not_found() -> Rejection {
    Rejection::new(StatusCode::NOT_FOUND, SESSION_NOT_FOUND, "session not found")
}
