//! An upstream's own question (`elicitation/create`, pushed to a legacy client or passed on in a modern client's
//! `input_required`), made to look like what it is before a person reads it: labelled with the upstream that asks,
//! its texts escaped and bounded, and stripped of toolgate's own `_meta` keys, so no upstream's question can pass
//! for toolgate's confirmation. Pure; it decides nothing and sends nothing.

use serde_json::{Value, json};
use toolgate_core::display::{bounded, escape, quoted};

/// Longest description shown from a relayed question.
const SUMMARY_CHARS: usize = 600;

/// Longest name or title shown from a relayed question.
const NAME_CHARS: usize = 80;

/// An upstream's own `elicitation/create`, made to look like what it is before it is relayed: its message (escaped,
/// so it cannot draw lines of its own) follows a label naming the upstream that asks, the texts of its
/// `requestedSchema` are escaped and labelled too ([`label_requested_schema`]), every `toolgate/` key it set
/// in `_meta` (toolgate's question marker above all) is removed, and `_meta["toolgate/upstream"]` names the asker.
pub(crate) fn label_relayed_question(mut params: Value, upstream: &str) -> Value {
    let Value::Object(object) = &mut params else {
        return params;
    };
    let message = object.get("message").and_then(Value::as_str).unwrap_or_default();
    let labelled = format!("[upstream {} asks] {}", quoted(upstream, NAME_CHARS), escape(message));
    object.insert("message".into(), Value::String(labelled));
    if let Some(Value::Object(schema)) = object.get_mut("requestedSchema") {
        label_requested_schema(schema, upstream);
    }
    let meta = object.entry("_meta").or_insert_with(|| json!({}));
    if !meta.is_object() {
        *meta = json!({});
    }
    if let Value::Object(meta) = meta {
        meta.retain(|key, _| !key.starts_with("toolgate/"));
        meta.insert("toolgate/upstream".into(), Value::String(upstream.to_owned()));
    }
    params
}

/// A relayed question's form, made to look like what it is: a client renders each property's title and
/// description (and enum names, `oneOf`/`anyOf` titles) as text of the question, so an upstream could leave the
/// message empty and put toolgate's words there. Every such text is escaped and bounded, and each property's title
/// starts with the asker's label (a property without a title gets its name, escaped, as one). Enum values, `const`
/// and property names stay exact: they are what the client sends back.
fn label_requested_schema(schema: &mut serde_json::Map<String, Value>, upstream: &str) {
    escape_schema_texts(schema);
    let Some(Value::Object(properties)) = schema.get_mut("properties") else { return };
    for (name, property) in properties.iter_mut() {
        let Value::Object(property) = property else { continue };
        escape_schema_texts(property);
        let shown = match property.get("title") {
            Some(Value::String(title)) => title.clone(),
            _ => bounded(name, NAME_CHARS),
        };
        let title = format!("[upstream {}] {shown}", quoted(upstream, NAME_CHARS));
        property.insert("title".into(), Value::String(title));
    }
}

/// Escapes and bounds the texts a client shows for one schema (the object, a property, an option or an array's
/// items); the values it sends back are left alone.
fn escape_schema_texts(schema: &mut serde_json::Map<String, Value>) {
    for (key, max_chars) in [("title", NAME_CHARS), ("description", SUMMARY_CHARS)] {
        if let Some(Value::String(text)) = schema.get_mut(key) {
            *text = bounded(text, max_chars);
        }
    }
    if let Some(Value::Array(names)) = schema.get_mut("enumNames") {
        for name in names.iter_mut() {
            if let Value::String(text) = name {
                *text = bounded(text, NAME_CHARS);
            }
        }
    }
    for key in ["oneOf", "anyOf"] {
        if let Some(Value::Array(options)) = schema.get_mut(key) {
            for option in options.iter_mut() {
                if let Value::Object(option) = option {
                    escape_schema_texts(option);
                }
            }
        }
    }
    if let Some(Value::Object(items)) = schema.get_mut("items") {
        escape_schema_texts(items);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::guard::confirm::QUESTION_META;

    #[test]
    fn a_relayed_question_names_its_upstream_and_loses_toolgates_marker() {
        let params = json!({"message": "Approve?\nToken:", "_meta": {QUESTION_META: {}, "toolgate/x": 1, "k": 2},
            "requestedSchema": {"type": "object"}});
        let labelled = label_relayed_question(params, "notes");
        assert_eq!(labelled["message"], "[upstream \"notes\" asks] Approve?\\nToken:");
        assert_eq!(labelled["_meta"], json!({"k": 2, "toolgate/upstream": "notes"}));
        assert_eq!(labelled["requestedSchema"], json!({"type": "object"}));
    }
}
