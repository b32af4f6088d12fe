//! RFC 9068 typing: an access token is a JWT with `typ: at+jwt` (node-oidc-provider's JWT access tokens are). A
//! person's ID token from the same issuer (authorization code with PKCE, through the provider's login) is refused
//! as not an access token, and so is a token with every claim right (issuer, audience, scope, signed with the
//! issuer's own key) but another `typ`. The provider's real access tokens are accepted.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::{Value, json};
use toolgate_test_support::oidc::{OidcProvider, Signer, generate_keys, jwt_parts, sign_jwt};
use toolgate_test_support::oidc_login::log_in;

use super::{Scene, jwt_provider};

const CONSOLE: &str = "console";
const REDIRECT: &str = "http://127.0.0.1:9/callback";

/// alice's ID token, from the authorization code flow with PKCE (S256) as the public client `console`.
fn id_token(provider: &OidcProvider) -> String {
    let verifier = "a-code-verifier-long-enough-for-rfc-7636-0123456789";
    let digest = toolgate_core::fingerprint::digest_bytes(verifier.as_bytes());
    let hex = digest.trim_start_matches("sha256:");
    let bytes: Vec<u8> =
        (0..hex.len()).step_by(2).map(|at| u8::from_str_radix(&hex[at..at + 2], 16).unwrap()).collect();
    let challenge = URL_SAFE_NO_PAD.encode(bytes);
    let authorize = format!(
        "{}/auth?client_id={CONSOLE}&response_type=code&scope=openid%20email&redirect_uri={}&state=s&nonce=n\
         &code_challenge={challenge}&code_challenge_method=S256",
        provider.issuer(),
        encode(REDIRECT)
    );
    let landed = log_in(provider.port(), &authorize, "alice").unwrap();
    let code = landed
        .split(['?', '&'])
        .find_map(|pair| pair.strip_prefix("code="))
        .unwrap_or_else(|| panic!("no code in {landed}"));
    let body = format!(
        "grant_type=authorization_code&code={code}&redirect_uri={}&client_id={CONSOLE}&code_verifier={verifier}",
        encode(REDIRECT)
    );
    let (status, text) = provider.request("POST", "/token", &[], Some(&body)).unwrap();
    let answer: Value = serde_json::from_str(&text).unwrap_or_else(|_| panic!("{status}: {text}"));
    answer["id_token"].as_str().unwrap_or_else(|| panic!("no ID token: {answer}")).to_owned()
}

/// Percent-encodes a URL for a query value.
fn encode(text: &str) -> String {
    text.bytes()
        .map(|byte| match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => (byte as char).to_string(),
            _ => format!("%{byte:02X}"),
        })
        .collect()
}

#[test]
fn an_id_token_or_a_jwt_of_another_type_is_not_an_access_token() {
    let keys = generate_keys(&["RS256"]);
    let scene = Scene::start(
        |resource| {
            jwt_provider(&keys, resource).console_client(CONSOLE, REDIRECT, "openid email").account(
                "alice",
                "Alice",
                "alice@example.org",
                &[],
            )
        },
        "",
        &[],
    );
    let access = scene.provider.service_token("svc", "svc-secret", "tools:call", &scene.resource);
    assert_eq!(jwt_parts(&access).0["typ"], "at+jwt", "the provider types its JWT access tokens");
    scene.assert_accepted(&access);

    let id = id_token(&scene.provider);
    scene.assert_refused(&id, "not_an_access_token");

    // Everything right but the type: the provider's own key, issuer, audience and scope.
    let (_, mut claims) = jwt_parts(&access);
    claims["jti"] = json!("another-token");
    let key = &keys["keys"][0];
    for typ in [json!("JWT"), json!("id+jwt"), Value::Null] {
        let mut header = json!({"alg": "RS256", "kid": key["kid"]});
        if !typ.is_null() {
            header["typ"] = typ;
        }
        let token = sign_jwt(&header, &claims, Signer::Key(key));
        scene.assert_refused(&token, "not_an_access_token");
    }
    let retyped =
        sign_jwt(&json!({"alg": "RS256", "kid": key["kid"], "typ": "application/at+jwt"}), &claims, Signer::Key(key));
    scene.assert_accepted(&retyped);
}
