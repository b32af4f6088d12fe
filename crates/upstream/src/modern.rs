//! The 2026-07-28 era toward one upstream: the probe's verdict, the `server/discover` outcome, and the envelope
//! each request gets (`_meta` for a modern upstream; the modern keys removed for a legacy one).
//!
//! Pure functions over JSON values and errors: no IO, no state. The connection decides when to probe and which
//! era it speaks ([`crate::Connection::connect`]); this module only says what a probe's answer means and what a
//! request's params become. It must never add or keep a key a legacy upstream would not understand, and never
//! drop a key of the request's own (arguments, `progressToken`, other `_meta` keys).

use serde_json::{Map, Value, json};

use crate::error::UpstreamError;
use crate::initialize_outcome::InitializeOutcome;

/// The modern protocol version toolgate speaks with upstreams.
pub const MODERN_PROTOCOL_VERSION: &str = "2026-07-28";

/// The `_meta` keys of the 2026-07-28 request envelope. A legacy upstream gets none of them: they describe a
/// modern client's request to toolgate, not toolgate's session with the upstream.
pub const MODERN_REQUEST_META_KEYS: [&str; 4] =
    [META_VERSION, META_CLIENT_CAPABILITIES, META_CLIENT_INFO, "io.modelcontextprotocol/logLevel"];
const META_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
const META_CLIENT_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
const META_CLIENT_INFO: &str = "io.modelcontextprotocol/clientInfo";
const META_SERVER_INFO: &str = "io.modelcontextprotocol/serverInfo";

/// The 2026-07-28 error codes a modern server answers a request it refuses with: any of them means the server
/// speaks the modern era (it checked the request as a modern one).
const MODERN_ERROR_CODES: [i64; 3] = [-32020, -32021, -32022];

/// What a `server/discover` probe showed about the server.
#[derive(Debug)]
pub(crate) enum ProbeVerdict {
    /// It answered as a 2026-07-28 server: the outcome to keep.
    Modern(InitializeOutcome),
    /// It answered as a legacy server (a JSON-RPC error, a client error over HTTP, or no modern version listed)
    /// or did not answer in time: `initialize` on the same connection.
    Legacy,
    /// The connection ended (a server that exits on any request before `initialize`): `initialize` on a new one.
    Ended,
    /// The answer says nothing about the era (unreachable, 401/403, 5xx): the connection attempt fails with it.
    Failed(UpstreamError),
}

/// Reads the answer to a `server/discover` probe (the whole response message, or the error waiting for it).
pub(crate) fn probe_verdict(answer: Result<Value, UpstreamError>) -> ProbeVerdict {
    match answer {
        Ok(message) => match message.get("error") {
            Some(error) => {
                let code = error.get("code").and_then(Value::as_i64).unwrap_or_default();
                if MODERN_ERROR_CODES.contains(&code) {
                    // A modern server that refused the probe itself (say -32022 for a version it no longer
                    // serves): it is modern, but toolgate cannot speak to it.
                    let message = error.get("message").and_then(Value::as_str).unwrap_or_default();
                    ProbeVerdict::Failed(UpstreamError::Protocol(format!(
                        "the server answered server/discover with the 2026-07-28 error {code} ({message})"
                    )))
                } else {
                    ProbeVerdict::Legacy
                }
            }
            None => match discover_outcome(message.get("result").cloned().unwrap_or(Value::Null)) {
                Ok(outcome) => ProbeVerdict::Modern(outcome),
                Err(_) => ProbeVerdict::Legacy,
            },
        },
        Err(UpstreamError::Rpc { .. } | UpstreamError::Timeout { .. }) => ProbeVerdict::Legacy,
        // Over HTTP a legacy server refuses a request outside a session with a client error (400, 404, 405...);
        // 401 and 403 are about credentials, not the era.
        Err(UpstreamError::HttpStatus { status, .. })
            if (400..500).contains(&status) && status != 401 && status != 403 =>
        {
            ProbeVerdict::Legacy
        }
        Err(UpstreamError::Closed { .. }) => ProbeVerdict::Ended,
        Err(error) => ProbeVerdict::Failed(error),
    }
}

