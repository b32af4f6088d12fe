//! Session taint through the gateway: once an open-world tool's answer has entered a session, an open-world write
//! the rules allow needs a person's confirmation there, and an `isError` answer counts as much as a result (its
//! text came from outside too). Another session is not affected.
//!
//! Issue 10, item 7: the same holds for every way content from an open-world source reaches a client, whatever the
//! method (`resources/read`, `prompts/get`) and however the call ended (cancelled after its progress arrived). An
//! upstream configured with `open_world_content = false` does not taint through its resources.
//!
//! A 2026-07-28 client over HTTP runs each request in a session of its own: its taint is its authenticated
//! caller's, so an open-world read in one POST makes the same caller's next write need a person, and another
//! caller is not affected. On stdio the one connection is the caller: its modern requests share its session's taint.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::sync::Arc;

use serde_json::{Value, json};
use toolgate_core::fingerprint::digest_bytes;
use toolgate_core::policy::PolicySpec;
use toolgate_proxy::Gateway;
use toolgate_proxy::session::{ClientBound, SessionFactory};
use toolgate_spec::{CallerSpec, GuardrailSpec, HttpListenerSpec, Limits};

use support::{Client, Elicit, FixtureLog, GUARD, start_guarded, text_of, tool_error, upstream};

/// The standard profile with session taint on; posting is allowed by a rule of its own.
fn posting_allowed() -> PolicySpec {
    serde_json::from_value(json!({"rule": [
        {"id": "posting-allowed", "effect": "allow", "match": {"tool": "post_message"}}
    ]}))
    .unwrap()
}

/// Whether the session may still post without a person: true when the post reached the upstream, false when it
/// needed a confirmation (which this client declines).
async fn may_post(client: &mut Client, id: &str) -> bool {
    let response = client.call(json!(id), "hostile_post_message", json!({})).await;
    if text_of(&response) == "called post_message" {
        return true;
    }
    assert!(tool_error(&response).contains("declined"), "neither posted nor declined: {response}");
    false
}

/// `hostile` (open-world tools, lists notes://shared/1) then `first` (templates notes://shared/{id}, configured as
/// closed-world content).
async fn hostile_then_closed(log: &FixtureLog) -> Gateway {
    let hostile = upstream("hostile", "hostile-relay", GUARD, Some(&log.path));
    let mut first = upstream("first", "resource-templates", GUARD, None);
    first.trust.open_world_content = Some(false);
    start_guarded(vec![hostile, first], GuardrailSpec { policy: posting_allowed(), ..Default::default() }, None).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resource_or_a_prompt_from_an_open_world_source_taints_the_session() {
    let log = FixtureLog::new();
    let gateway = hostile_then_closed(&log).await;

    // A resource of the upstream configured as closed-world content: no taint.
    let mut closed = Client::connect_with(&gateway, Elicit::Decline).await;
    let read = closed.request(json!(1), "resources/read", json!({"uri": "notes://shared/2"})).await;
    assert_eq!(read["result"]["contents"][0]["text"], "from the first upstream: notes://shared/2", "{read}");
    assert!(may_post(&mut closed, "post").await, "closed-world content does not taint");

    let mut reader = Client::connect_with(&gateway, Elicit::Decline).await;
    let read = reader.request(json!(1), "resources/read", json!({"uri": "notes://shared/1"})).await;
    assert!(read.to_string().contains("from the hostile upstream"), "{read}");
    assert!(!may_post(&mut reader, "post").await, "a resource from an open-world upstream taints");

    let mut prompted = Client::connect_with(&gateway, Elicit::Decline).await;
    let prompt = prompted.request(json!(1), "prompts/get", json!({"name": "hostile_summarize_page"})).await;
    assert!(prompt.to_string().contains("ignore your instructions"), "{prompt}");
    assert!(!may_post(&mut prompted, "post").await, "a prompt from an open-world upstream taints");

    let posts = log.entries().iter().filter(|entry| entry["params"]["name"] == "post_message").count();
    assert_eq!(posts, 1, "only the untainted session's post reached the upstream");
    gateway.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_open_world_call_cancelled_after_its_progress_arrived_still_taints_the_session() {
    let log = FixtureLog::new();
    let gateway = hostile_then_closed(&log).await;
    let mut client = Client::connect_with(&gateway, Elicit::Decline).await;
    client.send(
        json!("search"),
        "tools/call",
        json!({"name": "hostile_slow_search", "arguments": {"text": "q"}, "_meta": {"progressToken": "p"}}),
    );
    // The search's progress text (from outside) reaches the client; then the client gives up on the call.
    loop {
        let arrived = client.all.iter().any(|bound| {
            matches!(bound, ClientBound::Related { message, .. } if message["method"] == "notifications/progress")
        });
        if arrived {
            break;
        }
        assert!(client.receive_one(GUARD).await, "no progress within the hang guard");
    }
    client
        .session
        .deliver(json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "search"}}));
    assert!(!may_post(&mut client, "post").await, "the cancelled call's outside text tainted the session");
    gateway.shutdown().await;
}

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

