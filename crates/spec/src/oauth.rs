//! The HTTP listener as an OAuth 2.1 resource server: which authorization server issues the access tokens it
//! accepts, for which resource identifier (RFC 8707 audience), with which scopes and algorithms; and the access
//! token a request presented, carried so that its Debug and Display never show it.
//!
//! Data only: validation lives in `toolgate-auth`. No secret is ever part of this spec (the introspection client's
//! credentials are named by environment variables, read where they are used).

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

/// Asymmetric JWS algorithms accepted unless the configuration names others. `none` and the HMAC family are never
/// in it: a resource server holding a shared secret could mint the tokens it checks.
pub const DEFAULT_OAUTH_ALGORITHMS: &[&str] =
    &["RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "EdDSA"];
/// Default tolerance on `exp`, `nbf` and `iat` for clocks that disagree.
pub const DEFAULT_OAUTH_CLOCK_SKEW: Duration = Duration::from_secs(30);
/// Default age after which the JWKS is fetched again even when every `kid` is known.
pub const DEFAULT_JWKS_REFRESH: Duration = Duration::from_secs(300);
/// Default shortest interval between two fetches of the issuer's metadata or keys (an unknown `kid` in a flood of
/// forged tokens must not turn into a flood of requests to the provider).
pub const DEFAULT_JWKS_MIN_REFETCH: Duration = Duration::from_secs(10);
/// Default longest time an introspection answer is reused (never past the token's `exp`): the window in which a
/// revoked opaque token is still accepted.
pub const DEFAULT_INTROSPECTION_CACHE: Duration = Duration::from_secs(30);

/// `[oauth]`: access tokens from one issuer, for this gateway's resource identifier.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OAuthSpec {
    /// The issuer (`iss`), whose metadata is discovered at `/.well-known/openid-configuration` or
    /// `/.well-known/oauth-authorization-server`. `http://` only for a loopback host.
    pub issuer: String,
    /// This gateway's resource identifier: the audience (`aud`) a token must name, and the `resource` of the
    /// protected-resource metadata.
    pub resource: String,
    /// Scopes every request's token must carry (else 403 `insufficient_scope`).
    pub required_scopes: Vec<String>,
    /// Scopes advertised in the protected-resource metadata (`scopes_supported`); the required ones when empty.
    pub scopes_supported: Vec<String>,
    /// JWS algorithms accepted.
    pub algorithms: Vec<String>,
    /// Tolerance on `exp` / `nbf`.
    pub clock_skew: Duration,
    /// Claims whose string (or string array) values become the caller's scopes besides `scope` (e.g. `groups`).
    pub group_claims: Vec<String>,
    /// Claim that names the caller for display (first present wins; the subject otherwise).
    pub display_claims: Vec<String>,
    /// Age after which keys are fetched again.
    pub jwks_refresh: Duration,
    /// Shortest interval between fetches (unknown `kid`, provider down).
    pub jwks_min_refetch: Duration,
    /// A JWT must say `typ: at+jwt` (RFC 9068), so an ID token or another JWT of the issuer is not taken for an
    /// access token.
    pub require_at_jwt: bool,
    /// RFC 7662 introspection for tokens that are not JWTs; `None`: opaque tokens are refused.
    pub introspection: Option<IntrospectionSpec>,
}

impl OAuthSpec {
    /// Tokens from `issuer` for `resource`, with the defaults above and no required scope.
    pub fn new(issuer: impl Into<String>, resource: impl Into<String>) -> Self {
        OAuthSpec {
            issuer: issuer.into(),
            resource: resource.into(),
            required_scopes: Vec::new(),
            scopes_supported: Vec::new(),
            algorithms: DEFAULT_OAUTH_ALGORITHMS.iter().map(|alg| (*alg).to_owned()).collect(),
            clock_skew: DEFAULT_OAUTH_CLOCK_SKEW,
            group_claims: Vec::new(),
            display_claims: vec!["email".to_owned(), "name".to_owned()],
            jwks_refresh: DEFAULT_JWKS_REFRESH,
            jwks_min_refetch: DEFAULT_JWKS_MIN_REFETCH,
            require_at_jwt: true,
            introspection: None,
        }
    }
}

/// RFC 7662 introspection: the endpoint comes from the issuer's metadata, the client's credentials from the
/// environment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IntrospectionSpec {
    /// Environment variable holding the client id.
    pub client_id_env: String,
    /// Environment variable holding the client secret.
    pub client_secret_env: String,
    /// Longest time an answer is reused (also never past the token's `exp`); zero asks the issuer every time.
    pub cache: Duration,
}

/// The bearer token a request presented, for the upstream side's token exchange (RFC 8693). Its `Debug` and
/// `Display` say `[redacted]`; only [`SubjectToken::expose`] gives the value, so a log line or a panic message
/// that formats a caller cannot leak it.
#[derive(Clone, PartialEq, Eq)]
pub struct SubjectToken(Arc<str>);

impl SubjectToken {
    /// Wraps a token.
    pub fn new(token: &str) -> Self {
        SubjectToken(Arc::from(token))
    }

    /// The token itself: only for sending it to the authorization server.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for SubjectToken {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str("SubjectToken([redacted])")
    }
}

impl fmt::Display for SubjectToken {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str("[redacted]")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_subject_token_never_formats_its_value() {
        let token = SubjectToken::new("eyJ.secret.sig");
        assert_eq!(format!("{token}"), "[redacted]");
        assert!(!format!("{token:?}").contains("secret"));
        assert_eq!(token.expose(), "eyJ.secret.sig");
    }

    #[test]
    fn the_default_algorithms_are_asymmetric() {
        let spec = OAuthSpec::new("https://id.example", "https://gw.example/mcp");
        assert!(spec.algorithms.iter().all(|alg| alg != "none" && !alg.starts_with("HS")));
    }
}
