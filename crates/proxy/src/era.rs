//! The protocol era of one client request: legacy (a session opened by `initialize`, protocol 2025-03-26 to
//! 2025-11-25) or modern (2026-07-28: no session, every request carries its own `_meta`).
//!
//! Pure functions over one request's method and params, shared by both transports and the gateway: which era a
//! request belongs to, the body checks a modern request must pass (in the spec's order, first failure wins), and
//! the envelope every modern answer gets (`resultType`, toolgate's serverInfo, resource-not-found as -32602). It
//! holds no state and never changes a legacy request or answer: the era only changes the envelope, each method
//! keeps one code path.

use serde_json::{Value, json};

/// The modern protocol version toolgate serves.
pub(crate) const MODERN_VERSION: &str = "2026-07-28";
/// Every version toolgate serves, both eras, oldest first (what `server/discover` and -32022 list).
pub(crate) const ALL_VERSIONS: [&str; 4] = ["2025-03-26", "2025-06-18", "2025-11-25", MODERN_VERSION];
/// The `_meta` key of a modern request's protocol version.
pub(crate) const META_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
/// The `_meta` key of a modern request's client capabilities.
pub(crate) const META_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
/// The `_meta` key of the server's identity on every modern result.
pub(crate) const META_SERVER_INFO: &str = "io.modelcontextprotocol/serverInfo";

/// A header disagrees with the body, or is missing (2026-07-28).
pub(crate) const HEADER_MISMATCH: i64 = -32020;
/// The requested protocol version is not served (2026-07-28).
pub(crate) const UNSUPPORTED_VERSION: i64 = -32022;
/// JSON-RPC invalid params.
const INVALID_PARAMS: i64 = -32602;
/// JSON-RPC method not found.
pub(crate) const METHOD_NOT_FOUND: i64 = -32601;
/// The legacy error code for an unknown resource, which a modern answer states as invalid params.
const LEGACY_RESOURCE_NOT_FOUND: i64 = -32002;

/// Methods the 2026-07-28 revision removed: a modern request for one is answered as an unknown method.
const REMOVED_METHODS: [&str; 6] = [
    "initialize",
    "ping",
    "logging/setLevel",
    "resources/subscribe",
    "resources/unsubscribe",
    "notifications/roots/list_changed",
];

/// Why a modern request is refused before any method runs: the JSON-RPC error (and, over HTTP, 400 or 404).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct EraError {
    /// The JSON-RPC error code.
    pub(crate) code: i64,
    /// The message.
    pub(crate) message: String,
    /// The error's `data`, when the spec defines one.
    pub(crate) data: Option<Value>,
}

impl EraError {
    fn new(code: i64, message: impl Into<String>) -> Self {
        EraError { code, message: message.into(), data: None }
    }

    /// True for the errors HTTP answers with 404 rather than 400.
    pub(crate) fn is_not_found(&self) -> bool {
        self.code == METHOD_NOT_FOUND
    }

    /// The JSON-RPC error response to request `id`.
    pub(crate) fn response(&self, id: &Value) -> Value {
        let mut error = json!({"code": self.code, "message": self.message});
        if let Some(data) = &self.data {
            error["data"] = data.clone();
        }
        json!({"jsonrpc": "2.0", "id": id, "error": error})
    }
}

/// The request's `_meta`, when it is an object.
fn meta(params: Option<&Value>) -> Option<&serde_json::Map<String, Value>> {
    params?.get("_meta")?.as_object()
}

/// True when the request's body says it is modern: its `_meta` carries the protocol version or the client
/// capabilities (a legacy `_meta` holds only a progress token and the like, never these keys).
pub(crate) fn is_modern(params: Option<&Value>) -> bool {
    meta(params).is_some_and(|meta| meta.contains_key(META_VERSION) || meta.contains_key(META_CAPABILITIES))
}

/// The version a modern request's `_meta` names.
pub(crate) fn requested_version(params: Option<&Value>) -> Option<&str> {
    meta(params)?.get(META_VERSION)?.as_str()
}

/// Step one of the spec's order: `_meta` must carry the version and the client capabilities (`clientInfo` is
/// optional).
pub(crate) fn check_meta(params: Option<&Value>) -> Result<(), EraError> {
    let Some(meta) = meta(params) else {
        return Err(EraError::new(INVALID_PARAMS, "invalid params: a 2026-07-28 request needs `_meta`"));
    };
    if !meta.get(META_VERSION).is_some_and(Value::is_string) {
        return Err(EraError::new(INVALID_PARAMS, format!("invalid params: `_meta` needs `{META_VERSION}`")));
    }
    if !meta.get(META_CAPABILITIES).is_some_and(Value::is_object) {
        return Err(EraError::new(INVALID_PARAMS, format!("invalid params: `_meta` needs `{META_CAPABILITIES}`")));
    }
    Ok(())
}

