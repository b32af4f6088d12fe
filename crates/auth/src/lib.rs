//! toolgate as an OAuth 2.1 resource server: an access token is validated against its issuer (a JWT checked
//! locally with the issuer's discovered keys, or an opaque token asked about by RFC 7662 introspection) and mapped
//! to an [`Identity`]: the subject, a display name, and the scopes the policy sees (`scope` plus configured group
//! claims). Also the RFC 9728 protected-resource metadata and the `WWW-Authenticate` challenges that point to it.
//! The console's OpenID logins use the same stack: [`OpenIdProvider`] gives the provider's login endpoints from the
//! same discovery and validates ID tokens with the same signature and claim checks (`jws`), plus [`IdTokenRules`].
//!
//! What a token must pass: its `alg` on the allow-list (asymmetric only by default: never `none`, HMAC only when
//! configured), `typ: at+jwt` (RFC 9068, unless configured off: an ID token is not an access token), `iss` exactly
//! the configured issuer, a key the issuer publishes (cached, see `keys`), a valid signature, `aud` naming this
//! gateway's resource identifier (RFC 8707), `exp` / `nbf` within the clock skew, and a `sub`. Every refusal is a [`TokenError`] with a stable [`TokenError::reason`] for the audit log. The provider
//! being unreachable fails closed ([`TokenError::ProviderUnavailable`]) and recovers when it returns. The keys are
//! fetched again on a timer whose task ends with the [`Validator`]; introspection answers are reused briefly (see
//! `introspection`: that reuse bounds how long a revoked opaque token is still accepted), and the introspections
//! in flight are bounded per remote address and in all ([`TokenError::IntrospectionBusy`] past that).
//!
//! This crate never logs a token, never stores one, and never sends one anywhere but the configured issuer's
//! introspection endpoint. It holds no secret: introspection's client credentials come from the environment.

mod id_token;
mod introspection;
mod jws;
mod keys;

use std::sync::Arc;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use jsonwebtoken::Algorithm;
use serde_json::{Value, json};
use toolgate_spec::OAuthSpec;

pub use self::id_token::{IdTokenError, IdTokenRules, LoginEndpoints, OpenIdProvider};
use self::introspection::{AnswerCache, InFlight};
use self::keys::KeyCache;

/// The well-known path prefix of RFC 9728 protected-resource metadata.
pub const METADATA_PREFIX: &str = "/.well-known/oauth-protected-resource";

/// Who a valid token says is calling.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    /// The token's `sub` (a person's id, or a service's client id for client credentials).
    pub subject: String,
    /// A person-readable name from the configured display claims (`email`, `name`), when present.
    pub display: Option<String>,
    /// Scopes from `scope` (or `scp`) and the configured group claims, deduplicated, in order.
    pub scopes: Vec<String>,
}

/// Why a token is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TokenError {
    /// Not a JWT, or one whose parts do not decode.
    #[error("the token is not a well-formed JWT")]
    Malformed,
    /// An opaque token and no introspection configured.
    #[error("the token is not a JWT and no introspection is configured")]
    Opaque,
    /// `alg` not on the allow-list (`none`, HMAC, or one not configured).
    #[error("the token's algorithm {0:?} is not accepted")]
    AlgorithmNotAllowed(String),
    /// A JWT whose `typ` is not `at+jwt` (RFC 9068): an ID token, or another kind of token of the issuer.
    #[error("the token is not typed as an access token (`typ: at+jwt`)")]
    NotAnAccessToken,
    /// `iss` is not the configured issuer.
    #[error("the token was issued by another issuer")]
    WrongIssuer,
    /// `aud` does not name this gateway's resource identifier.
    #[error("the token is for another audience")]
    WrongAudience,
    /// Past `exp` (plus the skew).
    #[error("the token has expired")]
    Expired,
    /// Before `nbf` (minus the skew).
    #[error("the token is not valid yet")]
    NotYetValid,
    /// Signed with a key the issuer does not publish.
    #[error("the token was signed with a key the issuer does not publish")]
    UnknownKey,
    /// The signature does not verify.
    #[error("the token's signature does not verify")]
    BadSignature,
    /// A required claim is missing or has the wrong type.
    #[error("the token lacks the {0} claim")]
    MissingClaim(String),
    /// Introspection says the token is not active.
    #[error("the token is not active")]
    Inactive,
    /// The issuer's metadata or keys cannot be fetched: refused, not guessed.
    #[error("the identity provider is unreachable: {0}")]
    ProviderUnavailable(String),
    /// An opaque token not asked about: as many tokens from the same address (or in all) are being introspected
    /// already. Refused at once, so a flood of made-up tokens never becomes one provider request per token.
    #[error("too many tokens from this address are being checked at once")]
    IntrospectionBusy,
}

