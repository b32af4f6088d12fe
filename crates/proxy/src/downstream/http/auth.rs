//! Who is calling: bearer tokens or API keys checked on every request against the configured callers, and, with
//! `[oauth]`, OAuth 2.1 access tokens validated by `toolgate-auth`.
//!
//! Secrets are never stored or logged: callers are configured by the SHA-256 of their token, and an incoming token
//! is hashed and compared in constant time. Without configured callers or OAuth every request is the anonymous
//! caller (the listener then relies on its loopback bind). The session id is never authentication: a session
//! opened by one caller is invisible to every other, and an OAuth caller is its token's subject, so another
//! identity's token cannot use it.
//!
//! An OAuth refusal answers 401 with `WWW-Authenticate: Bearer resource_metadata=…, scope=…` (RFC 9728), a valid
//! token lacking the required scopes 403 `insufficient_scope` (step-up), an unreachable provider 503: fail
//! closed, never a guess; an opaque token from an address with as many introspections in flight as allowed 429
//! with `Retry-After` (`toolgate_auth::TokenError::IntrospectionBusy`). The accepted token rides in the caller as a `SubjectToken` (redacted when formatted) for
//! a token exchange upstream; it is never forwarded as is.

use std::net::IpAddr;
use std::sync::Arc;

use axum::http::{HeaderMap, StatusCode, header};
use toolgate_auth::{TokenError, Validator};
use toolgate_core::fingerprint::digest_bytes;
use toolgate_spec::{CallerSpec, SubjectToken};

use super::checks::{Rejection, TRANSPORT_ERROR};
use crate::session::{Caller, SessionFactory};

/// How the listener treats OAuth access tokens.
#[derive(Debug, Clone)]
pub(super) enum OAuth {
    /// No `[oauth]`: static callers only.
    Off,
    /// Tokens validated by this validator.
    On(Arc<Validator>),
    /// `[oauth]` is configured but cannot run (the reason): every request is refused rather than let through.
    Broken(String),
}

impl OAuth {
    pub(super) fn from_spec(spec: Option<&toolgate_spec::OAuthSpec>) -> OAuth {
        match spec.map(Validator::new) {
            None => OAuth::Off,
            Some(Ok(validator)) => OAuth::On(Arc::new(validator)),
            Some(Err(error)) => {
                tracing::error!(%error, "[oauth] cannot run: every HTTP request will be refused");
                OAuth::Broken(error.to_string())
            }
        }
    }

    pub(super) fn validator(&self) -> Option<&Arc<Validator>> {
        match self {
            OAuth::On(validator) => Some(validator),
            _ => None,
        }
    }

    /// True when requests must authenticate because of OAuth.
    pub(super) fn is_configured(&self) -> bool {
        !matches!(self, OAuth::Off)
    }
}

/// The caller a request authenticates as; 401 when callers (or OAuth) are configured and the token is missing,
/// unknown or invalid, 403 when a valid OAuth token lacks a required scope, 503 when the provider is unreachable.
pub(super) async fn authenticate(
    headers: &HeaderMap,
    remote: Option<IpAddr>,
    callers: &[CallerSpec],
    oauth: &OAuth,
    factory: &dyn SessionFactory,
) -> Result<Caller, Rejection> {
    if callers.is_empty() && !oauth.is_configured() {
        return Ok(Caller::anonymous());
    }
    let bearer = bearer_token(headers);
    let Some(token) = bearer.or_else(|| api_key(headers)) else {
        return Err(unauthorized(oauth, None));
    };
    let digest = digest_bytes(token.as_bytes());
    if let Some(caller) =
        callers.iter().find(|caller| constant_time_eq(caller.token_sha256.as_bytes(), digest.as_bytes()))
    {
        return Ok(Caller::named(caller.name.clone(), caller.scopes.clone()));
    }
    let validator = match oauth {
        OAuth::Off => return Err(unauthorized(oauth, None)),
        OAuth::Broken(reason) => {
            let message = format!("service unavailable: [oauth] is misconfigured ({reason})");
            return Err(Rejection::new(StatusCode::SERVICE_UNAVAILABLE, TRANSPORT_ERROR, message));
        }
        OAuth::On(validator) => validator,
    };
    // An OAuth access token comes as a bearer token only (RFC 6750); an unknown API key is just unknown.
    let Some(token) = bearer else { return Err(unauthorized(oauth, None)) };
    match validator.validate_from(token, remote).await {
        Ok(identity) => {
            let caller = Caller {
                name: identity.subject,
                scopes: identity.scopes,
                display: identity.display,
                token: Some(SubjectToken::new(token)),
            };
            let missing = validator.missing_scopes(&toolgate_auth::Identity {
                subject: caller.name.clone(),
                display: None,
                scopes: caller.scopes.clone(),
            });
            if missing.is_empty() {
                return Ok(caller);
            }
            factory.record_authentication_refusal(Some(&caller), "insufficient_scope", remote);
            let mut rejection = Rejection::new(
                StatusCode::FORBIDDEN,
                TRANSPORT_ERROR,
                format!("forbidden: the token lacks the scope {}", missing.join(" ")),
            );
            rejection.challenge = Some(validator.insufficient_scope(&missing));
            Err(rejection)
        }
        Err(error) => {
            factory.record_authentication_refusal(None, error.reason(), remote);
            if error.is_unavailable() {
                // What failed (the provider's address, the transport's error) is the operator's: the client learns
                // only that its token cannot be checked now and when to retry.
                tracing::warn!(%error, remote = ?remote, "[oauth] a token cannot be checked: the identity provider is unreachable");
                let mut rejection = Rejection::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    TRANSPORT_ERROR,
                    "service unavailable: the identity provider is unreachable, so the token cannot be checked now; \
                     retry later"
                        .to_owned(),
                );
                rejection.retry_after = Some(PROVIDER_RETRY_AFTER_SECONDS);
                return Err(rejection);
            }
            if error == TokenError::IntrospectionBusy {
                // Not the token's fault, nor the provider's: this address has as many tokens being checked as it
                // may. Retried shortly, it is checked (or answered from the cache).
                let mut rejection = Rejection::new(
                    StatusCode::TOO_MANY_REQUESTS,
                    TRANSPORT_ERROR,
                    "too many requests: as many tokens from this address are being checked with the identity \
                     provider as toolgate allows at once; retry shortly"
                        .to_owned(),
                );
                rejection.retry_after = Some(BUSY_RETRY_AFTER_SECONDS);
                return Err(rejection);
            }
            Err(unauthorized(oauth, Some(&error)))
        }
    }
}

