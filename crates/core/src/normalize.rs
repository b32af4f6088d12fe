//! Reading declared hints the way servers really write them.
//!
//! The spec keys (`readOnlyHint`, ...) are read as they are. Spellings seen in the wild (`readOnly`, `destructive`,
//! `read_only_hint`, `ReadOnlyHint`), string and numeric booleans (`"true"`, `"no"`, `1`) and hints placed at the
//! top level of the tool instead of inside `annotations` are accepted too, each with a finding so that lint can ask
//! the author to fix it. Extended hints that some guides recommend (`costWarning`, `progressIndicators`) are
//! carried as [`ExtendedHints`]: toolgate facts, never mistaken for spec fields. This module never changes the raw
//! definition.

use serde::Serialize;
use serde_json::{Map, Value};

use crate::hints::{DeclaredHints, Hint};
use crate::tool::{ToolDefinition, json_type_name};

/// The declared annotations of one tool after normalization, with what had to be normalized.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct NormalizedAnnotations {
    /// The hint values as the author meant them.
    pub declared: DeclaredHints,
    /// Non-spec hints toolgate recognizes and carries for policy.
    pub extended: ExtendedHints,
    /// One entry per key that was not written the spec's way.
    pub findings: Vec<NormalizationFinding>,
}

/// Extended hints from annotation guides outside the spec, carried as facts (never as spec hints).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ExtendedHints {
    /// `costWarning`: calling the tool costs money or quota (true, or a text saying how much).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cost_warning: Option<Value>,
    /// `progressIndicators`: the tool reports progress (it is long-running).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub progress_indicators: Option<Value>,
}

impl ExtendedHints {
    /// True when the author warned that a call costs something.
    pub fn warns_of_cost(&self) -> bool {
        match &self.cost_warning {
            Some(Value::Bool(flag)) => *flag,
            Some(Value::String(text)) => !text.trim().is_empty() && parse_loose_bool(text) != Some(false),
            Some(Value::Null) | None => false,
            Some(_) => true,
        }
    }
}

/// What was unusual about one annotation key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum NormalizationFinding {
    /// A hint under a vendor spelling, e.g. `readOnly` for `readOnlyHint`.
    VendorSpelling {
        /// The key as written.
        key: String,
        /// The spec hint it was read as.
        hint: Hint,
    },
    /// A boolean written as a string or number, e.g. `"true"`.
    LooseBoolean {
        /// The key as written.
        key: String,
        /// The spec hint it was read as.
        hint: Hint,
        /// The raw value, as JSON text.
        raw: String,
    },
    /// A value that is no boolean at all; it was ignored.
    InvalidValue {
        /// The key as written.
        key: String,
        /// The spec hint it would have set.
        hint: Hint,
        /// The JSON type found.
        found: &'static str,
    },
    /// Two spellings of one hint disagree; the spec spelling (or the first one seen) wins.
    ConflictingValues {
        /// The key whose value was ignored.
        key: String,
        /// The hint both keys set.
        hint: Hint,
    },
    /// A hint written at the tool's top level instead of inside `annotations`.
    MisplacedHint {
        /// The key as written.
        key: String,
        /// The spec hint it was read as.
        hint: Hint,
    },
    /// A recognized extended hint (`costWarning`, `progressIndicators`): carried, not a spec field.
    ExtendedHint {
        /// The key as written.
        key: String,
    },
    /// A key inside `annotations` that neither the spec nor toolgate knows.
    UnknownKey {
        /// The key as written.
        key: String,
    },
}

impl NormalizationFinding {
    /// The key the finding is about.
    pub fn key(&self) -> &str {
        match self {
            NormalizationFinding::VendorSpelling { key, .. }
            | NormalizationFinding::LooseBoolean { key, .. }
            | NormalizationFinding::InvalidValue { key, .. }
            | NormalizationFinding::ConflictingValues { key, .. }
            | NormalizationFinding::MisplacedHint { key, .. }
            | NormalizationFinding::ExtendedHint { key }
            | NormalizationFinding::UnknownKey { key } => key,
        }
    }
}

/// What a key inside `annotations` means once spelling is ignored.
enum KeyMeaning {
    Hint(Hint),
    Title,
    CostWarning,
    ProgressIndicators,
    Unknown,
}

