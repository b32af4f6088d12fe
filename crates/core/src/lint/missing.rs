//! `TG2xx`: hints and titles that client directories require but the tool does not declare.
//!
//! A missing hint is not a wrong one: the spec defaults are the cautious values. These rules ask for explicit
//! declarations so that clients, directories and toolgate need not guess. They read only what was declared (after
//! normalization), never inferred values, except that an app-only tool's writing may be corroborated by inference.

use super::catalogue::{
    APP_ONLY_WRITER_UNANNOTATED, MISSING_DESTRUCTIVE_HINT, MISSING_OPEN_WORLD_HINT, MISSING_READ_ONLY_HINT,
    MISSING_TITLE,
};
use super::wording::Wording;
use super::{Finding, json_pointer};
use crate::hints::Hint;
use crate::infer::{CueSource, Inference};
use crate::normalize::NormalizedAnnotations;
use crate::tool::ToolDefinition;
use crate::words::VerbClass;

/// How sure inference must be, from name or description evidence, before lint trusts it that a tool writes.
const INFERENCE_CONFIDENCE: f32 = 0.8;

/// Runs every missing-hint check.
pub(super) fn check(
    tool: &ToolDefinition,
    normalized: &NormalizedAnnotations,
    wording: &Wording,
    inference: &Inference,
    findings: &mut Vec<Finding>,
) {
    let declared = &normalized.declared;
    let missing = |hint: Hint| Some(json_pointer(&["annotations", hint.wire_key()]));
    if tool.title().is_none() && tool.annotations_title().is_none() {
        let message = "neither `title` nor `annotations.title` is set".to_owned();
        findings.push(Finding::new(&MISSING_TITLE, message, Some(json_pointer(&["title"]))));
    }
    if declared.read_only.is_none() {
        let message = "readOnlyHint is not declared; clients assume the tool writes".to_owned();
        findings.push(Finding::new(&MISSING_READ_ONLY_HINT, message, missing(Hint::ReadOnly)));
    }
    if declared.read_only != Some(true) && declared.destructive.is_none() {
        let message = "destructiveHint is not declared; clients assume the tool may destroy data".to_owned();
        findings.push(Finding::new(&MISSING_DESTRUCTIVE_HINT, message, missing(Hint::Destructive)));
    }
    if declared.open_world.is_none() {
        let message = "openWorldHint is not declared; clients assume the tool reaches the outside world".to_owned();
        findings.push(Finding::new(&MISSING_OPEN_WORLD_HINT, message, missing(Hint::OpenWorld)));
    }
    if tool.is_app_only()
        && declared.has_no_hints()
        && let Some(evidence) = writing_evidence(wording, inference)
    {
        let message = format!("app-only tool whose {evidence} declares no hints");
        findings.push(Finding::new(&APP_ONLY_WRITER_UNANNOTATED, message, Some(json_pointer(&["annotations"]))));
    }
}

/// What says the tool writes: its wording, or inference that is sure from the name or description.
fn writing_evidence(wording: &Wording, inference: &Inference) -> Option<String> {
    if let Some(cue) = wording.primary().filter(|cue| cue.class != VerbClass::Read) {
        return Some(format!("{} says `{}`", cue.place.as_str(), cue.word));
    }
    let inferred = &inference.read_only;
    let textual = inferred.evidence.iter().find(|evidence| {
        matches!(evidence.source, CueSource::Name | CueSource::Title | CueSource::Description) && evidence.weight < 0.0
    });
    match textual {
        Some(evidence) if !inferred.value && inferred.confidence >= INFERENCE_CONFIDENCE => {
            Some(format!("wording suggests writing (`{}`)", evidence.cue))
        }
        _ => None,
    }
}
