//! Fingerprints of tool definitions, and of the other definitions a pinned upstream publishes (prompts, resources,
//! templates, instructions): SHA-256 over the RFC 8785 (JCS) canonical JSON, whole and per field.
//!
//! The whole digest pins a definition (annotations included); per-field digests let a later comparison say what
//! changed (`description`, `inputSchema`, `annotations.readOnlyHint`, ...). Canonicalization makes both stable
//! under key order and whitespace. Digests are written `sha256:<64 hex digits>`.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use crate::tool::ToolDefinition;

// The canonicalizer's error is the fingerprint's: it is defined beside the canonicalizer (the lower module) so
// that `jcs` needs nothing from here.
pub use crate::jcs::FingerprintError;

/// The fingerprint of one tool definition.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ToolFingerprint {
    /// Digest of the whole definition.
    pub whole: String,
    /// Digest per top-level field, and per key inside `annotations` (as `annotations.<key>`).
    pub fields: BTreeMap<String, String>,
}

/// How one field differs between two fingerprints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FieldChange {
    /// Present only in the newer definition.
    Added,
    /// Present only in the older definition.
    Removed,
    /// Present in both with different content.
    Changed,
}

impl FieldChange {
    /// `added`, `removed` or `changed`.
    pub fn as_str(self) -> &'static str {
        match self {
            FieldChange::Added => "added",
            FieldChange::Removed => "removed",
            FieldChange::Changed => "changed",
        }
    }
}

/// RFC 8785 canonical JSON text of a value.
pub fn canonical_json(value: &Value) -> Result<String, FingerprintError> {
    crate::jcs::to_string(value)
}

/// `sha256:<hex>` of the canonical JSON of a value.
pub fn digest_value(value: &Value) -> Result<String, FingerprintError> {
    Ok(digest_bytes(canonical_json(value)?.as_bytes()))
}

/// `sha256:<hex>` of raw bytes.
pub fn digest_bytes(bytes: &[u8]) -> String {
    digest_parts(&[bytes])
}

/// `sha256:<hex>` of the concatenation of `parts`, without concatenating them first.
pub fn digest_parts(parts: &[&[u8]]) -> String {
    let mut hasher = Sha256::new();
    for part in parts {
        hasher.update(part);
    }
    let hash = hasher.finalize();
    let mut text = String::with_capacity(7 + 64);
    text.push_str("sha256:");
    for byte in hash {
        text.push(hex_digit(byte >> 4));
        text.push(hex_digit(byte & 0x0f));
    }
    text
}

fn hex_digit(nibble: u8) -> char {
    char::from_digit(u32::from(nibble), 16).unwrap_or('0')
}

/// Fingerprints a tool definition as it was received.
pub fn fingerprint_tool(tool: &ToolDefinition) -> Result<ToolFingerprint, FingerprintError> {
    fingerprint_object(tool.raw())
}

/// Fingerprints any other definition an upstream publishes (a prompt, a resource, a resource template, the server's
/// instructions as `{"instructions": text}`) the same way: whole, and per top-level field so a diff can name the
/// field that changed.
pub fn fingerprint_definition(raw: &Map<String, Value>) -> Result<ToolFingerprint, FingerprintError> {
    fingerprint_object(raw)
}

fn fingerprint_object(raw: &Map<String, Value>) -> Result<ToolFingerprint, FingerprintError> {
    let whole = digest_value(&Value::Object(raw.clone()))?;
    let mut fields = BTreeMap::new();
    for (key, value) in raw {
        if key == "annotations"
            && let Value::Object(annotations) = value
        {
            for (annotation_key, annotation_value) in annotations {
                fields.insert(format!("annotations.{annotation_key}"), digest_value(annotation_value)?);
            }
            continue;
        }
        fields.insert(key.clone(), digest_value(value)?);
    }
    Ok(ToolFingerprint { whole, fields })
}

