//! The audit page: the last rows of the log, filtered and searched, with the hash chain's verification.
//!
//! The query string becomes an [`AuditFilter`] here and nowhere else: verdicts and kinds must be names the store
//! knows (anything else is a 400 naming the field, never a silently dropped filter), times are an age (`2h`) or
//! RFC 3339. Every value reaches SQL as a bound parameter inside the store; this module builds no SQL. The form is
//! drawn again with the filters in force, so a person refines a search instead of retyping it.

use std::fmt::Write as _;
use std::time::SystemTime;

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::{Html, IntoResponse, Response};
use toolgate_core::decision::Verdict;
use toolgate_store::{AuditFilter, AuditKind, AuditRow, ChainReport, parse_age, parse_rfc3339, verdict_name};

use crate::handlers::{not_logged_in, session, store_failure};
use crate::html::{Page, escape, escape_form_value, layout};
use crate::{Console, form};

/// Audit rows shown when the page does not say.
const DEFAULT_ROWS: u32 = 100;
/// Most audit rows one page shows.
const MAX_ROWS: u32 = 1000;
/// Every verdict, in the order the form lists them.
const VERDICTS: [Verdict; 4] = [Verdict::Allow, Verdict::Confirm, Verdict::Deny, Verdict::Hide];

/// The filters as typed (trimmed), to draw the form again.
#[derive(Debug, Default, PartialEq, Eq)]
struct Typed {
    tool: String,
    verdict: String,
    kind: String,
    upstream: String,
    caller: String,
    text: String,
    since: String,
    until: String,
    limit: u32,
}

/// `GET /console/audit?tool=&verdict=&kind=&upstream=&caller=&q=&since=&until=&limit=`.
pub(crate) async fn audit_page(State(console): State<Console>, uri: Uri, headers: HeaderMap) -> Response {
    let Some((_, session)) = session(&console, &headers).await else {
        return not_logged_in(&console, &uri);
    };
    let typed = typed(&form::parse(uri.query().unwrap_or_default()));
    let filter = match filter(&typed, SystemTime::now()) {
        Ok(filter) => filter,
        Err(problem) => {
            let page = page(&[], None, &typed, Some(&problem), &session.csrf);
            return (StatusCode::BAD_REQUEST, Html(page)).into_response();
        }
    };
    let rows = match console.store.query_audit(&filter).await {
        Ok(rows) => rows,
        Err(error) => return store_failure(&error),
    };
    let report = match console.store.verify_audit().await {
        Ok(report) => report,
        Err(error) => return store_failure(&error),
    };
    Html(page(&rows, Some(&report), &typed, None, &session.csrf)).into_response()
}

fn typed(query: &[(String, String)]) -> Typed {
    let text = |name: &str| form::field(query, name).map(str::trim).unwrap_or_default().to_owned();
    let limit = form::field(query, "limit")
        .and_then(|limit| limit.trim().parse::<u32>().ok())
        .unwrap_or(DEFAULT_ROWS)
        .clamp(1, MAX_ROWS);
    Typed {
        tool: text("tool"),
        verdict: text("verdict"),
        kind: text("kind"),
        upstream: text("upstream"),
        caller: text("caller"),
        text: text("q"),
        since: text("since"),
        until: text("until"),
        limit,
    }
}

/// The store's filter for what was typed, or what is wrong with it.
fn filter(typed: &Typed, now: SystemTime) -> Result<AuditFilter, String> {
    let given = |text: &str| (!text.is_empty()).then(|| text.to_owned());
    let verdict = match typed.verdict.as_str() {
        "" => None,
        name => Some(
            VERDICTS
                .into_iter()
                .find(|verdict| verdict_name(*verdict) == name)
                .ok_or_else(|| format!("unknown verdict {name:?}"))?,
        ),
    };
    let kind = match typed.kind.as_str() {
        "" => None,
        name => Some(AuditKind::parse(name).ok_or_else(|| format!("unknown kind {name:?}"))?),
    };
    Ok(AuditFilter {
        since: time(&typed.since, now, "since")?,
        until: time(&typed.until, now, "until")?,
        tool_glob: given(&typed.tool),
        verdict,
        kind,
        session: None,
        upstream: given(&typed.upstream),
        caller: given(&typed.caller),
        instance: None,
        text: given(&typed.text),
        limit: Some(typed.limit),
    })
}

