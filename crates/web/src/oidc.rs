//! The console's side of OpenID Connect: the provider's discovery document and signing keys (cached; the keys are
//! fetched again when an ID token names a key they lack, at most once per `KEY_REFRESH_GAP`), the authorization
//! code exchange (PKCE verifier, client secret by HTTP Basic when one is configured), the ID token's validation
//! (signature by the provider's JWKS with RS256, PS256 or ES256 only, `iss`, `aud` = the console's client id,
//! `azp` when there are several audiences, `exp` / `iat` with a small skew, `nonce`) and the userinfo claims.
//!
//! This is the small seam the issue allowed until the gateway's own token validation is on main: the signature
//! check is `ring`'s (already in the build through rustls), nothing here implements a primitive. It never logs a
//! code, a token or a secret, and a provider that cannot be reached fails the login (nothing is cached from a
//! failure, so the next login tries again).

use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::Value;

use crate::SsoConfig;

/// How long the console waits for the provider on each request.
const PROVIDER_TIMEOUT: Duration = Duration::from_secs(10);
/// The least time between two fetches of the signing keys for an unknown key id.
const KEY_REFRESH_GAP: Duration = Duration::from_secs(10);
/// Clock difference tolerated on `exp` and `iat`.
const SKEW_S: u64 = 60;
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
    /// The ID token failed validation.
    #[error("the ID token is not valid: {0}")]
    IdToken(&'static str),
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

#[derive(Clone)]
struct Metadata {
    authorization_endpoint: String,
    token_endpoint: String,
    userinfo_endpoint: Option<String>,
    jwks_uri: String,
}

struct Cache {
    metadata: Option<Metadata>,
    keys: Vec<Value>,
    keys_fetched: Option<Instant>,
}

/// The configured provider, its discovery document and keys once fetched.
pub(crate) struct Provider {
    config: SsoConfig,
    /// Built at the first login (building it needs the TLS provider, which a console without logins never does).
    http: OnceLock<reqwest::Client>,
    cache: Mutex<Cache>,
}

impl Provider {
    pub(crate) fn new(config: SsoConfig) -> Provider {
        Provider {
            config,
            http: OnceLock::new(),
            cache: Mutex::new(Cache { metadata: None, keys: Vec::new(), keys_fetched: None }),
        }
    }

    fn http(&self) -> Result<&reqwest::Client, OidcError> {
        if let Some(client) = self.http.get() {
            return Ok(client);
        }
        // reqwest is built without a TLS provider; ring is the one the workspace uses (already installed: fine).
        let _ = rustls::crypto::ring::default_provider().install_default();
        let client = reqwest::Client::builder()
            .timeout(PROVIDER_TIMEOUT)
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|error| OidcError::Provider(error.to_string()))?;
        Ok(self.http.get_or_init(|| client))
    }

    pub(crate) fn config(&self) -> &SsoConfig {
        &self.config
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Cache> {
        self.cache.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    async fn get_json(&self, url: &str, bearer: Option<&str>) -> Result<Value, OidcError> {
        let mut request = self.http()?.get(url).header("accept", "application/json");
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

    async fn metadata(&self) -> Result<Metadata, OidcError> {
        if let Some(metadata) = self.lock().metadata.clone() {
            return Ok(metadata);
        }
        let issuer = self.config.issuer.trim_end_matches('/');
        let document = self.get_json(&format!("{issuer}/.well-known/openid-configuration"), None).await?;
        if document.get("issuer").and_then(Value::as_str) != Some(self.config.issuer.as_str()) {
            return Err(OidcError::Provider("the discovery document names another issuer".into()));
        }
        let text = |name: &str| document.get(name).and_then(Value::as_str).map(str::to_owned);
        let missing = |name: &str| OidcError::Provider(format!("the discovery document has no {name}"));
        let metadata = Metadata {
            authorization_endpoint: text("authorization_endpoint").ok_or_else(|| missing("authorization_endpoint"))?,
            token_endpoint: text("token_endpoint").ok_or_else(|| missing("token_endpoint"))?,
            userinfo_endpoint: text("userinfo_endpoint"),
            jwks_uri: text("jwks_uri").ok_or_else(|| missing("jwks_uri"))?,
        };
        self.lock().metadata = Some(metadata.clone());
        Ok(metadata)
    }

    /// The URL that starts a login at the provider.
    pub(crate) async fn authorization_url(
        &self,
        state: &str,
        nonce: &str,
        verifier: &str,
    ) -> Result<String, OidcError> {
        let metadata = self.metadata().await?;
        let challenge = URL_SAFE_NO_PAD.encode(ring::digest::digest(&ring::digest::SHA256, verifier.as_bytes()));
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
        let separator = if metadata.authorization_endpoint.contains('?') { '&' } else { '?' };
        Ok(format!("{}{separator}{query}", metadata.authorization_endpoint))
    }

    /// Exchanges `code` (with its PKCE verifier), validates the ID token against `nonce`, and reads the userinfo.
    pub(crate) async fn complete(&self, code: &str, verifier: &str, nonce: &str) -> Result<Person, OidcError> {
        let metadata = self.metadata().await?;
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
            .http()?
            .post(&metadata.token_endpoint)
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
        let id_token = answer.get("id_token").and_then(Value::as_str).ok_or(OidcError::IdToken("none was issued"))?;
        let claims = self.validate(id_token, nonce, now_s()).await?;
        let mut person = person_of(&claims, &self.config.groups_claim)?;
        if let (Some(endpoint), Some(access)) =
            (metadata.userinfo_endpoint, answer.get("access_token").and_then(Value::as_str))
        {
            let info = self.get_json(&endpoint, Some(access)).await?;
            if info.get("sub").and_then(Value::as_str) != Some(person.subject.as_str()) {
                return Err(OidcError::IdToken("the userinfo names another subject"));
            }
            let merged = merge(claims, info);
            person = person_of(&merged, &self.config.groups_claim)?;
        }
        Ok(person)
    }

    /// The ID token's claims, once its signature, issuer, audience, times and nonce are checked.
    async fn validate(&self, token: &str, nonce: &str, now: u64) -> Result<Value, OidcError> {
        let mut parts = token.split('.');
        let (Some(header), Some(payload), Some(signature), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(OidcError::IdToken("not a compact JWS"));
        };
        let header = decode_json(header).ok_or(OidcError::IdToken("unreadable header"))?;
        let alg = header.get("alg").and_then(Value::as_str).unwrap_or_default();
        let kid = header.get("kid").and_then(Value::as_str);
        let Some(algorithm) = Algorithm::of(alg) else {
            return Err(OidcError::IdToken("its algorithm is not allowed (RS256, PS256 or ES256 only)"));
        };
        let signature = URL_SAFE_NO_PAD.decode(signature).map_err(|_| OidcError::IdToken("unreadable signature"))?;
        let signed = token.rsplit_once('.').map_or("", |(signed, _)| signed).as_bytes();
        let key = self.key(kid, algorithm).await?;
        if !algorithm.verify(&key, signed, &signature) {
            return Err(OidcError::IdToken("its signature does not verify with the provider's key"));
        }
        let claims = decode_json(payload).ok_or(OidcError::IdToken("unreadable claims"))?;
        check_claims(&claims, &self.config.issuer, &self.config.client_id, nonce, now)?;
        Ok(claims)
    }

    /// The provider's key for `kid` fit for `algorithm`; the keys are fetched again (rate-limited) when none is.
    async fn key(&self, kid: Option<&str>, algorithm: Algorithm) -> Result<Value, OidcError> {
        let find = |keys: &[Value]| {
            keys.iter()
                .filter(|key| algorithm.fits(key))
                .find(|key| kid.is_none() || key.get("kid").and_then(Value::as_str) == kid)
                .cloned()
        };
        let (found, fetched) = {
            let cache = self.lock();
            (find(&cache.keys), cache.keys_fetched)
        };
        if let Some(key) = found {
            return Ok(key);
        }
        if fetched.is_some_and(|at| at.elapsed() < KEY_REFRESH_GAP) {
            return Err(OidcError::IdToken("it names a key the provider does not publish"));
        }
        let metadata = self.metadata().await?;
        let document = self.get_json(&metadata.jwks_uri, None).await?;
        let keys = document.get("keys").and_then(Value::as_array).cloned().unwrap_or_default();
        let found = find(&keys);
        let mut cache = self.lock();
        cache.keys = keys;
        cache.keys_fetched = Some(Instant::now());
        found.ok_or(OidcError::IdToken("it names a key the provider does not publish"))
    }
}

/// The signature algorithms an ID token may use: asymmetric only (`none` and HMAC are refused).
#[derive(Debug, Clone, Copy)]
enum Algorithm {
    Rs256,
    Ps256,
    Es256,
}

impl Algorithm {
    fn of(alg: &str) -> Option<Algorithm> {
        match alg {
            "RS256" => Some(Algorithm::Rs256),
            "PS256" => Some(Algorithm::Ps256),
            "ES256" => Some(Algorithm::Es256),
            _ => None,
        }
    }

    fn fits(self, key: &Value) -> bool {
        let text = |name: &str| key.get(name).and_then(Value::as_str);
        let usable = text("use").is_none_or(|usage| usage == "sig");
        usable
            && match self {
                Algorithm::Rs256 | Algorithm::Ps256 => text("kty") == Some("RSA"),
                Algorithm::Es256 => text("kty") == Some("EC") && text("crv") == Some("P-256"),
            }
    }

    fn verify(self, key: &Value, message: &[u8], signature: &[u8]) -> bool {
        let bytes =
            |name: &str| key.get(name).and_then(Value::as_str).and_then(|text| URL_SAFE_NO_PAD.decode(text).ok());
        match self {
            Algorithm::Rs256 | Algorithm::Ps256 => {
                let (Some(n), Some(e)) = (bytes("n"), bytes("e")) else { return false };
                let parameters = match self {
                    Algorithm::Rs256 => &ring::signature::RSA_PKCS1_2048_8192_SHA256,
                    _ => &ring::signature::RSA_PSS_2048_8192_SHA256,
                };
                ring::signature::RsaPublicKeyComponents { n: &n, e: &e }.verify(parameters, message, signature).is_ok()
            }
            Algorithm::Es256 => {
                let (Some(x), Some(y)) = (bytes("x"), bytes("y")) else { return false };
                let mut point = vec![4u8];
                point.extend_from_slice(&x);
                point.extend_from_slice(&y);
                ring::signature::UnparsedPublicKey::new(&ring::signature::ECDSA_P256_SHA256_FIXED, &point)
                    .verify(message, signature)
                    .is_ok()
            }
        }
    }
}

fn decode_json(part: &str) -> Option<Value> {
    serde_json::from_slice(&URL_SAFE_NO_PAD.decode(part).ok()?).ok()
}

fn now_s() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |since| since.as_secs())
}

/// `iss`, `aud` (and `azp` when several audiences), `exp`, `iat`, `nonce` and `sub`.
fn check_claims(claims: &Value, issuer: &str, client_id: &str, nonce: &str, now: u64) -> Result<(), OidcError> {
    if claims.get("iss").and_then(Value::as_str) != Some(issuer) {
        return Err(OidcError::IdToken("it was issued by another issuer"));
    }
    let audiences: Vec<&str> = match claims.get("aud") {
        Some(Value::String(one)) => vec![one.as_str()],
        Some(Value::Array(many)) => many.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    if !audiences.contains(&client_id) {
        return Err(OidcError::IdToken("it is for another audience than the console's client"));
    }
    if audiences.len() > 1 && claims.get("azp").and_then(Value::as_str) != Some(client_id) {
        return Err(OidcError::IdToken("it has several audiences and another authorized party"));
    }
    let time = |name: &str| claims.get(name).and_then(Value::as_u64);
    match time("exp") {
        Some(exp) if exp + SKEW_S > now => {}
        Some(_) => return Err(OidcError::IdToken("it has expired")),
        None => return Err(OidcError::IdToken("it has no expiry")),
    }
    if time("iat").is_none_or(|iat| iat > now + SKEW_S) {
        return Err(OidcError::IdToken("it has no issue time, or one in the future"));
    }
    let presented = claims.get("nonce").and_then(Value::as_str).unwrap_or_default();
    if !crate::session::same_secret(presented, nonce) {
        return Err(OidcError::IdToken("its nonce is not this login's"));
    }
    if claims.get("sub").and_then(Value::as_str).is_none_or(str::is_empty) {
        return Err(OidcError::IdToken("it names no subject"));
    }
    Ok(())
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
    let subject = text("sub").ok_or(OidcError::IdToken("it names no subject"))?.to_owned();
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

    fn claims() -> Value {
        json!({"iss": "http://idp", "aud": "console", "exp": 2000, "iat": 1000, "nonce": "n", "sub": "alice"})
    }

    #[test]
    fn claims_are_checked() {
        let check =
            |claims: &Value| check_claims(claims, "http://idp", "console", "n", 1500).map_err(|e| e.to_string());
        assert!(check(&claims()).is_ok());
        let with = |name: &str, value: Value| {
            let mut claims = claims();
            claims[name] = value;
            check(&claims)
        };
        assert!(with("iss", json!("http://other")).is_err_and(|e| e.contains("another issuer")));
        assert!(with("aud", json!("other")).is_err_and(|e| e.contains("another audience")));
        assert!(with("aud", json!(["console", "other"])).is_err_and(|e| e.contains("authorized party")));
        assert!(with("exp", json!(1000)).is_err_and(|e| e.contains("expired")));
        assert!(with("iat", json!(9000)).is_err_and(|e| e.contains("future")));
        assert!(with("nonce", json!("m")).is_err_and(|e| e.contains("nonce")));
        assert!(with("sub", json!("")).is_err_and(|e| e.contains("subject")));
    }

    #[test]
    fn only_asymmetric_algorithms() {
        assert!(Algorithm::of("none").is_none());
        assert!(Algorithm::of("HS256").is_none());
        assert!(Algorithm::of("RS256").is_some());
    }

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
