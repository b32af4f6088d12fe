//! Lint: a catalogue of rules with stable codes that check a tool's declared annotations.
//!
//! Each rule has a code (`TG1xx` contradictions, `TG2xx` missing hints, `TG3xx` spelling and shape), a severity
//! and a one-line fix; `docs/lint-rules.md` documents each with an example. Lint reads the raw definition, its
//! normalized annotations and the inference evidence; it never changes anything, and it accuses a declaration
//! only on clear wording: a false alarm on a good declaration costs more trust than a missed one.
//!
//! Layout: [`RULES`] in `catalogue.rs`; the checks by group in `contradictions.rs`, `missing.rs`, `shape.rs`;
//! the strict reading of names and texts in `wording.rs`.
//!
//! ```
//! use toolgate_core::{ToolDefinition, infer::infer_annotations, lint::lint_tool, normalize::normalize_annotations};
//! let tool = ToolDefinition::from_value(serde_json::json!({
//!     "name": "delete_customer",
//!     "title": "Delete customer",
//!     "inputSchema": {"type": "object"},
//!     "annotations": {"readOnlyHint": true, "openWorldHint": false}
//! })).unwrap();
//! let findings = lint_tool(&tool, &normalize_annotations(&tool), &infer_annotations(&tool));
//! assert_eq!(findings[0].code, "TG102");
//! assert_eq!(findings[0].message, "name says `delete` but readOnlyHint is true");
//! assert_eq!(findings[0].pointer.as_deref(), Some("/annotations/readOnlyHint"));
//! ```

mod catalogue;
mod contradictions;
mod missing;
mod shape;
mod wording;

use serde::Serialize;

use crate::hints::Hint;
use crate::infer::Inference;
use crate::normalize::{NormalizationFinding, NormalizedAnnotations};
use crate::tool::ToolDefinition;

pub use catalogue::RULES;

/// How serious a finding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    /// Worth knowing; no action needed.
    Note,
    /// Probably wrong or incomplete.
    Warning,
    /// Certainly wrong: clients will act on a false hint.
    Error,
}

impl Severity {
    /// The stable lowercase name.
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Note => "note",
            Severity::Warning => "warning",
            Severity::Error => "error",
        }
    }
}

/// One rule of the catalogue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Rule {
    /// Stable code, e.g. `TG101`.
    pub code: &'static str,
    /// Stable kebab-case name, e.g. `read-only-and-destructive`.
    pub name: &'static str,
    /// Default severity.
    pub severity: Severity,
    /// One line saying what the rule checks.
    pub summary: &'static str,
    /// One line saying how to fix a finding.
    pub fix: &'static str,
}

/// One finding about one tool.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Finding {
    /// The rule's code.
    pub code: &'static str,
    /// The rule's name.
    pub rule: &'static str,
    /// The severity.
    pub severity: Severity,
    /// What is wrong with this tool, in one line.
    pub message: String,
    /// How to fix it, in one line.
    pub fix: &'static str,
    /// JSON pointer into the tool definition where the problem is, when there is one place.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pointer: Option<String>,
}

/// Looks a rule up by code.
pub fn rule(code: &str) -> Option<&'static Rule> {
    RULES.iter().find(|rule| rule.code == code)
}

impl Finding {
    /// A finding of `rule` with its default severity and fix.
    pub fn new(rule: &Rule, message: String, pointer: Option<String>) -> Finding {
        Finding { code: rule.code, rule: rule.name, severity: rule.severity, message, fix: rule.fix, pointer }
    }
}

/// Lints one tool; findings come most severe first, then by code.
pub fn lint_tool(tool: &ToolDefinition, normalized: &NormalizedAnnotations, inference: &Inference) -> Vec<Finding> {
    let wording = wording::read_wording(tool);
    let mut findings = Vec::new();
    contradictions::check(tool, normalized, &wording, &mut findings);
    missing::check(tool, normalized, &wording, inference, &mut findings);
    shape::check(tool, normalized, &mut findings);
    findings.sort_by(|left, right| {
        right
            .severity
            .cmp(&left.severity)
            .then_with(|| left.code.cmp(right.code))
            .then_with(|| left.pointer.cmp(&right.pointer))
            .then_with(|| left.message.cmp(&right.message))
    });
    findings.dedup();
    findings
}

/// A JSON pointer (RFC 6901) from raw path segments.
pub(crate) fn json_pointer(segments: &[&str]) -> String {
    segments.iter().fold(String::new(), |mut pointer, segment| {
        pointer.push('/');
        pointer.push_str(&segment.replace('~', "~0").replace('/', "~1"));
        pointer
    })
}

/// Where a declared hint was written: the spec key, else the vendor spelling or top-level key it was read from.
///
/// When the hint is not written anywhere, the pointer names the spec key where it belongs.
pub(crate) fn hint_pointer(tool: &ToolDefinition, normalized: &NormalizedAnnotations, hint: Hint) -> String {
    let annotations = tool.annotations();
    if annotations.is_some_and(|annotations| annotations.contains_key(hint.wire_key())) {
        return json_pointer(&["annotations", hint.wire_key()]);
    }
    let written = normalized.findings.iter().find_map(|finding| match finding {
        NormalizationFinding::VendorSpelling { key, hint: found } if *found == hint => {
            Some(json_pointer(&["annotations", key]))
        }
        NormalizationFinding::MisplacedHint { key, hint: found } if *found == hint => Some(json_pointer(&[key])),
        _ => None,
    });
    written.unwrap_or_else(|| json_pointer(&["annotations", hint.wire_key()]))
}

#[cfg(test)]
mod tests;
