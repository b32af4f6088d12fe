//! The tools page: the changed definitions held in quarantine (a possible rug pull) with a field-by-field diff and
//! approve / reject forms (decided by [`crate::pins`]), every tool the upstreams list ([`crate::inventory`]), and
//! every pinned definition with its effective hints.
//!
//! The forms carry the fingerprint the page shows, so a definition that changed again while the person read the
//! diff is refused rather than pinned. Reads the store only; nothing here changes anything.

use std::fmt::Write as _;

use axum::extract::State;
use axum::http::{HeaderMap, Uri};
use axum::response::{Html, IntoResponse, Response};
use serde_json::Value;
use toolgate_core::definition_diff::field_diff;
use toolgate_store::{InventoryTool, PendingPinChange, PinKind, PinnedTool};

use crate::Console;
use crate::handlers::{not_logged_in, session, store_failure};
use crate::html::{Page, escape, escape_form_value, escape_markup, layout};
use crate::inventory::inventory_table;
use crate::tool_cells::{HINTS, hint_cell, short};

/// Most diff lines shown for one field before the rest is counted instead.
const MAX_DIFF_LINES: usize = 40;

/// `GET /console/tools`.
pub(crate) async fn tools_page(State(console): State<Console>, uri: Uri, headers: HeaderMap) -> Response {
    let Some((_, session)) = session(&console, &headers).await else {
        return not_logged_in(&console, &uri);
    };
    let pins = console.store.pins();
    let (pinned, pending, inventory) =
        match (pins.list().await, pins.list_pending().await, console.store.inventory().await) {
            (Ok(pinned), Ok(pending), Ok(inventory)) => (pinned, pending, inventory),
            (Err(error), _, _) | (_, Err(error), _) | (_, _, Err(error)) => return store_failure(&error),
        };
    Html(render(&pinned, &pending, &inventory, &session.csrf)).into_response()
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
