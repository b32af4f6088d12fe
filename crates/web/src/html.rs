//! Server-rendered pages. Every value from the store goes through [`escape`] (shown text: markup escaped, control,
//! bidi and invisible characters made visible by `core::display`) or, for a form field that must send back exactly
//! what it holds, [`escape_form_value`]; nothing here runs script inline.

use std::fmt::Write as _;
use std::time::SystemTime;

use toolgate_store::{ApprovalRecord, ToolRisk};

/// Escapes text for an HTML element or a quoted attribute, with control, bidi and invisible characters shown as
/// escapes (`\u{202e}`): the same function the terminal and the logs use, so every view shows the same text.
pub(crate) fn escape(text: &str) -> String {
    toolgate_core::display::escape_html(text)
}

/// Escapes markup only, for text that `core::display` already made safe (the lines of a definition diff): escaping
/// those again would double every backslash of their escapes.
pub(crate) fn escape_markup(text: &str) -> String {
    toolgate_core::display::escape_markup(text)
}

/// Escapes the value of a form field that must be posted back unchanged (a tool's name in a pin form): markup as
/// entities, and control, bidi and invisible characters as numeric character references, which the browser turns
/// back into the same characters when it posts the form, so no raw one is in the page.
pub(crate) fn escape_form_value(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for character in text.chars() {
        match toolgate_core::display::markup_entity(character) {
            Some(entity) => out.push_str(entity),
            None if toolgate_core::display::must_escape(character) => {
                let _ = write!(out, "&#x{:x};", u32::from(character));
            }
            None => out.push(character),
        }
    }
    out
}

/// Which page the navigation marks as current.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Page {
    Pending,
    Tools,
    Audit,
    Activity,
    Other,
}

/// A whole page around `body`. `csrf` (when logged in) is used by the logout form.
pub(crate) fn layout(title: &str, page: Page, csrf: Option<&str>, body: &str) -> String {
    let current = |which: Page| if page == which { " aria-current=\"page\"" } else { "" };
    let nav = match csrf {
        Some(csrf) => format!(
            "<nav aria-label=\"Console\"><a href=\"/console\"{}>Pending approvals</a><a href=\"/console/tools\"{}>Tools</a>\
             <a href=\"/console/audit\"{}>Audit log</a><a href=\"/console/activity\"{}>Activity</a></nav><form method=\"post\" action=\"/console/logout\"><input type=\"hidden\" name=\"csrf\" \
             value=\"{}\"><button type=\"submit\">Log out</button></form>",
            current(Page::Pending),
            current(Page::Tools),
            current(Page::Audit),
            current(Page::Activity),
            escape(csrf)
        ),
        None => String::new(),
    };
    format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>{} · toolgate</title><link rel=\"stylesheet\" href=\"/console/assets/console.css\">\
         <script src=\"/console/assets/console.js\" defer></script></head>\
         <body><header><strong>toolgate console</strong>{nav}</header><main>{body}</main></body></html>\n",
        escape(title)
    )
}

/// A page that only says something (errors, login problems).
pub(crate) fn message(title: &str, text: &str, logged_in: bool) -> String {
    let back = if logged_in { "<p><a href=\"/console\">Back to pending approvals</a></p>" } else { "" };
    layout(title, Page::Other, None, &format!("<h1>{}</h1><p>{}</p>{back}", escape(title), escape(text)))
}

