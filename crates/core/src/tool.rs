//! A tool definition kept as the raw JSON object the server sent, with typed read-only accessors.
//!
//! Nothing here rewrites the definition: a relay must be able to forward every field it does not mean to change
//! (icons, `execution`, `_meta`, unknown keys, `$defs` in schemas), and a fingerprint must hash what was sent.

use serde_json::{Map, Value};

/// Why a JSON value is not a usable tool definition.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ToolDefinitionError {
    /// The value is not a JSON object.
    #[error("a tool definition must be a JSON object, found {found}")]
    NotAnObject {
        /// The JSON type that was found instead.
        found: &'static str,
    },
    /// `name` is missing or not a string.
    #[error("a tool definition needs a string `name`")]
    MissingName,
}

/// One tool as the server defined it: the raw JSON object, guaranteed to carry a string `name`.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolDefinition {
    raw: Map<String, Value>,
}

impl ToolDefinition {
    /// Wraps a raw tool object; fails when it is not an object with a string `name`.
    pub fn from_value(value: Value) -> Result<Self, ToolDefinitionError> {
        match value {
            Value::Object(raw) => Self::from_map(raw),
            other => Err(ToolDefinitionError::NotAnObject { found: json_type_name(&other) }),
        }
    }

    /// Wraps a raw tool object map.
    pub fn from_map(raw: Map<String, Value>) -> Result<Self, ToolDefinitionError> {
        match raw.get("name") {
            Some(Value::String(_)) => Ok(ToolDefinition { raw }),
            _ => Err(ToolDefinitionError::MissingName),
        }
    }

    /// The tool's `name` as the server exposes it.
    pub fn name(&self) -> &str {
        self.raw.get("name").and_then(Value::as_str).unwrap_or_default()
    }

    /// The top-level `title` (2025-06-18 and later), when it is a non-empty string.
    pub fn title(&self) -> Option<&str> {
        non_empty_str(self.raw.get("title"))
    }

    /// `annotations.title`, when it is a non-empty string.
    pub fn annotations_title(&self) -> Option<&str> {
        non_empty_str(self.annotations().and_then(|annotations| annotations.get("title")))
    }

    /// The `description`, when present.
    pub fn description(&self) -> Option<&str> {
        non_empty_str(self.raw.get("description"))
    }

    /// The `inputSchema` object, when present.
    pub fn input_schema(&self) -> Option<&Map<String, Value>> {
        self.raw.get("inputSchema").and_then(Value::as_object)
    }

    /// The raw `annotations` object, when present.
    pub fn annotations(&self) -> Option<&Map<String, Value>> {
        self.raw.get("annotations").and_then(Value::as_object)
    }

    /// The raw `_meta` object, when present.
    pub fn meta(&self) -> Option<&Map<String, Value>> {
        self.raw.get("_meta").and_then(Value::as_object)
    }

    /// `_meta.ui.visibility` (MCP Apps), when declared as an array of strings.
    pub fn ui_visibility(&self) -> Option<Vec<&str>> {
        let visibility = self.meta()?.get("ui")?.get("visibility")?.as_array()?;
        Some(visibility.iter().filter_map(Value::as_str).collect())
    }

    /// True when MCP Apps metadata hides the tool from the model (`visibility` without `"model"`).
    pub fn is_app_only(&self) -> bool {
        self.ui_visibility().is_some_and(|visibility| !visibility.contains(&"model"))
    }

    /// The raw JSON object, exactly as received.
    pub fn raw(&self) -> &Map<String, Value> {
        &self.raw
    }

    /// Gives the raw JSON object back.
    pub fn into_raw(self) -> Map<String, Value> {
        self.raw
    }
}

fn non_empty_str(value: Option<&Value>) -> Option<&str> {
    value.and_then(Value::as_str).map(str::trim).filter(|text| !text.is_empty())
}

/// The JSON type name of a value, for error messages.
pub fn json_type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn rejects_values_that_are_not_tools() {
        assert_eq!(ToolDefinition::from_value(json!([1])), Err(ToolDefinitionError::NotAnObject { found: "an array" }));
        assert_eq!(ToolDefinition::from_value(json!({"name": 3})), Err(ToolDefinitionError::MissingName));
    }

    #[test]
    fn app_only_needs_a_visibility_without_model() {
        let app_only = json!({"name": "t", "_meta": {"ui": {"visibility": ["app"]}}});
        let both = json!({"name": "t", "_meta": {"ui": {"visibility": ["model", "app"]}}});
        let plain = json!({"name": "t"});
        assert!(ToolDefinition::from_value(app_only).is_ok_and(|tool| tool.is_app_only()));
        assert!(ToolDefinition::from_value(both).is_ok_and(|tool| !tool.is_app_only()));
        assert!(ToolDefinition::from_value(plain).is_ok_and(|tool| !tool.is_app_only()));
    }
}
