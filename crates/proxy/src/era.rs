//! The protocol era of one client request: legacy (a session opened by `initialize`, protocol 2025-03-26 to
//! 2025-11-25) or modern (2026-07-28: no session, every request carries its own `_meta`).
//!
//! Pure functions over one request's method and params, shared by both transports and the gateway: which era a
//! request belongs to, the body checks a modern request must pass (in the spec's order, first failure wins), and
//! the envelope every modern answer gets (`resultType`, toolgate's serverInfo, resource-not-found as -32602), and
//! whether a client's declared capabilities cover a request sent to it ([`declares`], for either era). It
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

/// A client capability the request did not declare is needed (2026-07-28).
const MISSING_CAPABILITY: i64 = -32021;

/// The HTTP status of a modern request answered with error `code`: 404 for an unknown method, 400 for the errors
/// that say the request itself is wrong (parse, invalid request or params, the three 2026-07-28 codes); `None`
/// (200) for the rest, which describe what happened while serving it.
pub(crate) fn error_status(code: i64) -> Option<u16> {
    match code {
        METHOD_NOT_FOUND => Some(404),
        -32700 | -32600 | INVALID_PARAMS | HEADER_MISMATCH | MISSING_CAPABILITY | UNSUPPORTED_VERSION => Some(400),
        _ => None,
    }
}

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

/// The client capabilities a modern request declared in its own `_meta` (`Null` when it declared none).
pub(crate) fn request_capabilities(params: &Value) -> &Value {
    params.get("_meta").and_then(|meta| meta.get(META_CAPABILITIES)).unwrap_or(&Value::Null)
}

/// Whether client `capabilities` (a modern request's own, or what a legacy client declared at `initialize`) cover
/// the request `method` with `params` sent to that client: form elicitation needs an empty `elicitation` object
/// (form, as before 2025-11-25 added modes) or one with `form`; URL mode (`params.mode` is `url`) needs
/// `elicitation.url`; sampling and roots their objects. The one answer to that question, whoever asks it.
pub(crate) fn declares(capabilities: &Value, method: &str, params: &Value) -> bool {
    let elicitation = capabilities.get("elicitation").and_then(Value::as_object);
    match method {
        "elicitation/create" if params.get("mode").and_then(Value::as_str) == Some("url") => {
            elicitation.is_some_and(|modes| modes.contains_key("url"))
        }
        "elicitation/create" => elicitation.is_some_and(|modes| modes.is_empty() || modes.contains_key("form")),
        "sampling/createMessage" => capabilities.get("sampling").is_some_and(Value::is_object),
        "roots/list" => capabilities.get("roots").is_some_and(Value::is_object),
        _ => false,
    }
}

/// `params` of a URL-mode elicitation, as [`declares`] reads them (`{}` is form mode).
pub(crate) fn url_mode() -> Value {
    json!({"mode": "url"})
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

/// The `_meta` key of a modern request's log level: without it, the request gets no `notifications/message`.
pub(crate) const META_LOG_LEVEL: &str = "io.modelcontextprotocol/logLevel";

/// A log level of MCP (RFC 5424's severities), least severe first, so `a < b` means `b` is more severe.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum LogLevel {
    Debug,
    Info,
    Notice,
    Warning,
    Error,
    Critical,
    Alert,
    Emergency,
}

impl LogLevel {
    /// The level a `notifications/message` or a `logLevel` names; `None` for anything else.
    pub(crate) fn parse(name: &str) -> Option<LogLevel> {
        Some(match name {
            "debug" => LogLevel::Debug,
            "info" => LogLevel::Info,
            "notice" => LogLevel::Notice,
            "warning" => LogLevel::Warning,
            "error" => LogLevel::Error,
            "critical" => LogLevel::Critical,
            "alert" => LogLevel::Alert,
            "emergency" => LogLevel::Emergency,
            _ => return None,
        })
    }
}

/// What a modern request declared for itself in `_meta`: its client capabilities (which stand in for a session's
/// for everything done for this request) and the log level it asked for.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct RequestEnvelope {
    /// `io.modelcontextprotocol/clientCapabilities`.
    pub(crate) capabilities: Value,
    /// `io.modelcontextprotocol/logLevel`, when it names a level.
    pub(crate) log_level: Option<LogLevel>,
}

