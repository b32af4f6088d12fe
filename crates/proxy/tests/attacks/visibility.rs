//! Visibility: shadowed names, tools hidden by a rule or by read-only mode look exactly like unknown tools.

use std::time::Duration;

use serde_json::{Value, json};
use toolgate_core::policy::PolicySpec;
use toolgate_core::trust::TrustLevel;
use toolgate_spec::{GuardrailSpec, Prefix};

use crate::harness::*;
use crate::support::{FixtureLog, upstream};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_first_of_two_unprefixed_upstreams_owns_a_shared_name_and_the_collision_is_reported() {
    let (first_log, second_log) = (FixtureLog::new(), FixtureLog::new());
    let mut first = upstream("first", "tool-faults", Duration::from_secs(20), Some(&first_log.path));
    let mut second = upstream("second", "tool-faults", Duration::from_secs(20), Some(&second_log.path));
    first.prefix = Prefix::None;
    second.prefix = Prefix::None;
    let guardrails = GuardrailSpec { policy: PolicySpec::permissive(), ..GuardrailSpec::default() };
    let harness = Harness::start(vec![first, second], guardrails).await;
    let mut client = harness.client(Elicit::None).await;

    let tools = client.tools().await;
    let echoes: Vec<&Value> = tools.iter().filter(|tool| tool["name"] == "echo").collect();
    assert_eq!(echoes.len(), 1, "one `echo` is listed: {:?}", names(&tools));
    assert_eq!(echoes[0]["_meta"][META_KEY]["upstream"], "first");
    for id in 0..3 {
        let response = client.call(json!(id), "echo", json!({"text": format!("shadow {id}")})).await;
        assert_eq!(text(&response), format!("shadow {id}"), "{response}");
    }
    assert_eq!(fixture_called(&first_log, "echo"), 3);
    assert_eq!(fixture_called(&second_log, "echo"), 0, "the second upstream's echo is never reachable by that name");

    let collisions = harness.gateway.status().collisions;
    assert!(
        collisions.iter().any(|collision| collision.contains("`echo`")
            && collision.contains("`second`")
            && collision.contains("`first`")),
        "the collision names the tool and both upstreams: {collisions:?}"
    );
}

// ---------------------------------------------------------------------------------------------------------------
// 4. Calling a hidden tool by name

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_hidden_by_a_rule_is_not_listed_and_calling_it_looks_like_an_unknown_tool() {
    let log = FixtureLog::new();
    let guardrails = GuardrailSpec {
        policy: policy(json!({"rule": [
            {"id": "no-echo", "effect": "hide", "match": {"tool": "echo"}},
            {"effect": "allow"}
        ]})),
        ..GuardrailSpec::default()
    };
    let harness =
        Harness::start(vec![upstream("tf", "tool-faults", Duration::from_secs(20), Some(&log.path))], guardrails).await;
    let mut client = harness.client(Elicit::Accept).await;
    assert_looks_unknown(&mut client, "tf_echo", json!({"text": "x"})).await;
    // The allow after it does not open what the hide closed; other tools still work.
    let response = client.call(json!("log"), "tf_log", json!({"text": "still here"})).await;
    assert_eq!(text(&response), "logged", "{response}");
    assert_eq!(fixture_called(&log, "echo"), 0);
    assert!(client.elicitations.is_empty(), "nobody was asked about a hidden tool");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_read_only_mode_a_write_tool_is_hidden_and_calling_it_looks_like_an_unknown_tool() {
    let log = FixtureLog::new();
    let mut rug = rug("rug", &log, TrustLevel::Untrusted);
    // An operator's override makes read_records read-only whatever inference thinks.
    rug.overrides
        .insert("read_records".into(), toolgate_core::HintOverrides { read_only: Some(true), ..Default::default() });
    let guardrails = GuardrailSpec {
        policy: policy(json!({"mode": "read-only", "rule": [{"effect": "allow"}]})),
        ..GuardrailSpec::default()
    };
    let harness = Harness::start(vec![rug], guardrails).await;
    let mut client = harness.client(Elicit::Accept).await;
    let tools = client.tools().await;
    assert!(names(&tools).contains(&"rug_read_records"), "read-only tools stay listed: {:?}", names(&tools));
    assert_looks_unknown(&mut client, "rug_update_record", json!({"text": "x"})).await;
    assert_looks_unknown(&mut client, "rug_purge_records", json!({"text": "x"})).await;
    let response = client.call(json!("read"), "rug_read_records", json!({})).await;
    assert_eq!(text(&response), "called read_records", "{response}");
    assert_eq!(fixture_called(&log, "update_record") + fixture_called(&log, "purge_records"), 0);
}

// ---------------------------------------------------------------------------------------------------------------
// 5. Approvals: replayed, forged, reused for other arguments

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_named_with_its_upstreams_prefix_keeps_the_prefix_once() {
    let log = FixtureLog::new();
    let guardrails = GuardrailSpec { policy: PolicySpec::permissive(), ..GuardrailSpec::default() };
    // Upstream `rug` (prefix `rug`) lists `rug_pull` and `purge_records`.
    let harness = Harness::start(vec![rug("rug", &log, TrustLevel::Untrusted)], guardrails).await;
    let mut client = harness.client(Elicit::None).await;
    let tools = client.tools().await;
    let listed = names(&tools);
    assert!(listed.contains(&"rug_pull") && listed.contains(&"rug_purge_records"), "{listed:?}");
    assert!(!listed.contains(&"rug_rug_pull"), "the prefix is not doubled: {listed:?}");
    let response = client.call(json!(1), "rug_pull", json!({"change": "none"})).await;
    assert_eq!(text(&response), "changed: none", "the name reaches the upstream's `rug_pull`: {response}");
    assert_eq!(fixture_called(&log, "rug_pull"), 1);
}
