//! Request handlers: the guard every request passes, login (behind the failed-login limit), the pages, the decision
//! forms and the assets.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::time::{Instant, SystemTime};

use axum::body::Bytes;
use axum::extract::{ConnectInfo, FromRequestParts, Path, Request, State};
use axum::http::header::{CACHE_CONTROL, CONTENT_TYPE, COOKIE, LOCATION, RETRY_AFTER, SET_COOKIE};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode, Uri};
use axum::middleware::Next;
use axum::response::{Html, IntoResponse, Response};
use serde_json::json;
use toolgate_store::{ApprovalDecision, ApprovalId, ApprovalRecord, StoreError};

use crate::login_limit::{Client, LockedOut};
use crate::session::{COOKIE as COOKIE_NAME, LoginError, SESSION_LIFETIME, Session, same_secret};
use crate::{Console, checks, destination, form, html};

/// The form field that asks the decision handler to go back to the approval page it was sent from
/// (`crate::approval`) rather than to the list.
pub(crate) const RETURN_FIELD: &str = "return";

const STYLESHEET: &str = include_str!("../assets/console.css");
const SCRIPT: &str = include_str!("../assets/console.js");

const SECURITY_HEADERS: [(&str, &str); 6] = [
    (
        "content-security-policy",
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; \
         form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    ),
    ("x-frame-options", "DENY"),
    ("x-content-type-options", "nosniff"),
    // Not `no-referrer`: under it a browser sends `Origin: null` with the console's own form posts, which the
    // Origin check must refuse (sandboxed frames send it too). `same-origin` keeps every URL, the login link's
    // included, from leaving the console's origin, and lets same-origin posts carry their real Origin.
    ("referrer-policy", "same-origin"),
    ("cache-control", "no-store"),
    ("cross-origin-opener-policy", "same-origin"),
];

/// Host and Origin first (403), then the handler; every response gets the security headers.
pub(crate) async fn guard(State(console): State<Console>, request: Request, next: Next) -> Response {
    let authority = request.uri().authority().map(|authority| authority.as_str().to_owned());
    let checked = checks::check_host_and_origin(
        request.headers(),
        authority.as_deref(),
        &console.config.allowed_hosts,
        &console.config.allowed_origins,
    );
    let mut response = match checked {
        Ok(()) => next.run(request).await,
        Err(forbidden) => {
            let what = match forbidden {
                checks::Forbidden::Host => "host not allowed",
                checks::Forbidden::Origin => "origin not allowed",
            };
            tracing::warn!(reason = what, "console request refused");
            (StatusCode::FORBIDDEN, Html(html::message("Forbidden", what, false))).into_response()
        }
    };
    let headers = response.headers_mut();
    for (name, value) in SECURITY_HEADERS {
        let name = HeaderName::from_static(name);
        if !headers.contains_key(&name) {
            headers.insert(name, HeaderValue::from_static(value));
        }
    }
    response
}

/// The session named by the request's cookie, with its id.
pub(crate) async fn session(console: &Console, headers: &HeaderMap) -> Option<(String, Session)> {
    let cookies: Vec<&str> = headers
        .get_all(COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .filter(|(name, _)| *name == COOKIE_NAME)
        .map(|(_, value)| value)
        .collect();
    for cookie in cookies {
        if let Some(session) = console.sessions.get(cookie).await {
            return Some((cookie.to_owned(), session));
        }
    }
    None
}

pub(crate) fn unauthorized() -> Response {
    let text = "Open the login link `toolgate serve` printed on its standard error, or log in with your console \
                token at /console/login.";
    (StatusCode::UNAUTHORIZED, Html(html::message("Not logged in", text, false))).into_response()
}

/// 401 for a console page asked for without a session: the login page, which leads back to the page asked for
/// (path and query, when `crate::destination` accepts them) once the person is logged in. For pages a person opens;
/// a script's fragment or a form's post gets [`unauthorized`].
pub(crate) fn not_logged_in(console: &Console, uri: &Uri) -> Response {
    let asked = uri.path_and_query().map(axum::http::uri::PathAndQuery::as_str);
    login_page(console, None, destination::or_front_page(asked))
}

pub(crate) fn see_other(location: &'static str) -> Response {
    (StatusCode::SEE_OTHER, [(LOCATION, location)]).into_response()
}

pub(crate) fn store_failure(error: &StoreError) -> Response {
    tracing::error!(%error, "console: the store failed");
    let page = html::message("Store error", "The state store could not be read or written; see toolgate's log.", true);
    (StatusCode::INTERNAL_SERVER_ERROR, Html(page)).into_response()
}

/// Who is logging in, as the failed-login limit counts them: the connection's peer address, when the server records
/// it (`ConnectInfo<SocketAddr>`). Never a header: `X-Forwarded-For` and the like are the client's to invent.
pub(crate) struct LoginClient(pub(crate) Client);

impl<S: Send + Sync> FromRequestParts<S> for LoginClient {
    type Rejection = Infallible;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        let peer = parts.extensions.get::<ConnectInfo<SocketAddr>>().map(|ConnectInfo(address)| address.ip());
        Ok(LoginClient(Client::of(peer)))
    }
}

