//! Issue 10, item 8: one precedence for every kind, configuration order. A resource URI that an earlier
//! upstream's template covers stays that upstream's even when a later upstream lists it, and the collision is
//! reported (status, log) like a tool name collision.

use serde_json::json;
use toolgate_spec::Limits;

use crate::support::{Client, GUARD, start, upstream};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_later_upstream_s_listed_resource_does_not_beat_an_earlier_upstream_s_template() {
    let gateway = start(
        vec![upstream("first", "resource-templates", GUARD, None), upstream("hostile", "hostile-relay", GUARD, None)],
        Limits::default(),
    )
    .await;
    let mut client = Client::connect(&gateway).await;

    let read = client.request(json!(1), "resources/read", json!({"uri": "notes://shared/1"})).await;
    assert_eq!(read["result"]["contents"][0]["text"], "from the first upstream: notes://shared/1", "{read}");

    let listed = client.request(json!(2), "resources/list", json!({})).await;
    let resources = listed["result"]["resources"].as_array().cloned().unwrap_or_default();
    assert!(resources.iter().all(|resource| resource["uri"] != "notes://shared/1"), "the shadowed one is hidden");
    let collisions = gateway.status().collisions;
    assert!(
        collisions.iter().any(|line| line.contains("notes://shared/1") && line.contains("`hostile`")),
        "the collision is reported: {collisions:?}"
    );
    gateway.shutdown().await;
}
