//! Lint: a catalogue of rules with stable codes that check a tool's declared annotations.
//!
//! Each rule has a code (`TG1xx` contradictions, `TG2xx` missing hints, `TG3xx` spelling and shape), a severity
//! and a one-line fix; `docs/lint-rules.md` documents each with an example. Lint reads the raw definition, its
//! normalized annotations and the inference evidence; it never changes anything.

use serde::Serialize;

use crate::infer::Inference;
use crate::normalize::NormalizedAnnotations;
use crate::tool::ToolDefinition;

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

/// The rule catalogue, in code order.
pub const RULES: &[Rule] = &[];

/// Looks a rule up by code.
pub fn rule(code: &str) -> Option<&'static Rule> {
    RULES.iter().find(|rule| rule.code == code)
}

/// Lints one tool; findings come most severe first, then by code.
pub fn lint_tool(tool: &ToolDefinition, normalized: &NormalizedAnnotations, inference: &Inference) -> Vec<Finding> {
    let _ = (tool, normalized, inference);
    Vec::new()
}