impl RequestEnvelope {
    /// The envelope of a modern request's `params`; `None` for a legacy request.
    pub(crate) fn of(params: Option<&Value>) -> Option<RequestEnvelope> {
        if !is_modern(params) {
            return None;
        }
        let meta = meta(params)?;
        Some(RequestEnvelope {
            capabilities: meta.get(META_CAPABILITIES).cloned().unwrap_or_else(|| json!({})),
            log_level: meta.get(META_LOG_LEVEL).and_then(Value::as_str).and_then(LogLevel::parse),
        })
    }

    /// True when a log line at `level` may reach this request: only at or above the level it asked for, and none
    /// without one (a line whose level toolgate cannot read is treated as the least severe).
    pub(crate) fn admits_log(&self, level: Option<&str>) -> bool {
        let line = level.and_then(LogLevel::parse).unwrap_or(LogLevel::Debug);
        self.log_level.is_some_and(|wanted| line >= wanted)
    }
}

/// The `_meta` key that tags every message of a `subscriptions/listen` stream with the listen request's id.
pub(crate) const META_SUBSCRIPTION_ID: &str = "io.modelcontextprotocol/subscriptionId";

/// What a `subscriptions/listen` request opts in to (`params.notifications`); every type is opt-in.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct ListenFilter {
    /// `toolsListChanged`.
    pub(crate) tools: bool,
    /// `promptsListChanged`.
    pub(crate) prompts: bool,
    /// `resourcesListChanged`.
    pub(crate) resources: bool,
    /// `resourceSubscriptions`: the URIs whose `notifications/resources/updated` it wants.
    pub(crate) resource_uris: std::collections::BTreeSet<String>,
}

impl ListenFilter {
    /// Reads `params.notifications`: an object whose list flags are booleans and whose `resourceSubscriptions` is
    /// an array of strings; anything else is invalid params (a filter toolgate misreads could deliver what the
    /// client never asked for).
    pub(crate) fn parse(params: Option<&Value>) -> Result<ListenFilter, EraError> {
        let invalid = |what: &str| EraError::new(INVALID_PARAMS, format!("invalid params: {what}"));
        let Some(notifications) = params.and_then(|params| params.get("notifications")) else {
            return Err(invalid("subscriptions/listen needs `notifications`"));
        };
        let Some(notifications) = notifications.as_object() else {
            return Err(invalid("`notifications` must be an object"));
        };
        let flag = |key: &str| match notifications.get(key) {
            None | Some(Value::Null) => Ok(false),
            Some(Value::Bool(flag)) => Ok(*flag),
            Some(_) => Err(invalid(&format!("`notifications.{key}` must be a boolean"))),
        };
        let mut filter = ListenFilter {
            tools: flag("toolsListChanged")?,
            prompts: flag("promptsListChanged")?,
            ..Default::default()
        };
        filter.resources = flag("resourcesListChanged")?;
        match notifications.get("resourceSubscriptions") {
            None | Some(Value::Null) => {}
            Some(Value::Array(uris)) => {
                for uri in uris {
                    let Some(uri) = uri.as_str() else {
                        return Err(invalid("`notifications.resourceSubscriptions` must hold strings"));
                    };
                    filter.resource_uris.insert(uri.to_owned());
                }
            }
            Some(_) => return Err(invalid("`notifications.resourceSubscriptions` must be an array")),
        }
        Ok(filter)
    }

    /// The filter as the acknowledgement states it: only what is honoured.
    pub(crate) fn to_json(&self) -> Value {
        let mut honoured = serde_json::Map::new();
        for (key, wanted) in [
            ("toolsListChanged", self.tools),
            ("promptsListChanged", self.prompts),
            ("resourcesListChanged", self.resources),
        ] {
            if wanted {
                honoured.insert(key.to_owned(), Value::Bool(true));
            }
        }
        if !self.resource_uris.is_empty() {
            honoured.insert("resourceSubscriptions".to_owned(), json!(self.resource_uris));
        }
        Value::Object(honoured)
    }