/// The outcome of a `server/discover` result: refused when it lists no version toolgate speaks.
pub(crate) fn discover_outcome(result: Value) -> Result<InitializeOutcome, UpstreamError> {
    let versions = result.get("supportedVersions").and_then(Value::as_array);
    let speaks_modern =
        versions.is_some_and(|versions| versions.iter().any(|version| version == MODERN_PROTOCOL_VERSION));
    if !speaks_modern {
        return Err(UpstreamError::Protocol(format!(
            "the server/discover result lists no supported version toolgate speaks ({MODERN_PROTOCOL_VERSION})"
        )));
    }
    let server_info = result
        .pointer("/_meta/io.modelcontextprotocol~1serverInfo")
        .or_else(|| result.get("serverInfo"))
        .cloned()
        .unwrap_or(Value::Null);
    let mut capabilities = result.get("capabilities").cloned().unwrap_or_else(|| json!({}));
    if let Some(capabilities) = capabilities.as_object_mut() {
        // 2026-07-28 removed `logging/setLevel` (the level is per request) and `resources/subscribe` (replaced by
        // `subscriptions/listen`): a capability that names them would have toolgate send a removed method.
        capabilities.remove("logging");
        if let Some(Value::Object(resources)) = capabilities.get_mut("resources") {
            resources.remove("subscribe");
        }
    }
    Ok(InitializeOutcome {
        protocol_version: MODERN_PROTOCOL_VERSION.to_owned(),
        server_info,
        capabilities,
        instructions: result.get("instructions").and_then(Value::as_str).map(str::to_owned),
        modern: true,
    })
}

/// A request's params for a modern upstream: `_meta` gets the protocol version, toolgate's `clientInfo` and the
/// client capabilities (the ones the caller put there, which the proxy has already narrowed to what it relays,
/// else `default_capabilities`). Every other key stays.
pub(crate) fn with_modern_envelope(params: Option<Value>, client_info: &Value, default_capabilities: &Value) -> Value {
    let mut params = match params {
        Some(Value::Object(params)) => params,
        _ => Map::new(),
    };
    let meta = params.entry("_meta").or_insert_with(|| Value::Object(Map::new()));
    if !meta.is_object() {
        *meta = Value::Object(Map::new());
    }
    if let Value::Object(meta) = meta {
        meta.insert(META_VERSION.to_owned(), Value::String(MODERN_PROTOCOL_VERSION.to_owned()));
        meta.insert(META_CLIENT_INFO.to_owned(), client_info.clone());
        if !meta.get(META_CLIENT_CAPABILITIES).is_some_and(Value::is_object) {
            meta.insert(META_CLIENT_CAPABILITIES.to_owned(), default_capabilities.clone());
        }
    }
    Value::Object(params)
}

/// The headers a 2026-07-28 request carries over HTTP, read from the message itself (so a probe carries them
/// and a legacy request, whose `_meta` has no version, never does): `MCP-Protocol-Version` from `_meta`,
/// `Mcp-Method`, and `Mcp-Name` (the tool or prompt name, or the resource URI) for the methods that name one.
/// A value that is not plain visible ASCII goes in the spec's `=?base64?...?=` form.
pub(crate) fn modern_headers(message: &Value) -> Vec<(&'static str, String)> {
    let Some(method) = message.get("method").and_then(Value::as_str) else { return Vec::new() };
    let params = message.get("params");
    let Some(version) = params.and_then(|params| params.pointer("/_meta/io.modelcontextprotocol~1protocolVersion"))
    else {
        return Vec::new();
    };
    let Some(version) = version.as_str() else { return Vec::new() };
    let mut headers = vec![("mcp-protocol-version", version.to_owned()), ("mcp-method", header_value(method))];
    let name = match method {
        "tools/call" | "prompts/get" => params.and_then(|params| params.get("name")),
        "resources/read" => params.and_then(|params| params.get("uri")),
        _ => None,
    };
    if let Some(name) = name.and_then(Value::as_str) {
        headers.push(("mcp-name", header_value(name)));
    }
    headers
}

