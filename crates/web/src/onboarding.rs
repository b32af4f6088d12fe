//! The onboarding page of one upstream (`/console/upstreams/{name}`): every tool it lists with its declared,
//! inferred and enforced hints, the tools that disagree or have lint findings first, and two forms that pin its
//! waiting definitions in one step: all of them, or the agreeing ones ([`InventoryTool::disagreements`]: declared
//! hints the trust rule accepted, no lint error).
//!
//! Both forms carry the exact fingerprints the page showed (hidden `tool`/`fingerprint` pairs), as the tools page's
//! pin form does: a definition that changed again after the page was shown is not pinned (409 naming how many).
//! Declared and inferred hints are computed here with `toolgate_core` from the definition the store holds (the one
//! waiting, else the pinned one); the enforced hints are the gateway's own, from its inventory. Every string an
//! upstream chose is escaped (`crate::html`, `core::display`). Nothing here talks to the relay.

use std::fmt::Write as _;

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::header::LOCATION;
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::{Html, IntoResponse, Response};
use serde_json::Value;
use toolgate_core::{Hint, ToolDefinition, assess_tool};
use toolgate_store::{
    InventoryTool, PendingPinChange, PinDecision, PinDecisionRecord, PinKind, PinnedTool, StoreError, ToolSnapshot,
};

use crate::handlers::{checked_post, not_logged_in, session, store_failure};
use crate::html::{Page, escape, escape_form_value, layout, message};
use crate::tool_cells::{hint_cell, short};
use crate::{Console, form};

/// `/console/upstreams/NAME`, the name percent-encoded so any upstream name makes one path segment.
pub(crate) fn page_path(upstream: &str) -> String {
    let mut path = String::from("/console/upstreams/");
    for byte in upstream.bytes() {
        if byte.is_ascii_alphanumeric() || b"-_.~".contains(&byte) {
            path.push(char::from(byte));
        } else {
            let _ = write!(path, "%{byte:02X}");
        }
    }
    path
}

/// `GET /console/upstreams/{upstream}`.
pub(crate) async fn upstream_page(
    State(console): State<Console>,
    Path(upstream): Path<String>,
    uri: Uri,
    headers: HeaderMap,
) -> Response {
    let Some((_, session)) = session(&console, &headers).await else {
        return not_logged_in(&console, &uri);
    };
    let pins = console.store.pins();
    let (pinned, pending, inventory) =
        match (pins.list().await, pins.list_pending().await, console.store.inventory().await) {
            (Ok(pinned), Ok(pending), Ok(inventory)) => (pinned, pending, inventory),
            (Err(error), _, _) | (_, Err(error), _) | (_, _, Err(error)) => return store_failure(&error),
        };
    // Tools only: a pinned upstream's prompts, resources and instructions wait on the tools page with their kind.
    let ours = |snapshot: &ToolSnapshot| snapshot.upstream == upstream && snapshot.kind == PinKind::Tool;
    let pinned: Vec<PinnedTool> = pinned.into_iter().filter(|pin| ours(&pin.snapshot)).collect();
    let pending: Vec<PendingPinChange> = pending.into_iter().filter(|change| ours(&change.proposed)).collect();
    let inventory: Vec<InventoryTool> = inventory.into_iter().filter(|tool| tool.upstream == upstream).collect();
    if inventory.is_empty() && pending.is_empty() {
        let page = message("Not found", "No upstream by that name has listed tools.", true);
        return (StatusCode::NOT_FOUND, Html(page)).into_response();
    }
    Html(render(&upstream, &pinned, &pending, &inventory, &session.csrf)).into_response()
}

/// One row of the page.
struct Row<'a> {
    name: &'a str,
    listed: Option<&'a InventoryTool>,
    waiting: Option<&'a PendingPinChange>,
    definition: Option<&'a Value>,
    disagreements: Vec<String>,
}

impl Row<'_> {
    /// Whether the gateway assessed the very definition that waits, and found it agreeing.
    fn agrees(&self) -> bool {
        match (self.listed, self.waiting) {
            (Some(listed), Some(waiting)) => {
                listed.fingerprint == waiting.proposed.fingerprint.whole && self.disagreements.is_empty()
            }
            _ => false,
        }
    }

    /// Shown first: what a person should look at before pinning anything.
    fn needs_a_look(&self) -> bool {
        !self.disagreements.is_empty() || self.listed.is_some_and(|listed| !listed.findings.is_empty())
    }
}

