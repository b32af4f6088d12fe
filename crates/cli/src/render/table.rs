//! The `inspect` table: one row per tool with each hint's effective value and source, then the lint findings.
//!
//! Built for a person reading at a glance: risky categories are coloured on a terminal, sources are short words,
//! and a legend explains them. Without a terminal the layout is stable (snapshot-tested).

use comfy_table::{Attribute, Cell, ContentArrangement, Table, presets};
use toolgate_core::display::bounded;
use toolgate_core::{EffectiveHint, Hint, HintSource};

/// Longest server or tool name, version or title shown (all come from the server; each is escaped).
const NAME_CHARS: usize = 120;

use crate::render::{category_color, findings, paint};
use crate::report::{Report, ToolReport};

/// Renders the whole inspect report as text.
pub(crate) fn report(report: &Report, color: bool) -> String {
    let mut out = String::new();
    out.push_str(&header_line(report));
    out.push('\n');
    if report.tools.is_empty() {
        out.push_str("the server lists no tools\n");
        return out;
    }
    out.push_str(&tools_table(report, color).to_string());
    out.push('\n');
    out.push_str(
        "sources: decl = declared by the server, inf = inferred by toolgate (confidence), impl = implied by \
         read-only, cfg = set in config, dflt = spec default; (said …) = the server declared otherwise and the trust \
         rule did not believe it\n",
    );
    // Only when a record was weighed, so a view without records reads as it always did.
    if report.tools.iter().any(|tool| tool.verification.is_some()) {
        out.push_str("seen = observed by `toolgate verify`; the record weighed is named under the tool\n");
    }
    let with_findings = findings::findings_section(report, color);
    if !with_findings.is_empty() {
        out.push('\n');
        out.push_str(&with_findings);
    }
    out.push('\n');
    out.push_str(&findings::summary_line(report));
    out
}

fn header_line(report: &Report) -> String {
    let server = &report.server;
    let mut parts = vec![match &server.version {
        Some(version) => format!("{} {}", bounded(&server.name, NAME_CHARS), bounded(version, NAME_CHARS)),
        None => bounded(&server.name, NAME_CHARS),
    }];
    if let Some(protocol) = &server.protocol_version {
        parts.push(format!("protocol {}", bounded(protocol, NAME_CHARS)));
    }
    parts.push(server.transport.to_owned());
    parts.push(format!("{} tool(s)", report.tools.len()));
    parts.push(format!("hints as enforced under trust {}", report.trust));
    parts.join(" · ")
}

fn tools_table(report: &Report, color: bool) -> Table {
    let mut table = Table::new();
    table.load_style(presets::UTF8_HORIZONTAL_ONLY).set_content_arrangement(ContentArrangement::Dynamic);
    if color {
        table.enforce_styling();
    } else {
        table.force_no_tty();
    }
    table.set_header(
        ["TOOL", "CLASS", "RISK", "READ-ONLY", "DESTRUCTIVE", "IDEMPOTENT", "OPEN-WORLD", "LINT"]
            .into_iter()
            .map(|title| Cell::new(title).add_attribute(Attribute::Bold)),
    );
    for tool in &report.tools {
        table.add_row(tool_row(tool, color));
    }
    table
}

fn tool_row(tool: &ToolReport, color: bool) -> Vec<Cell> {
    // Each part escaped on its own, so the only line break in the cell is the one between name and title.
    let mut name = bounded(&tool.name, NAME_CHARS);
    if let Some(looks_like) = toolgate_core::confusable::confusable(&tool.name).map(|found| found.looks_like) {
        name.push_str(&format!(" (looks like {})", bounded(&looks_like, NAME_CHARS)));
    }
    if tool.title != tool.name {
        name.push('\n');
        name.push_str(&bounded(&tool.title, NAME_CHARS));
    }
    if let Some(record) = &tool.verification {
        name.push('\n');
        name.push_str(record);
    }
    let mut category = Cell::new(tool.category.as_str());
    if color {
        category = category.fg(category_color(tool.category));
    }
    let mut row = vec![Cell::new(name), category, Cell::new(tool.risk_level)];
    for hint in Hint::ALL {
        row.push(Cell::new(hint_cell(tool, hint)));
    }
    row.push(Cell::new(lint_cell(tool, color)));
    row
}

fn hint_cell(tool: &ToolReport, hint: Hint) -> String {
    let effective = tool.effective.get(hint);
    let mut text = format!("{} {}", yes_no(effective.value), source_label(tool, hint, effective));
    if let Some(declared) = tool.declared.get(hint)
        && declared != effective.value
    {
        text.push_str(&format!(" (said {})", yes_no(declared)));
    }
    text
}

fn yes_no(value: bool) -> &'static str {
    if value { "yes" } else { "no" }
}

fn source_label(tool: &ToolReport, hint: Hint, effective: EffectiveHint) -> String {
    match effective.source {
        HintSource::Declared => "decl".into(),
        HintSource::Overridden => "cfg".into(),
        HintSource::Implied => "impl".into(),
        HintSource::Default => "dflt".into(),
        // A verification record's evidence (`toolgate verify`), weighed as the relay weighs it.
        HintSource::Observed => "seen".into(),
        HintSource::Inferred => {
            let confidence = tool
                .inferred
                .get(hint.wire_key())
                .and_then(|inferred| inferred.get("confidence"))
                .and_then(serde_json::Value::as_f64)
                .unwrap_or(0.5);
            format!("inf {confidence:.2}")
        }
    }
}

fn lint_cell(tool: &ToolReport, color: bool) -> String {
    if tool.findings.is_empty() {
        return "ok".into();
    }
    let codes: Vec<String> = tool
        .findings
        .iter()
        .map(|finding| paint(finding.code, crate::render::severity_color(finding.severity), color))
        .collect();
    codes.join(" ")
}
