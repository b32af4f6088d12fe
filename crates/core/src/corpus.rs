//! Parsing one line of the labelled corpus (`shared/corpus/*.jsonl`) into a tool and its declared labels.
//!
//! Pure: the caller reads the file. The tool is rebuilt as an MCP tool object (`name`, `title`, `description`,
//! `inputSchema`) *without* its annotations, so that inference evaluated on it can never see the labels;
//! [`corpus_tool_with_annotations`] gives the tool as the server sent it, for lint evaluation. Unknown fields
//! (`source`, `extraction`, ...) are ignored; `variant` and `title` may be missing, `name` may not.

use serde_json::{Map, Value};

use crate::hints::{DeclaredHints, Hint};
use crate::tool::{ToolDefinition, json_type_name};

/// One labelled tool of the corpus.
#[derive(Debug, Clone, PartialEq)]
pub struct CorpusEntry {
    /// Short id of the MCP server, e.g. `azure-mcp`.
    pub server: String,
    /// The tool name as the server exposes it.
    pub name: String,
    /// Set only when one server defines the same tool twice, depending on configuration.
    pub variant: Option<String>,
    /// The tool as an MCP tool object, without `annotations`.
    pub tool: ToolDefinition,
    /// The explicitly declared annotation keys (title and hints); `None` means not declared.
    pub labels: DeclaredHints,
    /// `annotation_origin`: `literal` or `derived` (hints computed from a per-tool category), when given.
    pub origin: Option<String>,
}

/// Why a corpus line could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CorpusError {
    /// The line is not valid JSON.
    #[error("invalid JSON: {0}")]
    InvalidJson(String),
    /// The line is JSON but not an object.
    #[error("a corpus line must be a JSON object, found {found}")]
    NotAnObject {
        /// The JSON type found.
        found: &'static str,
    },
    /// A required field is missing.
    #[error("missing field `{0}`")]
    MissingField(&'static str),
    /// A field has the wrong JSON type.
    #[error("field `{field}` must be {expected}, found {found}")]
    WrongType {
        /// The field name.
        field: &'static str,
        /// What was expected.
        expected: &'static str,
        /// The JSON type found.
        found: &'static str,
    },
}

/// Parses one corpus line. Blank lines are the caller's business (they fail as invalid JSON here).
pub fn parse_corpus_line(line: &str) -> Result<CorpusEntry, CorpusError> {
    let value: Value = serde_json::from_str(line).map_err(|error| CorpusError::InvalidJson(error.to_string()))?;
    let Value::Object(object) = value else {
        return Err(CorpusError::NotAnObject { found: json_type_name(&value) });
    };
    let name = required_string(&object, "name")?;
    let server = optional_string(&object, "server")?.unwrap_or_default();
    let variant = optional_string(&object, "variant")?;
    let origin = optional_string(&object, "annotation_origin")?;
    let labels = match object.get("annotations") {
        None | Some(Value::Null) => DeclaredHints::default(),
        Some(Value::Object(annotations)) => labels_from(annotations)?,
        Some(other) => {
            return Err(CorpusError::WrongType {
                field: "annotations",
                expected: "an object",
                found: json_type_name(other),
            });
        }
    };
    let tool = tool_from(&object, &name, None)?;
    Ok(CorpusEntry { server, name, variant, tool, labels, origin })
}

/// The tool of a corpus line with its declared `annotations`, as the server sent it (for lint evaluation).
pub fn corpus_tool_with_annotations(line: &str) -> Result<ToolDefinition, CorpusError> {
    let value: Value = serde_json::from_str(line).map_err(|error| CorpusError::InvalidJson(error.to_string()))?;
    let Value::Object(object) = value else {
        return Err(CorpusError::NotAnObject { found: json_type_name(&value) });
    };
    let name = required_string(&object, "name")?;
    tool_from(&object, &name, object.get("annotations").filter(|annotations| annotations.is_object()))
}

