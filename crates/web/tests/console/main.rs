//! The console served on a real loopback listener over a real SQLite store: login, CSRF, Origin, GET safety, and
//! a decision made through the form reaching the store, and a quarantined tool definition pinned or rejected.
//!
//! - [`audit`]: the audit page's filters and search.
//! - [`tools`]: the tools page: quarantined definitions, pin decisions, and the inventory of every tool.
//! - [`logins`]: the failed-login limit per address, and users replaced while the console serves.
//! - [`destinations`]: a login from an approval's link leads back to it; other destinations are refused.
//! - [`sso`]: single sign-on at a real OpenID provider, approver rules, and the callback's attacks.
//! - [`sso_sessions`]: how long a single sign-on session lasts, and its logout at the provider.

mod audit;
mod destinations;
mod logins;
mod onboarding;
mod sso;
mod sso_sessions;
mod tools;

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::{Duration, SystemTime};

use serde_json::json;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use toolgate_store::{ApprovalId, ApprovalState, ApprovalWait, PendingApproval, Store};
use toolgate_web::ConsoleConfig;

type TestResult = Result<(), Box<dyn std::error::Error>>;

const TOKEN: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
/// Alice's own console token (configured as its SHA-256).
const ALICE: &str = "alice-f1e2d3c4b5a69788f1e2d3c4b5a69788";

struct Console {
    address: SocketAddr,
    store: Store,
    handle: toolgate_web::ConsoleHandle,
    _dir: tempfile::TempDir,
}

struct Reply {
    status: u16,
    headers: Vec<(String, String)>,
    body: String,
}

impl Reply {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(key, _)| key.eq_ignore_ascii_case(name)).map(|(_, value)| value.as_str())
    }
}

async fn start() -> Result<Console, Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let store = Store::open(dir.path()).await?;
    let alice = toolgate_web::ConsoleUser {
        name: "alice".to_owned(),
        token_sha256: toolgate_core::fingerprint::digest_bytes(ALICE.as_bytes()),
    };
    let config = ConsoleConfig {
        login_token: TOKEN.to_owned(),
        allowed_hosts: Vec::new(),
        allowed_origins: Vec::new(),
        users: vec![alice],
        sso: None,
        forbid_self_approval: false,
    };
    let handle = toolgate_web::ConsoleHandle::new(store.clone(), config);
    let router = handle.router();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let address = listener.local_addr()?;
    // As `toolgate serve` serves it: with each connection's peer address, which the login limit counts by.
    tokio::spawn(
        async move { axum::serve(listener, router.into_make_service_with_connect_info::<SocketAddr>()).await },
    );
    Ok(Console { address, store, handle, _dir: dir })
}

/// One HTTP/1.1 request on its own connection from 127.0.0.1; `extra` are raw header lines.
async fn request(
    address: SocketAddr,
    method: &str,
    target: &str,
    extra: &[String],
    body: &str,
) -> Result<Reply, Box<dyn std::error::Error>> {
    request_from(IpAddr::V4(Ipv4Addr::LOCALHOST), address, method, target, extra, body).await
}

/// Posts the console's own decision form for approval `id` (`approve` or `deny`) with the session's CSRF token.
async fn decide_approval(
    console: &Console,
    cookie: &str,
    csrf: &str,
    id: &ApprovalId,
    decision: &str,
) -> Result<Reply, Box<dyn std::error::Error>> {
    let target = format!("/console/approvals/{id}/{decision}");
    request(console.address, "POST", &target, &[cookie.to_owned()], &format!("csrf={csrf}")).await
}

/// [`request`] from the local address `source` (on Linux all of 127.0.0.0/8 is loopback).
async fn request_from(
    source: IpAddr,
    address: SocketAddr,
    method: &str,
    target: &str,
    extra: &[String],
    body: &str,
) -> Result<Reply, Box<dyn std::error::Error>> {
    let socket = tokio::net::TcpSocket::new_v4()?;
    socket.bind(SocketAddr::new(source, 0))?;
    let mut stream = socket.connect(address).await?;
    let mut head = format!("{method} {target} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n");
    for line in extra {
        head.push_str(line);
        head.push_str("\r\n");
    }
    if method == "POST" {
        head.push_str(&format!(
            "Content-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\n",
            body.len()
        ));
    }
    head.push_str("\r\n");
    head.push_str(body);
    stream.write_all(head.as_bytes()).await?;
    let mut raw = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut raw)).await??;
    let text = String::from_utf8(raw)?;
    let (head, body) = text.split_once("\r\n\r\n").ok_or("no header end")?;
    let mut lines = head.lines();
    let status = lines.next().ok_or("no status line")?.split(' ').nth(1).ok_or("no status")?.parse()?;
    let headers = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(name, value)| (name.trim().to_owned(), value.trim().to_owned()))
        .collect();
    Ok(Reply { status, headers, body: body.to_owned() })
}

