//! What the tool tables show in a cell, alike on the tools page, its inventory and the onboarding page: the four
//! hints in column order with their headings, a hint's value and source, a fingerprint cut short.
//!
//! Plain text only: the pages escape what they put in markup, and nothing here reads the store or renders a page,
//! so every page that shows a definition can stand above it.

use serde_json::Value;

/// The hints, in the order the page shows them, with their column headings.
pub(crate) const HINTS: [(&str, &str); 4] = [
    ("readOnlyHint", "Read-only"),
    ("destructiveHint", "Destructive"),
    ("idempotentHint", "Idempotent"),
    ("openWorldHint", "Open world"),
];

/// `yes (declared)`, `no (inferred)`, ... from the stored effective hints; `?` when the row lacks the hint.
pub(crate) fn hint_cell(effective: &Value, key: &str) -> String {
    let hint = effective.get(key);
    let value = hint.and_then(|hint| hint.get("value")).and_then(Value::as_bool);
    let source = hint.and_then(|hint| hint.get("source")).and_then(Value::as_str);
    match (value, source) {
        (Some(value), Some(source)) => format!("{} ({source})", if value { "yes" } else { "no" }),
        (Some(value), None) => (if value { "yes" } else { "no" }).to_owned(),
        _ => "?".to_owned(),
    }
}

/// `sha256:` and the first 12 hex digits.
pub(crate) fn short(fingerprint: &str) -> &str {
    let end = fingerprint.char_indices().nth("sha256:".len() + 12).map_or(fingerprint.len(), |(index, _)| index);
    &fingerprint[..end]
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn hint_cells_say_value_and_source() {
        let effective =
            json!({"readOnlyHint": {"value": true, "source": "declared"}, "openWorldHint": {"value": false}});
        assert_eq!(hint_cell(&effective, "readOnlyHint"), "yes (declared)");
        assert_eq!(hint_cell(&effective, "openWorldHint"), "no");
        assert_eq!(hint_cell(&effective, "destructiveHint"), "?");
    }

    #[test]
    fn short_fingerprints() {
        assert_eq!(short("sha256:0123456789abcdef0123"), "sha256:0123456789ab");
        assert_eq!(short("sha256:01"), "sha256:01");
    }
}