impl TokenError {
    /// A stable short name for the audit log and metrics.
    pub fn reason(&self) -> &'static str {
        match self {
            TokenError::Malformed => "malformed",
            TokenError::Opaque => "opaque_token",
            TokenError::AlgorithmNotAllowed(_) => "algorithm_not_allowed",
            TokenError::NotAnAccessToken => "not_an_access_token",
            TokenError::WrongIssuer => "wrong_issuer",
            TokenError::WrongAudience => "wrong_audience",
            TokenError::Expired => "expired",
            TokenError::NotYetValid => "not_yet_valid",
            TokenError::UnknownKey => "unknown_key",
            TokenError::BadSignature => "bad_signature",
            TokenError::MissingClaim(_) => "missing_claim",
            TokenError::Inactive => "inactive",
            TokenError::ProviderUnavailable(_) => "provider_unavailable",
            TokenError::IntrospectionBusy => "introspection_busy",
        }
    }

    /// True when the fault is the provider's, not the token's (answered 503, not 401).
    pub fn is_unavailable(&self) -> bool {
        matches!(self, TokenError::ProviderUnavailable(_))
    }
}

/// A configuration the validator cannot run with.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// The issuer or resource is not an absolute http(s) URL.
    #[error("`{0}` is not an absolute http(s) URL")]
    NotAUrl(String),
    /// `http://` for a host that is not loopback: tokens and keys would travel unprotected.
    #[error("`{0}` uses http:// for a non-loopback host; only https:// (or a loopback http:// for tests) is allowed")]
    InsecureUrl(String),
    /// An algorithm name jsonwebtoken does not know (`none` included: it can never be allowed).
    #[error("unknown or unusable JWS algorithm `{0}`")]
    UnknownAlgorithm(String),
    /// The HTTP client cannot be built.
    #[error("cannot build the HTTP client: {0}")]
    Client(String),
}

/// Validates access tokens for one issuer and resource. Cheap to share behind an `Arc`. Made inside a Tokio
/// runtime, it keeps the issuer's keys fresh on a timer until it is dropped.
#[derive(Debug)]
pub struct Validator {
    spec: OAuthSpec,
    algorithms: Vec<Algorithm>,
    keys: Arc<KeyCache>,
    answers: AnswerCache,
    /// The introspections in flight, bounded per remote address and in all.
    in_flight: InFlight,
    client: reqwest::Client,
    metadata_url: String,
    /// Dropped with the validator, which ends the key timer's task.
    _refresher: Option<tokio::sync::oneshot::Sender<()>>,
}

impl Validator {
    /// Checks the configuration (URLs, algorithms) and prepares the key cache. Inside a Tokio runtime it also starts
    /// the key timer, whose first fetch comes at once (outside one, the first token fetches).
    pub fn new(spec: &OAuthSpec) -> Result<Validator, ConfigError> {
        checked_url(&spec.issuer)?;
        let resource = checked_url(&spec.resource)?;
        let algorithms = jws::algorithms(&spec.algorithms)?;
        let client = provider_client()?;
        let keys =
            Arc::new(KeyCache::new(client.clone(), spec.issuer.clone(), spec.jwks_refresh, spec.jwks_min_refetch));
        let refresher = keys::spawn_refresher(&keys);
        let path = resource.path().trim_end_matches('/');
        let metadata_url = format!("{}{METADATA_PREFIX}{path}", origin(&resource));
        Ok(Validator {
            spec: spec.clone(),
            algorithms,
            keys,
            answers: AnswerCache::default(),
            in_flight: InFlight::default(),
            client,
            metadata_url,
            _refresher: refresher,
        })
    }

    /// The configuration.
    pub fn spec(&self) -> &OAuthSpec {
        &self.spec
    }

