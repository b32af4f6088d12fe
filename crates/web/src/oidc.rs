//! The console's side of OpenID Connect: the authorization request (PKCE S256, `state`, `nonce`), the code
//! exchange (PKCE verifier, client secret by HTTP Basic when one is configured), the ID token's validation and the
//! userinfo claims, mapped to a [`Person`].
//!
//! Discovery, the signing keys (cached, fetched again for an unknown key id, rate-limited), the algorithm allow-list
//! and the ID token's checks are `toolgate-auth`'s ([`OpenIdProvider`], [`IdTokenRules`]), the same JOSE stack the
//! HTTP listener's access tokens go through; nothing here verifies a signature. It never logs a code, a token or a
//! secret, and a provider that cannot be reached fails the login (nothing is cached from a failure, so the next
//! login tries again).

use std::sync::OnceLock;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::Value;
use sha2::{Digest as _, Sha256};
use toolgate_auth::{IdTokenError, IdTokenRules, LoginEndpoints, OpenIdProvider, TokenError};

use crate::SsoSpec;

/// How long the console waits for the provider on each request of its own (discovery and keys have theirs).
const PROVIDER_TIMEOUT: Duration = Duration::from_secs(10);
/// Most groups a session keeps from the claims (the cookie carries them).
const MAX_GROUPS: usize = 32;

/// Why a login through the provider failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum OidcError {
    /// The provider could not be reached or answered something unreadable.
    #[error("the identity provider could not be reached or answered badly: {0}")]
    Provider(String),
    /// The provider refused the code (wrong, used, or without its PKCE verifier).
    #[error("the identity provider refused the authorization code: {0}")]
    CodeRefused(String),
    /// The ID token failed validation, or the claims around it do not name one person.
    #[error("the ID token is not valid: {0}")]
    IdToken(String),
}

impl From<IdTokenError> for OidcError {
    fn from(error: IdTokenError) -> OidcError {
        match error {
            IdTokenError::Token(token) => token.into(),
            other => OidcError::IdToken(other.to_string()),
        }
    }
}

impl From<TokenError> for OidcError {
    fn from(error: TokenError) -> OidcError {
        match error {
            TokenError::ProviderUnavailable(reason) => OidcError::Provider(reason),
            other => OidcError::IdToken(other.to_string()),
        }
    }
}

/// A completed login: who, and until when the provider vouches for it (the ID token's `exp`).
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct Login {
    /// The person.
    pub(crate) person: Person,
    /// When the ID token expires: the console session ends then at the latest.
    pub(crate) expires: SystemTime,
    /// The ID token itself, kept with the session (server-side) only to send as `id_token_hint` when the person
    /// logs out (OpenID Connect RP-Initiated Logout).
    pub(crate) id_token: String,
}

impl std::fmt::Debug for Login {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the ID token: a bearer credential at relying parties that (wrongly) accept ID tokens.
        formatter.debug_struct("Login").field("person", &self.person).field("expires", &self.expires).finish()
    }
}

/// A person as the provider vouches for them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Person {
    /// The issuer's subject identifier (stable, unique at the issuer).
    pub(crate) subject: String,
    /// A name to show: `name`, else `email`, else the subject.
    pub(crate) display: String,
    /// The values of the configured groups claim (at most `MAX_GROUPS`).
    pub(crate) groups: Vec<String>,
}

/// The configured provider; its `toolgate-auth` side is built at the first login (building it installs the TLS
/// provider, which a console without logins never needs).
pub(crate) struct Provider {
    config: SsoSpec,
    openid: OnceLock<OpenIdProvider>,
}

impl Provider {
    pub(crate) fn new(config: SsoSpec) -> Provider {
        Provider { config, openid: OnceLock::new() }
    }

    fn openid(&self) -> Result<&OpenIdProvider, OidcError> {
        if let Some(openid) = self.openid.get() {
            return Ok(openid);
        }
        let openid =
            OpenIdProvider::new(&self.config.issuer).map_err(|error| OidcError::Provider(error.to_string()))?;
        Ok(self.openid.get_or_init(|| openid))
    }

