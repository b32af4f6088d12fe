//! The 2026-07-28 routing headers that mirror a request's body: the `=?base64?…?=` form of a header value, which
//! tool input properties name an `Mcp-Param-*` header (`x-mcp-header`), and whether a `tools/call`'s
//! `Mcp-Param-*` headers agree with its arguments (integers compared numerically).
//!
//! Pure functions over JSON values and already-read header pairs: no IO, no HTTP types, no state. A header that
//! disagrees with the body is the transport's -32020; this module only says whether, and why. It never rewrites a
//! schema: toolgate exposes a tool's `inputSchema` as the upstream wrote it, so its `x-mcp-header` annotations
//! stay the upstream's under a prefixed name (the header names a property, never the tool).

use base64::Engine as _;
use serde_json::Value;

/// The schema annotation that names a property's header.
const X_MCP_HEADER: &str = "x-mcp-header";
/// The prefix of a property's header name.
pub(crate) const PARAM_HEADER_PREFIX: &str = "mcp-param-";
/// Schema keywords whose values are schema positions; crossing one leaves the plain `properties` chain.
const SUBSCHEMA_SINGLE: [&str; 11] = [
    "items",
    "contains",
    "unevaluatedItems",
    "additionalProperties",
    "propertyNames",
    "unevaluatedProperties",
    "not",
    "if",
    "then",
    "else",
    "contentSchema",
];
const SUBSCHEMA_LIST: [&str; 4] = ["allOf", "anyOf", "oneOf", "prefixItems"];
const SUBSCHEMA_MAP: [&str; 4] = ["patternProperties", "dependentSchemas", "$defs", "definitions"];

/// A header value as the client meant it: the `=?base64?PAYLOAD?=` form decoded (canonical base64 of UTF-8
/// only), anything else as it is; `None` for a malformed encoded value, so it never matches a body by accident.
pub(crate) fn decode_header_value(value: &str) -> Option<String> {
    let Some(payload) = value.strip_prefix("=?base64?").and_then(|rest| rest.strip_suffix("?=")) else {
        return Some(value.to_owned());
    };
    let engine = base64::engine::general_purpose::STANDARD;
    let bytes = engine.decode(payload).ok()?;
    // Only the canonical text of those bytes: another spelling of them could slip past a filter that compared text.
    if engine.encode(&bytes) != payload {
        return None;
    }
    String::from_utf8(bytes).ok()
}

/// One annotated property: the chain of `properties` keys from the root, its header token and its `type`.
#[derive(Debug, Clone, PartialEq)]
struct Annotated {
    path: Vec<String>,
    token: String,
    kind: Option<String>,
}

/// Every `x-mcp-header` annotation of `schema`, or why the schema's annotations are invalid (then a conforming
/// client sends no headers for the tool, and none are checked).
fn annotations(schema: &Value) -> Result<Vec<Annotated>, String> {
    let mut found = Vec::new();
    // (path when still on a plain `properties` chain, node); an explicit stack, so depth costs no recursion.
    let mut stack: Vec<(Option<Vec<String>>, &Value)> = vec![(Some(Vec::new()), schema)];
    while let Some((path, node)) = stack.pop() {
        let Some(object) = node.as_object() else { continue };
        if let Some(token) = object.get(X_MCP_HEADER) {
            let Some(path) = path.clone().filter(|path| !path.is_empty()) else {
                return Err(format!("{X_MCP_HEADER} outside a plain `properties` chain"));
            };
            let token = token.as_str().filter(|token| is_token(token)).ok_or("an invalid header token")?;
            let kind = object.get("type").and_then(Value::as_str).map(str::to_owned);
            if !matches!(kind.as_deref(), Some("string" | "integer" | "boolean")) {
                return Err(format!("{X_MCP_HEADER} on a property that is not a string, integer or boolean"));
            }
            if found.iter().any(|seen: &Annotated| seen.token.eq_ignore_ascii_case(token)) {
                return Err(format!("{X_MCP_HEADER} {token} is used twice"));
            }
            found.push(Annotated { path, token: token.to_owned(), kind });
        }
        for (keyword, value) in object {
            if keyword == "properties"
                && let Some(properties) = value.as_object()
            {
                for (name, property) in properties {
                    let path = path.clone().map(|mut path| {
                        path.push(name.clone());
                        path
                    });
                    stack.push((path, property));
                }
            } else if SUBSCHEMA_SINGLE.contains(&keyword.as_str()) {
                stack.push((None, value));
            } else if SUBSCHEMA_LIST.contains(&keyword.as_str()) {
                stack.extend(value.as_array().into_iter().flatten().map(|item| (None, item)));
            } else if SUBSCHEMA_MAP.contains(&keyword.as_str()) {
                stack.extend(value.as_object().into_iter().flat_map(|map| map.values()).map(|item| (None, item)));
            }
        }
    }
    Ok(found)
}