    /// Validates `token` and maps its claims to an identity.
    pub async fn validate(&self, token: &str) -> Result<Identity, TokenError> {
        self.validate_from(token, None).await
    }

    /// [`Validator::validate`] for a request from `remote`, the address an opaque token's introspection is counted
    /// against (at most a few at once per address: [`TokenError::IntrospectionBusy`] past that).
    pub async fn validate_from(&self, token: &str, remote: Option<std::net::IpAddr>) -> Result<Identity, TokenError> {
        let parts: Vec<&str> = token.split('.').collect();
        if parts.len() != 3 {
            return match &self.spec.introspection {
                Some(_) => self.introspect(token, remote).await,
                None if parts.len() == 1 => Err(TokenError::Opaque),
                None => Err(TokenError::Malformed),
            };
        }
        let expected = jws::Expected {
            issuer: &self.spec.issuer,
            audience: &self.spec.resource,
            algorithms: &self.algorithms,
            skew: self.spec.clock_skew,
            access_token: self.spec.require_at_jwt,
        };
        let claims = jws::verify(&self.keys, token, &expected).await?;
        self.identity(&claims)
    }

    /// The scopes of [`OAuthSpec::required_scopes`] that `identity` lacks (empty: it may call).
    pub fn missing_scopes(&self, identity: &Identity) -> Vec<String> {
        self.spec.required_scopes.iter().filter(|scope| !identity.scopes.contains(scope)).cloned().collect()
    }

    /// The RFC 9728 protected-resource metadata document.
    pub fn metadata(&self) -> Value {
        let scopes = if self.spec.scopes_supported.is_empty() {
            &self.spec.required_scopes
        } else {
            &self.spec.scopes_supported
        };
        json!({
            "resource": self.spec.resource,
            "authorization_servers": [self.spec.issuer],
            "scopes_supported": scopes,
            "bearer_methods_supported": ["header"],
            "resource_name": "toolgate",
        })
    }

    /// Where the metadata is served: the resource's origin, the well-known prefix, then the resource's path.
    pub fn metadata_url(&self) -> &str {
        &self.metadata_url
    }

    /// The path part of [`Validator::metadata_url`].
    pub fn metadata_path(&self) -> &str {
        let after_scheme = self.metadata_url.find("://").map_or(0, |at| at + 3);
        self.metadata_url[after_scheme..]
            .find('/')
            .map_or(METADATA_PREFIX, |slash| &self.metadata_url[after_scheme + slash..])
    }

    /// The `WWW-Authenticate` value for a 401: where the metadata is and which scopes to ask for, plus
    /// `error="invalid_token"` when a token was presented and refused.
    pub fn challenge(&self, refused: Option<&TokenError>) -> String {
        let mut value = format!("Bearer resource_metadata=\"{}\"", self.metadata_url);
        if !self.spec.required_scopes.is_empty() {
            value.push_str(&format!(", scope=\"{}\"", self.spec.required_scopes.join(" ")));
        }
        if let Some(error) = refused {
            value.push_str(&format!(", error=\"invalid_token\", error_description=\"{}\"", error.reason()));
        }
        value
    }

    /// The `WWW-Authenticate` value for a 403 step-up: the scopes the token lacks.
    pub fn insufficient_scope(&self, missing: &[String]) -> String {
        let mut needed = self.spec.required_scopes.clone();
        for scope in missing {
            if !needed.contains(scope) {
                needed.push(scope.clone());
            }
        }
        format!(
            "Bearer error=\"insufficient_scope\", scope=\"{}\", resource_metadata=\"{}\"",
            needed.join(" "),
            self.metadata_url
        )
    }

