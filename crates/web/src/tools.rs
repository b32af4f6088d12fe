//! The tools page: the changed definitions held in quarantine (a possible rug pull) with a field-by-field diff and
//! approve / reject forms, every tool the upstreams list ([`crate::inventory`]), and every pinned definition with
//! its effective hints.
//!
//! Approving binds to the fingerprint the page showed (a hidden form field): a definition that changed again while
//! the person read the diff is refused with 409, never pinned by accident. Decisions go to the store, where the
//! gateway reads pins on its next listing, exactly as `toolgate pins approve | reject` does.

use std::fmt::Write as _;

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use serde_json::Value;
use toolgate_core::definition_diff::field_diff;
use toolgate_store::{
    InventoryTool, PendingPinChange, PinDecision, PinDecisionRecord, PinKind, PinnedTool, StoreError,
};

use crate::handlers::{checked_post, see_other, session, store_failure, unauthorized};
use crate::html::{Page, escape, escape_form_value, escape_markup, layout, message};
use crate::inventory::inventory_table;
use crate::session::Session;
use crate::{Console, form};

/// Most diff lines shown for one field before the rest is counted instead.
const MAX_DIFF_LINES: usize = 40;

/// The hints, in the order the page shows them, with their column headings.
pub(crate) const HINTS: [(&str, &str); 4] = [
    ("readOnlyHint", "Read-only"),
    ("destructiveHint", "Destructive"),
    ("idempotentHint", "Idempotent"),
    ("openWorldHint", "Open world"),
];

/// `GET /console/tools`.
pub(crate) async fn tools_page(State(console): State<Console>, headers: HeaderMap) -> Response {
    let Some((_, session)) = session(&console, &headers).await else {
        return unauthorized();
    };
    let pins = console.store.pins();
    let (pinned, pending, inventory) =
        match (pins.list().await, pins.list_pending().await, console.store.inventory().await) {
            (Ok(pinned), Ok(pending), Ok(inventory)) => (pinned, pending, inventory),
            (Err(error), _, _) | (_, Err(error), _) | (_, _, Err(error)) => return store_failure(&error),
        };
    Html(render(&pinned, &pending, &inventory, &session.csrf)).into_response()
}

/// `POST /console/pins/{approve|reject}` with `csrf`, `upstream`, `tool` and `fingerprint` fields.
pub(crate) async fn decide_pin(
    State(console): State<Console>,
    Path(decision): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let post = match checked_post(&console, &headers, &body).await {
        Ok(post) => post,
        Err(refusal) => return refusal.into_response(),
    };
    let (fields, decided_by) = (&post.fields, post.session.identity.as_str());
    let (Some(upstream), Some(tool), Some(fingerprint)) =
        (form::field(fields, "upstream"), form::field(fields, "tool"), form::field(fields, "fingerprint"))
    else {
        let page = message("Bad request", "The form needs upstream, tool and fingerprint.", true);
        return (StatusCode::BAD_REQUEST, Html(page)).into_response();
    };
    // Forms from before pins had kinds carry none: those are tools.
    let Some(kind) = form::field(fields, "kind").map_or(Some(PinKind::Tool), PinKind::parse) else {
        let page = message("Bad request", "The form names an unknown kind of definition.", true);
        return (StatusCode::BAD_REQUEST, Html(page)).into_response();
    };
    let pins = console.store.pins();
    let current = match pins.pending_of(upstream, kind, tool).await {
        Ok(current) => current,
        Err(error) => return store_failure(&error),
    };
    let Some(current) = current else {
        let page = message("Not found", "This tool has no definition waiting for review.", true);
        return (StatusCode::NOT_FOUND, Html(page)).into_response();
    };
    if current.proposed.fingerprint.whole != fingerprint {
        let text = "The definition changed again after this page was shown; review the new diff.";
        return (StatusCode::CONFLICT, Html(message("Changed again", text, true))).into_response();
    }
    let recorded = match decision.as_str() {
        "approve" => PinDecision::Approved,
        "reject" => PinDecision::Rejected,
        _ => return StatusCode::NOT_FOUND.into_response(),
    };
    let record = PinDecisionRecord {
        upstream,
        kind,
        name: tool,
        fingerprint,
        decision: recorded,
        decided_by,
        decided_by_name: post.session.display.as_deref(),
    };
    if let Some(refusal) = refuse_pin_decider(&console, &post.session, &[record]).await {
        return refusal;
    }
    let result = match recorded {
        PinDecision::Approved => {
            pins.approve_pending_of(upstream, kind, tool, fingerprint, decided_by).await.map(|_| ())
        }
        PinDecision::Rejected => pins.reject_pending_of(upstream, kind, tool).await.map(|_| ()),
    };
    match result {
        Ok(()) => {
            let kind_name = kind.as_str();
            tracing::info!(
                upstream,
                kind = kind_name,
                tool,
                fingerprint,
                decision,
                decided_by,
                "definition decided in the console"
            );
            match console.store.record_pin(&record).await {
                Ok(_) => see_other("/console/tools"),
                Err(error) => store_failure(&error),
            }
        }
        Err(StoreError::NotFound(_)) => {
            let text = "The definition was decided or changed while this request ran; review the page again.";
            (StatusCode::CONFLICT, Html(message("Changed again", text, true))).into_response()
        }
        Err(error) => store_failure(&error),
    }
}

