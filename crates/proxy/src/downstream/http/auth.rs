//! Who is calling: bearer tokens or API keys checked on every request against the configured callers.
//!
//! Secrets are never stored or logged: callers are configured by the SHA-256 of their token, and an incoming token
//! is hashed and compared in constant time. Without configured callers every request is the anonymous caller (the
//! listener then relies on its loopback bind). The session id is never authentication: a session opened by one
//! caller is invisible to every other.

use axum::http::{HeaderMap, StatusCode, header};
use toolgate_core::fingerprint::digest_bytes;
use toolgate_spec::CallerSpec;

use super::checks::{Rejection, TRANSPORT_ERROR};
use crate::session::Caller;

/// The caller a request authenticates as; 401 when callers are configured and the token is missing or unknown.
pub(super) fn authenticate(headers: &HeaderMap, callers: &[CallerSpec]) -> Result<Caller, Rejection> {
    if callers.is_empty() {
        return Ok(Caller::anonymous());
    }
    let token = bearer_token(headers).or_else(|| api_key(headers)).ok_or_else(unauthorized)?;
    let digest = digest_bytes(token.as_bytes());
    callers
        .iter()
        .find(|caller| constant_time_eq(caller.token_sha256.as_bytes(), digest.as_bytes()))
        .map(|caller| Caller { name: caller.name.clone(), scopes: caller.scopes.clone() })
        .ok_or_else(unauthorized)
}

fn bearer_token(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?.trim();
    let (scheme, token) = value.split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then_some(token.trim()).filter(|token| !token.is_empty())
}

fn api_key(headers: &HeaderMap) -> Option<&str> {
    headers.get("x-api-key")?.to_str().ok().map(str::trim).filter(|key| !key.is_empty())
}

fn unauthorized() -> Rejection {
    let mut rejection = Rejection::new(
        StatusCode::UNAUTHORIZED,
        TRANSPORT_ERROR,
        "unauthorized: send `Authorization: Bearer <token>` or `X-API-Key: <key>` for a configured caller",
    );
    rejection.challenge = true;
    rejection
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

    #[test]
    fn tokens_map_to_callers_and_everything_else_is_refused() {
        let caller = authenticate(&headers("authorization", "Bearer s3cret"), &callers());
        assert_eq!(caller.map(|caller| caller.name), Ok("ci".to_owned()));
        let by_key = authenticate(&headers("x-api-key", "s3cret"), &callers());
        assert_eq!(by_key.map(|caller| caller.scopes), Ok(vec!["read".to_owned()]));
        for (name, value) in
            [("authorization", "Bearer wrong"), ("authorization", "Basic s3cret"), ("x-other", "s3cret")]
        {
            let refused = authenticate(&headers(name, value), &callers());
            assert_eq!(refused.map_err(|rejection| rejection.status), Err(StatusCode::UNAUTHORIZED), "{name}: {value}");
        }
    }

    #[test]
    fn no_configured_callers_means_anonymous() {
        assert_eq!(authenticate(&HeaderMap::new(), &[]), Ok(Caller::anonymous()));
    }
}
