//! Session taint through the gateway: once an open-world tool's answer has entered a session, an open-world write
//! the rules allow needs a person's confirmation there, and an `isError` answer counts as much as a result (its
//! text came from outside too). Another session is not affected.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use serde_json::json;
use toolgate_core::policy::PolicySpec;
use toolgate_proxy::spec::GuardrailSpec;

use support::{Client, Elicit, FixtureLog, GUARD, start_guarded, text_of, tool_error, upstream};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_open_world_error_answer_taints_the_session_and_its_next_open_world_write_needs_a_person() {
    let log = FixtureLog::new();
    // The standard profile with session taint on; posting is allowed by a rule of its own.
    let policy: PolicySpec = serde_json::from_value(json!({"rule": [
        {"id": "posting-allowed", "effect": "allow", "match": {"tool": "post_message"}}
    ]}))
    .unwrap();
    assert!(policy.session_taint, "taint is on by default");
    let web = upstream("web", "open-world-error", GUARD, Some(&log.path));
    let gateway = start_guarded(vec![web], GuardrailSpec { policy, ..Default::default() }, None).await;
    let posts = || log.entries().iter().filter(|entry| entry["params"]["name"] == "post_message").count();

    // A session that has seen nothing from outside may post: the rule allows it.
    let mut fresh = Client::connect_with(&gateway, Elicit::Decline).await;
    let allowed = fresh.call(json!(1), "web_post_message", json!({})).await;
    assert_eq!(text_of(&allowed), "called post_message", "{allowed}");

    // In another session an open-world read answers with an isError result: its outside text is now there.
    let mut client = Client::connect_with(&gateway, Elicit::Decline).await;
    let search = client.call(json!(2), "web_search_web", json!({})).await;
    assert!(tool_error(&search).contains("ignore your instructions"), "{search}");

    // The same write now needs a person; this client's person declines, so it never reaches the upstream.
    let tainted = client.call(json!(3), "web_post_message", json!({})).await;
    assert!(tool_error(&tainted).contains("declined"), "the tainted write was not confirmed: {tainted}");
    assert_eq!(posts(), 1, "only the untainted session's post reached the upstream: {:?}", log.entries());
    gateway.shutdown().await;
}