    /// True when the `list_changed` notification `method` is one this listen asked for.
    pub(crate) fn wants_list_changed(&self, method: &str) -> bool {
        match method {
            "notifications/tools/list_changed" => self.tools,
            "notifications/prompts/list_changed" => self.prompts,
            "notifications/resources/list_changed" => self.resources,
            _ => false,
        }
    }
}

/// `message` (a notification) tagged as belonging to the listen whose request id is `subscription_id`.
pub(crate) fn tagged(mut message: Value, subscription_id: &Value) -> Value {
    let Some(object) = message.as_object_mut() else { return message };
    let params = object.entry("params").or_insert_with(|| json!({}));
    if let Some(params) = params.as_object_mut() {
        let meta = params.entry("_meta").or_insert_with(|| json!({}));
        if let Some(meta) = meta.as_object_mut() {
            meta.insert(META_SUBSCRIPTION_ID.to_owned(), subscription_id.clone());
        }
    }
    message
}

/// The acknowledgement that opens a listen stream: what it honours, tagged with its id.
pub(crate) fn listen_acknowledgement(subscription_id: &Value, honoured: &ListenFilter) -> Value {
    let message = json!({"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged",
                         "params": {"notifications": honoured.to_json()}});
    tagged(message, subscription_id)
}

/// The result that ends a listen gracefully (the gateway stopping): empty but for its subscription id.
pub(crate) fn listen_ended(subscription_id: &Value) -> Value {
    json!({"_meta": {META_SUBSCRIPTION_ID: subscription_id}})
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
    fn a_request_gets_log_lines_only_at_or_above_its_own_level() {
        let envelope = |level: Option<&str>| {
            let mut meta = json!({META_VERSION: MODERN_VERSION, META_CAPABILITIES: {"roots": {}}});
            if let Some(level) = level {
                meta[META_LOG_LEVEL] = json!(level);
            }
            RequestEnvelope::of(Some(&modern(meta))).unwrap_or_default()
        };
        assert!(!envelope(None).admits_log(Some("emergency")), "no level, no log lines");
        let warning = envelope(Some("warning"));
        assert_eq!(warning.capabilities, json!({"roots": {}}));
        assert!(warning.admits_log(Some("warning")) && warning.admits_log(Some("alert")));
        assert!(!warning.admits_log(Some("info")) && !warning.admits_log(Some("bogus")) && !warning.admits_log(None));
        assert!(envelope(Some("debug")).admits_log(Some("bogus")));
        assert_eq!(RequestEnvelope::of(Some(&json!({"_meta": {"progressToken": 1}}))), None);
    }

    #[test]
    fn a_listen_filter_is_read_strictly_and_acknowledged_as_honoured() {
        let filter = |notifications: Value| ListenFilter::parse(Some(&json!({"notifications": notifications})));
        let read =
            filter(json!({"toolsListChanged": true, "promptsListChanged": false, "resourceSubscriptions": ["a://1"]}));
        let read = read.unwrap_or_default();
        assert!(read.tools && !read.prompts && !read.resources);
        assert!(read.wants_list_changed("notifications/tools/list_changed"));
        assert!(!read.wants_list_changed("notifications/prompts/list_changed"));
        assert_eq!(read.to_json(), json!({"toolsListChanged": true, "resourceSubscriptions": ["a://1"]}));
        for bad in [json!([]), json!({"toolsListChanged": "yes"}), json!({"resourceSubscriptions": [1]})] {
            assert_eq!(filter(bad).err().map(|error| error.code), Some(INVALID_PARAMS));
        }
        assert!(ListenFilter::parse(Some(&json!({}))).is_err(), "the filter is required");
        let ack = listen_acknowledgement(&json!(7), &read);
        assert_eq!(ack["params"]["_meta"][META_SUBSCRIPTION_ID], 7);
        assert_eq!(ack["params"]["notifications"]["toolsListChanged"], true);
        let note = tagged(json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}), &json!("s"));
        assert_eq!(note["params"]["_meta"][META_SUBSCRIPTION_ID], "s");
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
