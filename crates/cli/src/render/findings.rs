//! Lint findings as text: the `lint` command's default output and the findings section under the inspect table.

use toolgate_core::display::bounded;

use crate::render::{paint, severity_color};

/// Longest server or tool name shown, and longest message (messages quote the server's keys and texts).
const NAME_CHARS: usize = 120;
const MESSAGE_CHARS: usize = 600;
use crate::report::Report;

/// The `lint --format text` output.
pub(crate) fn report(report: &Report, color: bool) -> String {
    let mut out = String::new();
    let section = findings_section(report, color);
    if section.is_empty() {
        out.push_str(&format!("{}: no findings\n", bounded(&report.server.name, NAME_CHARS)));
    } else {
        out.push_str(&section);
    }
    out.push('\n');
    out.push_str(&summary_line(report));
    out
}

/// Every finding, grouped by tool; empty when there are none.
pub(crate) fn findings_section(report: &Report, color: bool) -> String {
    let mut out = String::new();
    for invalid in &report.invalid {
        out.push_str(&format!(
            "tools[{}]: {} invalid tool definition: {}\n",
            invalid.index,
            paint("error", severity_color(toolgate_core::lint::Severity::Error), color),
            bounded(&invalid.error, MESSAGE_CHARS)
        ));
    }
    for tool in &report.tools {
        for finding in &tool.findings {
            out.push_str(&format!(
                "{}: {} {} {}\n    fix: {}\n",
                bounded(&tool.name, NAME_CHARS),
                paint(finding.severity.as_str(), severity_color(finding.severity), color),
                finding.code,
                bounded(&finding.message, MESSAGE_CHARS),
                finding.fix
            ));
        }
    }
    out
}

/// One line of counts.
pub(crate) fn summary_line(report: &Report) -> String {
    let summary = &report.summary;
    format!(
        "{} tool(s): {} read, {} write, {} external, {} destructive; findings: {} error(s), {} warning(s), {} note(s)\n",
        summary.tools,
        summary.read,
        summary.write,
        summary.external,
        summary.destructive,
        summary.errors,
        summary.warnings,
        summary.notes
    )
}