/// The fields that differ between an older and a newer fingerprint, in field-name order.
pub fn diff_fingerprints(older: &ToolFingerprint, newer: &ToolFingerprint) -> Vec<(String, FieldChange)> {
    let mut changes = Vec::new();
    for (field, digest) in &older.fields {
        match newer.fields.get(field) {
            None => changes.push((field.clone(), FieldChange::Removed)),
            Some(other) if other != digest => changes.push((field.clone(), FieldChange::Changed)),
            Some(_) => {}
        }
    }
    for field in newer.fields.keys() {
        if !older.fields.contains_key(field) {
            changes.push((field.clone(), FieldChange::Added));
        }
    }
    changes.sort();
    changes
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn fingerprint(value: Value) -> ToolFingerprint {
        match ToolDefinition::from_value(value).map(|tool| fingerprint_tool(&tool)) {
            Ok(Ok(fingerprint)) => fingerprint,
            other => unreachable!("test tool fingerprints: {other:?}"),
        }
    }

    #[test]
    fn key_order_does_not_matter() {
        let one =
            fingerprint(json!({"name": "t", "description": "d", "annotations": {"readOnlyHint": true, "title": "T"}}));
        let two =
            fingerprint(json!({"annotations": {"title": "T", "readOnlyHint": true}, "description": "d", "name": "t"}));
        assert_eq!(one, two);
    }

    #[test]
    fn a_known_digest() {
        // sha256 of the canonical text {"name":"t"}
        let expected = digest_bytes(br#"{"name":"t"}"#);
        assert_eq!(fingerprint(json!({"name": "t"})).whole, expected);
        assert_eq!(expected.len(), 7 + 64);
    }

    #[test]
    fn diff_names_the_changed_fields() {
        let older = fingerprint(json!({"name": "t", "description": "d", "annotations": {"readOnlyHint": false}}));
        let newer =
            fingerprint(json!({"name": "t", "description": "e", "annotations": {"readOnlyHint": true, "title": "T"}}));
        assert_eq!(
            diff_fingerprints(&older, &newer),
            vec![
                ("annotations.readOnlyHint".to_owned(), FieldChange::Changed),
                ("annotations.title".to_owned(), FieldChange::Added),
                ("description".to_owned(), FieldChange::Changed),
            ]
        );
    }

    /// A definition's fingerprint depends on the numbers' values as RFC 8785 prints them, not on how serde_json
    /// holds them: with `arbitrary_precision` (the text as sent) the canonical text, and so every existing pin, is
    /// what it was when numbers were parsed into doubles and 64-bit integers. The expected text is RFC 8785's.
    #[test]
    fn numbers_fingerprint_as_rfc_8785_prints_them() {
        let definition = r#"{"name": "count", "inputSchema": {"type": "object", "properties": {"n": {
            "type": "integer", "minimum": -0, "maximum": 9007199254740993, "default": 1.50, "multipleOf": 1e2,
            "exclusiveMaximum": 18446744073709551615, "exclusiveMinimum": -1.0,
            "examples": [0.1, 333333333.33333329, 1E30, 5e-7, 1000000000000000000000, 18446744073709551616123]}}}}"#;
        let value: Value = serde_json::from_str(definition).unwrap_or_default();
        let expected = concat!(
            r#"{"inputSchema":{"properties":{"n":{"default":1.5,"examples":[0.1,333333333.3333333,1e+30,5e-7,"#,
            r#"1e+21,1.8446744073709552e+22],"exclusiveMaximum":18446744073709552000,"exclusiveMinimum":-1,"#,
            r#""maximum":9007199254740992,"minimum":0,"multipleOf":100,"type":"integer"}},"type":"object"},"#,
            r#""name":"count"}"#
        );
        assert_eq!(canonical_json(&value).unwrap_or_default(), expected);
        assert_eq!(fingerprint(value).whole, digest_bytes(expected.as_bytes()));
    }
}
