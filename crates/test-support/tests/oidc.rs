//! Checks the OpenID provider harness (`oidc::OidcProvider`): it starts, issues a client-credentials JWT access
//! token for a resource with the asked scope, refuses a scope the client lacks, rotates keys on a restart on the
//! same port (same issuer), and signs tokens the provider would never issue. Loopback only; fails when the peers lack
//! Node 22 or `oidc-provider`, never skips.
#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use serde_json::{Value, json};
use toolgate_test_support::oidc::{OidcProvider, ProviderConfig, Signer, generate_keys, jwt_parts, sign_jwt};

/// An upstream's resource, which the gateway's token exchange asks tokens for.
const UPSTREAM: &str = "http://127.0.0.1:2/mcp";

const RESOURCE: &str = "http://127.0.0.1:1/mcp";

fn config(keys: Value) -> ProviderConfig {
    ProviderConfig::new(keys)
        .scopes(&["tools:call", "tools:admin"])
        .service_client("svc", "svc-secret", "tools:call")
        .console_client("console", "http://127.0.0.1:1/console/callback", "openid profile email tools:call")
        .resource(RESOURCE, "tools:call tools:admin", 300)
        .account("alice", "Alice Example", "alice@example.org", &["approvers"])
}

fn kids(provider: &OidcProvider) -> Vec<String> {
    let (status, body) = provider.get("/jwks").expect("the JWKS answers");
    assert_eq!(status, 200);
    let jwks: Value = serde_json::from_str(&body).unwrap();
    jwks["keys"].as_array().unwrap().iter().map(|key| key["kid"].as_str().unwrap().to_string()).collect()
}

#[test]
fn issues_rotates_and_signs() {
    let first = generate_keys(&["RS256"]);
    let mut provider = OidcProvider::start(&config(first.clone()));
    assert_eq!(provider.issuer(), format!("http://127.0.0.1:{}", provider.port()));

    let token = provider.service_token("svc", "svc-secret", "tools:call", RESOURCE);
    let (header, claims) = jwt_parts(&token);
    assert_eq!(header["alg"], "RS256");
    assert_eq!(header["typ"], "at+jwt");
    assert_eq!(header["kid"], first["keys"][0]["kid"]);
    assert_eq!(claims["iss"], provider.issuer());
    assert_eq!(claims["aud"], RESOURCE);
    assert_eq!(claims["sub"], "svc");
    assert_eq!(claims["scope"], "tools:call");

    let (status, refused) = provider.client_credentials("svc", "svc-secret", "tools:admin", Some(RESOURCE));
    assert_eq!(status, 400, "a scope the client may not ask for is refused: {refused}");

    // The console client starts an authorization-code login with PKCE: the provider sends it to its login page.
    let (status, _) = provider
        .get(
            "/auth?client_id=console&response_type=code&scope=openid%20profile&redirect_uri=http%3A%2F%2F127.0.0.1%3A1%2Fconsole%2Fcallback&code_challenge=E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM&code_challenge_method=S256&state=s",
        )
        .unwrap();
    assert_eq!(status, 303, "the console client's login starts");

    let issuer = provider.issuer().to_string();
    let second = generate_keys(&["ES256"]);
    provider.restart(&config(second.clone()));
    assert_eq!(provider.issuer(), issuer, "a restart keeps the port and so the issuer");
    assert_eq!(kids(&provider), vec![second["keys"][0]["kid"].as_str().unwrap().to_string()]);
    let rotated = provider.service_token("svc", "svc-secret", "tools:call", RESOURCE);
    assert_eq!(jwt_parts(&rotated).0["alg"], "ES256");

    provider.stop();
    assert!(provider.get("/jwks").is_err(), "a stopped provider refuses connections");

    let forged = sign_jwt(&json!({"alg": "none", "typ": "at+jwt"}), &json!({"sub": "mallory"}), Signer::Unsigned);
    assert!(forged.ends_with('.'), "alg none has an empty signature: {forged}");
    let hs = sign_jwt(&json!({"alg": "HS256"}), &json!({"sub": "mallory"}), Signer::Secret("guess"));
    assert_eq!(hs.split('.').count(), 3);
    let stranger = generate_keys(&["RS256"]);
    let own = sign_jwt(
        &json!({"alg": "RS256", "kid": stranger["keys"][0]["kid"]}),
        &json!({"sub": "mallory"}),
        Signer::Key(&stranger["keys"][0]),
    );
    assert_eq!(jwt_parts(&own).1["sub"], "mallory");
}

#[test]
fn token_exchange_issues_the_subjects_token_for_the_upstream_with_the_gateway_as_actor() {
    let keys = generate_keys(&["RS256"]);
    let config =
        config(keys).exchange_client("gateway", "gateway-secret", "tools:call").resource(UPSTREAM, "tools:call", 120);
    let provider = OidcProvider::start(&config);
    let subject = provider.service_token("svc", "svc-secret", "tools:call", RESOURCE);

    let (status, answer) = provider.token_exchange("gateway", "gateway-secret", &subject, UPSTREAM);
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["issued_token_type"], "urn:ietf:params:oauth:token-type:access_token");
    assert_eq!(answer["token_type"], "Bearer");
    let token = answer["access_token"].as_str().unwrap();
    let (header, claims) = jwt_parts(token);
    assert_eq!(header["typ"], "at+jwt");
    assert_eq!(claims["iss"], provider.issuer());
    assert_eq!(claims["sub"], "svc", "the subject stays the caller");
    assert_eq!(claims["aud"], UPSTREAM);
    assert_eq!(claims["client_id"], "gateway");
    assert_eq!(claims["act"], json!({"sub": "gateway"}), "the gateway is named as the actor");
    assert_eq!(claims["scope"], "tools:call");

    // Refused: a subject token the provider did not sign, one that is not a token, a resource it does not know,
    // and a client without the grant.
    let stranger = generate_keys(&["RS256"]);
    let forged = sign_jwt(
        &json!({"alg": "RS256", "kid": stranger["keys"][0]["kid"]}),
        &json!({"iss": provider.issuer(), "sub": "mallory", "exp": 4_000_000_000u64}),
        Signer::Key(&stranger["keys"][0]),
    );
    for subject_token in [forged.as_str(), "not-a-token"] {
        let (status, refused) = provider.token_exchange("gateway", "gateway-secret", subject_token, UPSTREAM);
        assert_eq!((status, refused["error"].as_str()), (400, Some("invalid_grant")), "{refused}");
    }
    let (status, refused) = provider.token_exchange("gateway", "gateway-secret", &subject, "http://127.0.0.1:3/x");
    assert_eq!((status, refused["error"].as_str()), (400, Some("invalid_target")), "{refused}");
    let (status, refused) = provider.token_exchange("svc", "svc-secret", &subject, UPSTREAM);
    assert_eq!((status, refused["error"].as_str()), (400, Some("invalid_request")), "{refused}");
}
