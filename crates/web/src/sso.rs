//! Single sign-on for the console (OpenID Connect, authorization code with PKCE S256), and the rules that say who
//! may decide an approval.
//!
//! `GET /console/sso/login[?next=PATH]` starts a login: a random `state`, sealed with the store's console secret into
//! a short-lived cookie (`SameSite=Lax`, path `/console/sso`, so it comes back on the provider's redirect) with the
//! console page to go on to afterwards (`crate::destination`, checked when sealed and again when read: never a
//! parameter the provider echoes, so nobody but this browser's own login start chooses it); the PKCE
//! verifier and the `nonce` are derived from the state with the same secret, so neither is stored and any process on
//! the store can finish the login. `GET /console/sso/callback` accepts the code only when the `state` matches the
//! cookie's (sealed, unexpired), marks the state used in the store (a replayed callback is refused before the code
//! is sent anywhere), then exchanges the code with the verifier and validates the ID token (`oidc`). The person's
//! session is the ordinary sealed cookie, naming their subject, display name and groups, and it ends when the ID
//! token expires (or after `max_session`, if sooner): a console session never outlives the identity's. Logging out
//! of such a session also sends the browser to the provider's `end_session_endpoint` (`end_session_url`, in the
//! logout handler). Failed callbacks count against the login limit. Nothing here logs a code, a token or a secret.

use axum::extract::State;
use axum::http::header::{COOKIE, LOCATION, SET_COOKIE};
use axum::http::{HeaderMap, HeaderValue, StatusCode, Uri};
use axum::response::{Html, IntoResponse, Response};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::handlers::{LoginClient, store_failure};
use crate::oidc::OidcError;
use crate::session::{COOKIE as SESSION_COOKIE, LoginError, hex, same_secret, seal, unhex};
use crate::{Console, destination, form, html};

/// The login-state cookie's name.
const STATE_COOKIE: &str = "toolgate_console_sso";
/// How long a person has at the provider before the login's state expires.
const STATE_LIFETIME: Duration = Duration::from_secs(10 * 60);
/// The prefix of a used login state among the store's used nonces.
const USED_PREFIX: &str = "console-sso:";

/// `GET /console/sso/login[?next=PATH]`: sends the browser to the provider with a fresh state, nonce and PKCE
/// challenge; the login state's cookie also holds where to go afterwards.
pub(crate) async fn start(State(console): State<Console>, uri: Uri) -> Response {
    let Some(provider) = console.provider.as_ref() else { return StatusCode::NOT_FOUND.into_response() };
    let key = match console.sessions.secret().await {
        Ok(key) => key,
        Err(error) => return store_failure(&error),
    };
    let state = match crate::random_token() {
        Ok(state) => state,
        Err(error) => {
            tracing::error!(%error, "console: no randomness for a login state");
            return StatusCode::INTERNAL_SERVER_ERROR.into_response();
        }
    };
    let expires_s = unix_s(SystemTime::now() + STATE_LIFETIME);
    let query = form::parse(uri.query().unwrap_or_default());
    let next = destination::or_front_page(form::field(&query, destination::FIELD));
    let body = format!("{state}.{expires_s}.{}", hex(next.as_bytes()));
    let cookie = format!(
        "{STATE_COOKIE}={body}.{}; Path=/console/sso; HttpOnly; SameSite=Lax; Max-Age={}",
        seal(&key, "sso-state", &body),
        STATE_LIFETIME.as_secs()
    );
    let url = provider.authorization_url(&state, &seal(&key, "sso-nonce", &state), &verifier(&key, &state)).await;
    match url {
        Ok(url) => {
            let mut response = StatusCode::SEE_OTHER.into_response();
            let headers = response.headers_mut();
            if let (Ok(location), Ok(cookie)) = (HeaderValue::from_str(&url), HeaderValue::from_str(&cookie)) {
                headers.insert(LOCATION, location);
                headers.insert(SET_COOKIE, cookie);
                response
            } else {
                StatusCode::INTERNAL_SERVER_ERROR.into_response()
            }
        }
        Err(error) => provider_failure(&error),
    }
}