fn tool_from(
    object: &Map<String, Value>,
    name: &str,
    annotations: Option<&Value>,
) -> Result<ToolDefinition, CorpusError> {
    let mut raw = Map::new();
    raw.insert("name".into(), Value::String(name.to_owned()));
    if let Some(title) = optional_string(object, "title")? {
        raw.insert("title".into(), Value::String(title));
    }
    if let Some(description) = optional_string(object, "description")? {
        raw.insert("description".into(), Value::String(description));
    }
    match object.get("input_schema") {
        None | Some(Value::Null) => {}
        Some(schema @ Value::Object(_)) => {
            raw.insert("inputSchema".into(), schema.clone());
        }
        Some(other) => {
            return Err(CorpusError::WrongType {
                field: "input_schema",
                expected: "an object",
                found: json_type_name(other),
            });
        }
    }
    if let Some(annotations) = annotations {
        raw.insert("annotations".into(), annotations.clone());
    }
    ToolDefinition::from_map(raw).map_err(|_| CorpusError::MissingField("name"))
}

fn labels_from(annotations: &Map<String, Value>) -> Result<DeclaredHints, CorpusError> {
    let mut labels = DeclaredHints { title: optional_string(annotations, "title")?, ..DeclaredHints::default() };
    for hint in Hint::ALL {
        match annotations.get(hint.wire_key()) {
            None | Some(Value::Null) => {}
            Some(Value::Bool(flag)) => labels.set(hint, Some(*flag)),
            Some(other) => {
                return Err(CorpusError::WrongType {
                    field: hint.wire_key(),
                    expected: "a boolean",
                    found: json_type_name(other),
                });
            }
        }
    }
    Ok(labels)
}

fn required_string(object: &Map<String, Value>, field: &'static str) -> Result<String, CorpusError> {
    optional_string(object, field)?.ok_or(CorpusError::MissingField(field))
}

fn optional_string(object: &Map<String, Value>, field: &'static str) -> Result<Option<String>, CorpusError> {
    match object.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(text)) => Ok(Some(text.clone())),
        Some(other) => Err(CorpusError::WrongType { field, expected: "a string", found: json_type_name(other) }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LINE: &str = r#"{"server": "s", "name": "delete_thing", "title": null, "description": "Deletes a thing.",
        "input_schema": {"type": "object", "properties": {"id": {"type": "string"}}},
        "annotations": {"title": "Delete", "destructiveHint": true, "readOnlyHint": false},
        "annotation_origin": "literal", "source": {"repo": null}}"#;

    #[test]
    fn tool_carries_no_annotations_and_labels_carry_only_explicit_keys() {
        let entry = parse_corpus_line(LINE);
        let Ok(entry) = entry else { return assert!(entry.is_ok(), "{entry:?}") };
        assert_eq!(entry.name, "delete_thing");
        assert_eq!(entry.variant, None);
        assert!(entry.tool.annotations().is_none());
        assert_eq!(entry.tool.title(), None);
        assert!(entry.tool.input_schema().is_some());
        assert_eq!(entry.labels.read_only, Some(false));
        assert_eq!(entry.labels.destructive, Some(true));
        assert_eq!(entry.labels.idempotent, None);
        assert_eq!(entry.labels.title.as_deref(), Some("Delete"));
        let with = corpus_tool_with_annotations(LINE);
        assert!(with.is_ok_and(|tool| tool.annotations().is_some()));
    }

    #[test]
    fn says_what_is_wrong() {
        assert_eq!(parse_corpus_line(r#"{"server": "s"}"#), Err(CorpusError::MissingField("name")));
        assert!(matches!(parse_corpus_line("{"), Err(CorpusError::InvalidJson(_))));
        assert_eq!(parse_corpus_line("[]"), Err(CorpusError::NotAnObject { found: "an array" }));
        assert_eq!(
            parse_corpus_line(r#"{"name": "t", "annotations": {"readOnlyHint": "yes"}}"#),
            Err(CorpusError::WrongType { field: "readOnlyHint", expected: "a boolean", found: "a string" })
        );
    }

    #[test]
    fn tolerates_missing_optional_fields() {
        let entry = parse_corpus_line(r#"{"name": "t", "variant": "safe"}"#);
        assert!(entry.is_ok_and(|entry| entry.variant.as_deref() == Some("safe") && entry.labels.has_no_hints()));
    }
}