/// An RFC 9110 token (what a header name may hold).
fn is_token(text: &str) -> bool {
    !text.is_empty() && text.bytes().all(|byte| byte.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&byte))
}

/// The value at `path` in `arguments`, when every step is an object key that is present and not null.
fn value_at<'a>(arguments: &'a Value, path: &[String]) -> Option<&'a Value> {
    path.iter().try_fold(arguments, |node, key| node.as_object()?.get(key)).filter(|value| !value.is_null())
}

/// How a client writes an argument into its header: booleans as `true`/`false`, strings as they are, numbers as
/// their JSON text; `None` for anything else (no header is sent for it).
fn rendered(value: &Value) -> Option<String> {
    match value {
        Value::Bool(flag) => Some(flag.to_string()),
        Value::String(text) => Some(text.clone()),
        Value::Number(number) => Some(number.to_string()),
        _ => None,
    }
}

/// True when the decoded header `text` states the integer argument `value` (`42` matches `42.0` and `42`; plain
/// decimals only, compared digit by digit, so integers beyond 64 bits compare too).
fn same_integer(text: &str, value: &Value) -> bool {
    fn canonical(text: &str) -> Option<(bool, String)> {
        let (negative, digits) = match text.strip_prefix('-') {
            Some(rest) => (true, rest),
            None => (false, text),
        };
        let (whole, fraction) = digits.split_once('.').unwrap_or((digits, ""));
        let plain = !whole.is_empty() && whole.bytes().all(|byte| byte.is_ascii_digit());
        if !plain || !fraction.bytes().all(|byte| byte == b'0') || (digits.contains('.') && fraction.is_empty()) {
            return None;
        }
        let whole = whole.trim_start_matches('0');
        let whole = if whole.is_empty() { "0" } else { whole };
        Some((negative && whole != "0", whole.to_owned()))
    }
    let Value::Number(number) = value else { return false };
    match (canonical(text), canonical(&number.to_string())) {
        (Some(header), Some(body)) => header == body,
        _ => false,
    }
}

