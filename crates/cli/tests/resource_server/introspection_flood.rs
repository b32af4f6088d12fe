//! A flood of distinct made-up opaque tokens from one address, through `toolgate serve` against the real provider
//! (each introspection held a while there, so they overlap): the provider never has more than toolgate's bound of
//! them in flight, every token is either asked about once (401, inactive) or refused at once without asking (429
//! with `Retry-After`), a refused token repeated is answered from the kept refusal even with answers not reused,
//! and a valid token is accepted once the flood is over.

use serde_json::json;

use super::Scene;
use super::introspection::opaque_provider;

/// How many made-up tokens arrive at once.
const FLOOD: usize = 40;
/// toolgate's bound on introspections in flight for one address (`toolgate_auth`'s `MAX_IN_FLIGHT_PER_ADDRESS`).
const PER_ADDRESS: u64 = 8;

#[test]
fn a_flood_of_made_up_opaque_tokens_holds_few_introspections_and_a_refusal_is_asked_once() {
    // Answers are not reused (0 s): only refusals are kept, so the provider sees every accepted token's request.
    let oauth = "introspection_client_id_env = \"INTROSPECTION_ID\"\nintrospection_client_secret_env = \
                 \"INTROSPECTION_SECRET\"\nintrospection_cache_seconds = 0";
    let scene = Scene::start(
        |resource| opaque_provider(resource).set("introspection_delay_ms", json!(1_000)),
        oauth,
        &[("INTROSPECTION_ID", "toolgate"), ("INTROSPECTION_SECRET", "toolgate-secret")],
    );

    let replies: Vec<_> = std::thread::scope(|scope| {
        let scene = &scene;
        let calls: Vec<_> =
            (0..FLOOD).map(|index| scope.spawn(move || scene.call(&format!("made-up-opaque-{index}")))).collect();
        calls.into_iter().map(|call| call.join().expect("a caller thread")).collect()
    });
    let refused = replies.iter().filter(|reply| reply.status == 401).count();
    let busy: Vec<_> = replies.iter().filter(|reply| reply.status == 429).collect();
    assert_eq!(refused + busy.len(), FLOOD, "{:?}", replies.iter().map(|reply| reply.status).collect::<Vec<_>>());
    for reply in &busy {
        assert_eq!(reply.header("retry-after"), Some("1"), "{}", reply.body);
        assert!(reply.body.contains("retry shortly"), "{}", reply.body);
    }
    let (asked, most) = scene.provider.introspections();
    assert!(most <= PER_ADDRESS, "the provider had {most} introspections from one address in flight at once");
    assert_eq!(asked as usize, refused, "each refused token was asked about once, each busy one not at all");

    // A refusal is kept: the same made-up token again is refused without asking the provider.
    scene.assert_refused("made-up-and-repeated", "inactive");
    let (before, _) = scene.provider.introspections();
    scene.assert_refused("made-up-and-repeated", "inactive");
    assert_eq!(scene.provider.introspections().0, before, "the repeated refusal was not asked again");

    // The flood is over: a real token is asked about and accepted.
    let token = scene.provider.service_token("svc", "svc-secret", "tools:call tools:admin", &scene.resource);
    scene.assert_accepted(&token);
}
