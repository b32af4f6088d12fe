//! toolgate's own OAuth tokens for an HTTP upstream: the client credentials grant at the issuer's token endpoint
//! (found by discovery), cached until shortly before it expires and fetched again once when the upstream answers 401.
//!
//! One [`TokenSource`] belongs to one configured upstream and outlives its connections, so reconnecting does not
//! cost a token request. Concurrent callers wait for one fetch rather than each asking the issuer. A token is never
//! logged, put in an error or shown by `Debug`; a failure names the issuer and the reason only. When no token can be
//! had, the request fails closed ([`UpstreamError::Credentials`]) and is not sent without one. Discovery and the
//! token request itself are shared with `crate::token_exchange` (a caller's token exchanged at the same issuer).

use std::fmt;
use std::time::{Duration, Instant};

use base64::Engine;
use serde_json::Value;
use toolgate_spec::{ClientCredentialsSpec, Secret, UpstreamCredentials};

use crate::error::UpstreamError;

/// Longest time a discovery or token request may take.
const ISSUER_TIMEOUT: Duration = Duration::from_secs(10);
/// A token is renewed this long before it expires (or a fifth of its lifetime, for short-lived ones), so a request
/// sent with it does not arrive with an expired token.
const RENEW_BEFORE_EXPIRY: Duration = Duration::from_secs(30);
/// Lifetime assumed when the issuer does not say (`expires_in` missing): short, so a long-lived guess never keeps a
/// revoked token in use.
const ASSUMED_LIFETIME: Duration = Duration::from_secs(60);
/// How much of an issuer's error body an error quotes.
const ERROR_SAMPLE_CHARS: usize = 200;

/// Obtains and caches toolgate's token for one upstream.
pub struct TokenSource {
    spec: ClientCredentialsSpec,
    client: reqwest::Client,
    state: tokio::sync::Mutex<State>,
}

struct State {
    /// The token endpoint, once discovered.
    token_endpoint: Option<reqwest::Url>,
    token: Option<CachedToken>,
}

/// A token and when to stop using it.
pub(crate) struct CachedToken {
    pub(crate) value: Secret,
    /// When it is renewed (before it expires).
    pub(crate) renew_at: Instant,
}

impl CachedToken {
    /// Whether it may still be sent.
    pub(crate) fn is_fresh(&self) -> bool {
        Instant::now() < self.renew_at
    }
}

impl fmt::Debug for TokenSource {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter
            .debug_struct("TokenSource")
            .field("issuer", &self.spec.issuer)
            .field("client_id", &self.spec.client_id)
            .finish_non_exhaustive()
    }
}

impl TokenSource {
    /// A source for `credentials` (for a token exchange upstream: toolgate's own client-credentials token from the
    /// same client, for what it sends on no caller's behalf); nothing is fetched until the first request needs one.
    pub fn new(credentials: &UpstreamCredentials) -> Result<TokenSource, UpstreamError> {
        let (spec, token_endpoint) = match credentials {
            UpstreamCredentials::ClientCredentials(spec) => (spec.clone(), None),
            UpstreamCredentials::TokenExchange(exchange) => {
                (exchange.own_credentials(), exchange.token_endpoint.as_deref())
            }
        };
        let client = issuer_client(&spec.issuer)?;
        let token_endpoint = token_endpoint.map(|endpoint| configured_endpoint(&spec.issuer, endpoint)).transpose()?;
        let state = State { token_endpoint, token: None };
        Ok(TokenSource { spec, client, state: tokio::sync::Mutex::new(state) })
    }

    /// The issuer, for messages.
    pub fn issuer(&self) -> &str {
        &self.spec.issuer
    }

    /// A token that is not about to expire: the cached one, else a new one from the issuer.
    pub(crate) async fn token(&self) -> Result<Secret, UpstreamError> {
        let mut state = self.state.lock().await;
        if let Some(token) = state.token.as_ref().filter(|token| token.is_fresh()) {
            return Ok(token.value.clone());
        }
        state.token = None;
        let endpoint = match state.token_endpoint.clone() {
            Some(endpoint) => endpoint,
            None => {
                let endpoint = discover(&self.client, &self.spec.issuer).await?;
                state.token_endpoint = Some(endpoint.clone());
                endpoint
            }
        };
        let mut form = vec![("grant_type", "client_credentials")];
        if let Some(scope) = &self.spec.scope {
            form.push(("scope", scope));
        }
        if let Some(resource) = &self.spec.resource {
            form.push(("resource", resource));
        }
        let client = ClientAuth { id: &self.spec.client_id, secret: &self.spec.client_secret };
        let token = request_token(&self.client, &self.spec.issuer, endpoint, client, &form)
            .await
            .map_err(|(_, error)| error)?;
        let value = token.value.clone();
        state.token = Some(token);
        Ok(value)
    }

    /// The upstream refused `token` (HTTP 401): forget it, so the next [`TokenSource::token`] asks the issuer.
    /// A token already replaced by another caller's refresh is left alone.
    pub(crate) async fn reject(&self, token: &Secret) {
        let mut state = self.state.lock().await;
        if state.token.as_ref().is_some_and(|cached| cached.value == *token) {
            state.token = None;
        }
    }
}