/// An age before `now` (`30m`, `2h`, `1d`) or RFC 3339; empty means no bound.
fn time(text: &str, now: SystemTime, field: &str) -> Result<Option<SystemTime>, String> {
    if text.is_empty() {
        return Ok(None);
    }
    if let Some(age) = parse_age(text) {
        return now.checked_sub(age).map(Some).ok_or_else(|| format!("{field}: {text:?} is too long ago"));
    }
    parse_rfc3339(text).map(Some).map_err(|_| {
        format!("{field}: cannot read {text:?}; use an age (30m, 2h, 1d, 1w) or RFC 3339 (2026-01-31T09:00:00Z)")
    })
}

/// A text input of the filter form, with its current value.
fn input(out: &mut String, name: &str, label: &str, value: &str, placeholder: &str) {
    let _ = write!(
        out,
        "<label for=\"{name}\">{label}<input id=\"{name}\" name=\"{name}\" value=\"{}\" placeholder=\"{}\"></label>",
        escape_form_value(value),
        escape(placeholder)
    );
}

/// A select of the filter form: "any" then `options`, the current one selected.
fn select<'a>(out: &mut String, name: &str, label: &str, current: &str, options: impl Iterator<Item = &'a str>) {
    let _ = write!(
        out,
        "<label for=\"{name}\">{label}<select id=\"{name}\" name=\"{name}\"><option value=\"\">any</option>"
    );
    for option in options {
        let selected = if option == current { " selected" } else { "" };
        let _ = write!(out, "<option value=\"{option}\"{selected}>{option}</option>");
    }
    out.push_str("</select></label>");
}

fn filter_form(out: &mut String, typed: &Typed) {
    out.push_str(
        "<form class=\"filter\" method=\"get\" action=\"/console/audit\" aria-label=\"Filter the audit log\">",
    );
    input(out, "q", "Search", &typed.text, "tool, upstream, session, caller, outcome, reason");
    input(out, "tool", "Tool (glob)", &typed.tool, "*");
    select(out, "verdict", "Verdict", &typed.verdict, VERDICTS.into_iter().map(verdict_name));
    select(out, "kind", "Kind", &typed.kind, AuditKind::ALL.into_iter().map(AuditKind::as_str));
    input(out, "upstream", "Upstream", &typed.upstream, "");
    input(out, "caller", "Caller", &typed.caller, "console:alice");
    input(out, "since", "Since", &typed.since, "1h or 2026-01-31T09:00:00Z");
    input(out, "until", "Until", &typed.until, "");
    let _ = write!(
        out,
        "<label for=\"limit\">Rows<input id=\"limit\" name=\"limit\" type=\"number\" min=\"1\" max=\"{MAX_ROWS}\" \
         value=\"{}\"></label><button type=\"submit\">Show</button><a href=\"/console/audit\">Clear</a></form>",
        typed.limit
    );
}

/// The reasons as a cell: each rule's name, with its detail (which can be long) in a tooltip, so one wordy decision
/// does not stretch its row down the page.
fn reasons(row: &AuditRow) -> String {
    let Some(serde_json::Value::Array(reasons)) = &row.reasons else {
        return String::new();
    };
    let rule = |reason: &serde_json::Value| {
        format!(
            "<span title=\"{}\">{}</span>",
            escape(reason["detail"].as_str().unwrap_or_default()),
            escape(reason["rule"].as_str().unwrap_or("reason"))
        )
    };
    reasons.iter().map(rule).collect::<Vec<_>>().join(", ")
}