    pub(crate) fn config(&self) -> &SsoSpec {
        &self.config
    }

    async fn endpoints(&self) -> Result<LoginEndpoints, OidcError> {
        Ok(self.openid()?.endpoints().await?)
    }

    async fn get_json(&self, url: &str, bearer: Option<&str>) -> Result<Value, OidcError> {
        let mut request = self.openid()?.http().get(url).header("accept", "application/json").timeout(PROVIDER_TIMEOUT);
        if let Some(token) = bearer {
            request = request.bearer_auth(token);
        }
        let response = request.send().await.map_err(|error| OidcError::Provider(error.without_url().to_string()))?;
        let status = response.status();
        let body = response.bytes().await.map_err(|error| OidcError::Provider(error.without_url().to_string()))?;
        if !status.is_success() {
            return Err(OidcError::Provider(format!("{url} answered {status}")));
        }
        serde_json::from_slice(&body).map_err(|_| OidcError::Provider(format!("{url} did not answer JSON")))
    }

    /// The URL that starts a login at the provider.
    pub(crate) async fn authorization_url(
        &self,
        state: &str,
        nonce: &str,
        verifier: &str,
    ) -> Result<String, OidcError> {
        let endpoints = self.endpoints().await?;
        let challenge = URL_SAFE_NO_PAD.encode(Sha256::digest(verifier.as_bytes()));
        let scope = self.config.scopes.join(" ");
        let query = encode_pairs(&[
            ("response_type", "code"),
            ("client_id", &self.config.client_id),
            ("redirect_uri", &self.config.redirect_uri),
            ("scope", &scope),
            ("state", state),
            ("nonce", nonce),
            ("code_challenge", &challenge),
            ("code_challenge_method", "S256"),
        ]);
        let separator = if endpoints.authorization.contains('?') { '&' } else { '?' };
        Ok(format!("{}{separator}{query}", endpoints.authorization))
    }

    /// Where to send the browser to end the person's session at the provider (RP-initiated logout), or `None`
    /// when the provider offers no `end_session_endpoint`. The request carries the ID token the provider issued at
    /// login as `id_token_hint` when the console still holds it (so the provider knows whose session ends and
    /// honours `post_logout_redirect_uri`), and names the client either way.
    pub(crate) async fn end_session_url(&self, id_token_hint: Option<&str>) -> Result<Option<String>, OidcError> {
        let Some(endpoint) = self.endpoints().await?.end_session else { return Ok(None) };
        let mut pairs = Vec::new();
        if let Some(hint) = id_token_hint {
            pairs.push(("id_token_hint", hint));
        }
        pairs.push(("client_id", self.config.client_id.as_str()));
        if let Some(uri) = &self.config.post_logout_redirect_uri {
            pairs.push(("post_logout_redirect_uri", uri));
        }
        let separator = if endpoint.contains('?') { '&' } else { '?' };
        Ok(Some(format!("{endpoint}{separator}{}", encode_pairs(&pairs))))
    }