/// The login form for configured users' tokens; `problem` says why the last attempt failed.
/// With `sso`, a link to log in through the identity provider comes first.
pub(crate) fn login_page(problem: Option<&str>, tokens: bool, sso: bool, next: &str) -> String {
    let problem =
        problem.map(|text| format!("<p class=\"bad\" role=\"alert\">{}</p>", escape(text))).unwrap_or_default();
    // The page asked for rides along: in the single sign-on link (the console seals it into the login state) and
    // in the form; `next` is a checked console path (`crate::destination`).
    let asked = next != crate::destination::FRONT_PAGE;
    let (next_query, next_field) = if asked {
        let query = format!("?{}={}", crate::destination::FIELD, crate::oidc::form_encode(next));
        let field = format!(
            "<input type=\"hidden\" name=\"{}\" value=\"{}\">",
            crate::destination::FIELD,
            escape_form_value(next)
        );
        (query, field)
    } else {
        (String::new(), String::new())
    };
    let going_on = if asked {
        // The session cookie is `SameSite=Strict`: a browser following a link from another site (a chat client's web
        // page) does not send it, so a person already logged in lands here; the same link followed from here does.
        format!(
            "<p>After logging in you go on to <a id=\"next-link\" href=\"{}\">the page you asked for</a>. If you \
             are logged in already, that link opens it.</p>",
            escape_form_value(next)
        )
    } else {
        String::new()
    };
    let sso = if sso {
        format!(
            "<p><a id=\"sso-login\" href=\"/console/sso/login{}\">Log in with your organisation's account</a></p>",
            escape_form_value(&next_query)
        )
    } else {
        String::new()
    };
    let form = if tokens {
        format!(
            "<p>Paste your console token, or open the one-time link `toolgate serve` printed.</p>\
             <form class=\"filter\" method=\"post\" action=\"/console/login\">{next_field}<label for=\"token\">\
             Console token <input id=\"token\" name=\"token\" type=\"password\" autocomplete=\"current-password\" \
             required></label><button type=\"submit\">Log in</button></form>"
        )
    } else {
        "<p>Or open the one-time link `toolgate serve` printed.</p>".to_owned()
    };
    layout("Log in", Page::Other, None, &format!("<h1>Log in</h1>{problem}{going_on}{sso}{form}"))
}

/// After a single sign-on login: who is logged in, and a same-site refresh to `next` (a checked console path; see
/// `sso::logged_in`).
pub(crate) fn continue_page(display: &str, next: &str) -> String {
    let next = escape_form_value(next);
    format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta http-equiv=\"refresh\" content=\"0;url={next}\"><title>Logged in</title></head><body>\
         <p>Logged in as {}. <a href=\"{next}\">Continue to the console</a>.</p></body></html>",
        escape(display)
    )
}

/// The page after a single sign-on logout: on to the provider's logout (`url`, escaped for the attribute), by a
/// refresh and a link. Not a redirect of the logout form's POST: the console's `form-action 'self'` would stop a
/// browser following a form's redirect to the provider's origin.
pub(crate) fn provider_logout_page(url: &str) -> String {
    let url = escape_form_value(url);
    format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta http-equiv=\"refresh\" content=\"0;url={url}\"><title>Logged out</title></head><body>\
         <p>The console session ended. <a id=\"provider-logout\" href=\"{url}\">Log out at the identity provider \
         too</a>.</p></body></html>"
    )
}

/// The identity of the pending list: changes when an approval appears or goes.
pub(crate) fn pending_version(pending: &[ApprovalRecord]) -> String {
    pending.iter().map(|record| record.approval.id.as_str()).collect::<Vec<_>>().join(",")
}

/// Arguments as indented JSON when they parse (`display::json_safe`: its line breaks are layout, every control or
/// bidi character inside a key or value an escape), else as stored, escaped; either way safe text, markup aside.
pub(crate) fn pretty_arguments(summary: &str) -> String {
    serde_json::from_str::<serde_json::Value>(summary)
        .ok()
        .and_then(|value| serde_json::to_string_pretty(&value).ok())
        .map(|pretty| toolgate_core::display::json_safe(&pretty))
        .unwrap_or_else(|| toolgate_core::display::escape(summary))
}

/// A risk badge: the words say the class (colour only repeats them), the CSS class comes from the level alone, so
/// nothing read from the store reaches a class attribute. `None` (an approval queued by an older gateway) says so.
pub(crate) fn risk_badge(risk: Option<&ToolRisk>) -> String {
    match risk {
        Some(risk) => {
            let level = risk.level.min(4);
            let word = ["none", "low", "medium", "high", "critical"][usize::from(level)];
            format!(
                "<span class=\"badge risk-{level}\" title=\"risk {level} of 4\">Risk {level}/4 {word} · {}</span>",
                escape(&risk.category)
            )
        }
        None => "<span class=\"badge risk-unknown\">Risk not recorded</span>".to_owned(),
    }
}