/// What a request refused because its address has too many tokens being introspected is told to wait.
const BUSY_RETRY_AFTER_SECONDS: u64 = 1;

/// What a request refused because the provider is unreachable is told to wait.
const PROVIDER_RETRY_AFTER_SECONDS: u64 = 5;

fn bearer_token(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?.trim();
    let (scheme, token) = value.split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then_some(token.trim()).filter(|token| !token.is_empty())
}

fn api_key(headers: &HeaderMap) -> Option<&str> {
    headers.get("x-api-key")?.to_str().ok().map(str::trim).filter(|key| !key.is_empty())
}

fn unauthorized(oauth: &OAuth, refused: Option<&TokenError>) -> Rejection {
    let message = match refused {
        Some(error) => format!("unauthorized: {error}"),
        None if oauth.is_configured() => {
            "unauthorized: send `Authorization: Bearer <token>` with an access token from the authorization server \
             named in the protected-resource metadata"
                .to_owned()
        }
        None => "unauthorized: send `Authorization: Bearer <token>` or `X-API-Key: <key>` for a configured caller"
            .to_owned(),
    };
    let mut rejection = Rejection::new(StatusCode::UNAUTHORIZED, TRANSPORT_ERROR, message);
    rejection.challenge = Some(match oauth.validator() {
        Some(validator) => validator.challenge(refused),
        None => "Bearer realm=\"toolgate\"".to_owned(),
    });
    rejection
}

/// True when the request authenticates as a configured static caller (for `/metrics`, which never takes OAuth
/// tokens: a scrape is the operator's, not a person's).
pub(super) fn is_static_caller(headers: &HeaderMap, callers: &[CallerSpec]) -> bool {
    let Some(token) = bearer_token(headers).or_else(|| api_key(headers)) else { return false };
    let digest = digest_bytes(token.as_bytes());
    callers.iter().any(|caller| constant_time_eq(caller.token_sha256.as_bytes(), digest.as_bytes()))
}

/// Compares two byte strings without an early exit on the first difference.
fn constant_time_eq(left: &[u8], right: &[u8]) -> bool {
    if left.len() != right.len() {
        return false;
    }
    left.iter().zip(right).fold(0u8, |difference, (a, b)| difference | (a ^ b)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn callers() -> Vec<CallerSpec> {
        vec![CallerSpec { name: "ci".into(), token_sha256: digest_bytes(b"s3cret"), scopes: vec!["read".into()] }]
    }

    fn headers(name: &'static str, value: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        if let Ok(value) = HeaderValue::from_str(value) {
            headers.insert(name, value);
        }
        headers
    }

    struct NoFactory;

    impl SessionFactory for NoFactory {
        fn open_session(
            &self,
            _: crate::session::TransportKind,
            _: Caller,
        ) -> (Box<dyn crate::session::ClientSession>, tokio::sync::mpsc::Receiver<crate::session::ClientBound>)
        {
            unreachable!("authentication opens no session")
        }
    }

    async fn check(headers: &HeaderMap, callers: &[CallerSpec]) -> Result<Caller, Rejection> {
        authenticate(headers, None, callers, &OAuth::Off, &NoFactory).await
    }

    #[tokio::test]
    async fn tokens_map_to_callers_and_everything_else_is_refused() {
        let caller = check(&headers("authorization", "Bearer s3cret"), &callers()).await;
        assert_eq!(caller.map(|caller| caller.name), Ok("ci".to_owned()));
        let by_key = check(&headers("x-api-key", "s3cret"), &callers()).await;
        assert_eq!(by_key.map(|caller| caller.scopes), Ok(vec!["read".to_owned()]));
        for (name, value) in
            [("authorization", "Bearer wrong"), ("authorization", "Basic s3cret"), ("x-other", "s3cret")]
        {
            let refused = check(&headers(name, value), &callers()).await;
            assert_eq!(refused.map_err(|rejection| rejection.status), Err(StatusCode::UNAUTHORIZED), "{name}: {value}");
        }
    }

    #[tokio::test]
    async fn no_configured_callers_means_anonymous() {
        assert_eq!(check(&HeaderMap::new(), &[]).await, Ok(Caller::anonymous()));
    }
}
