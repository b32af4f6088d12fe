//! The report `inspect` and `lint` print: one entry per tool with everything `toolgate-core` concluded, and the hints
//! the relay enforces for it under the upstream's trust (`crate::view`, through the catalog's own function), beside
//! the hints the server declared.
//!
//! This is a stable output format (`--json`): field names change only with a major version. Building it is pure;
//! printing is in `render/`.

use serde::Serialize;
use serde_json::{Map, Value};
use toolgate_core::facts::Category;
use toolgate_core::fingerprint::FingerprintError;
use toolgate_core::infer::InferredHint;
use toolgate_core::lint::{Finding, Severity};
use toolgate_core::normalize::ExtendedHints;
use toolgate_core::trust::{Convention, HintRules};
use toolgate_core::{DeclaredHints, EffectiveHints, Hint, ToolDefinition, assess_tool};
use toolgate_spec::UpstreamSpec;

use crate::target::{ServerDescription, ToolSource};

/// Everything about one server's tools.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Report {
    /// Who served the tools.
    pub(crate) server: ServerDescription,
    /// The trust the hints were resolved under (`untrusted`, `pinned`, `verified`), as the upstream's.
    pub(crate) trust: &'static str,
    /// One entry per valid tool, in the server's order.
    pub(crate) tools: Vec<ToolReport>,
    /// Entries of the tools list that are not tool definitions.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) invalid: Vec<InvalidTool>,
    /// Counts for a one-line summary.
    pub(crate) summary: Summary,
}

/// One tool's assessment.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct ToolReport {
    pub(crate) name: String,
    pub(crate) title: String,
    pub(crate) category: Category,
    pub(crate) risk_level: u8,
    pub(crate) action: String,
    /// Hints as declared (after normalization); absent keys were not declared.
    pub(crate) declared: DeclaredHints,
    /// What the relay enforces under the upstream's trust (what a client is told), with the source of each value.
    pub(crate) effective: EffectiveHints,
    /// The trust rule behind each enforced value (`declared-relaxing-rejected`: a declaration not believed).
    pub(crate) rules: HintRules,
    /// The verification record (`verification/<id>`) weighed for this definition, as the relay's `_meta` names it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) verification: Option<String>,
    /// Inferred values for the hints the server did not declare, with confidence and evidence.
    #[serde(skip_serializing_if = "Map::is_empty")]
    pub(crate) inferred: Map<String, Value>,
    /// Extended hints (`costWarning`, `progressIndicators`) carried as facts.
    #[serde(skip_serializing_if = "extended_is_empty")]
    pub(crate) extended: ExtendedHints,
    /// `sha256:` fingerprint of the whole definition.
    pub(crate) fingerprint: String,
    /// Lint findings, most severe first.
    pub(crate) findings: Vec<Finding>,
}

fn extended_is_empty(extended: &ExtendedHints) -> bool {
    extended.cost_warning.is_none() && extended.progress_indicators.is_none()
}

/// An entry of the tools list that could not be read as a tool.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct InvalidTool {
    /// Position in the list, from 0.
    pub(crate) index: usize,
    /// What is wrong.
    pub(crate) error: String,
}

/// Counts over the report.
#[derive(Debug, Clone, Default, Serialize)]
pub(crate) struct Summary {
    pub(crate) tools: usize,
    pub(crate) read: usize,
    pub(crate) write: usize,
    pub(crate) external: usize,
    pub(crate) destructive: usize,
    pub(crate) errors: usize,
    pub(crate) warnings: usize,
    pub(crate) notes: usize,
}

/// Assesses every tool of a source as the relay would for `upstream`.
pub(crate) fn build_report(source: &ToolSource, upstream: &UpstreamSpec) -> Report {
    let mut tools = Vec::new();
    let mut invalid = Vec::new();
    // What the upstream's tools declare, counted as the catalog counts it, so the report shows what the relay does.
    let listing = toolgate_proxy::catalog::listing_convention(&source.tools);
    for (index, raw) in source.tools.iter().enumerate() {
        match ToolDefinition::from_value(raw.clone()) {
            Ok(tool) => match tool_report(&tool, upstream, &listing) {
                Ok(report) => tools.push(report),
                // The relay hides a tool it cannot fingerprint; the report lists it with the invalid ones.
                Err(error) => invalid.push(InvalidTool { index, error: error.to_string() }),
            },
            Err(error) => invalid.push(InvalidTool { index, error: error.to_string() }),
        }
    }
    let summary = summarize(&tools, invalid.len());
    Report { server: source.server.clone(), trust: upstream.trust.level.as_str(), tools, invalid, summary }
}

fn tool_report(
    tool: &ToolDefinition,
    upstream: &UpstreamSpec,
    listing: &Convention,
) -> Result<ToolReport, FingerprintError> {
    let overrides = upstream.overrides.get(tool.name()).cloned().unwrap_or_default();
    let assessment = assess_tool(tool, &overrides);
    let enforced = toolgate_proxy::catalog::enforced_tool(tool, upstream, listing)?;
    let mut inferred = Map::new();
    for hint in Hint::ALL {
        if assessment.normalized.declared.get(hint).is_none() {
            inferred.insert(hint.wire_key().to_owned(), inferred_json(assessment.inference.get(hint)));
        }
    }
    Ok(ToolReport {
        name: tool.name().to_owned(),
        title: enforced.facts.display_title,
        category: enforced.facts.category,
        risk_level: enforced.facts.risk_level,
        action: enforced.facts.action,
        declared: assessment.normalized.declared,
        effective: enforced.hints,
        rules: enforced.trusted.rules,
        verification: upstream
            .trust
            .observations
            .get(&enforced.fingerprint)
            .map(|observation| observation.record.clone()),
        inferred,
        extended: assessment.normalized.extended,
        fingerprint: enforced.fingerprint,
        findings: assessment.findings,
    })
}

fn inferred_json(hint: &InferredHint) -> Value {
    serde_json::to_value(hint).unwrap_or(Value::Null)
}

fn summarize(tools: &[ToolReport], invalid: usize) -> Summary {
    let mut summary = Summary { tools: tools.len(), errors: invalid, ..Summary::default() };
    for tool in tools {
        match tool.category {
            Category::Read => summary.read += 1,
            Category::Write => summary.write += 1,
            Category::External => summary.external += 1,
            Category::Destructive => summary.destructive += 1,
        }
        for finding in &tool.findings {
            match finding.severity {
                Severity::Error => summary.errors += 1,
                Severity::Warning => summary.warnings += 1,
                Severity::Note => summary.notes += 1,
            }
        }
    }
    summary
}