/// The PKCE verifier of a login state: 64 hex digits (RFC 7636 allows 43 to 128 unreserved characters).
fn verifier(key: &[u8], state: &str) -> String {
    seal(key, "sso-pkce", state)
}

fn unix_s(time: SystemTime) -> u64 {
    time.duration_since(UNIX_EPOCH).map_or(0, |since| since.as_secs())
}

/// Why a callback was refused before the provider was asked anything.
enum BadCallback {
    /// The provider sent an error instead of a code.
    ProviderError(String),
    /// No code in the query.
    NoCode,
    /// No login-state cookie, or one not sealed here, or expired: the login did not start in this browser.
    NoLoginState,
    /// The query's `state` is not the cookie's.
    StateMismatch,
    /// This login's state was already used: a replayed callback.
    Replayed,
}

impl BadCallback {
    fn text(&self) -> String {
        match self {
            BadCallback::ProviderError(error) => format!("The identity provider answered with an error: {error}."),
            BadCallback::NoCode => "The identity provider's answer carries no authorization code.".into(),
            BadCallback::NoLoginState => {
                "This login did not start in this browser, or it took too long (its state and \
                                          PKCE verifier are missing). Start again from the login page."
                    .into()
            }
            BadCallback::StateMismatch => {
                "The login's state does not match the one this browser started with; nothing was accepted.".into()
            }
            BadCallback::Replayed => "This login was already completed; its code is not accepted twice.".into(),
        }
    }
}

/// What a callback's login-state cookie holds, if sealed here and unexpired.
struct LoginState {
    state: String,
    expires: SystemTime,
    /// The checked console path to go on to (the front page when none was asked for).
    next: String,
}

/// The login state a callback's cookie holds, if sealed here and unexpired.
fn cookie_state(headers: &HeaderMap, key: &[u8]) -> Option<LoginState> {
    let value = headers
        .get_all(COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == STATE_COOKIE)
        .map(|(_, value)| value)?;
    let (body, mac) = value.rsplit_once('.')?;
    if !same_secret(mac, &seal(key, "sso-state", body)) {
        return None;
    }
    let mut fields = body.split('.');
    let (state, expires_s) = (fields.next()?, fields.next()?);
    // Sealed here, so it was checked when the login started; checked again all the same.
    let next = fields
        .next()
        .and_then(unhex)
        .and_then(|bytes| String::from_utf8(bytes).ok())
        .and_then(|next| destination::console_path(&next).map(str::to_owned));
    let expires = UNIX_EPOCH + Duration::from_secs(expires_s.parse().ok()?);
    (expires > SystemTime::now() && !state.is_empty()).then(|| LoginState {
        state: state.to_owned(),
        expires,
        next: next.unwrap_or_else(|| destination::FRONT_PAGE.to_owned()),
    })
}