/// A header value as the spec writes it: plain when it is visible ASCII without surrounding spaces, else base64.
fn header_value(text: &str) -> String {
    let plain = !text.is_empty()
        && text.bytes().all(|byte| (0x20..0x7f).contains(&byte))
        && !text.starts_with(' ')
        && !text.ends_with(' ')
        && !text.starts_with("=?");
    if plain {
        text.to_owned()
    } else {
        use base64::Engine;
        format!("=?base64?{}?=", base64::engine::general_purpose::STANDARD.encode(text.as_bytes()))
    }
}

/// The params a 2026-07-28 client's retry carries (MRTR): toolgate's own round state and the client's answers to
/// toolgate's questions. A legacy upstream asked nothing and understands neither.
const MODERN_RETRY_KEYS: [&str; 2] = ["requestState", "inputResponses"];

/// A request's params for a legacy upstream: the modern envelope keys removed from `_meta` (and `_meta` itself
/// when nothing else was in it), and a modern retry's `requestState` and `inputResponses`, which answer toolgate
/// and not the upstream. Returns the params unchanged otherwise.
pub(crate) fn without_modern_envelope(params: Option<Value>) -> Option<Value> {
    let mut params = params?;
    if let Some(params) = params.as_object_mut() {
        for key in MODERN_RETRY_KEYS {
            params.remove(key);
        }
    }
    if let Some(Value::Object(meta)) = params.get_mut("_meta") {
        for key in MODERN_REQUEST_META_KEYS {
            meta.remove(key);
        }
        if meta.is_empty()
            && let Some(params) = params.as_object_mut()
        {
            params.remove("_meta");
        }
    }
    Some(params)
}

