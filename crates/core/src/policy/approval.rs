//! What a person's approval binds to: the tool's fingerprint and a digest of the call's arguments.
//!
//! Pure parts only (the store keeps approvals, the proxy asks for them). An approval of [`ApprovalScope::Exact`]
//! arguments binds to the SHA-256 of their RFC 8785 canonical form, so key order and whitespace do not matter but
//! any value does. [`ApprovalScope::Shape`] ("remember for this session") binds to the argument *shape*: keys and
//! JSON types, recursively, never values. Both bind to the tool ([`BoundTool`]: its upstream, its original name and
//! its fingerprint), so an approval lapses when the tool's definition changes and never covers another tool whose
//! definition happens to fingerprint alike. Digests are `sha256:<hex>` like every fingerprint.

use serde::Serialize;
use serde_json::{Map, Value, json};

use crate::fingerprint::{FingerprintError, canonical_json, digest_bytes, digest_value};

/// What an approval covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalScope {
    /// This call's exact arguments.
    Exact,
    /// Any call whose arguments have the same keys and JSON types.
    Shape,
}

impl ApprovalScope {
    /// The stable name.
    pub fn as_str(self) -> &'static str {
        match self {
            ApprovalScope::Exact => "exact",
            ApprovalScope::Shape => "shape",
        }
    }
}

/// The tool an approval is for: the upstream (by its configured name), the tool's name there and its fingerprint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BoundTool<'a> {
    /// The upstream's configured name.
    pub upstream: &'a str,
    /// The tool's name as the upstream lists it.
    pub original_name: &'a str,
    /// The tool's fingerprint.
    pub fingerprint: &'a str,
}

/// The digests an approval binds to.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub struct ApprovalBinding {
    /// What the approval covers.
    pub scope: ApprovalScope,
    /// The tool's fingerprint (`sha256:` of its definition as the upstream sent it).
    pub tool_fingerprint: String,
    /// `sha256:` of the canonical arguments ([`ApprovalScope::Exact`]) or of their shape ([`ApprovalScope::Shape`]).
    pub arguments_digest: String,
    /// One key: `sha256:` of the canonical `{"v": 2, "scope", "upstream", "name", "tool", "arguments"}`. Version 1
    /// keys (without upstream and name) are never written again, so none of them matches a version 2 key: an older
    /// approval fails closed.
    pub key: String,
}

/// The binding of an approval for one call. Absent arguments (`None`) are treated as `{}`, as MCP servers do.
pub fn bind_approval(
    scope: ApprovalScope,
    tool: BoundTool<'_>,
    arguments: Option<&Value>,
) -> Result<ApprovalBinding, FingerprintError> {
    let empty = Value::Object(Map::new());
    let arguments = arguments.unwrap_or(&empty);
    let arguments_digest = match scope {
        ApprovalScope::Exact => arguments_digest(arguments)?,
        ApprovalScope::Shape => shape_digest(arguments)?,
    };
    let key = digest_value(&json!({
        "v": 2,
        "scope": scope.as_str(),
        "upstream": tool.upstream,
        "name": tool.original_name,
        "tool": tool.fingerprint,
        "arguments": arguments_digest,
    }))?;
    Ok(ApprovalBinding { scope, tool_fingerprint: tool.fingerprint.to_owned(), arguments_digest, key })
}

/// `sha256:` of the canonical arguments with every integer's own digits (`jcs::to_string_exact`): two integers that
/// round to the same double are different arguments, so an approval of one never covers the other.
pub fn arguments_digest(arguments: &Value) -> Result<String, FingerprintError> {
    Ok(digest_bytes(crate::jcs::to_string_exact(arguments)?.as_bytes()))
}

/// `sha256:` of the canonical [`argument_shape`].
pub fn shape_digest(arguments: &Value) -> Result<String, FingerprintError> {
    digest_value(&argument_shape(arguments)?)
}