/// `GET /console/sso/callback?code=...&state=...`: checks the state, exchanges the code, opens the session.
pub(crate) async fn callback(
    State(console): State<Console>,
    LoginClient(client): LoginClient,
    uri: Uri,
    headers: HeaderMap,
) -> Response {
    let Some(provider) = console.provider.as_ref() else { return StatusCode::NOT_FOUND.into_response() };
    let attempt = match console.login_limiter.admit(client, Instant::now()) {
        Ok(attempt) => attempt,
        Err(locked) => return crate::handlers::too_many_attempts(locked),
    };
    let key = match console.sessions.secret().await {
        Ok(key) => key,
        Err(error) => {
            console.login_limiter.refund(attempt);
            return store_failure(&error);
        }
    };
    let query = form::parse(uri.query().unwrap_or_default());
    let checked = async {
        if let Some(error) = form::field(&query, "error") {
            return Err(BadCallback::ProviderError(error.to_owned()));
        }
        let code = form::field(&query, "code").filter(|code| !code.is_empty()).ok_or(BadCallback::NoCode)?;
        let LoginState { state, expires, next } = cookie_state(&headers, &key).ok_or(BadCallback::NoLoginState)?;
        if !same_secret(form::field(&query, "state").unwrap_or_default(), &state) {
            return Err(BadCallback::StateMismatch);
        }
        match console.store.request_states().use_nonce(&format!("{USED_PREFIX}{state}"), expires).await {
            Ok(true) => Ok(Ok((code.to_owned(), state, next))),
            Ok(false) => Err(BadCallback::Replayed),
            Err(error) => Ok(Err(error)),
        }
    }
    .await;
    let (code, state, next) = match checked {
        Ok(Ok(found)) => found,
        Ok(Err(error)) => {
            console.login_limiter.refund(attempt);
            return store_failure(&error);
        }
        Err(bad) => {
            console.login_limiter.failed(attempt);
            tracing::warn!(%client, reason = %bad.text(), "console: a single sign-on callback was refused");
            return refused(StatusCode::BAD_REQUEST, &bad.text());
        }
    };
    let login = provider.complete(&code, &verifier(&key, &state), &seal(&key, "sso-nonce", &state)).await;
    let login = match login {
        Ok(login) => login,
        Err(error @ OidcError::Provider(_)) => {
            console.login_limiter.refund(attempt);
            return provider_failure(&error);
        }
        Err(error) => {
            console.login_limiter.failed(attempt);
            tracing::warn!(%client, %error, "console: a single sign-on login was refused");
            return refused(StatusCode::UNAUTHORIZED, &error.to_string());
        }
    };
    console.login_limiter.refund(attempt);
    // The session never outlives the provider's assertion of who this is, nor the configured maximum.
    let expires = login.expires.min(SystemTime::now() + provider.config().max_session);
    let person = &login.person;
    match console.sessions.login_person(&login, expires).await {
        Ok(cookie) => {
            tracing::info!(subject = %person.subject, "console: a person logged in through single sign-on");
            logged_in(&cookie, &person.display, expires, &next)
        }
        Err(LoginError::Store(error)) => store_failure(&error),
        Err(LoginError::Random(_) | LoginError::Refused) => StatusCode::INTERNAL_SERVER_ERROR.into_response(),
    }
}

/// The session cookie, the login state's cookie cleared, and a page that goes on to `next` (the console page the
/// login started from, checked; else the front page). Not a redirect:
/// the callback is the end of a navigation that started at the provider's site, and a browser does not send a
/// `SameSite=Strict` cookie along a redirect chain that crossed sites; the page's own refresh is same-site.
fn logged_in(cookie: &str, display: &str, expires: SystemTime, next: &str) -> Response {
    let max_age = expires.duration_since(SystemTime::now()).unwrap_or_default().as_secs();
    let session = format!("{SESSION_COOKIE}={cookie}; Path=/console; HttpOnly; SameSite=Strict; Max-Age={max_age}");
    let cleared = format!("{STATE_COOKIE}=; Path=/console/sso; HttpOnly; SameSite=Lax; Max-Age=0");
    let page = html::continue_page(display, next);
    let mut response = Html(page).into_response();
    for value in [session, cleared] {
        match HeaderValue::from_str(&value) {
            Ok(value) => {
                response.headers_mut().append(SET_COOKIE, value);
            }
            Err(_) => return StatusCode::INTERNAL_SERVER_ERROR.into_response(),
        }
    }
    response
}

fn refused(status: StatusCode, text: &str) -> Response {
    (status, Html(html::message("Login refused", text, false))).into_response()
}

fn provider_failure(error: &OidcError) -> Response {
    tracing::error!(%error, "console: single sign-on failed");
    let text = format!("{error}. Try again once it is back.");
    (StatusCode::BAD_GATEWAY, Html(html::message("Identity provider unavailable", &text, false))).into_response()
}