/// The steps after the headers: the version must be served (-32022 with `data{supported, requested}`), the method
/// must not be one the revision removed (-32601).
pub(crate) fn check_version_and_method(method: &str, params: Option<&Value>) -> Result<(), EraError> {
    let requested = requested_version(params).unwrap_or_default();
    if requested != MODERN_VERSION {
        let mut error = EraError::new(UNSUPPORTED_VERSION, format!("unsupported protocol version: {requested}"));
        error.data = Some(json!({"supported": ALL_VERSIONS, "requested": requested}));
        return Err(error);
    }
    if REMOVED_METHODS.contains(&method) {
        return Err(EraError::new(METHOD_NOT_FOUND, format!("method not found: {method} (removed in 2026-07-28)")));
    }
    Ok(())
}

/// Every body check of a modern request, in order (the transports add their header checks between the two).
pub(crate) fn check_body(method: &str, params: Option<&Value>) -> Result<(), EraError> {
    check_meta(params)?;
    check_version_and_method(method, params)
}

/// toolgate's own identity, as `initialize` and every modern result state it.
pub(crate) fn server_info() -> Value {
    json!({"name": "toolgate", "title": "toolgate", "version": env!("CARGO_PKG_VERSION")})
}

/// The methods whose complete results carry caching hints (`ttlMs`, `cacheScope`).
const CACHEABLE: [&str; 6] =
    ["server/discover", "tools/list", "prompts/list", "resources/list", "resources/templates/list", "resources/read"];

/// The modern envelope around the gateway's answer to a modern request: a result gets `resultType: "complete"`
/// (unless it states its own) and toolgate's serverInfo in `_meta`; a cacheable one gets `ttlMs: 0` and
/// `cacheScope: "private"` unless it states its own, because toolgate's lists depend on the caller's policy and
/// change with pins and reloads it cannot announce to a client that holds no session. An unknown resource (legacy
/// -32002) becomes -32602 with the `uri` in `data`. Anything else passes unchanged.
pub(crate) fn envelope(mut response: Value, method: &str, uri: Option<&str>) -> Value {
    if let Some(result) = response.get_mut("result").and_then(Value::as_object_mut) {
        result.entry("resultType").or_insert_with(|| json!("complete"));
        if CACHEABLE.contains(&method) && result.get("resultType") == Some(&json!("complete")) {
            result.entry("ttlMs").or_insert_with(|| json!(0));
            result.entry("cacheScope").or_insert_with(|| json!("private"));
        }
        let meta = result.entry("_meta").or_insert_with(|| json!({}));
        if let Some(meta) = meta.as_object_mut() {
            meta.insert(META_SERVER_INFO.to_owned(), server_info());
        }
    } else if let Some(error) = response.get_mut("error").and_then(Value::as_object_mut)
        && error.get("code").and_then(Value::as_i64) == Some(LEGACY_RESOURCE_NOT_FOUND)
    {
        error.insert("code".to_owned(), json!(INVALID_PARAMS));
        if let Some(uri) = uri {
            error.insert("data".to_owned(), json!({"uri": uri}));
        }
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    fn modern(meta: Value) -> Value {
        json!({"_meta": meta})
    }

    #[test]
    fn the_body_checks_run_in_the_spec_order() {
        let no_caps = modern(json!({META_VERSION: "2099-01-01"}));
        assert_eq!(check_body("tools/list", Some(&no_caps)).err().map(|error| error.code), Some(INVALID_PARAMS));
        let future = modern(json!({META_VERSION: "2099-01-01", META_CAPABILITIES: {}}));
        let error = check_body("ping", Some(&future)).err();
        assert_eq!(error.as_ref().map(|error| error.code), Some(UNSUPPORTED_VERSION));
        let data = error.and_then(|error| error.data).unwrap_or_default();
        assert_eq!(data["requested"], "2099-01-01");
        let current = modern(json!({META_VERSION: MODERN_VERSION, META_CAPABILITIES: {}}));
        assert!(check_body("ping", Some(&current)).err().is_some_and(|error| error.is_not_found()));
        assert!(check_body("tools/list", Some(&current)).is_ok());
    }

    #[test]
    fn a_legacy_meta_is_not_modern() {
        assert!(!is_modern(Some(&json!({"_meta": {"progressToken": 1}}))));
        assert!(!is_modern(None));
        assert!(is_modern(Some(&modern(json!({META_CAPABILITIES: {}})))));
    }

    #[test]
    fn the_envelope_marks_results_and_restates_resource_not_found() {
        let answered = envelope(json!({"jsonrpc": "2.0", "id": 1, "result": {"tools": []}}), "tools/list", None);
        assert_eq!(answered["result"]["resultType"], "complete");
        assert_eq!(answered["result"]["cacheScope"], "private");
        assert_eq!(answered["result"]["_meta"][META_SERVER_INFO]["name"], "toolgate");
        let missing = json!({"jsonrpc": "2.0", "id": 1, "error": {"code": -32002, "message": "no"}});
        let missing = envelope(missing, "resources/read", Some("test://x"));
        assert_eq!(missing["error"]["code"], INVALID_PARAMS);
        assert_eq!(missing["error"]["data"]["uri"], "test://x");
    }
}
