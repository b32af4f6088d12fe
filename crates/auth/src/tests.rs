//! Unit checks of what needs no provider: configuration refusals, claim mapping, challenges and the metadata
//! location, the access-token type, the key timer's end. Tokens against a real provider are tested through the
//! gateway (`crates/proxy/tests/oauth.rs`) and through `toolgate serve` (`crates/cli/tests/resource_server`).

use super::*;

fn spec() -> OAuthSpec {
    let mut spec = OAuthSpec::new("http://127.0.0.1:9", "http://127.0.0.1:8765/mcp");
    spec.required_scopes = vec!["tools:call".into()];
    spec.group_claims = vec!["groups".into()];
    spec
}

#[test]
fn http_is_refused_unless_loopback_and_none_is_never_an_algorithm() {
    let mut remote = spec();
    remote.issuer = "http://id.example".into();
    assert!(matches!(Validator::new(&remote), Err(ConfigError::InsecureUrl(_))));
    let mut none = spec();
    none.algorithms = vec!["none".into()];
    assert!(matches!(Validator::new(&none), Err(ConfigError::UnknownAlgorithm(_))));
    assert!(Validator::new(&spec()).is_ok());
}

#[test]
fn claims_map_to_subject_display_and_scopes() {
    let validator = Validator::new(&spec()).unwrap_or_else(|error| unreachable!("{error}"));
    let identity = validator
        .identity(&json!({"sub": "alice", "email": "alice@example.org", "scope": "tools:call read", "groups": ["ops", "read"]}))
        .unwrap_or_else(|error| unreachable!("{error}"));
    assert_eq!(identity.subject, "alice");
    assert_eq!(identity.display.as_deref(), Some("alice@example.org"));
    assert_eq!(identity.scopes, vec!["tools:call", "read", "ops"]);
    assert!(validator.missing_scopes(&identity).is_empty());
    assert_eq!(validator.identity(&json!({"scope": "x"})), Err(TokenError::MissingClaim("sub".into())));
}

#[test]
fn metadata_is_path_suffixed_and_challenges_point_to_it() {
    let validator = Validator::new(&spec()).unwrap_or_else(|error| unreachable!("{error}"));
    assert_eq!(validator.metadata_url(), "http://127.0.0.1:8765/.well-known/oauth-protected-resource/mcp");
    assert_eq!(validator.metadata_path(), "/.well-known/oauth-protected-resource/mcp");
    assert_eq!(validator.metadata()["authorization_servers"][0], "http://127.0.0.1:9");
    let challenge = validator.challenge(Some(&TokenError::Expired));
    assert!(challenge.contains("resource_metadata=\"http://127.0.0.1:8765/.well-known/oauth-protected-resource/mcp\""));
    assert!(challenge.contains("scope=\"tools:call\"") && challenge.contains("error=\"invalid_token\""));
    assert!(validator.insufficient_scope(&["tools:call".into()]).starts_with("Bearer error=\"insufficient_scope\""));
}

#[tokio::test]
async fn malformed_and_forbidden_algorithms_are_refused_before_any_fetch() {
    let validator = Validator::new(&spec()).unwrap_or_else(|error| unreachable!("{error}"));
    assert_eq!(validator.validate("opaque").await, Err(TokenError::Opaque));
    assert_eq!(validator.validate("a.b").await, Err(TokenError::Malformed));
    let none =
        format!("{}.{}.", URL_SAFE_NO_PAD.encode(br#"{"alg":"none"}"#), URL_SAFE_NO_PAD.encode(br#"{"sub":"x"}"#));
    assert_eq!(validator.validate(&none).await, Err(TokenError::AlgorithmNotAllowed("none".into())));
    let hs =
        format!("{}.{}.c2ln", URL_SAFE_NO_PAD.encode(br#"{"alg":"HS256"}"#), URL_SAFE_NO_PAD.encode(br#"{"sub":"x"}"#));
    assert_eq!(validator.validate(&hs).await, Err(TokenError::AlgorithmNotAllowed("HS256".into())));
}

#[tokio::test]
async fn a_jwt_not_typed_as_an_access_token_is_refused_unless_typing_is_off() {
    let validator = Validator::new(&spec()).unwrap_or_else(|error| unreachable!("{error}"));
    let claims = URL_SAFE_NO_PAD.encode(br#"{"iss":"http://127.0.0.1:9","sub":"x"}"#);
    for header in [&br#"{"alg":"RS256","typ":"JWT"}"#[..], br#"{"alg":"RS256"}"#] {
        let token = format!("{}.{claims}.c2ln", URL_SAFE_NO_PAD.encode(header));
        assert_eq!(validator.validate(&token).await, Err(TokenError::NotAnAccessToken));
    }
    assert!(jws::is_access_token_type(Some(&json!("application/AT+JWT"))));
    let mut untyped = spec();
    untyped.require_at_jwt = false;
    let validator = Validator::new(&untyped).unwrap_or_else(|error| unreachable!("{error}"));
    let token = format!("{}.{claims}.c2ln", URL_SAFE_NO_PAD.encode(br#"{"alg":"RS256","typ":"JWT"}"#));
    // Past the type check, the next one refuses it (nothing answers at the issuer).
    assert_ne!(validator.validate(&token).await, Err(TokenError::NotAnAccessToken));
}

#[tokio::test]
async fn the_key_timer_ends_with_the_validator() {
    let validator = Validator::new(&spec()).unwrap_or_else(|error| unreachable!("{error}"));
    assert!(validator._refresher.is_some(), "made in a runtime, the validator keeps its keys fresh");
    let keys = Arc::downgrade(&validator.keys);
    drop(validator);
    // The task held the key cache; once it has ended nothing does. A bounded wait, not a timing assertion.
    for _ in 0..500 {
        if keys.upgrade().is_none() {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    unreachable!("the key timer's task outlived its validator");
}