fn key_meaning(key: &str) -> KeyMeaning {
    let folded: String =
        key.chars().filter(|character| *character != '_' && *character != '-').collect::<String>().to_lowercase();
    let stem = folded.strip_prefix("is").unwrap_or(&folded);
    let stem = stem.strip_suffix("hint").unwrap_or(stem);
    match stem {
        "readonly" => KeyMeaning::Hint(Hint::ReadOnly),
        "destructive" => KeyMeaning::Hint(Hint::Destructive),
        "idempotent" => KeyMeaning::Hint(Hint::Idempotent),
        "openworld" => KeyMeaning::Hint(Hint::OpenWorld),
        "title" if key == "title" => KeyMeaning::Title,
        "costwarning" => KeyMeaning::CostWarning,
        "progressindicators" | "progressindicator" => KeyMeaning::ProgressIndicators,
        _ => KeyMeaning::Unknown,
    }
}

/// The spec hint an annotation key stands for under any spelling toolgate reads (`readOnly`, `read_only_hint`,
/// `ReadOnlyHint`, the spec key itself), or `None`. The relay uses it to remove other spellings that would
/// contradict the hints it rewrote.
pub fn hint_of_key(key: &str) -> Option<Hint> {
    match key_meaning(key) {
        KeyMeaning::Hint(hint) => Some(hint),
        _ => None,
    }
}

/// A boolean-ish value as toolgate reads a hint (`true`, `"yes"`, `1`), or `None` when it is no boolean at all.
pub fn loose_bool(value: &Value) -> Option<bool> {
    read_bool(value).ok().map(|(flag, _)| flag)
}

/// Parses `"true"`, `"False"`, `"yes"`, `"no"`, `"1"`, `"0"`, `"on"`, `"off"`.
pub fn parse_loose_bool(text: &str) -> Option<bool> {
    match text.trim().to_ascii_lowercase().as_str() {
        "true" | "yes" | "1" | "on" | "y" => Some(true),
        "false" | "no" | "0" | "off" | "n" => Some(false),
        _ => None,
    }
}

/// Reads a boolean-ish value: `Ok(Some(strict))` where `strict` tells whether it was a real JSON boolean.
fn read_bool(value: &Value) -> Result<(bool, bool), &'static str> {
    match value {
        Value::Bool(flag) => Ok((*flag, true)),
        Value::String(text) => parse_loose_bool(text).map(|flag| (flag, false)).ok_or("a string"),
        Value::Number(number) => match number.as_u64() {
            Some(0) => Ok((false, false)),
            Some(1) => Ok((true, false)),
            _ => Err("a number"),
        },
        other => Err(json_type_name(other)),
    }
}

/// Reads the declared annotations of a tool: spec keys first, then vendor spellings, then top-level hints.
pub fn normalize_annotations(tool: &ToolDefinition) -> NormalizedAnnotations {
    let mut normalized = NormalizedAnnotations::default();
    if let Some(annotations) = tool.annotations() {
        read_annotation_object(annotations, &mut normalized);
    }
    read_top_level_hints(tool.raw(), &mut normalized);
    normalized
}

fn read_annotation_object(annotations: &Map<String, Value>, normalized: &mut NormalizedAnnotations) {
    // Spec spellings are read first so that they win over vendor spellings whatever the key order.
    let (spec_keys, other_keys): (Vec<_>, Vec<_>) =
        annotations.iter().partition(|(key, _)| Hint::from_wire_key(key).is_some() || key.as_str() == "title");
    for (key, value) in spec_keys.into_iter().chain(other_keys) {
        match key_meaning(key) {
            KeyMeaning::Hint(hint) => read_hint(key, value, hint, false, normalized),
            KeyMeaning::Title => {
                normalized.declared.title = value.as_str().map(str::to_owned);
            }
            KeyMeaning::CostWarning => {
                normalized.extended.cost_warning = Some(value.clone());
                normalized.findings.push(NormalizationFinding::ExtendedHint { key: key.clone() });
            }
            KeyMeaning::ProgressIndicators => {
                normalized.extended.progress_indicators = Some(value.clone());
                normalized.findings.push(NormalizationFinding::ExtendedHint { key: key.clone() });
            }
            KeyMeaning::Unknown => normalized.findings.push(NormalizationFinding::UnknownKey { key: key.clone() }),
        }
    }
}

fn read_top_level_hints(raw: &Map<String, Value>, normalized: &mut NormalizedAnnotations) {
    for (key, value) in raw {
        // Only exact spec spellings and the common `readOnly`-style forms count at the top level: a top-level
        // `title` is the tool's own title, and arbitrary keys there are none of toolgate's business.
        if let KeyMeaning::Hint(hint) = key_meaning(key) {
            read_hint(key, value, hint, true, normalized);
        }
    }
}

