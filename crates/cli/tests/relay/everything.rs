//! The MCP Python SDK (`ClientSession`) talking to server-everything through toolgate: the listing with explicit
//! hints and toolgate's `_meta` record, a plain call, elicitation (accepted and declined), sampling, progress,
//! cancellation and a `list_changed` the server sends on demand.
//!
//! Each check runs `relay_clients/everything.py --scenario NAME` and asserts on the JSON it prints; the check
//! functions take the transport so the same scenario runs over stdio and Streamable HTTP.

use serde_json::Value;
use toolgate_test_support::Peers;

use crate::support::{Via, python_via};

fn scenario(name: &str, via: Via) -> Value {
    let peer = Peers::locate().server_everything();
    python_via("everything.py", &["--scenario", name], &peer, via)
}

fn texts(findings: &Value) -> Vec<&str> {
    findings["texts"].as_array().expect("texts is an array").iter().filter_map(Value::as_str).collect()
}

/// Every tool carries the four hints explicitly and toolgate's `_meta` record; the rest of each definition survives.
pub(crate) fn tools_list(via: Via) {
    let findings = scenario("list", via);
    assert!(findings["nextCursor"].is_null(), "toolgate serves one page: {findings}");
    let tools = findings["tools"].as_array().expect("tools is an array");
    let names: Vec<&str> = tools.iter().filter_map(|tool| tool["name"].as_str()).collect();
    for expected in ["echo", "get-sum", "trigger-long-running-operation", "toggle-simulated-logging"] {
        assert!(names.contains(&expected), "{expected} is listed: {names:?}");
    }
    for tool in tools {
        crate::assert_explicit_hints(tool);
        crate::assert_toolgate_record(tool);
    }
    let echo = tools.iter().find(|tool| tool["name"] == "echo").expect("echo is listed");
    assert_eq!(echo["title"], "Echo Tool");
    assert_eq!(echo["execution"]["taskSupport"], "forbidden", "execution survives: {echo}");
    assert_eq!(echo["inputSchema"]["required"][0], "message");
    // A tool that declares itself writing is never relayed as read-only.
    let toggle = tools.iter().find(|tool| tool["name"] == "toggle-simulated-logging").expect("toggle is listed");
    assert_eq!(toggle["annotations"]["readOnlyHint"], false, "{toggle}");
}

pub(crate) fn echo(via: Via) {
    let findings = scenario("echo", via);
    assert_eq!(texts(&findings), ["Echo: hello through toolgate"], "{findings}");
    assert_eq!(findings["isError"], false);
}

/// The server's `elicitation/create` reaches the client's callback; the accepted content reaches the server.
pub(crate) fn elicitation_accepted(via: Via) {
    let findings = scenario("elicit-accept", via);
    assert_eq!(findings["listed"], true, "the elicitation tool is listed: {findings}");
    let elicitations = findings["elicitations"].as_array().expect("elicitations is an array");
    assert_eq!(elicitations.len(), 1, "one elicitation reached the client: {findings}");
    // Relayed with the asking upstream's label, so it cannot pass for toolgate's own question.
    let message = elicitations[0]["message"].as_str().unwrap_or_default();
    assert!(
        message.starts_with("[upstream \"")
            && message.ends_with(" asks] Please provide inputs for the following fields:"),
        "{message}"
    );
    assert_eq!(elicitations[0]["requestedSchema"]["required"][0], "name");
    assert_eq!(findings["isError"], false);
    let all = texts(&findings).join("\n");
    assert!(all.contains("User provided the requested information"), "{all}");
    assert!(all.contains("- Name: Ada Lovelace"), "{all}");
    assert!(all.contains("- Agreed to terms: true"), "{all}");
    assert!(all.contains("- Favorite Integer: 7"), "{all}");
}

pub(crate) fn elicitation_declined(via: Via) {
    let findings = scenario("elicit-decline", via);
    assert_eq!(findings["elicitations"].as_array().map(Vec::len), Some(1), "{findings}");
    let all = texts(&findings).join("\n");
    assert!(all.contains("User declined to provide the requested information"), "{all}");
    assert!(all.contains("\"action\": \"decline\""), "{all}");
    assert!(!all.contains("Ada Lovelace"), "{all}");
}