/// Logs in and returns the `Cookie:` header line.
async fn login(console: &Console) -> Result<String, Box<dyn std::error::Error>> {
    let reply = request(console.address, "GET", &format!("/console/login?token={TOKEN}"), &[], "").await?;
    assert_eq!(reply.status, 303);
    let cookie = reply.header("set-cookie").ok_or("no cookie")?.to_owned();
    let pair = cookie.split(';').next().ok_or("empty cookie")?;
    Ok(format!("Cookie: {pair}"))
}

/// The CSRF token of the session behind `cookie`, from the approvals page's forms.
async fn csrf_for(console: &Console, cookie: &str) -> Result<String, Box<dyn std::error::Error>> {
    let page = request(console.address, "GET", "/console", &[cookie.to_owned()], "").await?;
    csrf_of(&page.body)
}

/// Percent-encodes everything but unreserved characters, as a query or a form carries a value.
fn encoded(text: &str) -> String {
    text.bytes()
        .map(|byte| {
            if byte.is_ascii_alphanumeric() || b"-._~".contains(&byte) {
                char::from(byte).to_string()
            } else {
                format!("%{byte:02X}")
            }
        })
        .collect()
}

/// The CSRF token in the page's forms.
fn csrf_of(page: &str) -> Result<String, Box<dyn std::error::Error>> {
    let marker = "name=\"csrf\" value=\"";
    let start = page.find(marker).ok_or("no csrf field")? + marker.len();
    let end = page[start..].find('"').ok_or("unterminated csrf")?;
    Ok(page[start..start + end].to_owned())
}

/// Queues test-support's pending approval of `tool`, titled with markup the page must escape.
async fn pending(store: &Store, tool: &str) -> Result<ApprovalId, Box<dyn std::error::Error>> {
    let pending = PendingApproval {
        tool: tool.into(),
        title: "Delete <file>".into(),
        ..toolgate_test_support::pending_approval(&json!({"path": "/tmp/x"}), Duration::from_secs(600))
    };
    store.approvals().create(&pending).await?;
    Ok(pending.id)
}

async fn state(store: &Store, id: &ApprovalId) -> Result<ApprovalState, Box<dyn std::error::Error>> {
    Ok(store.approvals().get(id).await?.ok_or("approval gone")?.state)
}

