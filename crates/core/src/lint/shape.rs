//! `TG3xx`: hints written the wrong way: vendor spellings, string booleans, misplaced or unknown keys, bad shapes.
//!
//! Normalization already read these the way the author meant them and recorded each oddity as a
//! [`NormalizationFinding`]; this module only turns those records (and the few shape errors normalization has no
//! record for) into findings with a pointer to the key. It never re-reads hint values itself.

use serde_json::Value;

use super::catalogue::{
    ANNOTATIONS_NOT_AN_OBJECT, CONFLICTING_SPELLINGS, CONFUSABLE_NAME, EXTENDED_HINT, INVALID_HINT_VALUE,
    INVALID_TITLE, LOOSE_BOOLEAN, MISPLACED_HINT, UNKNOWN_ANNOTATION_KEY, VENDOR_SPELLING,
};
use super::{Finding, json_pointer};
use crate::confusable::confusable;
use crate::normalize::{NormalizationFinding, NormalizedAnnotations};
use crate::tool::{ToolDefinition, json_type_name};

/// Runs every spelling and shape check.
pub(super) fn check(tool: &ToolDefinition, normalized: &NormalizedAnnotations, findings: &mut Vec<Finding>) {
    for finding in &normalized.findings {
        findings.push(from_normalization(tool, finding));
    }
    check_annotations_object(tool, findings);
    check_titles(tool, findings);
    check_name(tool, findings);
}

/// `TG310`: a name a person may take for another (policy rules also match what it looks like).
fn check_name(tool: &ToolDefinition, findings: &mut Vec<Finding>) {
    if let Some(found) = confusable(tool.name()) {
        let what = if found.mixed_scripts { "mixes Latin with Cyrillic or Greek letters" } else { "is disguised" };
        let message = format!("the name {} and reads as {}", what, crate::display::quoted(&found.looks_like, 80));
        findings.push(Finding::new(&CONFUSABLE_NAME, message, Some(json_pointer(&["name"]))));
    }
}

/// Where a key was written: inside `annotations` when it is there, else at the top level.
fn key_pointer(tool: &ToolDefinition, key: &str) -> String {
    let in_annotations = tool.annotations().is_some_and(|annotations| annotations.contains_key(key));
    if in_annotations || !tool.raw().contains_key(key) {
        json_pointer(&["annotations", key])
    } else {
        json_pointer(&[key])
    }
}

fn from_normalization(tool: &ToolDefinition, finding: &NormalizationFinding) -> Finding {
    let pointer = Some(key_pointer(tool, finding.key()));
    match finding {
        NormalizationFinding::VendorSpelling { key, hint } => Finding::new(
            &VENDOR_SPELLING,
            format!("`{key}` is not a spec key; it was read as `{}`", hint.wire_key()),
            pointer,
        ),
        NormalizationFinding::LooseBoolean { key, raw, .. } => {
            Finding::new(&LOOSE_BOOLEAN, format!("`{key}` is `{raw}`, not a JSON boolean"), pointer)
        }
        NormalizationFinding::InvalidValue { key, hint, found } => Finding::new(
            &INVALID_HINT_VALUE,
            format!("`{key}` is {found}, not a boolean; `{}` was ignored", hint.wire_key()),
            pointer,
        ),
        NormalizationFinding::MisplacedHint { key, hint } => Finding::new(
            &MISPLACED_HINT,
            format!("`{key}` is at the tool's top level, outside `annotations`; it was read as `{}`", hint.wire_key()),
            Some(json_pointer(&[key])),
        ),
        NormalizationFinding::ConflictingValues { key, hint } => Finding::new(
            &CONFLICTING_SPELLINGS,
            format!("`{key}` disagrees with another spelling of `{}` and was ignored", hint.wire_key()),
            pointer,
        ),
        NormalizationFinding::ExtendedHint { key } => Finding::new(
            &EXTENDED_HINT,
            format!("`{key}` is an extended hint, not a spec field; other clients ignore it"),
            pointer,
        ),
        NormalizationFinding::UnknownKey { key } => {
            Finding::new(&UNKNOWN_ANNOTATION_KEY, format!("`{key}` is not a known annotation key"), pointer)
        }
    }
}

/// `TG308`: `annotations` that is not an object (null counts as absent: some serializers write it for "none").
fn check_annotations_object(tool: &ToolDefinition, findings: &mut Vec<Finding>) {
    match tool.raw().get("annotations") {
        None | Some(Value::Null | Value::Object(_)) => {}
        Some(other) => findings.push(Finding::new(
            &ANNOTATIONS_NOT_AN_OBJECT,
            format!("`annotations` is {}, not an object", json_type_name(other)),
            Some(json_pointer(&["annotations"])),
        )),
    }
}

/// `TG309`: a `title` or `annotations.title` that is present but not a non-empty string.
fn check_titles(tool: &ToolDefinition, findings: &mut Vec<Finding>) {
    let top = tool.raw().get("title").map(|value| (value, json_pointer(&["title"])));
    let nested = tool
        .annotations()
        .and_then(|annotations| annotations.get("title"))
        .map(|value| (value, json_pointer(&["annotations", "title"])));
    for (value, pointer) in [top, nested].into_iter().flatten() {
        let problem = match value {
            Value::Null => None,
            Value::String(text) if text.trim().is_empty() => Some("an empty string".to_owned()),
            Value::String(_) => None,
            other => Some(json_type_name(other).to_owned()),
        };
        if let Some(problem) = problem {
            let message = format!("`{}` is {problem}, not a title", pointer.trim_start_matches('/').replace('/', "."));
            findings.push(Finding::new(&INVALID_TITLE, message, Some(pointer)));
        }
    }
}
