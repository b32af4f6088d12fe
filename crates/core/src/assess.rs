//! One call that computes everything toolgate knows about a tool: declared, inferred and effective hints, facts,
//! fingerprint and lint findings.
//!
//! `inspect`, `lint` and the relay's `tools/list` all go through [`assess_tool`], so they never disagree.

use serde::Serialize;

use crate::effective::{EffectiveHints, HintOverrides, resolve_hints};
use crate::facts::{ToolFacts, tool_facts};
use crate::fingerprint::{FingerprintError, ToolFingerprint, fingerprint_tool};
use crate::infer::model::LinearModel;
use crate::infer::{Inference, infer_annotations_with};
use crate::lint::{Finding, lint_tool};
use crate::normalize::{NormalizedAnnotations, normalize_annotations};
use crate::tool::ToolDefinition;

/// Everything toolgate concludes about one tool.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Assessment {
    /// Declared hints after normalization, with normalization findings.
    pub normalized: NormalizedAnnotations,
    /// Inferred hints with evidence (computed for every tool; used only where nothing better is known).
    pub inference: Inference,
    /// The hints a client should assume, with their sources.
    pub effective: EffectiveHints,
    /// Category, risk level, action phrase and display title.
    pub facts: ToolFacts,
    /// The definition's fingerprint, or why it could not be computed.
    #[serde(serialize_with = "serialize_fingerprint")]
    pub fingerprint: Result<ToolFingerprint, FingerprintError>,
    /// Lint findings, most severe first.
    pub findings: Vec<Finding>,
}

/// Assesses one tool; `overrides` are the operator's per-tool hint settings.
pub fn assess_tool(tool: &ToolDefinition, overrides: &HintOverrides) -> Assessment {
    assess_tool_with(tool, overrides, LinearModel::builtin())
}

/// [`assess_tool`] with another learned model (the eval scores each server with a model trained without it).
pub fn assess_tool_with(tool: &ToolDefinition, overrides: &HintOverrides, model: &LinearModel) -> Assessment {
    let normalized = normalize_annotations(tool);
    let inference = infer_annotations_with(tool, model);
    let effective = resolve_hints(overrides, &normalized.declared, Some(&inference));
    let facts = tool_facts(tool, &effective);
    let findings = lint_tool(tool, &normalized, &inference);
    Assessment { normalized, inference, effective, facts, fingerprint: fingerprint_tool(tool), findings }
}

fn serialize_fingerprint<S: serde::Serializer>(
    fingerprint: &Result<ToolFingerprint, FingerprintError>,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    match fingerprint {
        Ok(fingerprint) => fingerprint.serialize(serializer),
        Err(error) => serializer.serialize_str(&error.to_string()),
    }
}