    /// Exchanges `code` (with its PKCE verifier), validates the ID token against `nonce`, and reads the userinfo.
    pub(crate) async fn complete(&self, code: &str, verifier: &str, nonce: &str) -> Result<Login, OidcError> {
        let endpoints = self.endpoints().await?;
        let mut pairs = vec![
            ("grant_type", "authorization_code"),
            ("code", code),
            ("redirect_uri", self.config.redirect_uri.as_str()),
            ("code_verifier", verifier),
        ];
        if self.config.client_secret.is_none() {
            pairs.push(("client_id", self.config.client_id.as_str()));
        }
        let mut request = self
            .openid()?
            .http()
            .post(&endpoints.token)
            .timeout(PROVIDER_TIMEOUT)
            .header("content-type", "application/x-www-form-urlencoded")
            .header("accept", "application/json")
            .body(encode_pairs(&pairs));
        if let Some(secret) = &self.config.client_secret {
            request = request.basic_auth(form_encode(&self.config.client_id), Some(form_encode(secret)));
        }
        let response = request.send().await.map_err(|error| OidcError::Provider(error.without_url().to_string()))?;
        let status = response.status();
        let body = response.bytes().await.map_err(|error| OidcError::Provider(error.without_url().to_string()))?;
        let answer: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        if !status.is_success() {
            let error = answer.get("error").and_then(Value::as_str).unwrap_or("no error code");
            return Err(OidcError::CodeRefused(format!("{status}: {error}")));
        }
        let id_token = answer
            .get("id_token")
            .and_then(Value::as_str)
            .ok_or_else(|| OidcError::IdToken("none was issued".into()))?;
        let rules = IdTokenRules { client_id: &self.config.client_id, nonce };
        let claims = self.openid()?.validate_id_token(id_token, &rules).await?;
        // `exp` is present and in the future: the validation requires it.
        let expires = UNIX_EPOCH + Duration::from_secs(claims.get("exp").and_then(Value::as_u64).unwrap_or_default());
        let mut person = person_of(&claims, &self.config.groups_claim)?;
        if let (Some(endpoint), Some(access)) = (endpoints.userinfo, answer.get("access_token").and_then(Value::as_str))
        {
            let info = self.get_json(&endpoint, Some(access)).await?;
            if info.get("sub").and_then(Value::as_str) != Some(person.subject.as_str()) {
                return Err(OidcError::IdToken("the userinfo names another subject".into()));
            }
            let merged = merge(claims, info);
            person = person_of(&merged, &self.config.groups_claim)?;
        }
        Ok(Login { person, expires, id_token: id_token.to_owned() })
    }
}

/// The ID token's claims with the userinfo's added where the token has none.
fn merge(mut claims: Value, info: Value) -> Value {
    if let (Some(claims), Value::Object(info)) = (claims.as_object_mut(), info) {
        for (name, value) in info {
            claims.entry(name).or_insert(value);
        }
    }
    claims
}

fn person_of(claims: &Value, groups_claim: &str) -> Result<Person, OidcError> {
    let text = |name: &str| claims.get(name).and_then(Value::as_str).filter(|text| !text.is_empty());
    let subject = text("sub").ok_or_else(|| OidcError::IdToken("it names no subject".into()))?.to_owned();
    let display = text("name").or_else(|| text("email")).unwrap_or(&subject).to_owned();
    let groups = match claims.get(groups_claim) {
        Some(Value::Array(values)) => values.iter().filter_map(Value::as_str).map(str::to_owned).collect(),
        Some(Value::String(text)) => text.split_whitespace().map(str::to_owned).collect(),
        _ => Vec::new(),
    };
    Ok(Person { subject, display, groups: groups.into_iter().take(MAX_GROUPS).collect() })
}

/// `name=value&...`, each percent-encoded for a form body or a query.
fn encode_pairs(pairs: &[(&str, &str)]) -> String {
    pairs
        .iter()
        .map(|(name, value)| format!("{}={}", form_encode(name), form_encode(value)))
        .collect::<Vec<_>>()
        .join("&")
}

/// Percent-encodes everything but the unreserved characters (RFC 3986), as form bodies and Basic credentials of
/// OAuth clients must be (RFC 6749 section 2.3.1).
pub(crate) fn form_encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn groups_from_an_array_or_a_string() -> Result<(), OidcError> {
        let person = person_of(&json!({"sub": "a", "email": "a@x", "groups": ["ops", 3, "dev"]}), "groups")?;
        assert_eq!((person.display.as_str(), person.groups), ("a@x", vec!["ops".to_owned(), "dev".to_owned()]));
        assert_eq!(person_of(&json!({"sub": "a", "roles": "x y"}), "roles")?.groups, vec!["x", "y"]);
        Ok(())
    }

    #[test]
    fn form_encoding() {
        assert_eq!(form_encode("a b&c=d/é"), "a%20b%26c%3Dd%2F%C3%A9");
    }
}
