//! The console's side of an OpenID provider: its login endpoints (from the same discovery and key cache as access
//! tokens) and the validation of the ID token a login returns. The signature, `iss`, `aud` (the client id), `exp`
//! and `sub` go through [`crate::jws`], the checks every token from the issuer passes; [`IdTokenRules`] adds what
//! only an ID token must satisfy (OpenID Connect Core 3.1.3.7): `azp` naming the client when there are several
//! audiences, an `iat` not in the future, and the login's `nonce`.
//!
//! Nothing here runs the login (the authorization request, the code exchange, the session): that is the console's.
//! It never logs or keeps a token, and a provider that cannot be reached fails closed
//! ([`TokenError::ProviderUnavailable`]); the next login asks again.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use jsonwebtoken::Algorithm;
use serde_json::Value;
use toolgate_spec::{
    DEFAULT_JWKS_MIN_REFETCH, DEFAULT_JWKS_REFRESH, DEFAULT_OAUTH_ALGORITHMS, DEFAULT_OAUTH_CLOCK_SKEW,
};

use crate::keys::KeyCache;
use crate::{ConfigError, TokenError, checked_url, jws, provider_client};

/// Where a browser login goes at the provider, from its discovery document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoginEndpoints {
    /// Where the browser is sent to log in.
    pub authorization: String,
    /// Where the code is exchanged for tokens.
    pub token: String,
    /// Where more claims about the person are read, when the provider has one.
    pub userinfo: Option<String>,
    /// Where the browser is sent to end the person's session at the provider (RP-initiated logout), when offered.
    pub end_session: Option<String>,
}

/// What an ID token must say besides what every token from the issuer must: for whom and for which login.
#[derive(Debug, Clone, Copy)]
pub struct IdTokenRules<'a> {
    /// The client id: an audience of the token, and its `azp` when it has several.
    pub client_id: &'a str,
    /// The `nonce` the login's authorization request carried.
    pub nonce: &'a str,
}

/// Why an ID token is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IdTokenError {
    /// It fails what every token from the issuer must pass (signature, issuer, audience, expiry, subject).
    #[error(transparent)]
    Token(#[from] TokenError),
    /// Several audiences and an `azp` that is not the client.
    #[error("the ID token has several audiences and another authorized party")]
    AuthorizedParty,
    /// No `iat`, or one in the future (beyond the skew).
    #[error("the ID token has no issue time, or one in the future")]
    IssuedAt,
    /// The `nonce` is not this login's: a token from another login, replayed.
    #[error("the ID token's nonce is not this login's")]
    Nonce,
}

/// One OpenID provider, as a client logging people in sees it. Cheap to share behind an `Arc`.
#[derive(Debug)]
pub struct OpenIdProvider {
    issuer: String,
    algorithms: Vec<Algorithm>,
    skew: Duration,
    keys: KeyCache,
    client: reqwest::Client,
}

impl OpenIdProvider {
    /// The provider at `issuer`, accepting ID tokens signed with an algorithm of the access tokens' default
    /// asymmetric list (never `none`, never HMAC: the console verifies against the provider's published keys
    /// only); nothing is fetched yet.
    pub fn new(issuer: &str) -> Result<OpenIdProvider, ConfigError> {
        checked_url(issuer)?;
        let names: Vec<String> = DEFAULT_OAUTH_ALGORITHMS.iter().map(|alg| (*alg).to_owned()).collect();
        let algorithms = jws::algorithms(&names)?;
        let client = provider_client()?;
        let keys = KeyCache::new(client.clone(), issuer.to_owned(), DEFAULT_JWKS_REFRESH, DEFAULT_JWKS_MIN_REFETCH);
        Ok(OpenIdProvider { issuer: issuer.to_owned(), algorithms, skew: DEFAULT_OAUTH_CLOCK_SKEW, keys, client })
    }

    /// The issuer.
    pub fn issuer(&self) -> &str {
        &self.issuer
    }

    /// The HTTP client for the login's own requests to the provider (code exchange, userinfo): no redirects
    /// followed, TLS by rustls.
    pub fn http(&self) -> &reqwest::Client {
        &self.client
    }

    /// The login endpoints, discovering them at the first call (the same discovery the keys come from, so the
    /// endpoints and the keys are the one issuer's).
    pub async fn endpoints(&self) -> Result<LoginEndpoints, TokenError> {
        let metadata = self.keys.metadata().await?;
        let missing = |name: &str| TokenError::ProviderUnavailable(format!("the issuer's metadata names no {name}"));
        Ok(LoginEndpoints {
            authorization: metadata.authorization_endpoint.ok_or_else(|| missing("authorization_endpoint"))?,
            token: metadata.token_endpoint.ok_or_else(|| missing("token_endpoint"))?,
            userinfo: metadata.userinfo_endpoint,
            end_session: metadata.end_session_endpoint,
        })
    }

    /// The claims of `token` once it passed the issuer's checks and `rules`.
    pub async fn validate_id_token(&self, token: &str, rules: &IdTokenRules<'_>) -> Result<Value, IdTokenError> {
        let expected = jws::Expected {
            issuer: &self.issuer,
            audience: rules.client_id,
            algorithms: &self.algorithms,
            skew: self.skew,
            access_token: false,
        };
        let claims = jws::verify(&self.keys, token, &expected).await?;
        check_id_token_claims(&claims, rules, now_s(), self.skew)?;
        Ok(claims)
    }
}

fn now_s() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |since| since.as_secs())
}

/// The checks only an ID token needs, on claims whose signature, issuer, audience and expiry already passed.
fn check_id_token_claims(
    claims: &Value,
    rules: &IdTokenRules<'_>,
    now: u64,
    skew: Duration,
) -> Result<(), IdTokenError> {
    let several_audiences = claims.get("aud").and_then(Value::as_array).is_some_and(|audiences| audiences.len() > 1);
    if several_audiences && claims.get("azp").and_then(Value::as_str) != Some(rules.client_id) {
        return Err(IdTokenError::AuthorizedParty);
    }
    if claims.get("iat").and_then(Value::as_u64).is_none_or(|iat| iat > now + skew.as_secs()) {
        return Err(IdTokenError::IssuedAt);
    }
    // A plain comparison: the nonce travelled in the authorization URL, and a token bearing it must still be signed
    // by the provider, so timing says nothing an attacker could use.
    if claims.get("nonce").and_then(Value::as_str) != Some(rules.nonce) {
        return Err(IdTokenError::Nonce);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn id_token_rules() {
        let rules = IdTokenRules { client_id: "console", nonce: "n" };
        let check = |claims: Value| check_id_token_claims(&claims, &rules, 1500, Duration::from_secs(30));
        let good = json!({"aud": "console", "iat": 1000, "nonce": "n"});
        assert_eq!(check(good.clone()), Ok(()));
        let with = |name: &str, value: Value| {
            let mut claims = good.clone();
            claims[name] = value;
            check(claims)
        };
        assert_eq!(with("aud", json!(["console", "other"])), Err(IdTokenError::AuthorizedParty));
        let mut both = good.clone();
        both["aud"] = json!(["console", "other"]);
        both["azp"] = json!("console");
        assert_eq!(check(both), Ok(()));
        assert_eq!(with("iat", json!(9000)), Err(IdTokenError::IssuedAt));
        assert_eq!(with("iat", Value::Null), Err(IdTokenError::IssuedAt));
        assert_eq!(with("nonce", json!("m")), Err(IdTokenError::Nonce));
    }
}