/// toolgate's client at the issuer, as a token request authenticates it.
#[derive(Clone, Copy)]
pub(crate) struct ClientAuth<'a> {
    pub(crate) id: &'a str,
    pub(crate) secret: &'a Secret,
}

/// The token endpoint from the issuer's OpenID configuration, else its RFC 8414 metadata.
pub(crate) async fn discover(client: &reqwest::Client, issuer: &str) -> Result<reqwest::Url, UpstreamError> {
    let configured = issuer;
    let issuer = issuer.trim_end_matches('/');
    let base = reqwest::Url::parse(issuer).map_err(|error| failure(configured, format!("not a URL: {error}")))?;
    let openid = format!("{issuer}/.well-known/openid-configuration");
    // RFC 8414 §3.1: the well-known segment goes between the host and the issuer's path.
    let rfc8414 =
        format!("{}/.well-known/oauth-authorization-server{}", origin(&base), base.path().trim_end_matches('/'));
    let mut last = String::new();
    for url in [openid, rfc8414] {
        match metadata(client, &url).await {
            Ok(metadata) => return token_endpoint(configured, &metadata),
            Err(reason) => last = reason,
        }
    }
    Err(failure(configured, format!("discovery failed: {last}")))
}

async fn metadata(client: &reqwest::Client, url: &str) -> Result<Value, String> {
    let response = client.get(url).send().await.map_err(|error| format!("{url}: {}", root_cause(&error)))?;
    let status = response.status();
    if !status.is_success() {
        return Err(format!("{url} answered HTTP {}", status.as_u16()));
    }
    let body = response.bytes().await.map_err(|error| format!("{url}: {}", root_cause(&error)))?;
    serde_json::from_slice(&body).map_err(|error| format!("{url}: not JSON: {error}"))
}

/// The metadata's `token_endpoint`, after checking it describes the configured issuer (RFC 8414 §3.3: a document
/// for another issuer must not be used).
fn token_endpoint(issuer: &str, metadata: &Value) -> Result<reqwest::Url, UpstreamError> {
    let named = metadata.get("issuer").and_then(Value::as_str).unwrap_or_default();
    if named.trim_end_matches('/') != issuer.trim_end_matches('/') {
        return Err(failure(issuer, format!("the discovery document names another issuer (`{named}`)")));
    }
    let endpoint = metadata
        .get("token_endpoint")
        .and_then(Value::as_str)
        .ok_or_else(|| failure(issuer, "the discovery document has no token_endpoint".to_owned()))?;
    reqwest::Url::parse(endpoint).map_err(|error| failure(issuer, format!("token_endpoint is not a URL: {error}")))
}

/// How a request to the token endpoint failed, for the metrics of token exchange (`TokenExchanger::counts`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenFailure {
    /// The token endpoint could not be found: discovery failed, or named another issuer.
    Discovery,
    /// The token endpoint could not be reached (connection, TLS, timeout).
    Unreachable,
    /// The token endpoint answered with an HTTP error (a refused grant, bad client credentials).
    Refused,
    /// It answered 2xx without a usable Bearer access token.
    BadAnswer,
    /// The caller presented no OAuth access token to exchange: nothing was asked.
    NoCallerToken,
}

impl TokenFailure {
    /// Every kind, in the order the metrics list them.
    pub const ALL: [TokenFailure; 5] = [
        TokenFailure::Discovery,
        TokenFailure::Unreachable,
        TokenFailure::Refused,
        TokenFailure::BadAnswer,
        TokenFailure::NoCallerToken,
    ];

    /// The metric label.
    pub fn label(self) -> &'static str {
        match self {
            TokenFailure::Discovery => "discovery",
            TokenFailure::Unreachable => "unreachable",
            TokenFailure::Refused => "refused",
            TokenFailure::BadAnswer => "bad_answer",
            TokenFailure::NoCallerToken => "no_caller_token",
        }
    }
}

