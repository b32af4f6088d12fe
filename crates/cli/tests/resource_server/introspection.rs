//! Opaque access tokens from the provider (a resource whose tokens are `format: opaque`), checked by RFC 7662
//! introspection with toolgate's own client: accepted with the scope (the row names the service), 403 without,
//! inactive when made up, revoked before use or (once its reuse window lapsed) after, refused past its `exp` even
//! while its answer would still be reused, and 503 while the provider is down, accepted again when it is back.

use std::time::Duration;

use serde_json::json;
use toolgate_store::AuditKind;
use toolgate_test_support::oidc::{ProviderConfig, generate_keys};
use toolgate_test_support::toolgate::poll;

use super::{Scene, identity};

/// Opaque tokens live this long: short, so one test can watch a token expire; long enough to be used first.
const TOKEN_TTL: u64 = 8;
/// How long toolgate reuses an answer: longer than a token's life, so only `exp` can end a reuse early.
const REUSE_SECONDS: u64 = 20;

/// A provider issuing opaque tokens for `resource`, with the services `svc` and `reader` and toolgate's own client.
pub(super) fn opaque_provider(resource: &str) -> ProviderConfig {
    ProviderConfig::new(generate_keys(&["RS256"]))
        .scopes(&["tools:call", "tools:admin"])
        .service_client("svc", "svc-secret", "tools:call tools:admin")
        .service_client("reader", "reader-secret", "tools:admin")
        // toolgate's client at the provider, for the introspection endpoint only.
        .service_client("toolgate", "toolgate-secret", "tools:admin")
        .resource_with(json!({
            "indicator": resource, "scope": "tools:call tools:admin", "ttl": TOKEN_TTL, "format": "opaque",
        }))
}

#[test]
fn opaque_tokens_are_introspected_and_a_revoked_or_expired_one_is_refused() {
    let oauth = format!(
        "introspection_client_id_env = \"INTROSPECTION_ID\"\nintrospection_client_secret_env = \
         \"INTROSPECTION_SECRET\"\nintrospection_cache_seconds = {REUSE_SECONDS}"
    );
    let mut scene = Scene::start(
        opaque_provider,
        &oauth,
        &[("INTROSPECTION_ID", "toolgate"), ("INTROSPECTION_SECRET", "toolgate-secret")],
    );
    let token = |scene: &Scene, client: &str, secret: &str| {
        let token = scene.provider.service_token(client, secret, "tools:call tools:admin", &scene.resource);
        assert!(!token.contains('.'), "the provider issued a JWT, not an opaque token: {token}");
        token
    };

    // With the scope: the call is answered, and its row names the service (a client-credentials token's
    // introspection has no `sub`: it is its client).
    let svc = token(&scene, "svc", "svc-secret");
    scene.assert_accepted(&svc);
    let calls = scene.audit_when(AuditKind::Call, |rows| !rows.is_empty());
    assert_eq!(calls.last().and_then(identity).as_deref(), Some("svc"), "{calls:#?}");
    // Without it: 403, naming who lacked it.
    let reader = scene.provider.service_token("reader", "reader-secret", "tools:admin", &scene.resource);
    let reply = scene.call(&reader);
    assert_eq!(reply.status, 403, "{}", reply.body);
    // Made up, or revoked before its first use: the provider says inactive.
    scene.assert_refused("an-opaque-token-nobody-issued", "inactive");
    let revoked = token(&scene, "svc", "svc-secret");
    assert_eq!(scene.provider.revoke("svc", "svc-secret", &revoked), 200);
    scene.assert_refused(&revoked, "inactive");

    // Expiry ends a reused answer, however long the reuse time: accepted now, refused once past its `exp`.
    let expiring = token(&scene, "svc", "svc-secret");
    scene.assert_accepted(&expiring);
    std::thread::sleep(Duration::from_secs(TOKEN_TTL + 2));
    scene.assert_refused(&expiring, "inactive");

    // Revoked after use: its answer is reused for at most the configured time, then the revocation holds.
    let used = token(&scene, "svc", "svc-secret");
    scene.assert_accepted(&used);
    assert_eq!(scene.provider.revoke("svc", "svc-secret", &used), 200);
    poll("the revoked token refused once its answer lapsed", || (scene.call(&used).status == 401).then_some(()));

    // The provider down: a token toolgate has no answer for cannot be checked (503, fail closed) ...
    let unchecked = token(&scene, "svc", "svc-secret");
    scene.provider.stop();
    let reply = scene.call(&unchecked);
    assert_eq!(reply.status, 503, "{}", reply.body);
    assert!(reply.body.contains("identity provider is unreachable"), "{}", reply.body);
    // ... and once it is back, its tokens are accepted again without a restart of toolgate.
    let config = scene.config.clone();
    scene.provider.restart(&config);
    let fresh = token(&scene, "svc", "svc-secret");
    scene.assert_accepted(&fresh);

    let refusals = scene.audit_when(AuditKind::Authentication, |rows| {
        rows.iter().any(|row| row.outcome.as_deref() == Some("refused: provider_unavailable"))
    });
    assert!(refusals.iter().any(|row| row.outcome.as_deref() == Some("refused: inactive")), "{refusals:#?}");
    // The tokens themselves are never logged.
    let log = scene.serving.stderr_text();
    for secret in [&svc, &revoked, &expiring, &used, &fresh, &"toolgate-secret".to_owned()] {
        assert!(!log.contains(secret.as_str()), "a token or the introspection secret is in toolgate's log");
    }
}