/// The shape of a JSON value: a scalar becomes its type name (`"string"`, `"number"`, `"boolean"`, `"null"`), an
/// object the object of its keys' shapes, an array the list of its distinct element shapes in canonical order (so
/// the number and order of elements do not matter, their kinds do).
pub fn argument_shape(value: &Value) -> Result<Value, FingerprintError> {
    Ok(match value {
        Value::Null => Value::from("null"),
        Value::Bool(_) => Value::from("boolean"),
        Value::Number(_) => Value::from("number"),
        Value::String(_) => Value::from("string"),
        Value::Object(fields) => Value::Object(
            fields
                .iter()
                .map(|(key, field)| Ok((key.clone(), argument_shape(field)?)))
                .collect::<Result<_, FingerprintError>>()?,
        ),
        Value::Array(items) => {
            let mut shapes = items
                .iter()
                .map(|item| {
                    let shape = argument_shape(item)?;
                    Ok((canonical_json(&shape)?, shape))
                })
                .collect::<Result<Vec<_>, FingerprintError>>()?;
            shapes.sort_by(|left, right| left.0.cmp(&right.0));
            shapes.dedup_by(|left, right| left.0 == right.0);
            Value::Array(shapes.into_iter().map(|(_, shape)| shape).collect())
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOOL: BoundTool<'static> = BoundTool {
        upstream: "git",
        original_name: "push",
        fingerprint: "sha256:0000000000000000000000000000000000000000000000000000000000000000",
    };

    fn bind(scope: ApprovalScope, arguments: Value) -> ApprovalBinding {
        bind_approval(scope, TOOL, Some(&arguments)).unwrap_or_else(|error| unreachable!("{error}"))
    }

    #[test]
    fn exact_bindings_ignore_key_order_but_not_values() {
        let one = bind(ApprovalScope::Exact, json!({"repo": "a", "force": true}));
        let reordered =
            bind(ApprovalScope::Exact, serde_json::from_str(r#"{ "force" : true, "repo":"a" }"#).unwrap_or_default());
        let other = bind(ApprovalScope::Exact, json!({"repo": "b", "force": true}));
        assert_eq!(one, reordered);
        assert_ne!(one.key, other.key);
        assert!(one.key.starts_with("sha256:") && one.key.len() == 71);
        assert_eq!(one.arguments_digest, digest_value(&json!({"repo": "a", "force": true})).unwrap_or_default());
    }

    #[test]
    fn integers_that_round_to_one_double_are_different_arguments() {
        let parse = |text: &str| serde_json::from_str::<Value>(text).unwrap_or_default();
        let one = bind(ApprovalScope::Exact, parse(r#"{"amount": 18446744073709551616123}"#));
        let other = bind(ApprovalScope::Exact, parse(r#"{"amount": 18446744073709551616124}"#));
        let float = bind(ApprovalScope::Exact, parse(r#"{"amount": 1.8446744073709552e22}"#));
        assert_ne!(one.key, other.key);
        assert_ne!(one.key, float.key);
    }

    #[test]
    fn shape_bindings_ignore_values_but_not_keys_or_types() {
        let one = bind(ApprovalScope::Shape, json!({"repo": "a", "labels": ["x", "y"], "limit": 3}));
        let same_shape = bind(ApprovalScope::Shape, json!({"limit": 10, "labels": ["z"], "repo": "b"}));
        let new_key = bind(ApprovalScope::Shape, json!({"repo": "a", "labels": ["x"], "limit": 3, "force": true}));
        let new_type = bind(ApprovalScope::Shape, json!({"repo": "a", "labels": ["x"], "limit": "3"}));
        assert_eq!(one.key, same_shape.key);
        assert_ne!(one.key, new_key.key);
        assert_ne!(one.key, new_type.key);
    }

    #[test]
    fn scopes_and_tools_never_share_keys() {
        let arguments = json!({"path": "/tmp/x"});
        let exact = bind(ApprovalScope::Exact, arguments.clone());
        let shape = bind(ApprovalScope::Shape, arguments.clone());
        assert_ne!(exact.key, shape.key);
        let other_tool =
            bind_approval(ApprovalScope::Exact, BoundTool { fingerprint: "sha256:1", ..TOOL }, Some(&arguments));
        assert_ne!(other_tool.map(|binding| binding.key).ok(), Some(exact.key.clone()));
    }

    #[test]
    fn tools_of_one_fingerprint_on_other_upstreams_or_names_never_share_keys() {
        let arguments = json!({"path": "/tmp/x"});
        let shape = bind(ApprovalScope::Shape, arguments.clone());
        for tool in [BoundTool { upstream: "other", ..TOOL }, BoundTool { original_name: "pull", ..TOOL }] {
            let other = bind_approval(ApprovalScope::Shape, tool, Some(&arguments));
            assert_ne!(other.map(|binding| binding.key).ok(), Some(shape.key.clone()));
        }
    }

    #[test]
    fn shapes_are_recursive_and_order_free() {
        let shape = argument_shape(&json!({"a": [1, "x", 2, {"b": null}], "c": {"d": false}}))
            .unwrap_or_else(|error| unreachable!("{error}"));
        assert_eq!(shape, json!({"a": ["number", "string", {"b": "null"}], "c": {"d": "boolean"}}));
        let absent = bind_approval(ApprovalScope::Exact, TOOL, None).unwrap_or_else(|error| unreachable!("{error}"));
        assert_eq!(absent, bind(ApprovalScope::Exact, json!({})));
    }
}
