//! The bounds and the bookkeeping of `subscriptions/listen` through the in-process gateway, on stdio-kind sessions
//! (one session may hold any number of listens there): the cap on resource URIs per listen, the cap on listens per
//! caller, a listener that falls behind being told so, an acknowledgement that claims only URIs an upstream really
//! subscribed, and the upstream subscription of a URI following many listens opening and closing on it at once
//! (subscribed while one is left, unsubscribed after the last).
//! The upstream that subscribes for real is `misbehave.py --mode subscriptions` (its `subscribed` tool says what it
//! holds; its `touch` announces an update only for a subscribed URI).
//!
//! Waits are hang guards; nothing asserts how long anything took.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use serde_json::{Value, json};
use toolgate_spec::{Caller, Limits};

use support::{Client, Elicit, GUARD, start, upstream};

/// A modern listen's params for `notifications`.
fn listen_params(notifications: Value) -> Value {
    json!({"notifications": notifications, "_meta": {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
    }})
}

fn acknowledged_for<'a>(id: &'a Value) -> impl Fn(&Value) -> bool + 'a {
    move |message: &Value| {
        message["method"] == "notifications/subscriptions/acknowledged"
            && message["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"] == *id
    }
}

/// The URIs the `watch` upstream holds subscribed now.
async fn upstream_subscribed(client: &mut Client, id: &str) -> Vec<String> {
    let answer = client.call(json!(id), "watch_subscribed", json!({})).await;
    serde_json::from_str(answer["result"]["content"][0]["text"].as_str().unwrap()).unwrap()
}