/// A modern upstream's result as toolgate relays it: the upstream hop's envelope (its serverInfo, its caching
/// hints, `resultType: "complete"`) removed, since toolgate answers its clients with its own. An
/// `input_required` result keeps its `resultType`: the caller must see it.
pub fn without_modern_result_envelope(mut result: Value) -> Value {
    if let Some(object) = result.as_object_mut() {
        if object.get("resultType").and_then(Value::as_str) == Some("complete") {
            object.remove("resultType");
        }
        object.remove("ttlMs");
        object.remove("cacheScope");
        if let Some(Value::Object(meta)) = object.get_mut("_meta") {
            meta.remove(META_SERVER_INFO);
            if meta.is_empty() {
                object.remove("_meta");
            }
        }
    }
    result
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_legacy_upstream_gets_no_modern_envelope_key_and_keeps_the_rest() {
        let params = json!({"name": "t", "_meta": {META_VERSION: "2026-07-28", META_CLIENT_CAPABILITIES: {},
            "progressToken": 3, "io.modelcontextprotocol/related-task": {"taskId": "x"}}});
        let stripped = without_modern_envelope(Some(params)).unwrap_or_default();
        assert_eq!(
            stripped,
            json!({"name": "t", "_meta": {"progressToken": 3, "io.modelcontextprotocol/related-task": {"taskId": "x"}}})
        );
        let only_modern = json!({"name": "t", "_meta": {META_VERSION: "2026-07-28"}});
        assert_eq!(without_modern_envelope(Some(only_modern)), Some(json!({"name": "t"})));
        // A retry after toolgate's own confirmation: its state and the person's answer are toolgate's.
        let retry = json!({"name": "t", "arguments": {"a": 1}, "requestState": "v1.x",
            "inputResponses": {"toolgate/confirm": {"action": "accept"}}});
        assert_eq!(without_modern_envelope(Some(retry)), Some(json!({"name": "t", "arguments": {"a": 1}})));
    }

    #[test]
    fn a_modern_upstream_gets_the_envelope_and_the_callers_capabilities_win() {
        let info = json!({"name": "toolgate"});
        let params = json!({"name": "t", "_meta": {"progressToken": 1, META_CLIENT_CAPABILITIES: {"roots": {}}}});
        let enveloped = with_modern_envelope(Some(params), &info, &json!({"sampling": {}}));
        assert_eq!(enveloped["_meta"][META_VERSION], "2026-07-28");
        assert_eq!(enveloped["_meta"][META_CLIENT_CAPABILITIES], json!({"roots": {}}));
        assert_eq!(enveloped["_meta"]["progressToken"], 1);
        let bare = with_modern_envelope(None, &info, &json!({"sampling": {}}));
        assert_eq!(bare["_meta"][META_CLIENT_CAPABILITIES], json!({"sampling": {}}));
        assert_eq!(bare["_meta"][META_CLIENT_INFO], info);
    }

    #[test]
    fn the_probe_reads_each_answer_as_the_spec_says() {
        let discover = json!({"result": {"supportedVersions": ["2026-07-28"], "capabilities": {"logging": {},
            "resources": {"subscribe": true, "listChanged": true}},
            "_meta": {META_SERVER_INFO: {"name": "m", "version": "1"}}}});
        let verdict = probe_verdict(Ok(discover));
        let ProbeVerdict::Modern(outcome) = verdict else {
            unreachable!("expected modern, got {verdict:?}");
        };
        assert_eq!(outcome.server_info["name"], "m");
        assert_eq!(outcome.capabilities, json!({"resources": {"listChanged": true}}));
        let not_found = json!({"error": {"code": -32601, "message": "Method not found"}});
        assert!(matches!(probe_verdict(Ok(not_found)), ProbeVerdict::Legacy));
        let old_only = json!({"result": {"supportedVersions": ["2025-11-25"]}});
        assert!(matches!(probe_verdict(Ok(old_only)), ProbeVerdict::Legacy));
        let bad_request = UpstreamError::HttpStatus { url: "u".into(), status: 400, body: String::new() };
        assert!(matches!(probe_verdict(Err(bad_request)), ProbeVerdict::Legacy));
        let forbidden = UpstreamError::HttpStatus { url: "u".into(), status: 403, body: String::new() };
        assert!(matches!(probe_verdict(Err(forbidden)), ProbeVerdict::Failed(_)));
        let exited = UpstreamError::Closed { detail: "gone".into() };
        assert!(matches!(probe_verdict(Err(exited)), ProbeVerdict::Ended));
    }

    #[test]
    fn modern_requests_carry_their_headers_and_legacy_ones_none() {
        let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "héllo", "_meta": {META_VERSION: "2026-07-28"}}});
        assert_eq!(
            modern_headers(&call),
            [
                ("mcp-protocol-version", "2026-07-28".to_owned()),
                ("mcp-method", "tools/call".to_owned()),
                ("mcp-name", "=?base64?aMOpbGxv?=".to_owned())
            ]
        );
        let legacy = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "x"}});
        assert!(modern_headers(&legacy).is_empty());
    }

    #[test]
    fn a_modern_result_loses_the_upstream_hops_envelope_only() {
        let result = json!({"content": [], "resultType": "complete", "ttlMs": 0, "cacheScope": "private",
            "_meta": {META_SERVER_INFO: {"name": "m"}, "other": 1}});
        assert_eq!(without_modern_result_envelope(result), json!({"content": [], "_meta": {"other": 1}}));
        let asks = json!({"resultType": "input_required", "inputRequests": {}});
        assert_eq!(without_modern_result_envelope(asks.clone()), asks);
    }
}