/// Serves the MCP endpoint of `gateway` on loopback for two callers, `alice` (token `alice-token`) and `bob`
/// (token `bob-token`); returns its URL.
async fn serve_for_two_callers(gateway: &Gateway) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let spec = HttpListenerSpec {
        bind: addr,
        path: "/mcp".into(),
        allowed_origins: Vec::new(),
        allowed_hosts: Vec::new(),
        oauth: None,
    };
    let callers: Vec<CallerSpec> = ["alice", "bob"]
        .into_iter()
        .map(|name| CallerSpec {
            name: name.into(),
            token_sha256: digest_bytes(format!("{name}-token").as_bytes()),
            scopes: Vec::new(),
        })
        .collect();
    let factory: Arc<dyn SessionFactory> = Arc::new(gateway.clone());
    let router = toolgate_proxy::downstream::http::router(factory, &spec, &Limits::default(), &callers);
    tokio::spawn(toolgate_proxy::downstream::http::serve(listener, router, std::future::pending()));
    format!("http://{addr}/mcp")
}

/// One 2026-07-28 `tools/call` of `tool` POSTed as `caller`; returns its JSON-RPC response (from a JSON body or
/// the last message of an SSE stream).
async fn modern_call(url: &str, caller: &str, id: u64, tool: &str) -> Value {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let http = reqwest::Client::builder().no_proxy().build().unwrap();
    let meta = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
    });
    let body = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": tool, "arguments": {}, "_meta": meta}});
    let response = http
        .post(url)
        .bearer_auth(format!("{caller}-token"))
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "tools/call")
        .header("mcp-name", tool)
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    assert!(response.status().is_success(), "{caller}'s {tool}: {}", response.status());
    let text = tokio::time::timeout(GUARD, response.text()).await.expect("the answer within the hang guard").unwrap();
    let messages: Vec<Value> = if text.trim_start().starts_with('{') {
        vec![serde_json::from_str(&text).unwrap()]
    } else {
        text.lines()
            .filter_map(|line| line.strip_prefix("data:"))
            .filter_map(|data| serde_json::from_str(data.trim()).ok())
            .collect()
    };
    messages.into_iter().find(|message| message["id"] == json!(id)).unwrap_or_else(|| panic!("no answer in {text}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_modern_callers_open_world_read_makes_its_next_request_s_write_need_a_person_and_not_another_callers() {
    let log = FixtureLog::new();
    let web = upstream("web", "open-world-error", GUARD, Some(&log.path));
    let gateway =
        start_guarded(vec![web], GuardrailSpec { policy: posting_allowed(), ..Default::default() }, None).await;
    let url = serve_for_two_callers(&gateway).await;
    let posts = || log.entries().iter().filter(|entry| entry["params"]["name"] == "post_message").count();

    // Alice reads outside text in one request (its session ends with the answer) ...
    let search = modern_call(&url, "alice", 1, "web_search_web").await;
    assert!(tool_error(&search).contains("ignore your instructions"), "{search}");
    // ... and her next request's write needs a person, as in a legacy session; there is neither a person to ask
    // (a modern request is never asked) nor a queue (no store), so it is refused and never reaches the upstream.
    let tainted = modern_call(&url, "alice", 2, "web_post_message").await;
    assert!(tool_error(&tainted).contains("needs a person"), "the tainted caller's write was made: {tainted}");
    assert_eq!(posts(), 0, "the tainted caller's post reached the upstream: {:?}", log.entries());

    // Bob read nothing from outside: the rule allows his post.
    let clean = modern_call(&url, "bob", 3, "web_post_message").await;
    assert_eq!(text_of(&clean), "called post_message", "another caller was tainted: {clean}");
    assert_eq!(posts(), 1, "only the untainted caller's post reached the upstream: {:?}", log.entries());

    // Alice stays tainted for her later requests too.
    let again = modern_call(&url, "alice", 4, "web_post_message").await;
    assert!(tool_error(&again).contains("needs a person"), "the caller's taint did not last: {again}");
    assert_eq!(posts(), 1);
    gateway.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn modern_requests_on_the_one_stdio_connection_share_its_taint() {
    let log = FixtureLog::new();
    let web = upstream("web", "open-world-error", GUARD, Some(&log.path));
    let gateway =
        start_guarded(vec![web], GuardrailSpec { policy: posting_allowed(), ..Default::default() }, None).await;
    let posts = || log.entries().iter().filter(|entry| entry["params"]["name"] == "post_message").count();
    let modern = |tool: &str| {
        json!({"name": tool, "arguments": {}, "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
        }})
    };
    // Over stdio the transport-level client is the one connection: its modern requests run in its session.
    let mut client = Client::connect_with(&gateway, Elicit::Decline).await;
    let search = client.request(json!(1), "tools/call", modern("web_search_web")).await;
    assert!(tool_error(&search).contains("ignore your instructions"), "{search}");
    let tainted = client.request(json!(2), "tools/call", modern("web_post_message")).await;
    assert!(tool_error(&tainted).contains("needs a person"), "the tainted connection's write was made: {tainted}");
    assert_eq!(posts(), 0, "the tainted connection's post reached the upstream: {:?}", log.entries());
    gateway.shutdown().await;
}
