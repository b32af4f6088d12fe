//! The one place a signed JWT from the configured issuer is verified, for access tokens ([`crate::Validator`]) and
//! for the console's ID tokens ([`crate::OpenIdProvider`]): `alg` on the allow-list, `typ: at+jwt` when an access
//! token is expected (RFC 9068: an ID token is not one), `iss` the issuer before any key is looked up, a key the
//! issuer publishes (from [`KeyCache`]) whose own `alg` (when it names one) is the token's, the signature, `aud` naming the expected audience, `exp` / `nbf` within the skew, and `exp`, `iss`, `aud`, `sub`
//! present. It returns the claims and decides nothing about them beyond that: what a token means (a caller's
//! scopes, a login's nonce) is its caller's business. Nothing here logs or keeps a token.

use std::str::FromStr;
use std::time::Duration;

use jsonwebtoken::{Algorithm, DecodingKey, Validation, errors::ErrorKind};
use serde_json::Value;

use crate::keys::KeyCache;
use crate::{ConfigError, TokenError, decode_part};

/// The configured algorithm names as jsonwebtoken's; `none` and unknown names are configuration errors.
pub(crate) fn algorithms(names: &[String]) -> Result<Vec<Algorithm>, ConfigError> {
    names
        .iter()
        .map(|name| Algorithm::from_str(name).map_err(|_| ConfigError::UnknownAlgorithm(name.clone())))
        .collect()
}

/// What a token must name and may use, besides a valid signature.
pub(crate) struct Expected<'a> {
    /// The issuer (`iss`), exactly.
    pub(crate) issuer: &'a str,
    /// An audience `aud` must contain (a resource identifier, or a client id for an ID token).
    pub(crate) audience: &'a str,
    /// The algorithms accepted.
    pub(crate) algorithms: &'a [Algorithm],
    /// Tolerance on `exp` and `nbf`.
    pub(crate) skew: Duration,
    /// An access token typed `at+jwt` is expected (RFC 9068); false for an ID token, or when configured off.
    pub(crate) access_token: bool,
}

/// The claims of `token` (a compact JWS) once it passed everything [`Expected`] says.
pub(crate) async fn verify(keys: &KeyCache, token: &str, expected: &Expected<'_>) -> Result<Value, TokenError> {
    let mut parts = token.split('.');
    let (Some(header), Some(payload), Some(_), None) = (parts.next(), parts.next(), parts.next(), parts.next()) else {
        return Err(TokenError::Malformed);
    };
    let header = decode_part(header)?;
    let alg_name = header.get("alg").and_then(Value::as_str).ok_or(TokenError::Malformed)?;
    let alg = Algorithm::from_str(alg_name)
        .ok()
        .filter(|alg| expected.algorithms.contains(alg))
        .ok_or_else(|| TokenError::AlgorithmNotAllowed(alg_name.to_owned()))?;
    if expected.access_token && !is_access_token_type(header.get("typ")) {
        return Err(TokenError::NotAnAccessToken);
    }
    // The issuer is checked before any key is looked up: a token from elsewhere must not make toolgate fetch.
    let unverified = decode_part(payload)?;
    if unverified.get("iss").and_then(Value::as_str) != Some(expected.issuer) {
        return Err(TokenError::WrongIssuer);
    }
    let jwk = keys.key(header.get("kid").and_then(Value::as_str)).await?;
    if jwk.common.key_algorithm.is_some_and(|key_alg| key_alg.to_string() != alg_name) {
        // A published key says which algorithm it is for; a token claiming another is an algorithm confusion.
        return Err(TokenError::BadSignature);
    }
    let key = DecodingKey::from_jwk(&jwk).map_err(|_| TokenError::UnknownKey)?;
    let mut validation = Validation::new(alg);
    validation.algorithms = vec![alg];
    validation.leeway = expected.skew.as_secs();
    validation.validate_nbf = true;
    validation.set_issuer(&[expected.issuer]);
    validation.set_audience(&[expected.audience]);
    validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
    let data = jsonwebtoken::decode::<Value>(token, &key, &validation).map_err(|error| match error.kind() {
        ErrorKind::ExpiredSignature => TokenError::Expired,
        ErrorKind::ImmatureSignature => TokenError::NotYetValid,
        ErrorKind::InvalidIssuer => TokenError::WrongIssuer,
        ErrorKind::InvalidAudience => TokenError::WrongAudience,
        ErrorKind::InvalidSignature => TokenError::BadSignature,
        ErrorKind::InvalidAlgorithm => TokenError::AlgorithmNotAllowed(alg_name.to_owned()),
        ErrorKind::MissingRequiredClaim(claim) => TokenError::MissingClaim(claim.clone()),
        _ => TokenError::Malformed,
    })?;
    Ok(data.claims)
}

/// RFC 9068 §4: `at+jwt`, or its full media type, compared without case.
pub(crate) fn is_access_token_type(typ: Option<&Value>) -> bool {
    typ.and_then(Value::as_str)
        .is_some_and(|typ| typ.eq_ignore_ascii_case("at+jwt") || typ.eq_ignore_ascii_case("application/at+jwt"))
}