/// POSTs `form` to the token endpoint as `client` (HTTP Basic) and takes a Bearer access token from the answer,
/// to be renewed a fifth of its lifetime (at most [`RENEW_BEFORE_EXPIRY`]) early. A failure says its kind
/// ([`TokenFailure`]) beside the error.
pub(crate) async fn request_token(
    http: &reqwest::Client,
    issuer: &str,
    endpoint: reqwest::Url,
    client: ClientAuth<'_>,
    form: &[(&str, &str)],
) -> Result<CachedToken, (TokenFailure, UpstreamError)> {
    let bad_answer = |reason: String| (TokenFailure::BadAnswer, failure(issuer, reason));
    // RFC 6749 §2.3.1: the id and secret are form-encoded before they are joined for Basic authentication.
    let basic = format!("{}:{}", form_encode(client.id), form_encode(client.secret.expose()));
    let authorization = format!("Basic {}", base64::engine::general_purpose::STANDARD.encode(basic));
    let body = form.iter().map(|(key, value)| format!("{key}={}", form_encode(value))).collect::<Vec<_>>().join("&");
    let sent = Instant::now();
    let response = http
        .post(endpoint)
        .header(reqwest::header::AUTHORIZATION, authorization)
        .header(reqwest::header::CONTENT_TYPE, "application/x-www-form-urlencoded")
        .header(reqwest::header::ACCEPT, "application/json")
        .body(body)
        .send()
        .await
        .map_err(|error| {
            (TokenFailure::Unreachable, failure(issuer, format!("the token endpoint: {}", root_cause(&error))))
        })?;
    let status = response.status();
    let body = response.bytes().await.unwrap_or_default();
    let answer: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    if !status.is_success() {
        // Only the standard error fields are quoted: an issuer's body is not echoed whole.
        let error = answer.get("error").and_then(Value::as_str).unwrap_or("no error code");
        let description = answer.get("error_description").and_then(Value::as_str).unwrap_or_default();
        let sample: String = format!("{error} {description}").trim().chars().take(ERROR_SAMPLE_CHARS).collect();
        let reason = format!("the token endpoint answered HTTP {}: {sample}", status.as_u16());
        return Err((TokenFailure::Refused, failure(issuer, reason)));
    }
    let value = answer
        .get("access_token")
        .and_then(Value::as_str)
        .filter(|token| !token.is_empty() && is_header_safe(token))
        .ok_or_else(|| bad_answer("the token response has no usable access_token".to_owned()))?;
    let token_type = answer.get("token_type").and_then(Value::as_str).unwrap_or_default();
    if !token_type.eq_ignore_ascii_case("bearer") {
        return Err(bad_answer(format!("the token type is `{token_type}`, not Bearer")));
    }
    let lifetime = answer.get("expires_in").and_then(Value::as_u64).map_or(ASSUMED_LIFETIME, Duration::from_secs);
    let margin = RENEW_BEFORE_EXPIRY.min(lifetime / 5);
    // Counted from when the request was sent: the issuer's clock started no later.
    Ok(CachedToken { value: Secret::new(value), renew_at: sent + lifetime.saturating_sub(margin) })
}

/// The HTTP client for one issuer's discovery and token requests.
pub(crate) fn issuer_client(issuer: &str) -> Result<reqwest::Client, UpstreamError> {
    // reqwest is built without a default TLS provider; ring is installed once per process for https issuers.
    let _ = rustls::crypto::ring::default_provider().install_default();
    // Redirects are not followed: the client secret goes only to the configured issuer's token endpoint.
    reqwest::Client::builder()
        .timeout(ISSUER_TIMEOUT)
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .map_err(|error| failure(issuer, error.to_string()))
}

/// A configured token endpoint, used without discovery.
pub(crate) fn configured_endpoint(issuer: &str, endpoint: &str) -> Result<reqwest::Url, UpstreamError> {
    reqwest::Url::parse(endpoint).map_err(|error| failure(issuer, format!("token_endpoint is not a URL: {error}")))
}

pub(crate) fn failure(issuer: &str, reason: String) -> UpstreamError {
    UpstreamError::Credentials { issuer: issuer.to_owned(), reason }
}

/// `scheme://host[:port]` of `url`.
fn origin(url: &reqwest::Url) -> String {
    url.origin().ascii_serialization()
}

/// The innermost cause of a reqwest error ("Connection refused"), after reqwest's own text.
fn root_cause(error: &reqwest::Error) -> String {
    let root = std::iter::successors(std::error::Error::source(error), |cause| cause.source()).last();
    match root {
        Some(root) => format!("{error}: {root}"),
        None => error.to_string(),
    }
}

/// Whether `value` may go into an HTTP header as it is.
fn is_header_safe(value: &str) -> bool {
    value.bytes().all(|byte| (0x21..=0x7e).contains(&byte))
}

/// `application/x-www-form-urlencoded` encoding of one value.
fn form_encode(value: &str) -> String {
    let mut encoded = String::with_capacity(value.len());
    for byte in value.bytes() {
        match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'*' => encoded.push(char::from(byte)),
            b' ' => encoded.push('+'),
            other => encoded.push_str(&format!("%{other:02X}")),
        }
    }
    encoded
}

#[cfg(test)]
#[allow(clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn form_encoding_escapes_what_the_form_reserves() {
        assert_eq!(form_encode("a b&c=d/é"), "a+b%26c%3Dd%2F%C3%A9");
    }

    #[test]
    fn debug_never_shows_the_secret() {
        let spec = ClientCredentialsSpec {
            issuer: "http://127.0.0.1:1".into(),
            client_id: "toolgate".into(),
            client_secret: Secret::new("s3cr3t-value"),
            scope: None,
            resource: None,
        };
        let source = TokenSource::new(&UpstreamCredentials::ClientCredentials(spec)).expect("a client is built");
        let shown = format!("{source:?} {:?}", source.spec);
        assert!(!shown.contains("s3cr3t-value"), "{shown}");
    }
}