/// The list of pending approvals (the part the script refreshes).
pub(crate) fn pending_list(pending: &[ApprovalRecord], csrf: &str) -> String {
    if pending.is_empty() {
        return "<p>No approvals are waiting.</p>".to_owned();
    }
    let mut out = String::new();
    let now = SystemTime::now();
    for record in pending {
        let approval = &record.approval;
        let id = escape(approval.id.as_str());
        let heading = format!("approval-{id}");
        let remaining = approval.expires.duration_since(now).map(|left| left.as_secs()).unwrap_or_default();
        let _ = write!(
            out,
            "<article class=\"card\" aria-labelledby=\"{heading}\"><h2 id=\"{heading}\">{title} {badge}</h2>\
             <p class=\"meta\">Upstream <strong>{upstream}</strong> · tool <code>{tool}</code> · {action} · expires in \
             {remaining} s{retry} · <a href=\"/console/approvals/{id}\">page</a></p><pre aria-label=\"Arguments\">{arguments}</pre><div class=\"actions\">\
             <form method=\"post\" action=\"/console/approvals/{id}/approve\"><input type=\"hidden\" name=\"csrf\" \
             value=\"{csrf}\"><button type=\"submit\" class=\"approve\">Approve</button></form>\
             <form method=\"post\" action=\"/console/approvals/{id}/deny\"><input type=\"hidden\" name=\"csrf\" \
             value=\"{csrf}\"><button type=\"submit\" class=\"deny\">Deny</button></form></div></article>",
            title = escape(&approval.title),
            badge = risk_badge(approval.risk.as_ref()),
            upstream = escape(&approval.upstream),
            tool = escape(&approval.tool),
            action = escape(&approval.action),
            retry = if record.detached { " · no call waits: the client retries it once you decide" } else { "" },
            arguments = escape_markup(&pretty_arguments(&approval.args_summary)),
            csrf = escape(csrf),
        );
    }
    out
}

/// The pending approvals page.
pub(crate) fn pending_page(pending: &[ApprovalRecord], csrf: &str) -> String {
    let body = format!(
        "<h1>Pending approvals</h1><div id=\"pending\" aria-live=\"polite\" data-version=\"{}\">{}</div>",
        escape(&pending_version(pending)),
        pending_list(pending, csrf)
    );
    layout("Pending approvals", Page::Pending, Some(csrf), &body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_markup() {
        assert_eq!(escape("<a href=\"x\">'&'</a>"), "&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;");
        assert_eq!(escape("a\r\u{1b}[2K\u{202e}b"), "a\\r\\u{1b}[2K\\u{202e}b", "controls and bidi are shown");
        assert_eq!(escape_form_value("a\r\u{202e}<"), "a&#xd;&#x202e;&lt;", "form values post back unchanged");
    }

    #[test]
    fn risk_badges_say_the_class_in_words() {
        let badge = |level: u8, category: &str| risk_badge(Some(&ToolRisk { level, category: category.into() }));
        assert_eq!(
            badge(4, "destructive"),
            "<span class=\"badge risk-4\" title=\"risk 4 of 4\">Risk 4/4 critical · destructive</span>"
        );
        assert_eq!(badge(0, "read"), "<span class=\"badge risk-0\" title=\"risk 0 of 4\">Risk 0/4 none · read</span>");
        // A level out of range (a row written by hand) is clamped, and the category is escaped.
        assert!(badge(9, "<b>").contains("risk-4\"") && badge(9, "<b>").contains("&lt;b&gt;"));
        assert_eq!(risk_badge(None), "<span class=\"badge risk-unknown\">Risk not recorded</span>");
    }

    #[test]
    fn pretty_prints_json_arguments() {
        assert_eq!(pretty_arguments("{\"path\":\"/tmp/x\"}"), "{\n  \"path\": \"/tmp/x\"\n}");
        assert_eq!(pretty_arguments("path=/tmp/x"), "path=/tmp/x");
    }
}