/// The server's `sampling/createMessage` reaches the client's callback and the answer comes back.
pub(crate) fn sampling(via: Via) {
    let findings = scenario("sampling", via);
    assert_eq!(findings["listed"], true, "the sampling tool is listed: {findings}");
    let requests = findings["requests"].as_array().expect("requests is an array");
    assert_eq!(requests.len(), 1, "{findings}");
    assert_eq!(requests[0]["systemPrompt"], "You are a helpful test server.");
    assert_eq!(requests[0]["maxTokens"], 20);
    let prompt = requests[0]["messages"][0]["content"]["text"].as_str().unwrap_or_default();
    assert!(prompt.contains("say hi"), "{prompt}");
    let all = texts(&findings).join("\n");
    assert!(all.contains("sampled by the relay test") && all.contains("relay-test-model"), "{all}");
}

/// Progress notifications reach the client's callback (the SDK matches them by its own token).
pub(crate) fn progress(via: Via) {
    let findings = scenario("progress", via);
    let progress: Vec<(f64, f64)> = findings["progress"]
        .as_array()
        .expect("progress is an array")
        .iter()
        .map(|item| (item["progress"].as_f64().unwrap_or(-1.0), item["total"].as_f64().unwrap_or(-1.0)))
        .collect();
    // In order and each with its total. (That the last one is never lost to the response overtaking it is checked
    // in `progress_order`.)
    assert!(!progress.is_empty(), "no progress reached the callback: {findings}");
    assert_eq!(progress, [(1.0, 4.0), (2.0, 4.0), (3.0, 4.0), (4.0, 4.0)][..progress.len()], "{findings}");
    assert!(texts(&findings)[0].starts_with("Long running operation completed"), "{findings}");
}

/// A cancelled call ends on the client's side, and the session keeps working afterwards.
pub(crate) fn cancellation(via: Via) {
    let findings = scenario("cancel", via);
    assert_eq!(findings["long_call"], "cancelled", "{findings}");
    assert!(findings["progress_before_cancel"].as_u64().unwrap_or(0) >= 1, "{findings}");
    assert_eq!(findings["echo_after_cancel"][0], "Echo: still alive", "{findings}");
    assert!(findings["tools_after_cancel"].as_u64().unwrap_or(0) > 0, "{findings}");
    let second = findings["second_call"][0].as_str().unwrap_or_default();
    assert!(second.starts_with("Long running operation completed"), "{findings}");
    // The second call's progress reaches its own callback, in order (none of the cancelled call's).
    let second_progress = findings["second_call_progress"].as_array().expect("second_call_progress");
    assert!(!second_progress.is_empty(), "{findings}");
    assert_eq!(second_progress[..], [serde_json::json!(1.0), serde_json::json!(2.0)][..second_progress.len()]);
}

/// server-everything registers a session resource during a call and says `resources/list_changed`; the client
/// hears it and a re-list (and a read) through toolgate shows the new resource.
pub(crate) fn resources_list_changed(via: Via) {
    let findings = scenario("list-changed", via);
    assert_eq!(findings["listed_before"], false, "{findings}");
    assert_eq!(findings["call_content_types"][0], "resource_link", "{findings}");
    let notifications: Vec<&str> =
        findings["notifications"].as_array().expect("notifications").iter().filter_map(Value::as_str).collect();
    assert!(notifications.contains(&"notifications/resources/list_changed"), "{findings}");
    assert_eq!(findings["listed_after_notification"], true, "{findings}");
    let read = &findings["read"][0];
    assert_eq!(read["uri"], findings["uri"]);
    assert_eq!(read["mimeType"], "application/gzip");
    assert_eq!(read["hasBlob"], true);
}

#[test]
fn tools_list_over_stdio() {
    tools_list(Via::Stdio);
}

#[test]
fn echo_over_stdio() {
    echo(Via::Stdio);
}

#[test]
fn elicitation_accepted_over_stdio() {
    elicitation_accepted(Via::Stdio);
}

#[test]
fn elicitation_declined_over_stdio() {
    elicitation_declined(Via::Stdio);
}

#[test]
fn sampling_over_stdio() {
    sampling(Via::Stdio);
}

#[test]
fn progress_over_stdio() {
    progress(Via::Stdio);
}

#[test]
fn cancellation_over_stdio() {
    cancellation(Via::Stdio);
}

#[test]
fn resources_list_changed_over_stdio() {
    resources_list_changed(Via::Stdio);
}