/// Runs `login` if the failed-login limit admits `client`, and tells the limit how it went.
async fn limited_login(
    console: &Console,
    client: Client,
    login: impl AsyncFnOnce() -> Result<String, LoginError>,
) -> Result<Result<String, LoginError>, LockedOut> {
    let attempt = console.login_limiter.admit(client, Instant::now())?;
    let opened = login().await;
    match &opened {
        Err(LoginError::Refused) => console.login_limiter.failed(attempt),
        Ok(_) | Err(LoginError::Random(_) | LoginError::Store(_)) => console.login_limiter.refund(attempt),
    }
    Ok(opened)
}

/// 429: too many failed logins from this address; the token was not looked at.
pub(crate) fn too_many_attempts(locked: LockedOut) -> Response {
    let seconds = locked.retry_after_seconds();
    let text = format!(
        "Too many failed logins from your address. Every login from it, with any token, is refused for {seconds} \
         more seconds."
    );
    let page = Html(html::message("Too many login attempts", &text, false));
    (StatusCode::TOO_MANY_REQUESTS, [(RETRY_AFTER, seconds.to_string())], page).into_response()
}

/// `GET /console/login?token=...[&next=PATH]`: exchanges the one-time token for a session cookie, then goes to the
/// console page `next` names (`crate::destination`: only a console path, else the front page). Without a token:
/// the login form when users or single sign-on are configured (401 until logged in), carrying `next`; a browser
/// that is logged in already goes straight on.
pub(crate) async fn login(
    State(console): State<Console>,
    LoginClient(client): LoginClient,
    uri: Uri,
    headers: HeaderMap,
) -> Response {
    let query = form::parse(uri.query().unwrap_or_default());
    let next = destination::or_front_page(form::field(&query, destination::FIELD));
    let Some(token) = form::field(&query, "token") else {
        return if session(&console, &headers).await.is_some() {
            see_other_to(next)
        } else {
            login_page(&console, None, next)
        };
    };
    // Only the one-time link logs in through a URL: a user's lasting token never goes into one.
    match limited_login(&console, client, async || console.sessions.login(token).await).await {
        Err(locked) => too_many_attempts(locked),
        Ok(Ok(id)) => logged_in(&id, next),
        Ok(Err(LoginError::Refused)) => {
            let text = "This login link is wrong or was already used. Restart `toolgate serve` for a new one.";
            (StatusCode::UNAUTHORIZED, Html(html::message("Login refused", text, false))).into_response()
        }
        Ok(Err(LoginError::Random(error))) => no_randomness(&error),
        Ok(Err(LoginError::Store(error))) => store_failure(&error),
    }
}

/// 401 with the login page leading on to `next` (a checked console path) when a way to log in is configured, else
/// the plain "not logged in" page (only the one-time link logs in).
pub(crate) fn login_page(console: &Console, problem: Option<&str>, next: &str) -> Response {
    let (tokens, sso) = (console.sessions.has_users(), console.provider.is_some());
    if !tokens && !sso && next == destination::FRONT_PAGE {
        return unauthorized();
    }
    (StatusCode::UNAUTHORIZED, Html(html::login_page(problem, tokens, sso, next))).into_response()
}