/// Whether a `tools/call`'s `Mcp-Param-*` headers (`headers`: lowercase names, as read, repeats kept) agree with
/// its `arguments` under the tool's `schema`: each annotated property's header present exactly when its argument
/// is, once, and stating the same value. `Err` says which header disagrees. A schema whose annotations are invalid
/// checks nothing (conforming clients send no headers for it).
pub(crate) fn check_param_headers(
    schema: &Value,
    arguments: &Value,
    headers: &[(String, String)],
) -> Result<(), String> {
    let Ok(annotated) = annotations(schema) else { return Ok(()) };
    for property in annotated {
        let name = format!("{PARAM_HEADER_PREFIX}{}", property.token.to_ascii_lowercase());
        let mut sent = headers.iter().filter(|(header, _)| *header == name).map(|(_, value)| value.as_str());
        let header = sent.next();
        let shown = format!("Mcp-Param-{}", property.token);
        if header.is_some() && sent.next().is_some() {
            return Err(format!("{shown} is sent more than once"));
        }
        let argument = value_at(arguments, &property.path);
        let text = match (header, argument.and_then(rendered)) {
            (None, None) => continue,
            (Some(_), None) => return Err(format!("{shown} is sent but the argument it mirrors is not")),
            (None, Some(_)) => return Err(format!("{shown} is missing but its argument is present")),
            (Some(header), Some(text)) => match decode_header_value(header) {
                Some(decoded) => (decoded, text),
                None => return Err(format!("{shown} holds a malformed base64 value")),
            },
        };
        let (decoded, expected) = text;
        let integer = property.kind.as_deref() == Some("integer")
            && argument.is_some_and(|value| value.is_number())
            && same_integer(&decoded, argument.unwrap_or(&Value::Null));
        if !integer && decoded != expected {
            return Err(format!("{shown} disagrees with its argument"));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn headers(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs.iter().map(|(name, value)| (name.to_ascii_lowercase(), (*value).to_owned())).collect()
    }

    #[test]
    fn base64_values_decode_only_when_canonical() {
        assert_eq!(decode_header_value("plain"), Some("plain".into()));
        assert_eq!(decode_header_value("=?base64?w6lsYW4=?="), Some("élan".into()));
        assert_eq!(decode_header_value("=?base64?not base64?="), None);
        assert_eq!(decode_header_value("=?base64?w6lsYW5=?="), None, "non-canonical padding bits");
        assert_eq!(decode_header_value("=?base64?/w==?="), None, "not UTF-8");
    }

    #[test]
    fn param_headers_must_mirror_the_arguments() {
        let schema = json!({"type": "object", "properties": {
            "region": {"type": "string", "x-mcp-header": "Region"},
            "count": {"type": "integer", "x-mcp-header": "Count"},
            "nested": {"type": "object", "properties": {"flag": {"type": "boolean", "x-mcp-header": "Flag"}}},
            "free": {"type": "string"},
        }});
        let arguments = json!({"region": "eu-west", "count": 42, "nested": {"flag": true}, "free": "x"});
        let check = |pairs: &[(&str, &str)]| check_param_headers(&schema, &arguments, &headers(pairs));
        let all = [("Mcp-Param-Region", "eu-west"), ("Mcp-Param-Count", "42.0"), ("Mcp-Param-Flag", "true")];
        assert_eq!(check(&all), Ok(()));
        let encoded = [("Mcp-Param-Region", "=?base64?ZXUtd2VzdA==?="), ("Mcp-Param-Count", "42"), all[2]];
        assert_eq!(check(&encoded), Ok(()));
        assert!(check(&all[..2]).is_err(), "a missing header");
        assert!(check(&[all[0], ("Mcp-Param-Count", "43"), all[2]]).is_err(), "another number");
        assert!(check(&[all[0], ("Mcp-Param-Count", "4.2e1"), all[2]]).is_err(), "not a plain decimal");
        assert!(check(&[all[0], all[1], all[2], ("Mcp-Param-Region", "eu-west")]).is_err(), "sent twice");
        let absent = check_param_headers(&schema, &json!({}), &headers(&[("Mcp-Param-Region", "eu-west")]));
        assert!(absent.is_err(), "a header without its argument");
        assert_eq!(check_param_headers(&schema, &json!({}), &[]), Ok(()));
    }

    #[test]
    fn a_schema_with_invalid_annotations_checks_nothing() {
        for schema in [
            json!({"type": "object", "properties": {"n": {"type": "number", "x-mcp-header": "N"}}}),
            json!({"type": "object", "properties": {"a": {"type": "string", "x-mcp-header": "bad token"}}}),
            json!({"type": "object", "items": {"type": "string", "x-mcp-header": "Item"}}),
            json!({"type": "object", "properties": {
                "a": {"type": "string", "x-mcp-header": "Same"}, "b": {"type": "string", "x-mcp-header": "same"}}}),
        ] {
            assert!(annotations(&schema).is_err(), "{schema}");
            assert_eq!(check_param_headers(&schema, &json!({"a": "x"}), &headers(&[("Mcp-Param-A", "y")])), Ok(()));
        }
    }
}