fn read_hint(key: &str, value: &Value, hint: Hint, top_level: bool, normalized: &mut NormalizedAnnotations) {
    let (flag, strict) = match read_bool(value) {
        Ok(parsed) => parsed,
        Err(found) => {
            normalized.findings.push(NormalizationFinding::InvalidValue { key: key.to_owned(), hint, found });
            return;
        }
    };
    if top_level {
        normalized.findings.push(NormalizationFinding::MisplacedHint { key: key.to_owned(), hint });
    } else if key != hint.wire_key() {
        normalized.findings.push(NormalizationFinding::VendorSpelling { key: key.to_owned(), hint });
    }
    if !strict {
        normalized.findings.push(NormalizationFinding::LooseBoolean {
            key: key.to_owned(),
            hint,
            raw: value.to_string(),
        });
    }
    match normalized.declared.get(hint) {
        None => normalized.declared.set(hint, Some(flag)),
        Some(existing) if existing != flag => {
            normalized.findings.push(NormalizationFinding::ConflictingValues { key: key.to_owned(), hint });
        }
        Some(_) => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn normalize(value: Value) -> NormalizedAnnotations {
        match ToolDefinition::from_value(value) {
            Ok(tool) => normalize_annotations(&tool),
            Err(error) => unreachable!("test tool is valid: {error}"),
        }
    }

    #[test]
    fn spec_keys_need_no_findings() {
        let normalized = normalize(json!({"name": "t", "annotations": {
            "title": "T", "readOnlyHint": true, "destructiveHint": false, "idempotentHint": true, "openWorldHint": false
        }}));
        assert!(normalized.findings.is_empty(), "{:?}", normalized.findings);
        assert_eq!(normalized.declared.read_only, Some(true));
        assert_eq!(normalized.declared.open_world, Some(false));
        assert_eq!(normalized.declared.title.as_deref(), Some("T"));
    }

    #[test]
    fn vendor_spellings_and_string_booleans_are_read_with_findings() {
        let normalized = normalize(json!({"name": "t", "annotations": {
            "readOnly": "true", "destructive_hint": false, "Idempotent": 1, "open_world": "no"
        }}));
        assert_eq!(normalized.declared.read_only, Some(true));
        assert_eq!(normalized.declared.destructive, Some(false));
        assert_eq!(normalized.declared.idempotent, Some(true));
        assert_eq!(normalized.declared.open_world, Some(false));
        let spelling = normalized
            .findings
            .iter()
            .filter(|finding| matches!(finding, NormalizationFinding::VendorSpelling { .. }))
            .count();
        let loose = normalized
            .findings
            .iter()
            .filter(|finding| matches!(finding, NormalizationFinding::LooseBoolean { .. }))
            .count();
        assert_eq!((spelling, loose), (4, 3));
    }

    #[test]
    fn spec_spelling_wins_over_a_conflicting_vendor_spelling_in_any_order() {
        let normalized = normalize(json!({"name": "t", "annotations": {"readOnly": true, "readOnlyHint": false}}));
        assert_eq!(normalized.declared.read_only, Some(false));
        assert!(
            normalized
                .findings
                .contains(&NormalizationFinding::ConflictingValues { key: "readOnly".into(), hint: Hint::ReadOnly })
        );
    }

    #[test]
    fn extended_hints_are_facts_not_spec_hints() {
        let normalized = normalize(
            json!({"name": "t", "annotations": {"costWarning": "about $0.10", "progressIndicators": true, "category": "x"}}),
        );
        assert!(normalized.declared.has_no_hints());
        assert!(normalized.extended.warns_of_cost());
        assert_eq!(normalized.extended.progress_indicators, Some(json!(true)));
        assert!(normalized.findings.contains(&NormalizationFinding::UnknownKey { key: "category".into() }));
    }

    #[test]
    fn invalid_values_are_ignored_and_reported() {
        let normalized =
            normalize(json!({"name": "t", "annotations": {"readOnlyHint": "maybe", "destructiveHint": [true]}}));
        assert!(normalized.declared.has_no_hints());
        assert_eq!(normalized.findings.len(), 2);
    }

    #[test]
    fn top_level_hints_count_when_annotations_say_nothing() {
        let normalized = normalize(json!({"name": "t", "readOnlyHint": true}));
        assert_eq!(normalized.declared.read_only, Some(true));
        assert!(matches!(normalized.findings.as_slice(), [NormalizationFinding::MisplacedHint { .. }]));
    }
}