/// Waits until the `watch` upstream holds exactly `expected` (the listens' subscriptions are sent without waiting).
async fn wait_upstream_holds(client: &mut Client, expected: &[&str]) {
    let deadline = tokio::time::Instant::now() + GUARD;
    for round in 0.. {
        let held = upstream_subscribed(client, &format!("subscribed-{round}")).await;
        if held == expected {
            return;
        }
        assert!(tokio::time::Instant::now() < deadline, "the upstream holds {held:?}, not {expected:?}");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_acknowledgement_claims_only_uris_an_upstream_really_subscribes() {
    // The only resource server: a URI it neither lists nor templates is not claimed for it.
    let gateway = start(vec![upstream("watch", "subscriptions", GUARD, None)], Limits::default()).await;
    let mut client = Client::connect(&gateway).await;
    let asked = json!({"resourceSubscriptions": ["notes://watched/1", "notes://watched/7", "elsewhere://x"]});
    client.send(json!("listen"), "subscriptions/listen", listen_params(asked));
    let ack = client.wait_for("the acknowledgement", acknowledged_for(&json!("listen"))).await;
    assert_eq!(
        ack["params"]["notifications"],
        json!({"resourceSubscriptions": ["notes://watched/1", "notes://watched/7"]}),
        "{ack}"
    );
    assert_eq!(ack["params"]["_meta"]["toolgate/notSubscribed"], json!(["elsewhere://x"]), "{ack}");
    let mut other = Client::connect(&gateway).await;
    wait_upstream_holds(&mut other, &["notes://watched/1", "notes://watched/7"]).await;

    // An upstream that lists a URI but never declared `resources.subscribe`: the URI is not subscribed.
    let gateway = start(vec![upstream("hostile", "hostile-relay", GUARD, None)], Limits::default()).await;
    let mut client = Client::connect(&gateway).await;
    let asked = json!({"toolsListChanged": true, "resourceSubscriptions": ["notes://shared/1"]});
    client.send(json!("listen"), "subscriptions/listen", listen_params(asked));
    let ack = client.wait_for("the acknowledgement", acknowledged_for(&json!("listen"))).await;
    assert_eq!(ack["params"]["notifications"], json!({"toolsListChanged": true}), "{ack}");
    assert_eq!(ack["params"]["_meta"]["toolgate/notSubscribed"], json!(["notes://shared/1"]), "{ack}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listen_over_the_uri_cap_is_invalid_params_naming_the_cap() {
    let gateway = start(vec![upstream("watch", "subscriptions", GUARD, None)], Limits::default()).await;
    let mut client = Client::connect(&gateway).await;
    let uris = |count: usize| (0..count).map(|n| format!("notes://watched/{n}")).collect::<Vec<_>>();
    let over = client
        .request(json!("over"), "subscriptions/listen", listen_params(json!({"resourceSubscriptions": uris(257)})))
        .await;
    assert_eq!(over["error"]["code"], -32602, "{over}");
    assert!(over["error"]["message"].as_str().unwrap().contains("256"), "{over}");
    let mut watcher = Client::connect(&gateway).await;
    assert!(upstream_subscribed(&mut watcher, "none").await.is_empty(), "nothing was subscribed for it upstream");

    client.send(json!("at"), "subscriptions/listen", listen_params(json!({"resourceSubscriptions": uris(256)})));
    let ack = client.wait_for("the acknowledgement", acknowledged_for(&json!("at"))).await;
    assert_eq!(ack["params"]["notifications"]["resourceSubscriptions"].as_array().unwrap().len(), 256, "{ack}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_caller_past_its_listen_cap_is_refused_and_another_caller_is_not() {
    let gateway = start(vec![upstream("watch", "subscriptions", GUARD, None)], Limits::default()).await;
    let alice = || Caller::named("alice", Vec::new());
    // The caller's places are counted across its sessions.
    let mut first = Client::connect_as(&gateway, alice(), Elicit::None, json!({})).await;
    let mut second = Client::connect_as(&gateway, alice(), Elicit::None, json!({})).await;
    let filter = || listen_params(json!({"toolsListChanged": true}));
    for n in 0..64 {
        let client = if n % 2 == 0 { &mut first } else { &mut second };
        let id = json!(format!("listen-{n}"));
        client.send(id.clone(), "subscriptions/listen", filter());
        client.wait_for("an acknowledgement", acknowledged_for(&id)).await;
    }
    let refused = second.request(json!("one-more"), "subscriptions/listen", filter()).await;
    assert_eq!(refused["error"]["code"], -32000, "{refused}");
    assert!(refused["error"]["message"].as_str().unwrap().contains("64"), "{refused}");

    let bob = Caller::named("bob", Vec::new());
    let mut other = Client::connect_as(&gateway, bob, Elicit::None, json!({})).await;
    other.send(json!("bobs"), "subscriptions/listen", filter());
    other.wait_for("another caller's acknowledgement", acknowledged_for(&json!("bobs"))).await;

    // A listen the caller ends gives its place back.
    first.deliver(json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "listen-0"}}));
    let deadline = tokio::time::Instant::now() + GUARD;
    for attempt in 0.. {
        let id = json!(format!("again-{attempt}"));
        first.send(id.clone(), "subscriptions/listen", filter());
        let answer =
            first.wait_for("an acknowledgement or a refusal", |m| acknowledged_for(&id)(m) || m["id"] == id).await;
        if answer.get("error").is_none() {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "the place never came back: {answer}");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listener_that_falls_behind_is_told_its_listen_ended() {
    // A small client budget: a listener that reads nothing fills it with a handful of updates.
    let limits = Limits { max_client_queue_bytes: 4096, ..Limits::default() };
    let gateway = start(vec![upstream("watch", "subscriptions", GUARD, None)], limits).await;
    let mut listener = Client::connect(&gateway).await;
    let mut toucher = Client::connect(&gateway).await;
    listener.send(
        json!("slow"),
        "subscriptions/listen",
        listen_params(json!({"resourceSubscriptions": ["notes://watched/1"]})),
    );
    wait_upstream_holds(&mut toucher, &["notes://watched/1"]).await;
    let touched = toucher.call(json!("touch"), "watch_touch", json!({"uri": "notes://watched/1", "times": 200})).await;
    assert_eq!(touched["result"]["content"][0]["text"], "announced 200", "{touched}");

    // Only now does the listener read: some updates, then the listen's end with an error saying why.
    let ended = listener.response(&json!("slow")).await;
    assert_eq!(ended["error"]["code"], -32000, "{ended}");
    assert!(ended["error"]["message"].as_str().unwrap().contains("fell behind"), "{ended}");
    let heard = listener
        .all
        .iter()
        .filter(|bound| support::message_of(bound)["method"] == "notifications/resources/updated")
        .count();
    assert!(heard < 200, "a listener over its budget cannot have heard everything: {heard}");
    // Its place and subscription are given back.
    wait_upstream_holds(&mut toucher, &[]).await;
}

// Thread timing decides the interleaving here, so this guards the behaviour rather than forcing the race; the
// interleavings themselves (a listen opening while the unsubscribe of the last one is in flight, and back) are
// stepped deterministically in `state::listens`'s unit tests.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_upstream_subscription_follows_listens_opening_and_closing_at_once_on_two_sessions() {
    let gateway = start(vec![upstream("watch", "subscriptions", GUARD, None)], Limits::default()).await;
    let mut keeper = Client::connect(&gateway).await;
    let mut toucher = Client::connect(&gateway).await;
    let filter = || listen_params(json!({"resourceSubscriptions": ["notes://watched/1"]}));
    for cycle in 0..20 {
        // Another session opens and closes listens on the URI while the keeper's listen opens among them.
        let churn = Client::connect(&gateway).await;
        let keep = json!(format!("keep-{cycle}"));
        for round in 0..20 {
            let id = json!(format!("churn-{cycle}-{round}"));
            churn.send(id.clone(), "subscriptions/listen", filter());
            if round == 10 {
                keeper.send(keep.clone(), "subscriptions/listen", filter());
            }
            churn.deliver(json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": id}}));
        }
        keeper.wait_for("the keeper's acknowledgement", acknowledged_for(&keep)).await;
        wait_upstream_holds(&mut toucher, &["notes://watched/1"]).await;
        // A late unsubscribe of a churned listen would land in this window.
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        let held = upstream_subscribed(&mut toucher, &format!("after-{cycle}")).await;
        assert_eq!(held, ["notes://watched/1"], "cycle {cycle}: the keeper's URI was unsubscribed upstream");
        let touched =
            toucher.call(json!(format!("touch-{cycle}")), "watch_touch", json!({"uri": "notes://watched/1"})).await;
        assert_eq!(touched["result"]["content"][0]["text"], "announced 1", "{touched}");
        let updated = keeper.wait_for("resources/updated", |m| m["method"] == "notifications/resources/updated").await;
        assert_eq!(updated["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"], keep, "{updated}");
        keeper.deliver(json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": keep}}));
        // Nobody wants it any more: it is unsubscribed (no subscription left behind either).
        wait_upstream_holds(&mut toucher, &[]).await;
    }
}

/// Waits until the `watch` upstream is down (its supervisor noticed the crash) and then ready again.
async fn wait_restarted(gateway: &toolgate_proxy::Gateway) {
    use toolgate_proxy::upstreams::UpstreamStatus;
    let deadline = tokio::time::Instant::now() + GUARD;
    let mut seen_down = false;
    loop {
        match support::status_of(gateway, "watch") {
            UpstreamStatus::Down { .. } | UpstreamStatus::Starting => seen_down = true,
            UpstreamStatus::Ready { .. } if seen_down => return,
            UpstreamStatus::Ready { .. } => {}
        }
        assert!(tokio::time::Instant::now() < deadline, "the upstream was not restarted");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subscriptions_are_sent_again_to_an_upstream_the_supervisor_restarted() {
    let gateway = start(vec![upstream("watch", "subscriptions", GUARD, None)], Limits::default()).await;
    // A legacy session's subscription and a listen's.
    let mut legacy = Client::connect(&gateway).await;
    let subscribed = legacy.request(json!("sub"), "resources/subscribe", json!({"uri": "notes://watched/1"})).await;
    assert!(subscribed.get("error").is_none(), "{subscribed}");
    let mut listener = Client::connect(&gateway).await;
    let asked = json!({"resourceSubscriptions": ["notes://watched/2"]});
    listener.send(json!("listen"), "subscriptions/listen", listen_params(asked));
    listener.wait_for("the acknowledgement", acknowledged_for(&json!("listen"))).await;
    let mut other = Client::connect(&gateway).await;
    wait_upstream_holds(&mut other, &["notes://watched/1", "notes://watched/2"]).await;

    // The upstream dies; its supervisor starts a new process, which holds no subscription of its own.
    other.send(json!("crash"), "tools/call", json!({"name": "watch_crash", "arguments": {}}));
    wait_restarted(&gateway).await;
    wait_upstream_holds(&mut other, &["notes://watched/1", "notes://watched/2"]).await;

    // Both subscribers hear the new process's updates again.
    for (id, uri) in [("touch-1", "notes://watched/1"), ("touch-2", "notes://watched/2")] {
        let touched = other.call(json!(id), "watch_touch", json!({"uri": uri})).await;
        assert_eq!(touched["result"]["content"][0]["text"], "announced 1", "{touched}");
    }
    legacy
        .wait_for("the legacy session's update", |message| {
            message["method"] == "notifications/resources/updated" && message["params"]["uri"] == "notes://watched/1"
        })
        .await;
    listener
        .wait_for("the listen's update", |message| {
            message["method"] == "notifications/resources/updated"
                && message["params"]["uri"] == "notes://watched/2"
                && message["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"] == "listen"
        })
        .await;
}