    fn identity(&self, claims: &Value) -> Result<Identity, TokenError> {
        let subject = claims
            .get("sub")
            .and_then(Value::as_str)
            .filter(|sub| !sub.is_empty())
            .ok_or_else(|| TokenError::MissingClaim("sub".into()))?
            .to_owned();
        let mut scopes: Vec<String> = Vec::new();
        let mut add = |scope: &str| {
            if !scope.is_empty() && !scopes.iter().any(|known| known == scope) {
                scopes.push(scope.to_owned());
            }
        };
        match claims.get("scope").or_else(|| claims.get("scp")) {
            Some(Value::String(text)) => text.split(' ').for_each(&mut add),
            Some(Value::Array(items)) => items.iter().filter_map(Value::as_str).for_each(&mut add),
            _ => {}
        }
        for claim in &self.spec.group_claims {
            match claims.get(claim) {
                Some(Value::String(group)) => add(group),
                Some(Value::Array(groups)) => groups.iter().filter_map(Value::as_str).for_each(&mut add),
                _ => {}
            }
        }
        let display = self
            .spec
            .display_claims
            .iter()
            .find_map(|claim| claims.get(claim).and_then(Value::as_str).filter(|text| !text.is_empty()))
            .map(str::to_owned);
        Ok(Identity { subject, display, scopes })
    }

    /// RFC 7662: the issuer's introspection endpoint asked (as the client named in the environment), or its recent
    /// answer reused; an active token must also be for this issuer and resource.
    async fn introspect(&self, token: &str, remote: Option<std::net::IpAddr>) -> Result<Identity, TokenError> {
        let Some(spec) = &self.spec.introspection else { return Err(TokenError::Opaque) };
        if let Some(answer) = self.answers.get(token) {
            return answer;
        }
        // Held until the provider answers: past the bound the token is refused without asking.
        let _place = self.in_flight.enter(remote).ok_or(TokenError::IntrospectionBusy)?;
        let endpoint = self.keys.metadata().await?.introspection_endpoint.ok_or_else(|| {
            TokenError::ProviderUnavailable("the issuer's metadata names no introspection_endpoint".into())
        })?;
        let claims = introspection::ask(&self.client, spec, &endpoint, token).await;
        let exp = claims.as_ref().ok().and_then(|claims| claims.get("exp")).and_then(Value::as_u64);
        let answer = claims.and_then(|claims| self.introspected_identity(&claims));
        self.answers.put(token, &answer, exp, spec.cache);
        answer
    }

    fn introspected_identity(&self, claims: &Value) -> Result<Identity, TokenError> {
        if claims.get("iss").and_then(Value::as_str).is_some_and(|iss| iss != self.spec.issuer) {
            return Err(TokenError::WrongIssuer);
        }
        let audience_ok = match claims.get("aud") {
            Some(Value::String(aud)) => *aud == self.spec.resource,
            Some(Value::Array(auds)) => auds.iter().any(|aud| aud.as_str() == Some(self.spec.resource.as_str())),
            _ => false,
        };
        if !audience_ok {
            return Err(TokenError::WrongAudience);
        }
        self.identity(claims)
    }
}

fn decode_part(part: &str) -> Result<Value, TokenError> {
    let bytes = URL_SAFE_NO_PAD.decode(part.trim_end_matches('=')).map_err(|_| TokenError::Malformed)?;
    let value: Value = serde_json::from_slice(&bytes).map_err(|_| TokenError::Malformed)?;
    if value.is_object() { Ok(value) } else { Err(TokenError::Malformed) }
}

/// The HTTP client every request to the provider goes through.
fn provider_client() -> Result<reqwest::Client, ConfigError> {
    // reqwest is built without a default TLS provider; ring is installed once per process for https issuers.
    let _ = rustls::crypto::ring::default_provider().install_default();
    // No redirects: the keys must come from where the issuer's metadata says, not wherever a response points.
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .map_err(|error| ConfigError::Client(error.to_string()))
}

fn checked_url(text: &str) -> Result<reqwest::Url, ConfigError> {
    let url = reqwest::Url::parse(text).map_err(|_| ConfigError::NotAUrl(text.to_owned()))?;
    match url.scheme() {
        "https" => Ok(url),
        "http" if is_loopback(&url) => Ok(url),
        "http" => Err(ConfigError::InsecureUrl(text.to_owned())),
        _ => Err(ConfigError::NotAUrl(text.to_owned())),
    }
}

fn is_loopback(url: &reqwest::Url) -> bool {
    let Some(host) = url.host_str() else { return false };
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    match bare.parse::<std::net::IpAddr>() {
        Ok(ip) => ip.is_loopback(),
        Err(_) => bare.eq_ignore_ascii_case("localhost"),
    }
}

fn origin(url: &reqwest::Url) -> String {
    url.origin().ascii_serialization()
}

#[cfg(test)]
mod tests;
