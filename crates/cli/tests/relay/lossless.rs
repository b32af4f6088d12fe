//! Lossless relay: what toolgate sends on equals what the upstream said, as JSON values, except what toolgate
//! deliberately changes: the four hints made explicit inside `annotations` (vendor keys and the title there
//! survive), other spellings of a hint removed where they contradict the explicit value (issue 10), and its own
//! `_meta["toolgate/annotations"]` record (whose fingerprint is that of the original).
//!
//! The upstream is the misbehave fixture (`lossless` mode: icons, execution, outputSchema, `$defs`/`$ref`, vendor
//! keys, unknown top-level keys, `_meta.ui`; `paginated` mode: vendor spellings and string booleans over three
//! pages). The same fixture is first asked directly, so the expectation is what it really sends. The client is a
//! raw JSON-RPC line client: no SDK model in the way to drop or add fields.

use serde_json::{Map, Value, json};
use toolgate_core::ToolDefinition;
use toolgate_core::fingerprint::fingerprint_tool;
use toolgate_core::normalize::{hint_of_key, loose_bool};
use toolgate_test_support::{PeerCommand, misbehave};

use crate::support::RawClient;

const HINTS: [&str; 4] = ["readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint"];

/// Client capabilities that declare the MCP Apps extension (so app-only tools are listed).
fn with_apps() -> Value {
    json!({"extensions": {"io.modelcontextprotocol/ui": {"mimeTypes": ["text/html;profile=mcp-app"]}}})
}

/// The fixture's tools as it lists them itself (every page), by name.
fn direct_tools(peer: &PeerCommand) -> Map<String, Value> {
    let mut direct = RawClient::direct(peer);
    direct.initialize(with_apps());
    direct
        .list_all_tools()
        .into_iter()
        .map(|tool| (tool["name"].as_str().unwrap_or_default().to_owned(), tool))
        .collect()
}

/// The tools toolgate lists (one page), by name.
fn relayed_tools(client: &mut RawClient) -> Map<String, Value> {
    let result = client.request_ok("tools/list", json!({}));
    assert!(result.get("nextCursor").is_none_or(Value::is_null), "toolgate serves one page: {result}");
    let tools = result["tools"].as_array().expect("tools is an array");
    tools.iter().map(|tool| (tool["name"].as_str().unwrap_or_default().to_owned(), tool.clone())).collect()
}

/// Asserts that `relayed` is `original` plus only toolgate's deliberate changes.
fn assert_lossless(original: &Value, relayed: &Value) {
    let name = original["name"].as_str().unwrap_or_default();
    let mut relayed = relayed.clone();
    let relayed_object = relayed.as_object_mut().expect("a tool is an object");

    // toolgate's own record: present, with the fingerprint of what the upstream sent; then set aside.
    let meta =
        relayed_object.get_mut("_meta").and_then(Value::as_object_mut).unwrap_or_else(|| panic!("{name}: no _meta"));
    let record = meta.remove(crate::META_KEY).unwrap_or_else(|| panic!("{name}: no _meta[{:?}]", crate::META_KEY));
    let definition = ToolDefinition::from_value(original.clone()).expect("the fixture's tool is valid");
    let expected_fingerprint = fingerprint_tool(&definition).expect("the fixture's tool has a fingerprint").whole;
    assert_eq!(record["fingerprint"], expected_fingerprint, "{name}: fingerprint of the original definition");
    if meta.is_empty() && original.get("_meta").is_none() {
        relayed_object.remove("_meta");
    }

    // The four hints: explicit booleans (their values are toolgate's to decide); then set aside.
    let annotations = relayed_object
        .get_mut("annotations")
        .and_then(Value::as_object_mut)
        .unwrap_or_else(|| panic!("{name}: no annotations"));
    let mut explicit = Map::new();
    for hint in HINTS {
        let emitted = annotations.remove(hint).unwrap_or_else(|| panic!("{name}: {hint} is not explicit"));
        assert!(emitted.is_boolean(), "{name}: {hint} is {emitted}, not a boolean");
        explicit.insert(hint.to_owned(), emitted);
    }
    let mut original = original.clone();
    if let Some(annotations) = original.get_mut("annotations").and_then(Value::as_object_mut) {
        for hint in HINTS {
            annotations.remove(hint);
        }
        remove_contradicting(annotations, &explicit);
    }
    if let Some(top_level) = original.as_object_mut() {
        remove_contradicting(top_level, &explicit);
    }
    if original.get("annotations").is_none() && annotations.is_empty() {
        relayed_object.remove("annotations");
    }

    // Everything else: equal as JSON values.
    assert_eq!(relayed, original, "{name}: the relayed definition lost or changed something");
}

/// Removes the spellings of a hint (`readOnly`, a top-level `readOnlyHint`, ...) whose value is not the explicit
/// hint's: toolgate removes exactly those.
fn remove_contradicting(object: &mut Map<String, Value>, explicit: &Map<String, Value>) {
    object.retain(|key, value| match hint_of_key(key) {
        Some(hint) => loose_bool(value) == explicit.get(hint.wire_key()).and_then(Value::as_bool),
        None => true,
    });
}