/// A `403` page (after one audit row per definition, outcome `refused`) when the approver rules forbid this person
/// the decisions in `records`; `None` when they may go on. A definition has no caller, so only the approver group
/// applies, to pinning and rejecting alike.
pub(crate) async fn refuse_pin_decider(
    console: &Console,
    session: &Session,
    records: &[PinDecisionRecord<'_>],
) -> Option<Response> {
    let approve = records.iter().any(|record| record.decision == PinDecision::Approved);
    let reason = crate::approvers::may_decide(console, session, None, approve).err()?.reason();
    tracing::warn!(decided_by = %session.identity, reason, "console: a pin decision was refused");
    for record in records {
        if let Err(error) = console.store.record_pin_refusal(record, &reason).await {
            return Some(store_failure(&error));
        }
    }
    let text = format!("Refused: {reason}. The definition still waits for someone else.");
    Some((StatusCode::FORBIDDEN, Html(message("Not allowed", &text, true))).into_response())
}

/// The whole tools page.
fn render(pinned: &[PinnedTool], pending: &[PendingPinChange], inventory: &[InventoryTool], csrf: &str) -> String {
    let mut body = String::from("<h1>Tools</h1>");
    // One page per upstream with definitions waiting: review them side by side and pin them in one step.
    let mut waiting: Vec<&str> = pending
        .iter()
        .filter(|change| change.proposed.kind == PinKind::Tool)
        .map(|change| change.proposed.upstream.as_str())
        .collect();
    waiting.sort_unstable();
    waiting.dedup();
    if !waiting.is_empty() {
        body.push_str("<p>Onboard an upstream (every waiting definition, disagreements first):");
        for upstream in waiting {
            let _ = write!(
                body,
                " <a href=\"{}\"><code>{}</code></a>",
                escape_form_value(&crate::onboarding::page_path(upstream)),
                escape(upstream)
            );
        }
        body.push_str("</p>");
    }
    body.push_str("<h2>Changed definitions waiting for review</h2>");
    if pending.is_empty() {
        body.push_str("<p>No changed definitions are waiting.</p>");
    }
    for change in pending {
        let pin = pinned.iter().find(|pin| {
            pin.snapshot.upstream == change.proposed.upstream
                && pin.snapshot.kind == change.proposed.kind
                && pin.snapshot.tool == change.proposed.tool
        });
        pending_card(&mut body, change, pin, csrf);
    }
    body.push_str("<h2 id=\"every-tool\">Every tool</h2>");
    inventory_table(&mut body, inventory, pinned, pending);
    body.push_str("<h2>Pinned tools</h2>");
    if pinned.is_empty() {
        body.push_str("<p>No tool is pinned yet.</p>");
    } else {
        pinned_table(&mut body, pinned);
    }
    layout("Tools", Page::Tools, Some(csrf), &body)
}

fn pending_card(out: &mut String, change: &PendingPinChange, pin: Option<&PinnedTool>, csrf: &str) {
    let proposed = &change.proposed;
    let heading = format!("change-{}", escape(&proposed.fingerprint.whole).replace(':', "-"));
    let what = if pin.is_some() { "changed since it was pinned" } else { "new, not pinned yet" };
    let _ = write!(
        out,
        "<article class=\"card\" aria-labelledby=\"{heading}\"><h3 id=\"{heading}\">{kind}<code>{tool}</code> on \
         <strong>{upstream}</strong></h3><p class=\"meta\">{what} · first seen {detected} · proposed <code>{fp}</code>\
         </p>",
        kind = kind_label(proposed.kind),
        tool = escape(&proposed.tool),
        upstream = escape(&proposed.upstream),
        detected = escape(&change.detected_at),
        fp = escape(short(&proposed.fingerprint.whole)),
    );
    let older = pin.map(|pin| &pin.snapshot.definition).unwrap_or(&Value::Null);
    for (field, kind) in &change.changes {
        let lines = field_diff(older, &proposed.definition, field);
        let hidden = lines.len().saturating_sub(MAX_DIFF_LINES);
        let mut shown = lines.into_iter().take(MAX_DIFF_LINES).collect::<Vec<_>>().join("\n");
        if hidden > 0 {
            let _ = write!(shown, "\n… and {hidden} more change(s)");
        }
        let _ = write!(
            out,
            "<h4><code>{}</code> {}</h4><pre class=\"diff\">{}</pre>",
            escape(field),
            kind.as_str(),
            escape_markup(&shown)
        );
    }
    let hidden = |name: &str, value: &str| {
        format!("<input type=\"hidden\" name=\"{name}\" value=\"{}\">", escape_form_value(value))
    };
    let fields = [
        hidden("csrf", csrf),
        hidden("upstream", &proposed.upstream),
        hidden("kind", proposed.kind.as_str()),
        hidden("tool", &proposed.tool),
        hidden("fingerprint", &proposed.fingerprint.whole),
    ]
    .concat();
    let _ = write!(
        out,
        "<div class=\"actions\"><form method=\"post\" action=\"/console/pins/approve\">{fields}<button type=\"submit\" \
         class=\"approve\">Pin this definition</button></form><form method=\"post\" action=\"/console/pins/reject\">\
         {fields}<button type=\"submit\" class=\"deny\">Reject</button></form></div></article>"
    );
}

fn pinned_table(out: &mut String, pinned: &[PinnedTool]) {
    out.push_str(
        "<div class=\"table-wrap\"><table><caption>By upstream, then tool</caption><thead><tr><th scope=\"col\">\
         Upstream</th><th scope=\"col\">Tool</th>",
    );
    for (_, heading) in HINTS {
        let _ = write!(out, "<th scope=\"col\">{heading}</th>");
    }
    out.push_str("<th scope=\"col\">Fingerprint</th><th scope=\"col\">Approved</th></tr></thead><tbody>");
    for pin in pinned {
        let snapshot = &pin.snapshot;
        let _ = write!(
            out,
            "<tr><td>{}</td><td>{}<code>{}</code></td>",
            escape(&snapshot.upstream),
            kind_label(snapshot.kind),
            escape(&snapshot.tool)
        );
        for (key, _) in HINTS {
            let _ = write!(out, "<td>{}</td>", escape(&hint_cell(&snapshot.effective_hints, key)));
        }
        let _ = write!(
            out,
            "<td><code title=\"{full}\">{short}</code></td><td>{at} by {by}</td></tr>",
            full = escape(&snapshot.fingerprint.whole),
            short = escape(short(&snapshot.fingerprint.whole)),
            at = escape(&pin.approved_at),
            by = escape(&pin.approved_by),
        );
    }
    out.push_str("</tbody></table></div>");
}

/// The kind before a definition's name, for every kind but a tool (`prompt `, `resource template `, ...): fixed text.
fn kind_label(kind: PinKind) -> String {
    match kind {
        PinKind::Tool => String::new(),
        kind => format!("{} ", kind.as_str().replace('_', " ")),
    }
}

/// `yes (declared)`, `no (inferred)`, ... from the stored effective hints; `?` when the row lacks the hint.
pub(crate) fn hint_cell(effective: &Value, key: &str) -> String {
    let hint = effective.get(key);
    let value = hint.and_then(|hint| hint.get("value")).and_then(Value::as_bool);
    let source = hint.and_then(|hint| hint.get("source")).and_then(Value::as_str);
    match (value, source) {
        (Some(value), Some(source)) => format!("{} ({source})", if value { "yes" } else { "no" }),
        (Some(value), None) => (if value { "yes" } else { "no" }).to_owned(),
        _ => "?".to_owned(),
    }
}

/// `sha256:` and the first 12 hex digits.
pub(crate) fn short(fingerprint: &str) -> &str {
    let end = fingerprint.char_indices().nth("sha256:".len() + 12).map_or(fingerprint.len(), |(index, _)| index);
    &fingerprint[..end]
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn hint_cells_say_value_and_source() {
        let effective =
            json!({"readOnlyHint": {"value": true, "source": "declared"}, "openWorldHint": {"value": false}});
        assert_eq!(hint_cell(&effective, "readOnlyHint"), "yes (declared)");
        assert_eq!(hint_cell(&effective, "openWorldHint"), "no");
        assert_eq!(hint_cell(&effective, "destructiveHint"), "?");
    }

    #[test]
    fn short_fingerprints() {
        assert_eq!(short("sha256:0123456789abcdef0123"), "sha256:0123456789ab");
        assert_eq!(short("sha256:01"), "sha256:01");
    }
}
