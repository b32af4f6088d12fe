//! Keys fetched again on a timer: after the issuer rotates its keys so that the old one is removed from its JWKS,
//! a token signed with the old key is refused even though no token ever named an unknown key in between (nothing
//! but the timer can have fetched the new set), and even while the provider is down, when toolgate can no longer
//! ask it: the removed key is gone from toolgate's cache, not kept because the fetch that would replace it failed.
//! With OAuth tokens as the only callers, neither `check-config` nor the console's inventory names `anonymous`.

use std::time::Duration;

use toolgate_core::decision::Verdict;
use toolgate_test_support::oidc::generate_keys;

use super::{Scene, jwt_provider};

/// `jwks_refresh_seconds` here: the timer fetches the keys once per this many seconds.
const REFRESH_SECONDS: u64 = 1;

#[test]
fn a_key_the_issuer_stopped_publishing_is_refused_after_the_timer_fetched_the_keys() {
    let old_keys = generate_keys(&["RS256"]);
    let oauth = format!("jwks_refresh_seconds = {REFRESH_SECONDS}\njwks_min_refetch_seconds = 0");
    // OAuth tokens are the only callers here: nobody may call as `anonymous`, and nothing says so.
    let mut scene = Scene::start_with(|resource| jwt_provider(&old_keys, resource), &oauth, &[], false);
    assert_eq!(scene.inventory_access("list_notes"), [("any OAuth caller".to_owned(), Verdict::Allow)]);
    let checked = scene.check_config();
    assert!(checked.contains("callers:\n  OAuth access tokens from"), "{checked}");
    assert!(!checked.contains("anonymous") && !checked.contains("callers: none"), "{checked}");
    let old = scene.provider.service_token("svc", "svc-secret", "tools:call", &scene.resource);
    scene.assert_accepted(&old);

    // The issuer now publishes only a new key. No request reaches toolgate until the provider is down again, so
    // only the timer can fetch the new key set; the wait gives it several intervals (a hang guard, not a timing
    // assertion: the test asserts what toolgate answers afterwards).
    let new_keys = generate_keys(&["RS256"]);
    let config = jwt_provider(&new_keys, &scene.resource);
    scene.provider.restart(&config);
    std::thread::sleep(Duration::from_secs(REFRESH_SECONDS * 5));
    scene.provider.stop();

    let reply = scene.call(&old);
    assert_ne!(
        reply.status, 200,
        "a token signed with a key the issuer no longer publishes was accepted: {}",
        reply.body
    );
    assert_eq!(reply.status, 503, "its key is not in the cache and the provider cannot say otherwise: {}", reply.body);

    // Back up: the removed key is unknown (401), tokens with the new key are accepted.
    scene.provider.restart(&config);
    let new = scene.provider.service_token("svc", "svc-secret", "tools:call", &scene.resource);
    scene.assert_accepted(&new);
    scene.assert_refused(&old, "unknown_key");
}