/// Every tool of the `lossless` fixture, including the app-only one for a client that declares MCP Apps.
#[test]
fn lossless_tools_survive_the_relay() {
    let peer = misbehave("lossless");
    let direct = direct_tools(&peer);
    assert_eq!(direct.len(), 4, "the fixture lists four tools over two pages: {direct:?}");
    let mut client = RawClient::through_toolgate(&peer);
    client.initialize(with_apps());
    let relayed = relayed_tools(&mut client);
    assert_eq!(relayed.keys().collect::<Vec<_>>(), direct.keys().collect::<Vec<_>>(), "the same tools, same order");
    for (name, original) in &direct {
        assert_lossless(original, &relayed[name]);
    }

    // Spot checks that say what the comparison above covers.
    let rich = &relayed["inspect_everything"];
    assert_eq!(rich["annotations"]["x-vendorRisk"], "low");
    assert_eq!(rich["annotations"]["vendor.example/reviewed"]["by"], "alice");
    assert_eq!(rich["annotations"]["title"], "Inspect (vendor title)");
    assert_eq!(rich["execution"]["taskSupport"], "optional");
    assert_eq!(rich["icons"][1]["theme"], "dark");
    assert_eq!(rich["inputSchema"]["properties"]["record"]["$ref"], "#/$defs/record");
    assert_eq!(rich["inputSchema"]["$defs"]["tag"]["enum"][2], "\u{e9}t\u{e9}");
    assert_eq!(rich["_meta"]["ui"]["visibility"], json!(["model", "app"]));
    assert_eq!(rich["_meta"]["vendor.example/build"], 42);
    assert_eq!(rich["x-vendor-top-level"]["nested"], json!([1, 2.5, null, "s", {"deep": true}]));
    assert_eq!(relayed["unicode_tool"]["annotations"]["title"], "Snowman \u{2603}");
    assert_eq!(relayed["bare_tool"]["annotations"].as_object().map(Map::len), Some(4), "only the four hints added");
}

/// A client without the MCP Apps extension sees neither the app-only tool nor can call it; the rest is the same.
#[test]
fn app_only_tools_are_hidden_without_the_apps_extension() {
    let peer = misbehave("lossless");
    let direct = direct_tools(&peer);
    let mut client = RawClient::through_toolgate(&peer);
    client.initialize(json!({}));
    let relayed = relayed_tools(&mut client);
    assert_eq!(relayed.keys().collect::<Vec<_>>(), ["inspect_everything", "bare_tool", "unicode_tool"]);
    for (name, tool) in &relayed {
        assert_lossless(&direct[name], tool);
    }
    // Calling it looks exactly like calling a tool that does not exist (toolgate answers an unknown tool with an
    // `isError` result, as the TypeScript and Python SDKs do).
    let hidden = client.request_ok("tools/call", json!({"name": "app_panel", "arguments": {}}));
    let missing = client.request_ok("tools/call", json!({"name": "app_panel_x", "arguments": {}}));
    assert_eq!(hidden["isError"], true, "an app-only tool is unknown to this client: {hidden}");
    assert_eq!(hidden["content"][0]["text"], "Unknown tool: app_panel");
    assert_eq!(missing["content"][0]["text"], "Unknown tool: app_panel_x");
    assert_eq!(
        hidden.as_object().map(|result| result.keys().collect::<Vec<_>>()),
        missing.as_object().map(|result| result.keys().collect())
    );
}

/// A tools/call result comes back exactly as the upstream sent it (structuredContent, content annotations, _meta,
/// unknown keys), with the client's id; the arguments reach the upstream unchanged.
#[test]
fn call_results_survive_the_relay() {
    let peer = misbehave("lossless");
    let arguments = json!({"record": {"id": "ab-1", "tags": ["a", "\u{e9}t\u{e9}"]}, "depth": 3, "ratio": 0.75});
    let params = json!({"name": "inspect_everything", "arguments": arguments});

    let mut direct = RawClient::direct(&peer);
    direct.initialize(with_apps());
    let expected = direct.request_ok("tools/call", params.clone());
    assert_eq!(expected["structuredContent"]["arguments"], arguments, "the fixture echoes the arguments");

    let mut client = RawClient::through_toolgate(&peer);
    client.initialize(with_apps());
    let id = json!("call-\u{2603}-1");
    client.send(&json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params}));
    let response = client.read_until("the tools/call response", |message| crate::support::is_response_to(message, &id));
    assert_eq!(response["jsonrpc"], "2.0");
    assert_eq!(response["result"], expected, "the relayed result equals the upstream's");
}

/// The `paginated` fixture: three upstream pages become one, and every tool keeps what it said (vendor spellings
/// such as `readOnly` and string booleans stay inside `annotations` next to the explicit hints where they agree
/// with them, and are removed where they contradict them).
#[test]
fn paginated_upstream_is_joined_and_kept() {
    let peer = misbehave("paginated");
    let direct = direct_tools(&peer);
    assert_eq!(direct.len(), 7, "three pages, seven tools: {direct:?}");
    let mut client = RawClient::through_toolgate(&peer);
    client.initialize(with_apps());
    let relayed = relayed_tools(&mut client);
    assert_eq!(relayed.keys().collect::<Vec<_>>(), direct.keys().collect::<Vec<_>>());
    for (name, original) in &direct {
        assert_lossless(original, &relayed[name]);
    }
    assert_eq!(relayed["read_config"]["annotations"]["readOnly"], true, "the vendor spelling survives");
    assert_eq!(relayed["wipe_cache"]["annotations"]["destructive"], true);
    assert_eq!(relayed["wipe_cache"]["annotations"]["destructiveHint"], true, "a declared destruction is kept");
    assert!(relayed["lookup_user"]["annotations"]["readOnlyHint"].is_boolean(), "a string boolean became a boolean");
    assert_eq!(relayed["long_export"]["vendorExtension"], json!({"kept": true}));
    assert_eq!(relayed["create_ticket"]["inputSchema"]["$defs"]["ticket"]["required"][0], "summary");
    let no_annotations = &relayed["no_annotations"]["_meta"][crate::META_KEY]["sources"];
    assert!(HINTS.iter().all(|hint| no_annotations[hint] != "declared"), "nothing was declared: {no_annotations}");
}