fn rows<'a>(pinned: &'a [PinnedTool], pending: &'a [PendingPinChange], inventory: &'a [InventoryTool]) -> Vec<Row<'a>> {
    let mut names: Vec<&str> = inventory.iter().map(|tool| tool.tool.as_str()).collect();
    names.extend(pending.iter().map(|change| change.proposed.tool.as_str()));
    names.sort_unstable();
    names.dedup();
    let mut rows: Vec<Row<'a>> = names
        .into_iter()
        .map(|name| {
            let listed = inventory.iter().find(|tool| tool.tool == name);
            let waiting = pending.iter().find(|change| change.proposed.tool == name);
            let pin = pinned.iter().find(|pin| pin.snapshot.tool == name);
            let definition =
                waiting.map(|change| &change.proposed.definition).or(pin.map(|pin| &pin.snapshot.definition));
            let disagreements = match listed {
                Some(listed) => listed.disagreements(),
                None => vec!["the gateway has not assessed this definition yet".to_owned()],
            };
            Row { name, listed, waiting, definition, disagreements }
        })
        .collect();
    // Disagreements and lint findings first; otherwise by name (already sorted, and the sort is stable).
    rows.sort_by_key(|row| !row.needs_a_look());
    rows
}

fn render(
    upstream: &str,
    pinned: &[PinnedTool],
    pending: &[PendingPinChange],
    inventory: &[InventoryTool],
    csrf: &str,
) -> String {
    let rows = rows(pinned, pending, inventory);
    let mut body = format!("<h1>Upstream <code>{}</code></h1>", escape(upstream));
    let waiting: Vec<&Row> = rows.iter().filter(|row| row.waiting.is_some()).collect();
    let agreeing: Vec<&Row> = waiting.iter().copied().filter(|row| row.agrees()).collect();
    if waiting.is_empty() {
        body.push_str("<p>No definition of this upstream waits to be pinned.</p>");
    } else {
        let _ = write!(
            body,
            "<p>{} definition(s) wait to be pinned; {} agree (declared hints the trust rule accepted, no lint \
             error). Look at the ones listed first before pinning them all.</p><div class=\"actions\">",
            waiting.len(),
            agreeing.len()
        );
        pin_form(&mut body, upstream, &agreeing, csrf, "Pin the agreeing ones", "approve");
        pin_form(&mut body, upstream, &waiting, csrf, "Pin all", "");
        body.push_str("</div>");
    }
    body.push_str(
        "<div class=\"table-wrap\"><table><caption>Disagreements and lint findings first; each hint as declared, \
         inferred and enforced</caption><thead><tr><th scope=\"col\">Tool</th><th scope=\"col\">State</th>",
    );
    for hint in Hint::ALL {
        let _ = write!(body, "<th scope=\"col\">{}</th>", hint.wire_key());
    }
    body.push_str("<th scope=\"col\">Why it does not agree</th><th scope=\"col\">Lint</th></tr></thead><tbody>");
    for row in &rows {
        table_row(&mut body, row);
    }
    body.push_str("</tbody></table></div>");
    layout("Upstream", Page::Tools, Some(csrf), &body)
}

fn table_row(out: &mut String, row: &Row) {
    let state = match (row.waiting, row.listed) {
        (Some(waiting), _) => format!("waiting · <code>{}</code>", escape(short(&waiting.proposed.fingerprint.whole))),
        (None, Some(listed)) => escape(listed.state.as_str()),
        (None, None) => "?".to_owned(),
    };
    // The verification record the gateway weighed as evidence (`toolgate verify`), when there is one.
    let record = row
        .listed
        .and_then(|listed| listed.annotations.get("verification"))
        .and_then(serde_json::Value::as_str)
        .map(|record| format!("<br>evidence <code>{}</code>", escape(record)))
        .unwrap_or_default();
    let _ = write!(out, "<tr><th scope=\"row\"><code>{}</code></th><td>{state}{record}</td>", escape(row.name));
    let assessed = row
        .definition
        .and_then(|definition| ToolDefinition::from_value(definition.clone()).ok())
        .map(|tool| assess_tool(&tool, &Default::default()));
    for hint in Hint::ALL {
        let declared = match &assessed {
            Some(assessment) => match assessment.normalized.declared.get(hint) {
                Some(value) => yes_no(value).to_owned(),
                None => "—".to_owned(),
            },
            None => "?".to_owned(),
        };
        let inferred = match &assessed {
            Some(assessment) => {
                let inferred = assessment.inference.get(hint);
                format!("{} ({:.2})", yes_no(inferred.value), inferred.confidence)
            }
            None => "?".to_owned(),
        };
        let enforced = row.listed.map_or_else(|| "?".to_owned(), |listed| hint_cell(&listed.hints, hint.wire_key()));
        let _ = write!(
            out,
            "<td>declared {}<br>inferred {}<br>enforced {}</td>",
            escape(&declared),
            escape(&inferred),
            escape(&enforced)
        );
    }
    let reasons: Vec<String> = row.disagreements.iter().map(|reason| escape(reason)).collect();
    let findings: Vec<String> = row
        .listed
        .map(|listed| {
            listed
                .findings
                .iter()
                .map(|finding| format!("{} {}: {}", finding.severity, finding.code, finding.message))
                .map(|text| escape(&text))
                .collect()
        })
        .unwrap_or_default();
    let _ = write!(out, "<td>{}</td><td>{}</td></tr>", reasons.join("<br>"), findings.join("<br>"));
}