/// The whole page; `report` is absent when the filter was refused (`problem` says why).
fn page(rows: &[AuditRow], report: Option<&ChainReport>, typed: &Typed, problem: Option<&str>, csrf: &str) -> String {
    let mut body = String::from("<h1>Audit log</h1>");
    match report {
        Some(report) if report.is_intact() => {
            let _ = write!(body, "<p class=\"ok\">Hash chain verified: {} rows intact.</p>", report.rows_checked);
        }
        Some(report) => {
            let detail =
                report.first_break.as_ref().and_then(|first| serde_json::to_string(first).ok()).unwrap_or_default();
            let _ = write!(body, "<p class=\"bad\">Hash chain broken: {}</p>", escape(&detail));
        }
        None => {}
    }
    filter_form(&mut body, typed);
    if let Some(problem) = problem {
        let _ = write!(body, "<p class=\"bad\" role=\"alert\">{}</p>", escape(problem));
        return layout("Audit log", Page::Audit, Some(csrf), &body);
    }
    if rows.is_empty() {
        body.push_str("<p>No rows match.</p>");
        return layout("Audit log", Page::Audit, Some(csrf), &body);
    }
    let _ = write!(
        body,
        "<div class=\"table-wrap\"><table><caption>{} row(s), most recent last</caption><thead><tr>\
         <th scope=\"col\">#</th><th scope=\"col\">Time</th><th scope=\"col\">Kind</th><th scope=\"col\">Upstream</th>\
         <th scope=\"col\">Tool</th><th scope=\"col\">Verdict</th><th scope=\"col\">Outcome</th><th scope=\"col\">\
         Approval</th><th scope=\"col\">Caller</th><th scope=\"col\">Reasons</th></tr></thead><tbody>",
        rows.len()
    );
    for row in rows {
        let cell = |value: &Option<String>| escape(value.as_deref().unwrap_or(""));
        let _ = write!(
            body,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>\
             <td class=\"reasons\">{}</td></tr>",
            row.seq,
            escape(&row.time),
            escape(&row.kind),
            cell(&row.upstream),
            cell(&row.tool),
            cell(&row.verdict),
            cell(&row.outcome),
            cell(&row.approval_id),
            escape(&caller_label(row.caller.as_ref())),
            reasons(row),
        );
    }
    body.push_str("</tbody></table></div>");
    layout("Audit log", Page::Audit, Some(csrf), &body)
}

/// The identity, and the display name a token gave beside it (`alice (alice@example.org)`).
fn caller_label(caller: Option<&serde_json::Value>) -> String {
    let identity = caller.and_then(|caller| caller["identity"].as_str()).unwrap_or("");
    match caller.and_then(|caller| caller["display"].as_str()) {
        Some(display) if display != identity => format!("{identity} ({display})"),
        _ => identity.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn typed_from(query: &str) -> Typed {
        typed(&form::parse(query))
    }

    #[test]
    fn every_filter_is_read_and_combined() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        let typed = typed_from(
            "q=+Time+out+&tool=delete_*&verdict=confirm&kind=pin&upstream=files&caller=console%3Aalice&since=2h\
             &until=1970-01-12T00:00:00Z&limit=5000",
        );
        assert_eq!(
            filter(&typed, now),
            Ok(AuditFilter {
                since: Some(now - Duration::from_secs(7200)),
                until: Some(SystemTime::UNIX_EPOCH + Duration::from_secs(950_400)),
                tool_glob: Some("delete_*".into()),
                verdict: Some(Verdict::Confirm),
                kind: Some(AuditKind::Pin),
                session: None,
                upstream: Some("files".into()),
                caller: Some("console:alice".into()),
                instance: None,
                text: Some("Time out".into()),
                limit: Some(MAX_ROWS),
            })
        );
        assert_eq!(
            filter(&typed_from(""), now),
            Ok(AuditFilter { limit: Some(DEFAULT_ROWS), ..AuditFilter::default() })
        );
    }

    #[test]
    fn unknown_names_and_unreadable_times_are_refused_by_field() {
        let now = SystemTime::now();
        let problem = |query: &str| filter(&typed_from(query), now).err().unwrap_or_default();
        assert_eq!(problem("verdict=maybe"), "unknown verdict \"maybe\"");
        assert_eq!(problem("kind=delete"), "unknown kind \"delete\"");
        assert!(problem("since=yesterday").starts_with("since: cannot read \"yesterday\""));
        assert!(problem("until=10y").starts_with("until: cannot read"));
    }

    #[test]
    fn the_form_keeps_the_filters_escaped() {
        let typed = typed_from("q=%22%3E%3Cscript%3E&verdict=deny&kind=result&limit=7");
        let page = page(&[], None, &typed, None, "csrf");
        assert!(page.contains("value=\"&quot;&gt;&lt;script&gt;\""), "{page}");
        assert!(page.contains("<option value=\"deny\" selected>deny</option>"));
        assert!(page.contains("<option value=\"result\" selected>result</option>"));
        assert!(page.contains("<option value=\"allow\">allow</option>"));
        assert!(page.contains("name=\"limit\" type=\"number\" min=\"1\" max=\"1000\" value=\"7\""));
    }

    #[test]
    fn an_oauth_caller_shows_its_display_name_beside_its_subject() {
        let caller = serde_json::json!({"identity": "u-1842", "display": "alice@example.org"});
        assert_eq!(caller_label(Some(&caller)), "u-1842 (alice@example.org)");
        assert_eq!(caller_label(Some(&serde_json::json!({"identity": "ci"}))), "ci");
        assert_eq!(caller_label(None), "");
    }
}