#[tokio::test]
async fn login_sets_a_strict_http_only_cookie_once() -> TestResult {
    let console = start().await?;
    let reply = request(console.address, "GET", &format!("/console/login?token={TOKEN}"), &[], "").await?;
    assert_eq!(reply.status, 303);
    assert_eq!(reply.header("location"), Some("/console"));
    let cookie = reply.header("set-cookie").ok_or("no cookie")?;
    assert!(cookie.starts_with("toolgate_console="), "{cookie}");
    assert!(cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"), "{cookie}");
    assert_eq!(reply.header("referrer-policy"), Some("same-origin"));
    // The link is single use.
    let again = request(console.address, "GET", &format!("/console/login?token={TOKEN}"), &[], "").await?;
    assert_eq!(again.status, 401);
    assert!(again.header("set-cookie").is_none());
    Ok(())
}

#[tokio::test]
async fn without_the_token_nothing_is_shown() -> TestResult {
    let console = start().await?;
    pending(&console.store, "delete_file").await?;
    for target in [
        "/console",
        "/console/tools",
        "/console/audit",
        "/console/api/pending",
        "/console/fragment/pending",
        "/console/login",
    ] {
        let reply = request(console.address, "GET", target, &[], "").await?;
        assert_eq!(reply.status, 401, "{target}");
        assert!(!reply.body.contains("delete_file"), "{target}");
    }
    let wrong = request(console.address, "GET", "/console/login?token=nope", &[], "").await?;
    assert_eq!(wrong.status, 401);
    let forged = request(console.address, "GET", "/console", &["Cookie: toolgate_console=forged".into()], "").await?;
    assert_eq!(forged.status, 401);
    // The real token still works after wrong attempts.
    login(&console).await?;
    Ok(())
}

#[tokio::test]
async fn the_form_approves_and_denies_in_the_store() -> TestResult {
    let console = start().await?;
    let approve = pending(&console.store, "delete_file").await?;
    let deny = pending(&console.store, "drop_table").await?;
    let cookie = login(&console).await?;
    let page = request(console.address, "GET", "/console", std::slice::from_ref(&cookie), "").await?;
    assert_eq!(page.status, 200);
    assert!(page.body.contains("name=\"viewport\""));
    assert!(page.body.contains("Delete &lt;file&gt;"), "titles are escaped");
    assert!(page.body.contains("delete a file") && page.body.contains("files"));
    assert!(page.body.contains("{\n  &quot;path&quot;: &quot;/tmp/x&quot;\n}"), "arguments pretty-printed");
    assert!(page.body.contains("class=\"badge risk-4\""), "the risk badge is styled by class");
    assert!(page.body.contains("Risk 4/4 critical · destructive"), "and says its class in words");
    assert!(page.body.contains(&format!("/console/approvals/{approve}/approve")));
    assert!(!page.body.contains("<script>"), "no inline script");
    let csrf = csrf_of(&page.body)?;

    let reply = decide_approval(&console, &cookie, &csrf, &approve, "approve").await?;
    assert_eq!(reply.status, 303, "{}", reply.body);
    assert_eq!(
        console.store.approvals().wait(&approve, Duration::from_secs(1)).await?,
        ApprovalWait::Approved { by: "console".into() }
    );
    let reply = decide_approval(&console, &cookie, &csrf, &deny, "deny").await?;
    assert_eq!(reply.status, 303);
    assert_eq!(state(&console.store, &deny).await?, ApprovalState::Denied);
    // Deciding twice is a conflict, and the first decision stands.
    let reply = decide_approval(&console, &cookie, &csrf, &approve, "deny").await?;
    assert_eq!(reply.status, 409);
    assert_eq!(state(&console.store, &approve).await?, ApprovalState::Approved);
    // Each decision is an audit row naming who decided; the refused second try is not.
    let rows = console.store.query_audit(&toolgate_store::AuditFilter::default()).await?;
    let decided: Vec<_> = rows
        .iter()
        .map(|row| (row.kind.as_str(), row.approval_id.clone(), row.outcome.as_deref(), row.caller.clone()))
        .collect();
    let by_console = Some(json!({"identity": "console"}));
    assert_eq!(
        decided,
        [
            ("confirmation", Some(approve.to_string()), Some("approved"), by_console.clone()),
            ("confirmation", Some(deny.to_string()), Some("denied"), by_console)
        ]
    );
    assert!(console.store.verify_audit().await?.is_intact());
    let json = request(console.address, "GET", "/console/api/pending", &[cookie], "").await?;
    assert_eq!(json.status, 200);
    let value: serde_json::Value = serde_json::from_str(&json.body)?;
    assert_eq!(value["approvals"], serde_json::json!([]));
    Ok(())
}

#[tokio::test]
async fn a_post_without_the_csrf_token_is_forbidden() -> TestResult {
    let console = start().await?;
    let id = pending(&console.store, "delete_file").await?;
    let cookie = login(&console).await?;
    let target = format!("/console/approvals/{id}/approve");
    for body in ["", "csrf=", "csrf=0000", "other=1"] {
        let reply = request(console.address, "POST", &target, std::slice::from_ref(&cookie), body).await?;
        assert_eq!(reply.status, 403, "{body:?}");
    }
    // Without a session at all: not logged in.
    let reply = request(console.address, "POST", &target, &[], "csrf=0000").await?;
    assert_eq!(reply.status, 401);
    assert_eq!(state(&console.store, &id).await?, ApprovalState::Pending);
    Ok(())
}

#[tokio::test]
async fn another_origin_or_host_is_forbidden() -> TestResult {
    let console = start().await?;
    let id = pending(&console.store, "delete_file").await?;
    let cookie = login(&console).await?;
    let csrf = csrf_for(&console, &cookie).await?;
    let target = format!("/console/approvals/{id}/approve");
    let evil = [cookie.clone(), "Origin: http://evil.example".to_owned()];
    let reply = request(console.address, "POST", &target, &evil, &format!("csrf={csrf}")).await?;
    assert_eq!(reply.status, 403);
    let reply = request(console.address, "GET", "/console", &evil, "").await?;
    assert_eq!(reply.status, 403);
    let null_origin = [cookie.clone(), "Origin: null".to_owned()];
    let reply = request(console.address, "POST", &target, &null_origin, &format!("csrf={csrf}")).await?;
    assert_eq!(reply.status, 403);
    // A rebinding attack arrives with the attacker's host name.
    let mut stream = tokio::net::TcpStream::connect(console.address).await?;
    stream.write_all(b"GET /console/login?token=x HTTP/1.1\r\nHost: evil.example\r\nConnection: close\r\n\r\n").await?;
    let mut raw = String::new();
    stream.read_to_string(&mut raw).await?;
    assert!(raw.starts_with("HTTP/1.1 403"), "{raw}");
    assert_eq!(state(&console.store, &id).await?, ApprovalState::Pending);
    // The same form from the console's own origin goes through.
    let own = [cookie, format!("Origin: http://{}", console.address)];
    let reply = request(console.address, "POST", &target, &own, &format!("csrf={csrf}")).await?;
    assert_eq!(reply.status, 303);
    assert_eq!(state(&console.store, &id).await?, ApprovalState::Approved);
    Ok(())
}

#[tokio::test]
async fn get_never_changes_state() -> TestResult {
    let console = start().await?;
    let id = pending(&console.store, "delete_file").await?;
    let (_, changed) = tools::rug_pull(&console.store).await?;
    let pin_form = format!("upstream=files&tool=delete_file&fingerprint={}", changed.fingerprint.whole);
    let cookie = login(&console).await?;
    let csrf = csrf_for(&console, &cookie).await?;
    for target in [
        format!("/console/approvals/{id}/approve"),
        format!("/console/approvals/{id}/approve?csrf={csrf}"),
        format!("/console/approvals/{id}/deny?csrf={csrf}"),
        format!("/console/logout?csrf={csrf}"),
        format!("/console/pins/approve?csrf={csrf}&{pin_form}"),
        format!("/console/pins/reject?csrf={csrf}&{pin_form}"),
        "/console".to_owned(),
        "/console/tools".to_owned(),
        "/console/audit?tool=*".to_owned(),
        "/console/api/pending".to_owned(),
        "/console/fragment/pending".to_owned(),
    ] {
        for method in ["GET", "HEAD"] {
            let reply = request(console.address, method, &target, std::slice::from_ref(&cookie), "").await?;
            assert!(reply.status == 200 || reply.status == 405, "{method} {target}: {}", reply.status);
        }
    }
    assert_eq!(state(&console.store, &id).await?, ApprovalState::Pending);
    assert_eq!(console.store.pins().list_pending().await?.len(), 1, "the quarantined definition still waits");
    // The session survived the GET to the logout URL.
    let page = request(console.address, "GET", "/console", &[cookie], "").await?;
    assert_eq!(page.status, 200);
    Ok(())
}

#[tokio::test]
async fn assets_are_served_locally() -> TestResult {
    let console = start().await?;
    let css = request(console.address, "GET", "/console/assets/console.css", &[], "").await?;
    assert_eq!(css.status, 200);
    assert!(css.header("content-type").is_some_and(|value| value.starts_with("text/css")));
    let js = request(console.address, "GET", "/console/assets/console.js", &[], "").await?;
    assert_eq!(js.status, 200);
    assert!(js.body.contains("/console/api/pending"));
    let csp = js.header("content-security-policy").ok_or("no csp")?;
    assert!(csp.contains("script-src 'self'"));
    Ok(())
}

#[tokio::test]
async fn the_activity_page_charts_calls_by_verdict() -> TestResult {
    use toolgate_core::decision::Verdict;
    use toolgate_store::{AuditEntry, AuditKind};
    let console = start().await?;
    let cookie = login(&console).await?;
    let empty = request(console.address, "GET", "/console/activity", std::slice::from_ref(&cookie), "").await?;
    assert_eq!(empty.status, 200);
    assert!(empty.body.contains("No tool calls in this period."), "{}", empty.body);
    // Calls a few seconds ago: they fall in the current minute and hour whatever the clock says.
    let now = SystemTime::now();
    let audit = console.store.audit();
    // One row per call; the confirmed one was declined by the person asked.
    for (kind, verdict, id, outcome) in [
        (AuditKind::Call, Verdict::Allow, 1, Some("ok")),
        (AuditKind::Call, Verdict::Allow, 2, Some("ok")),
        (AuditKind::Decision, Verdict::Deny, 3, None),
        (AuditKind::Decision, Verdict::Hide, 4, None),
        (AuditKind::Call, Verdict::Confirm, 5, Some("declined")),
    ] {
        let entry = AuditEntry {
            time: Some(now),
            session: Some("s1".into()),
            tool: Some("delete_file".into()),
            verdict: Some(verdict),
            args: Some(json!({"id": id})),
            outcome: outcome.map(str::to_owned),
            ..AuditEntry::new(kind)
        };
        audit.record_durable(entry).await?;
    }
    for span in ["hour", "day"] {
        let page = request(
            console.address,
            "GET",
            &format!("/console/activity?span={span}"),
            std::slice::from_ref(&cookie),
            "",
        )
        .await?;
        assert_eq!(page.status, 200);
        let body = &page.body;
        assert!(body.contains("role=\"img\"") && body.contains("<desc id=\"chart-desc\">5 calls"), "{body}");
        assert!(body.contains("2 allowed, 1 confirm, refused, 1 denied, 1 hidden"), "{body}");
        for (verdict, count) in
            [("allow", 2), ("confirm-refused", 1), ("deny", 1), ("hidden", 1), ("confirm-approved", 0)]
        {
            assert!(
                body.contains(&format!("<td data-verdict=\"{verdict}\">{count}</td>")),
                "{verdict} {count}: {body}"
            );
        }
        assert!(body.contains("class=\"v-allow\""), "bars coloured by class: {body}");
        assert!(!body.contains("style="), "no inline style: {body}");
    }
    Ok(())
}

#[tokio::test]
async fn a_configured_user_logs_in_with_the_form_and_decides_under_their_name() -> TestResult {
    let console = start().await?;
    let id = pending(&console.store, "delete_file").await?;
    let form = request(console.address, "GET", "/console/login", &[], "").await?;
    assert_eq!(form.status, 401, "not logged in yet");
    assert!(
        form.body.contains("action=\"/console/login\"") && form.body.contains("type=\"password\""),
        "{}",
        form.body
    );
    // A user's token never logs in through a URL, and a wrong token opens nothing.
    let in_url = request(console.address, "GET", &format!("/console/login?token={ALICE}"), &[], "").await?;
    assert_eq!(in_url.status, 401);
    let wrong = request(console.address, "POST", "/console/login", &[], "token=alice").await?;
    assert_eq!(wrong.status, 401);
    assert!(wrong.header("set-cookie").is_none() && wrong.body.contains("That token opens nothing."));
    // Another site's form is refused before the token is looked at.
    let foreign = ["Origin: http://evil.example".to_owned()];
    let reply = request(console.address, "POST", "/console/login", &foreign, &format!("token={ALICE}")).await?;
    assert_eq!(reply.status, 403);

    let reply = request(console.address, "POST", "/console/login", &[], &format!("token={ALICE}")).await?;
    assert_eq!(reply.status, 303, "{}", reply.body);
    let cookie = reply.header("set-cookie").ok_or("no cookie")?;
    assert!(cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"), "{cookie}");
    let cookie = format!("Cookie: {}", cookie.split(';').next().unwrap_or_default());
    let csrf = csrf_for(&console, &cookie).await?;
    let reply = decide_approval(&console, &cookie, &csrf, &id, "deny").await?;
    assert_eq!(reply.status, 303);
    assert_eq!(
        console.store.approvals().wait(&id, Duration::from_secs(1)).await?,
        ApprovalWait::Denied { by: "console:alice".into() }
    );
    let rows = console.store.query_audit(&toolgate_store::AuditFilter::default()).await?;
    assert_eq!(rows.last().and_then(|row| row.caller.clone()), Some(json!({"identity": "console:alice"})));
    // The one-time link still works, as `console`, and alice can log in again.
    login(&console).await?;
    let again = request(console.address, "POST", "/console/login", &[], &format!("token={ALICE}")).await?;
    assert_eq!(again.status, 303);
    Ok(())
}
