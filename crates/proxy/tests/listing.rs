//! What a client is offered, through the gateway: the tool-selection profile (a maximum, destructive tools left
//! out, always-include globs first), toolgate's own safety prompt, which lists the visible tools by class, and
//! visibility by the caller's scopes.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::time::Duration;

use serde_json::{Value, json};
use toolgate_core::policy::PolicySpec;
use toolgate_spec::{GuardrailSpec, SelectionSpec};

use support::{Client, Elicit, start_guarded, upstream};
use toolgate_proxy::session::Caller;

/// A gateway in front of the `rug-pull` fixture (untrusted: `purge_records`' read-only claim does not count, and
/// it is destructive by inference) as `rug`.
async fn gateway_with(selection: SelectionSpec) -> toolgate_proxy::Gateway {
    gateway_with_policy(PolicySpec::default(), selection).await
}

async fn gateway_with_policy(policy: PolicySpec, selection: SelectionSpec) -> toolgate_proxy::Gateway {
    let rug = upstream("rug", "rug-pull", Duration::from_secs(20), None);
    start_guarded(vec![rug], GuardrailSpec { policy, selection, ..Default::default() }, None).await
}

fn names(tools: &[Value]) -> Vec<String> {
    tools.iter().filter_map(|tool| tool["name"].as_str().map(str::to_owned)).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_selection_profile_caps_the_listing_leaves_out_destructive_tools_and_keeps_the_always_included() {
    let everything = gateway_with(SelectionSpec::default()).await;
    let all = names(&Client::connect(&everything).await.tools().await);
    assert!(all.contains(&"rug_purge_records".to_owned()) && all.len() == 4, "{all:?}");
    everything.shutdown().await;

    let profile =
        SelectionSpec { max_tools: Some(2), exclude_destructive: true, always_include: vec!["rug_pull".to_owned()] };
    let gateway = gateway_with(profile).await;
    let mut client = Client::connect(&gateway).await;
    let listed = names(&client.tools().await);
    assert_eq!(listed.len(), 2, "at most two tools: {listed:?}");
    assert_eq!(listed[0], "rug_pull", "always-included tools come first: {listed:?}");
    assert!(!listed.contains(&"rug_purge_records".to_owned()), "destructive tools are left out: {listed:?}");
    gateway.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_safety_prompt_lists_the_visible_tools_by_class() {
    let gateway = gateway_with(SelectionSpec::default()).await;
    let mut client = Client::connect(&gateway).await;
    let prompts = client.request(json!("p"), "prompts/list", json!({})).await;
    let listed: Vec<&str> =
        prompts["result"]["prompts"].as_array().unwrap().iter().filter_map(|prompt| prompt["name"].as_str()).collect();
    assert!(listed.contains(&"toolgate_safety"), "{prompts}");
    let got = client.request(json!("g"), "prompts/get", json!({"name": "toolgate_safety"})).await;
    let text = got["result"]["messages"][0]["content"]["text"].as_str().unwrap_or_default().to_owned();
    let section = |heading: &str| {
        let start = text.find(heading).unwrap_or_else(|| panic!("no `{heading}` in:\n{text}"));
        let rest = &text[start + heading.len()..];
        rest[..rest.find("\n## ").unwrap_or(rest.len())].to_owned()
    };
    assert!(section("## Read-only tools").contains("rug_read_records"), "{text}");
    assert!(section("## Destructive tools").contains("rug_purge_records"), "{text}");
    assert!(!section("## Read-only tools").contains("rug_purge_records"), "{text}");
    gateway.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_hidden_from_callers_without_a_scope_is_listed_and_callable_only_with_it() {
    let policy: PolicySpec = serde_json::from_value(json!({"rule": [
        {"id": "admins-only", "effect": "hide", "match": {"destructive": true, "missing_scopes": "admin"}}
    ]}))
    .unwrap();
    let gateway = gateway_with_policy(policy, SelectionSpec::default()).await;
    let caller = |name: &str, scopes: &[&str]| Caller::named(name, scopes.iter().map(|s| (*s).to_owned()).collect());
    let mut admin =
        Client::connect_as(&gateway, caller("ops", &["admin"]), Elicit::Decline, json!({"elicitation": {}})).await;
    let mut agent =
        Client::connect_as(&gateway, caller("agent", &["read"]), Elicit::Decline, json!({"elicitation": {}})).await;

    assert!(names(&admin.tools().await).contains(&"rug_purge_records".to_owned()));
    let seen_by_agent = names(&agent.tools().await);
    assert!(!seen_by_agent.contains(&"rug_purge_records".to_owned()), "{seen_by_agent:?}");
    assert!(seen_by_agent.contains(&"rug_read_records".to_owned()), "other tools stay: {seen_by_agent:?}");

    // Calling it without the scope looks exactly like calling a tool that does not exist; nobody is asked.
    let hidden = agent.call(json!(1), "rug_purge_records", json!({})).await;
    let unknown = agent.call(json!(2), "rug_no_such_tool", json!({})).await;
    assert_eq!(hidden["result"]["content"][0]["text"], "Unknown tool: rug_purge_records");
    assert_eq!(unknown["result"]["content"][0]["text"], "Unknown tool: rug_no_such_tool");
    assert!(agent.elicitations.is_empty());
    // With it, the call goes to a person (destructive: confirm), who declines here.
    let asked = admin.call(json!(3), "rug_purge_records", json!({})).await;
    assert_eq!(admin.elicitations.len(), 1, "the admin's person was asked: {asked}");
    gateway.shutdown().await;
}
