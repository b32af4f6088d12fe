//! The page of one approval (`GET /console/approvals/{id}`): where a 2026-07-28 client's URL-mode confirmation sends
//! a person. It shows the call as the queue does (title, risk badge, upstream, tool, action, arguments, whose call,
//! every value escaped) and, while the approval can still be decided, the same approve / deny forms as the list,
//! posting to `/console/approvals/{id}/{decision}` with the session's CSRF token and a `return` field that brings
//! the person back here; the decision itself goes through the list's handler, so the session, CSRF, approver-group
//! and no-self-approval rules are the same. Once decided it says what happened and what the client does next.
//!
//! Reads the store only; it changes nothing (nothing changes state through GET).

use std::fmt::Write as _;
use std::time::SystemTime;

use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::{Html, IntoResponse, Response};
use toolgate_store::{ApprovalId, ApprovalRecord, ApprovalState};

use crate::Console;
use crate::handlers::{RETURN_FIELD, not_logged_in, session, store_failure};
use crate::html::{self, Page, escape, escape_markup};

/// `GET /console/approvals/{id}`.
pub(crate) async fn approval_page(
    State(console): State<Console>,
    Path(id): Path<String>,
    uri: Uri,
    headers: HeaderMap,
) -> Response {
    // The login page leads back here (the console's pages all do, `handlers::not_logged_in`), and links here for a
    // person logged in already: the session cookie is `SameSite=Strict`, so a browser following a link from another
    // site (a chat client's web page) does not send it.
    let Some((_, session)) = session(&console, &headers).await else {
        return not_logged_in(&console, &uri);
    };
    let id = ApprovalId::from_text(&id);
    match console.store.approvals().get(&id).await {
        Ok(Some(record)) => Html(page(&record, &session.csrf, SystemTime::now())).into_response(),
        Ok(None) => {
            (StatusCode::NOT_FOUND, Html(html::message("Not found", "No such approval.", true))).into_response()
        }
        Err(error) => store_failure(&error),
    }
}

/// What the page says about where the approval stands (and, when it can still be decided, the forms).
fn standing(record: &ApprovalRecord, csrf: &str, now: SystemTime) -> String {
    let approval = &record.approval;
    let by = escape(record.decided_by.as_deref().unwrap_or("someone"));
    let next = if record.detached { " The client retries the call now and toolgate reads this decision." } else { "" };
    match record.state {
        ApprovalState::Pending if approval.expires > now => {
            let id = escape(approval.id.as_str());
            let csrf = escape(csrf);
            let remaining = approval.expires.duration_since(now).map(|left| left.as_secs()).unwrap_or_default();
            let waits = if record.detached {
                "No call waits in toolgate: the client retries the call once you decide."
            } else {
                "The call waits in toolgate for your decision."
            };
            let mut out =
                format!("<p class=\"meta\">Waiting · expires in {remaining} s. {waits}</p><div class=\"actions\">");
            for (verb, label) in [("approve", "Approve"), ("deny", "Deny")] {
                let _ = write!(
                    out,
                    "<form method=\"post\" action=\"/console/approvals/{id}/{verb}\"><input type=\"hidden\" \
                     name=\"csrf\" value=\"{csrf}\"><input type=\"hidden\" name=\"{RETURN_FIELD}\" value=\"approval\">\
                     <button type=\"submit\" class=\"{verb}\">{label}</button></form>"
                );
            }
            out.push_str("</div>");
            out
        }
        ApprovalState::Pending => "<p role=\"status\">Expired: nobody decided in time. Nothing runs.</p>".to_owned(),
        ApprovalState::Approved => format!("<p role=\"status\">Approved by {by}; not used yet.{next}</p>"),
        ApprovalState::Consumed => format!("<p role=\"status\">Approved by {by} and used: the call was made.</p>"),
        ApprovalState::Denied => format!("<p role=\"status\">Denied by {by}. The call is not made.</p>"),
        ApprovalState::Lapsed => format!(
            "<p role=\"status\">Lapsed: {}. Nothing can decide or use it.</p>",
            escape(record.lapsed_why.as_deref().unwrap_or("its call stopped waiting"))
        ),
    }
}

/// The whole page.
fn page(record: &ApprovalRecord, csrf: &str, now: SystemTime) -> String {
    let approval = &record.approval;
    let caller = approval
        .caller
        .as_deref()
        .map(|caller| format!(" · called by <strong>{}</strong>", escape(caller)))
        .unwrap_or_default();
    let arguments = if approval.args_summary.is_empty() {
        "<p class=\"meta\">The arguments are no longer kept (the approval is settled).</p>".to_owned()
    } else {
        format!(
            "<pre aria-label=\"Arguments\">{}</pre>",
            escape_markup(&html::pretty_arguments(&approval.args_summary))
        )
    };
    let body = format!(
        "<h1>Approval</h1><article class=\"card\" aria-labelledby=\"approval-title\"><h2 id=\"approval-title\">{title} \
         {badge}</h2><p class=\"meta\">Upstream <strong>{upstream}</strong> · tool <code>{tool}</code> · {action}{caller}\
         </p>{arguments}{standing}</article>",
        title = escape(&approval.title),
        badge = html::risk_badge(approval.risk.as_ref()),
        upstream = escape(&approval.upstream),
        tool = escape(&approval.tool),
        action = escape(&approval.action),
        standing = standing(record, csrf, now),
    );
    html::layout("Approval", Page::Pending, Some(csrf), &body)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use toolgate_store::PendingApproval;

    use super::*;

    fn record(state: ApprovalState) -> ApprovalRecord {
        let now = SystemTime::now();
        ApprovalRecord {
            approval: PendingApproval {
                id: ApprovalId::from_text("a1"),
                session: "s".into(),
                upstream: "files<script>".into(),
                tool: "files_delete".into(),
                title: "Delete \u{202e}fdp.exe".into(),
                action: "delete a file".into(),
                risk: None,
                args_summary: "{\"path\":\"</pre><script>alert(1)</script>\"}".into(),
                tool_fingerprint: "sha256:aa".into(),
                args_digest: "sha256:bb".into(),
                created: now,
                expires: now + Duration::from_secs(60),
                caller: Some("alice".into()),
            },
            state,
            decided_by: Some("console:bob".into()),
            lapsed_why: None,
            detached: true,
        }
    }

    #[test]
    fn the_page_escapes_the_call_and_offers_forms_only_while_pending() {
        let pending = page(&record(ApprovalState::Pending), "tok", SystemTime::now());
        assert!(!pending.contains("<script>alert"), "{pending}");
        assert!(pending.contains("files&lt;script&gt;") && pending.contains("\\u{202e}"), "{pending}");
        assert!(pending.contains("action=\"/console/approvals/a1/approve\""), "{pending}");
        assert!(pending.contains("name=\"return\" value=\"approval\""), "{pending}");
        assert!(pending.contains("the client retries the call once you decide"), "{pending}");
        let approved = page(&record(ApprovalState::Approved), "tok", SystemTime::now());
        assert!(!approved.contains("/approve\""), "{approved}");
        assert!(approved.contains("Approved by console:bob"), "{approved}");
    }
}