/// `POST /console/login` with a `token` field: a configured user's token (or the one-time link's), from the form,
/// and the `next` field the login page carried. No CSRF field (there is no session yet); the Host/Origin rule has
/// already refused other sites' forms.
pub(crate) async fn login_form(
    State(console): State<Console>,
    LoginClient(client): LoginClient,
    body: Bytes,
) -> Response {
    let fields = form::parse(std::str::from_utf8(&body).unwrap_or_default());
    let token = form::field(&fields, "token").map(str::trim).unwrap_or_default();
    let next = destination::or_front_page(form::field(&fields, destination::FIELD));
    let opened = limited_login(&console, client, async || match console.sessions.login(token).await {
        Err(LoginError::Refused) if !token.is_empty() => console.sessions.login_user(token).await,
        other => other,
    })
    .await;
    match opened {
        Err(locked) => too_many_attempts(locked),
        Ok(Ok(id)) => logged_in(&id, next),
        Ok(Err(LoginError::Refused)) => {
            tracing::warn!(%client, "console: a login with an unknown token was refused");
            let page = html::login_page(Some("That token opens nothing."), true, console.provider.is_some(), next);
            (StatusCode::UNAUTHORIZED, Html(page)).into_response()
        }
        Ok(Err(LoginError::Random(error))) => no_randomness(&error),
        Ok(Err(LoginError::Store(error))) => store_failure(&error),
    }
}

/// The answer to a successful login: the session cookie, then the page `next` names (a checked console path).
fn logged_in(id: &str, next: &str) -> Response {
    let cookie =
        format!("{COOKIE_NAME}={id}; Path=/console; HttpOnly; SameSite=Strict; Max-Age={}", SESSION_LIFETIME.as_secs());
    let mut response = see_other_to(next);
    match HeaderValue::from_str(&cookie) {
        Ok(value) => {
            response.headers_mut().insert(SET_COOKIE, value);
            response
        }
        Err(_) => StatusCode::INTERNAL_SERVER_ERROR.into_response(),
    }
}

/// 303 to `location`, a checked console path (the front page if it cannot be a header).
fn see_other_to(location: &str) -> Response {
    match HeaderValue::from_str(location) {
        Ok(location) => (StatusCode::SEE_OTHER, [(LOCATION, location)]).into_response(),
        Err(_) => see_other(destination::FRONT_PAGE),
    }
}

fn no_randomness(error: &std::io::Error) -> Response {
    tracing::error!(%error, "console: no randomness for a session");
    StatusCode::INTERNAL_SERVER_ERROR.into_response()
}

/// Why a POST was refused before its handler ran.
pub(crate) enum PostRefusal {
    /// No session: 401.
    NotLoggedIn,
    /// The form's CSRF token is missing or wrong: 403.
    Csrf,
}

impl IntoResponse for PostRefusal {
    fn into_response(self) -> Response {
        match self {
            PostRefusal::NotLoggedIn => unauthorized(),
            PostRefusal::Csrf => {
                let text = "The form's CSRF token is missing or wrong; reload the page.";
                (StatusCode::FORBIDDEN, Html(html::message("Forbidden", text, true))).into_response()
            }
        }
    }
}

/// A POST whose form carries its session's CSRF token.
pub(crate) struct CheckedPost {
    /// The session: who decides.
    pub(crate) session: Session,
    /// The form's fields.
    pub(crate) fields: Vec<(String, String)>,
}

