//! The tools page's inventory: every tool each upstream lists, as the gateway last wrote it to the store, with its
//! four effective hints and their sources, risk badge, lint findings, pin state, whether clients see it and what the
//! policy would do with a call for each configured caller.
//!
//! Read from the store only (`Store::inventory`, written by the gateway after each catalog rebuild): the console
//! never asks the relay. Everything shown is escaped; nothing here decides or changes anything.

use std::fmt::Write as _;

use toolgate_core::decision::Verdict;
use toolgate_store::{InventoryState, InventoryTool, PendingPinChange, PinKind, PinnedTool, ToolSnapshot};

use crate::html::{escape, risk_badge};
use crate::tool_cells::{HINTS, hint_cell, short};

/// What a tool's pin says: pinned at the fingerprint the upstream lists now, pinned at another one, a changed
/// definition waiting for review, or not pinned.
fn pin_state(tool: &InventoryTool, pinned: &[PinnedTool], pending: &[PendingPinChange]) -> String {
    // Tools only: a prompt or resource of the same name has a pin of its own.
    let same = |snapshot: &ToolSnapshot| {
        snapshot.kind == PinKind::Tool && snapshot.upstream == tool.upstream && snapshot.tool == tool.tool
    };
    if pending.iter().any(|change| same(&change.proposed)) {
        return "<strong>change waiting for review</strong>".to_owned();
    }
    match pinned.iter().find(|pin| same(&pin.snapshot)) {
        Some(pin) if pin.snapshot.fingerprint.whole == tool.fingerprint => {
            format!("pinned by {}", escape(&pin.approved_by))
        }
        Some(pin) => format!("pinned at <code>{}</code>", escape(short(&pin.snapshot.fingerprint.whole))),
        None => "not pinned".to_owned(),
    }
}

fn state(tool: &InventoryTool) -> String {
    let hidden_from_all = !tool.access.is_empty() && tool.access.iter().all(|access| access.verdict == Verdict::Hide);
    let word = match tool.state {
        InventoryState::Visible if hidden_from_all => "listed by the upstream, hidden from every caller by the policy",
        InventoryState::Visible => "listed",
        InventoryState::Quarantined => "quarantined",
        InventoryState::Hidden => "hidden",
    };
    let mut out = match &tool.state_reason {
        Some(reason) => format!("{word}: {}", escape(reason)),
        None => word.to_owned(),
    };
    out.push_str(&access(tool));
    out
}

/// Who may do what with the tool, grouped by verdict: "may call: ops (rule) · hidden from: agent (rule)".
fn access(tool: &InventoryTool) -> String {
    if tool.access.is_empty() {
        return String::new();
    }
    let mut groups = Vec::new();
    for verdict in Verdict::ALL {
        let callers: Vec<String> = tool
            .access
            .iter()
            .filter(|access| access.verdict == verdict)
            .map(|access| format!("{} <span class=\"meta\">({})</span>", escape(&access.caller), escape(&access.rule)))
            .collect();
        if callers.is_empty() {
            continue;
        }
        let label = match verdict {
            Verdict::Allow => "may call",
            Verdict::Confirm => "needs approval",
            Verdict::Deny => "refused",
            Verdict::Hide => "hidden from",
        };
        groups.push(format!("<li>{label}: {}</li>", callers.join(", ")));
    }
    format!("<ul class=\"access\">{}</ul>", groups.concat())
}

fn findings(tool: &InventoryTool) -> String {
    if tool.findings.is_empty() {
        return "none".to_owned();
    }
    let errors = tool.findings.iter().filter(|finding| finding.severity == "error").count();
    let summary = match errors {
        0 => format!("{} finding(s)", tool.findings.len()),
        _ => format!("{} finding(s), {errors} error(s)", tool.findings.len()),
    };
    let mut out = format!("<details><summary>{summary}</summary><ul>");
    for finding in &tool.findings {
        let _ = write!(
            out,
            "<li><code>{}</code> {}: {}</li>",
            escape(&finding.code),
            escape(&finding.severity),
            escape(&finding.message)
        );
    }
    out.push_str("</ul></details>");
    out
}

/// The table of every tool (or a line saying the gateway has written none yet).
pub(crate) fn inventory_table(
    out: &mut String,
    tools: &[InventoryTool],
    pinned: &[PinnedTool],
    pending: &[PendingPinChange],
) {
    if tools.is_empty() {
        out.push_str("<p>No tools recorded yet: the gateway writes them once it has listed its upstreams.</p>");
        return;
    }
    let _ = write!(
        out,
        "<div class=\"table-wrap\"><table class=\"inventory\"><caption>{} tool(s), by upstream in listing order; \
         each hint with its source</caption><thead><tr><th scope=\"col\">Tool</th><th scope=\"col\">Upstream</th>",
        tools.len()
    );
    for (_, heading) in HINTS {
        let _ = write!(out, "<th scope=\"col\">{heading}</th>");
    }
    out.push_str(
        "<th scope=\"col\">Risk</th><th scope=\"col\">Lint</th><th scope=\"col\">Pin</th><th scope=\"col\">\
         Clients</th></tr></thead><tbody>",
    );
    for tool in tools {
        let original = if tool.exposed_name == tool.tool {
            String::new()
        } else {
            format!(" <span class=\"meta\">(upstream name <code>{}</code>)</span>", escape(&tool.tool))
        };
        // A look-alike of another name (lint TG310) says what it looks like; policy rules match that form too.
        let original = match toolgate_core::confusable::confusable(&tool.tool) {
            Some(found) => format!(
                "{original} <span class=\"meta\">(looks like <code>{}</code>)</span>",
                escape(&found.looks_like)
            ),
            None => original,
        };
        let _ = write!(
            out,
            "<tr><th scope=\"row\"><code>{name}</code>{original}<br><span class=\"meta\">{title}</span></th><td>{upstream}\
             </td>",
            name = escape(&tool.exposed_name),
            title = escape(&tool.title),
            upstream = escape(&tool.upstream),
        );
        for (key, _) in HINTS {
            let _ = write!(out, "<td>{}</td>", escape(&hint_cell(&tool.hints, key)));
        }
        let _ = write!(
            out,
            "<td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            risk_badge(Some(&tool.risk)),
            findings(tool),
            pin_state(tool, pinned, pending),
            state(tool),
        );
    }
    out.push_str("</tbody></table></div>");
}