fn yes_no(value: bool) -> &'static str {
    if value { "yes" } else { "no" }
}

/// A form pinning `rows` at the fingerprints shown; none when there is nothing to pin.
fn pin_form(out: &mut String, upstream: &str, rows: &[&Row], csrf: &str, label: &str, class: &str) {
    if rows.is_empty() {
        return;
    }
    let hidden = |name: &str, value: &str| {
        format!("<input type=\"hidden\" name=\"{name}\" value=\"{}\">", escape_form_value(value))
    };
    let mut fields = hidden("csrf", csrf);
    for row in rows {
        if let Some(waiting) = row.waiting {
            fields.push_str(&hidden("tool", &waiting.proposed.tool));
            fields.push_str(&hidden("fingerprint", &waiting.proposed.fingerprint.whole));
        }
    }
    let _ = write!(
        out,
        "<form method=\"post\" action=\"{action}\">{fields}<button type=\"submit\" class=\"{class}\">{label} ({count})\
         </button></form>",
        action = escape_form_value(&format!("{}/pin", page_path(upstream))),
        count = rows.len(),
    );
}

/// `POST /console/upstreams/{upstream}/pin` with `csrf` and `tool`/`fingerprint` pairs: pins each definition that
/// still waits at the fingerprint given; 409 when any changed since the page was shown (the others are pinned).
pub(crate) async fn pin_upstream(
    State(console): State<Console>,
    Path(upstream): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let post = match checked_post(&console, &headers, &body).await {
        Ok(post) => post,
        Err(refusal) => return refusal.into_response(),
    };
    let decided_by = post.session.identity.as_str();
    let values = |name: &str| -> Vec<&str> {
        post.fields.iter().filter(|(key, _)| key == name).map(|(_, value)| value.as_str()).collect()
    };
    let (tools, fingerprints) = (values("tool"), values("fingerprint"));
    if tools.is_empty() || tools.len() != fingerprints.len() || form::field(&post.fields, "csrf").is_none() {
        let page = message("Bad request", "The form needs tool and fingerprint pairs.", true);
        return (StatusCode::BAD_REQUEST, Html(page)).into_response();
    }
    let decided_by_name = post.session.display.as_deref();
    let records: Vec<PinDecisionRecord<'_>> = tools
        .iter()
        .zip(&fingerprints)
        .map(|(tool, fingerprint)| PinDecisionRecord {
            upstream: &upstream,
            kind: PinKind::Tool,
            name: tool,
            fingerprint,
            decision: PinDecision::Approved,
            decided_by,
            decided_by_name,
        })
        .collect();
    if let Some(refusal) = crate::pins::refuse_pin_decider(&console, &post.session, &records).await {
        return refusal;
    }
    let pins = console.store.pins();
    let mut changed = 0usize;
    for record in &records {
        let (tool, fingerprint) = (record.name, record.fingerprint);
        match pins.pending(&upstream, tool).await {
            Ok(Some(current)) if current.proposed.fingerprint.whole == fingerprint => {}
            Ok(_) => {
                changed += 1;
                continue;
            }
            Err(error) => return store_failure(&error),
        }
        match pins.approve_pending(&upstream, tool, fingerprint, decided_by).await {
            Ok(_) => {}
            Err(StoreError::NotFound(_)) => {
                changed += 1;
                continue;
            }
            Err(error) => return store_failure(&error),
        }
        tracing::info!(upstream, tool, fingerprint, decided_by, "tool definition pinned in the console");
        if let Err(error) = console.store.record_pin(record).await {
            return store_failure(&error);
        }
    }
    if changed > 0 {
        let text = format!(
            "{changed} definition(s) changed or were decided after this page was shown and were not pinned; the \
             others were. Review the page again."
        );
        return (StatusCode::CONFLICT, Html(message("Changed again", &text, true))).into_response();
    }
    (StatusCode::SEE_OTHER, [(LOCATION, page_path(&upstream))]).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn any_upstream_name_is_one_path_segment() {
        assert_eq!(page_path("notes"), "/console/upstreams/notes");
        assert_eq!(page_path("a/b c\"<"), "/console/upstreams/a%2Fb%20c%22%3C");
    }
}