/// The session and form fields of a POST whose form carries the session's CSRF token.
pub(crate) async fn checked_post(
    console: &Console,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<CheckedPost, PostRefusal> {
    let Some((_, session)) = session(console, headers).await else {
        return Err(PostRefusal::NotLoggedIn);
    };
    let fields = form::parse(std::str::from_utf8(body).unwrap_or_default());
    match form::field(&fields, "csrf") {
        Some(token) if same_secret(token, &session.csrf) => Ok(CheckedPost { session, fields }),
        _ => Err(PostRefusal::Csrf),
    }
}

/// `POST /console/logout`.
pub(crate) async fn logout(State(console): State<Console>, headers: HeaderMap, body: Bytes) -> Response {
    match checked_post(&console, &headers, &body).await {
        Ok(post) => {
            // Read before the session is removed, which forgets it.
            let id_token = console.sessions.id_token(&post.session).await;
            if let Err(error) = console.sessions.remove(&post.session).await {
                return store_failure(&error);
            }
            let mut response = match console.provider.as_ref().filter(|_| post.session.single_sign_on) {
                Some(provider) => provider_logout(provider, id_token.as_deref()).await,
                None => Html(html::message("Logged out", "The console session ended.", false)).into_response(),
            };
            let expired = format!("{COOKIE_NAME}=; Path=/console; HttpOnly; SameSite=Strict; Max-Age=0");
            if let Ok(value) = HeaderValue::from_str(&expired) {
                response.headers_mut().insert(SET_COOKIE, value);
            }
            response
        }
        Err(refusal) => refusal.into_response(),
    }
}

/// After a single sign-on session ended here: a page that goes on to the provider to end the person's session there
/// too (RP-initiated logout), or one saying why that is left to them (no `end_session_endpoint`, or the provider
/// cannot be reached); either way the console session has already ended. `id_token` is the session's, when the store
/// kept it (whichever process the person logged in on): the provider's `id_token_hint`.
async fn provider_logout(provider: &crate::oidc::Provider, id_token: Option<&str>) -> Response {
    let text = match provider.end_session_url(id_token).await {
        Ok(Some(url)) => return Html(html::provider_logout_page(&url)).into_response(),
        Ok(None) => "The console session ended. The identity provider offers no logout endpoint: log out there \
                     yourself to end your session with it."
            .to_owned(),
        Err(error) => {
            tracing::error!(%error, "console: cannot reach the identity provider to log out there");
            format!("The console session ended, but the identity provider could not be asked to end yours ({error}).")
        }
    };
    Html(html::message("Logged out", &text, false)).into_response()
}

/// Pending approvals that can still be decided, oldest first.
async fn pending(console: &Console) -> Result<Vec<ApprovalRecord>, StoreError> {
    let now = SystemTime::now();
    let mut records = console.store.approvals().list_pending().await?;
    records.retain(|record| record.approval.expires > now);
    Ok(records)
}

/// `GET /console`: the pending approvals.
pub(crate) async fn pending_page(State(console): State<Console>, uri: Uri, headers: HeaderMap) -> Response {
    let Some((_, session)) = session(&console, &headers).await else {
        return not_logged_in(&console, &uri);
    };
    match pending(&console).await {
        Ok(records) => Html(html::pending_page(&records, &session.csrf)).into_response(),
        Err(error) => store_failure(&error),
    }
}

/// `GET /console/fragment/pending`: the list alone, for the refresh script.
pub(crate) async fn pending_fragment(State(console): State<Console>, headers: HeaderMap) -> Response {
    let Some((_, session)) = session(&console, &headers).await else {
        return unauthorized();
    };
    match pending(&console).await {
        Ok(records) => Html(html::pending_list(&records, &session.csrf)).into_response(),
        Err(error) => store_failure(&error),
    }
}

/// `GET /console/api/pending`: the pending approvals as JSON, with the list's version.
pub(crate) async fn pending_json(State(console): State<Console>, headers: HeaderMap) -> Response {
    if session(&console, &headers).await.is_none() {
        return (StatusCode::UNAUTHORIZED, axum::Json(json!({"error": "not logged in"}))).into_response();
    }
    match pending(&console).await {
        Ok(records) => {
            axum::Json(json!({"version": html::pending_version(&records), "approvals": records})).into_response()
        }
        Err(error) => {
            tracing::error!(%error, "console: the store failed");
            (StatusCode::INTERNAL_SERVER_ERROR, axum::Json(json!({"error": "store failure"}))).into_response()
        }
    }
}

/// `POST /console/approvals/{id}/{approve|deny}` with the CSRF field: decides, then back to the list.
pub(crate) async fn decide(
    State(console): State<Console>,
    Path((id, decision)): Path<(String, String)>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let post = match checked_post(&console, &headers, &body).await {
        Ok(post) => post,
        Err(refusal) => return refusal.into_response(),
    };
    let decided_by = post.session.identity.as_str();
    let decision = match decision.as_str() {
        "approve" => ApprovalDecision::Approve,
        "deny" => ApprovalDecision::Deny,
        _ => return StatusCode::NOT_FOUND.into_response(),
    };
    let id = ApprovalId::from_text(&id);
    if let Some(refusal) = refuse_decider(&console, &post.session, &id, decision).await {
        return refusal;
    }
    match console.store.approvals().decide(&id, decision, decided_by).await {
        Ok(()) => {
            tracing::info!(approval = %id, ?decision, decided_by, "approval decided in the console");
            // The decision stands whatever happens next; its audit row says who made it.
            let name = post.session.display.as_deref();
            let recorded = match console.store.approvals().get(&id).await {
                Ok(Some(record)) => console
                    .store
                    .record_approval_decision_named(&record.approval, decision, decided_by, name)
                    .await
                    .map(|_| ()),
                Ok(None) => Ok(()),
                Err(error) => Err(error),
            };
            match recorded {
                // From the approval's own page (a URL-mode confirmation's link): back there, to see it decided.
                Ok(()) if form::field(&post.fields, RETURN_FIELD) == Some("approval") => {
                    match HeaderValue::from_str(&format!("/console/approvals/{id}")) {
                        Ok(location) => (StatusCode::SEE_OTHER, [(LOCATION, location)]).into_response(),
                        Err(_) => see_other("/console"),
                    }
                }
                Ok(()) => see_other("/console"),
                Err(error) => store_failure(&error),
            }
        }
        Err(StoreError::NotFound(_)) => {
            (StatusCode::NOT_FOUND, Html(html::message("Not found", "No such approval.", true))).into_response()
        }
        Err(StoreError::AlreadyDecided { state, .. }) => {
            let text = format!("This approval was already decided ({state}).");
            (StatusCode::CONFLICT, Html(html::message("Already decided", &text, true))).into_response()
        }
        Err(StoreError::Expired(_)) => {
            let text = "This approval expired before it was decided.";
            (StatusCode::GONE, Html(html::message("Expired", text, true))).into_response()
        }
        Err(error) => store_failure(&error),
    }
}

/// A `403` page (after its audit row) when the approver rules forbid this person this decision on this approval;
/// `None` when they may go on (or the approval is unknown: `decide` answers that).
async fn refuse_decider(
    console: &Console,
    session: &Session,
    id: &ApprovalId,
    decision: ApprovalDecision,
) -> Option<Response> {
    let record = match console.store.approvals().get(id).await {
        Ok(Some(record)) => record,
        Ok(None) => return None,
        Err(error) => return Some(store_failure(&error)),
    };
    let approve = matches!(decision, ApprovalDecision::Approve);
    let not_allowed =
        crate::approvers::may_decide(console, session, record.approval.caller.as_deref(), approve).err()?;
    let reason = not_allowed.reason();
    tracing::warn!(approval = %id, decided_by = %session.identity, reason, "console: a decision was refused");
    let audited = console.store.record_approval_refusal(&record.approval, decision, &session.identity, &reason).await;
    if let Err(error) = audited {
        return Some(store_failure(&error));
    }
    let text = format!("Refused: {reason}. The call still waits for someone else.");
    Some((StatusCode::FORBIDDEN, Html(html::message("Not allowed", &text, true))).into_response())
}

/// `GET /console/assets/console.css`.
pub(crate) async fn stylesheet() -> Response {
    ([(CONTENT_TYPE, "text/css; charset=utf-8"), (CACHE_CONTROL, "no-cache")], STYLESHEET).into_response()
}

/// `GET /console/assets/console.js`.
pub(crate) async fn script() -> Response {
    ([(CONTENT_TYPE, "text/javascript; charset=utf-8"), (CACHE_CONTROL, "no-cache")], SCRIPT).into_response()
}
