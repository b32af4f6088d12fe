//! Issue 12: the 2026-07-28 surface toward clients that needs no MRTR, through the in-process gateway served over
//! Streamable HTTP on loopback (and, where stdio differs, through a stdio-kind session): `subscriptions/listen`
//! (acknowledgement, filter, tagging, `list_changed` from every upstream, resource updates), the per-request
//! `logLevel`, the `Mcp-Name` and `Mcp-Param-*` header checks on a prefixed tool, the one-request sessions of
//! modern requests beside legacy sessions' places, and a modern request on a stdio session never being sent a
//! request by the server, and a passed-through upstream never seen beside toolgate's own names, even while a reload
//! restarts it. Upstreams are `misbehave.py` in the `relist`, `hostile-relay`, `tool-faults` and `stubborn` modes.
//!
//! Waits are hang guards; nothing asserts how long anything took.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::net::SocketAddr;
use std::time::Duration;

use base64::Engine as _;
use serde_json::{Value, json};
use toolgate_proxy::Gateway;
use toolgate_proxy::session::{ClientBound, SessionFactory};
use toolgate_spec::{HttpListenerSpec, Limits};

use support::{Client, Elicit, FixtureLog, GUARD, start, upstream};

const MODERN: &str = "2026-07-28";

/// Serves the MCP endpoint of `gateway` on loopback; returns its URL.
async fn serve(gateway: &Gateway, limits: &Limits) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr: SocketAddr = listener.local_addr().unwrap();
    let spec = HttpListenerSpec {
        bind: addr,
        path: "/mcp".into(),
        allowed_origins: Vec::new(),
        allowed_hosts: Vec::new(),
        oauth: None,
    };
    let factory: std::sync::Arc<dyn SessionFactory> = std::sync::Arc::new(gateway.clone());
    let router = toolgate_proxy::downstream::http::router(factory, &spec, limits, &[]);
    tokio::spawn(toolgate_proxy::downstream::http::serve(listener, router, std::future::pending()));
    format!("http://{addr}/mcp")
}

/// An HTTP client for loopback (no proxy; rustls's provider installed once for the process).
fn http() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder().no_proxy().build().unwrap()
}

/// The `_meta` of a modern request, with `extra` keys added.
fn meta(extra: Value) -> Value {
    let mut meta = json!({
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {},
    });
    for (key, value) in extra.as_object().cloned().unwrap_or_default() {
        meta[key] = value;
    }
    meta
}

/// POSTs a modern request with its routing headers (`Mcp-Name` from the body) and `extra` headers.
async fn post(url: &str, id: Value, method: &str, mut params: Value, extra: &[(&str, &str)]) -> reqwest::Response {
    if params.get("_meta").is_none() {
        params["_meta"] = meta(json!({}));
    }
    let name = params.get("name").or_else(|| params.get("uri")).and_then(Value::as_str).map(str::to_owned);
    let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
    let mut request = http()
        .post(url)
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .header("mcp-protocol-version", MODERN)
        .header("mcp-method", method);
    if let Some(name) = name.filter(|_| !extra.iter().any(|(header, _)| header.eq_ignore_ascii_case("mcp-name"))) {
        request = request.header("mcp-name", name);
    }
    for (header, value) in extra {
        request = request.header(*header, *value);
    }
    request.body(body.to_string()).send().await.unwrap()
}

/// Reads JSON-RPC messages from a response, JSON or SSE, as they arrive.
struct Messages {
    response: reqwest::Response,
    buffer: String,
    sse: bool,
    done: bool,
}

impl Messages {
    fn new(response: reqwest::Response) -> Messages {
        let sse = response.headers().get("content-type").is_some_and(|value| value.as_bytes() == b"text/event-stream");
        Messages { response, buffer: String::new(), sse, done: false }
    }

    /// The next message, or `None` when the body ended or nothing came within `wait`.
    async fn next(&mut self, wait: Duration) -> Option<Value> {
        loop {
            if let Some(message) = self.take() {
                return Some(message);
            }
            if self.done {
                return None;
            }
            match tokio::time::timeout(wait, self.response.chunk()).await {
                Ok(Ok(Some(chunk))) => self.buffer.push_str(&String::from_utf8_lossy(&chunk)),
                Ok(_) => self.done = true,
                Err(_) => return None,
            }
        }
    }

    fn take(&mut self) -> Option<Value> {
        if !self.sse {
            return (self.done && !self.buffer.is_empty())
                .then(|| serde_json::from_str(&std::mem::take(&mut self.buffer)).unwrap());
        }
        while let Some(end) = self.buffer.find("\n\n") {
            let event: String = self.buffer.drain(..end + 2).collect();
            let data: String = event.lines().filter_map(|line| line.strip_prefix("data:")).map(str::trim).collect();
            if !data.is_empty() {
                return Some(serde_json::from_str(&data).unwrap());
            }
        }
        None
    }

    /// Every message until the body ends.
    async fn all(mut self) -> Vec<Value> {
        let mut messages = Vec::new();
        while let Some(message) = self.next(GUARD).await {
            messages.push(message);
        }
        assert!(self.done, "the body did not end within the hang guard: {messages:?}");
        messages
    }

    /// Waits for the first message `predicate` accepts; fails the test if none comes.
    async fn wait_for(&mut self, what: &str, seen: &mut Vec<Value>, predicate: impl Fn(&Value) -> bool) -> Value {
        loop {
            let message = self.next(GUARD).await.unwrap_or_else(|| panic!("never saw {what}; saw {seen:?}"));
            seen.push(message.clone());
            if predicate(&message) {
                return message;
            }
        }
    }
}

fn subscription_of(message: &Value) -> &Value {
    &message["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listen_hears_only_the_kinds_it_asked_for_from_every_upstream_tagged_with_its_id() {
    let relist = upstream("relist", "relist", GUARD, None);
    let hostile = upstream("hostile", "hostile-relay", GUARD, None);
    let watch = upstream("watch", "subscriptions", GUARD, None);
    let gateway = start(vec![relist, hostile, watch], Limits::default()).await;
    let url = serve(&gateway, &Limits::default()).await;

    let discovered = Messages::new(post(&url, json!(1), "server/discover", json!({}), &[]).await).all().await;
    let capabilities = &discovered[0]["result"]["capabilities"];
    assert_eq!(capabilities["tools"]["listChanged"], true, "{capabilities}");
    assert_eq!(capabilities["resources"]["subscribe"], true, "{capabilities}");

    // Over HTTP: one listen for tools and a resource, another for prompts; over stdio, one for tools.
    let tools_filter = json!({"toolsListChanged": true, "resourceSubscriptions": ["notes://watched/1", "notes://shared/1", "nowhere://x"]});
    let tools_listen =
        post(&url, json!("tools-listen"), "subscriptions/listen", json!({"notifications": tools_filter}), &[]);
    let mut tools_listen = Messages::new(tools_listen.await);
    let prompts_filter = json!({"notifications": {"promptsListChanged": true}});
    let mut prompts_listen = Messages::new(post(&url, json!(7), "subscriptions/listen", prompts_filter, &[]).await);
    let mut stdio = Client::connect(&gateway).await;
    let stdio_filter = json!({"notifications": {"toolsListChanged": true}, "_meta": meta(json!({}))});
    stdio.send(json!("stdio-listen"), "subscriptions/listen", stdio_filter);

    let (mut tools_seen, mut prompts_seen) = (Vec::new(), Vec::new());
    let ack = tools_listen.wait_for("the acknowledgement", &mut tools_seen, |_| true).await;
    assert_eq!(ack["method"], "notifications/subscriptions/acknowledged", "the acknowledgement comes first: {ack}");
    assert_eq!(subscription_of(&ack), "tools-listen");
    // A URI is honoured only when an upstream that declared `resources.subscribe` serves it (the hostile upstream
    // lists notes://shared/1 but cannot subscribe; nobody serves nowhere://x).
    let honoured = &ack["params"]["notifications"];
    assert_eq!(*honoured, json!({"toolsListChanged": true, "resourceSubscriptions": ["notes://watched/1"]}));
    assert_eq!(ack["params"]["_meta"]["toolgate/notSubscribed"], json!(["notes://shared/1", "nowhere://x"]), "{ack}");
    let ack = prompts_listen.wait_for("the acknowledgement", &mut prompts_seen, |_| true).await;
    assert_eq!(ack["method"], "notifications/subscriptions/acknowledged");
    assert_eq!(subscription_of(&ack), 7);
    let stdio_ack = stdio
        .wait_for("the stdio acknowledgement", |m| m["method"] == "notifications/subscriptions/acknowledged")
        .await;
    assert_eq!(subscription_of(&stdio_ack), "stdio-listen", "{stdio_ack}");

    // One upstream changes its tools and prompts; the other announces a resource update.
    let changed =
        post(&url, json!(2), "tools/call", json!({"name": "relist_change", "arguments": {"what": "both"}}), &[]);
    Messages::new(changed.await).all().await;
    let tools = tools_listen
        .wait_for("tools/list_changed", &mut tools_seen, |m| m["method"] == "notifications/tools/list_changed")
        .await;
    assert_eq!(subscription_of(&tools), "tools-listen");
    let prompts = prompts_listen
        .wait_for("prompts/list_changed", &mut prompts_seen, |m| m["method"] == "notifications/prompts/list_changed")
        .await;
    assert_eq!(subscription_of(&prompts), 7);
    // The stdio session was opened with a legacy handshake too: it also hears the change unsolicited, untagged.
    stdio
        .wait_for("stdio tools/list_changed on the listen", |m| {
            m["method"] == "notifications/tools/list_changed" && *subscription_of(m) == "stdio-listen"
        })
        .await;

    // The upstream announces an update only once the listen's subscription reached it (sent without waiting).
    let update = json!({"name": "watch_touch", "arguments": {"uri": "notes://watched/1"}});
    for attempt in 0.. {
        let touched =
            Messages::new(post(&url, json!(300 + attempt), "tools/call", update.clone(), &[]).await).all().await;
        if touched.last().unwrap()["result"]["content"][0]["text"] == "announced 1" {
            break;
        }
        assert!(attempt < 600, "the listen's subscription never reached the upstream: {touched:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let updated = tools_listen
        .wait_for("resources/updated", &mut tools_seen, |m| m["method"] == "notifications/resources/updated")
        .await;
    assert_eq!(updated["params"]["uri"], "notes://watched/1");
    assert_eq!(subscription_of(&updated), "tools-listen");

    // By now every list_changed of the change was offered to every listen: none leaked past a filter.
    for message in &tools_seen {
        assert_ne!(message["method"], "notifications/prompts/list_changed", "{tools_seen:?}");
        assert!(message["method"].as_str().is_some_and(|m| m.starts_with("notifications/")), "{message}");
        assert_eq!(subscription_of(message), "tools-listen", "{message}");
    }
    let prompts_rest = prompts_listen.next(Duration::from_millis(300)).await;
    assert!(prompts_rest.is_none(), "the prompts listen heard more: {prompts_rest:?}");
    assert_eq!(heard_on_listen(&stdio, "notifications/prompts/list_changed"), 0, "{}", stdio.everything());

    // stdio: the client cancels its listen; no answer comes for it, and the next change is not delivered to it.
    stdio.deliver(
        json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "stdio-listen"}}),
    );
    let again = json!({"name": "relist_change", "arguments": {"what": "describe"}});
    Messages::new(post(&url, json!(4), "tools/call", again, &[]).await).all().await;
    tools_listen
        .wait_for("the second tools/list_changed", &mut tools_seen, |m| {
            m["method"] == "notifications/tools/list_changed"
        })
        .await;
    stdio.receive_until_quiet(Duration::from_millis(300)).await;
    let heard = heard_on_listen(&stdio, "notifications/tools/list_changed");
    assert_eq!(heard, 1, "a cancelled listen hears nothing more: {}", stdio.everything());
    assert_eq!(stdio.stashed_responses(&json!("stdio-listen")), 0);
}

/// How many `method` notifications the stdio client received as messages of its listen `stdio-listen`.
fn heard_on_listen(client: &Client, method: &str) -> usize {
    client
        .all
        .iter()
        .filter(|bound| {
            matches!(bound, ClientBound::Related { request_id, message }
                if *request_id == "stdio-listen" && message["method"] == method)
        })
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_modern_request_hears_log_lines_only_at_or_above_the_level_it_asked_for() {
    let gateway = start(vec![upstream("faulty", "tool-faults", GUARD, None)], Limits::default()).await;
    let url = serve(&gateway, &Limits::default()).await;
    let call = |id: u64, line_level: &str, wanted: Option<&str>| {
        let extra = wanted.map_or(json!({}), |level| json!({"io.modelcontextprotocol/logLevel": level}));
        let params = json!({"name": "faulty_log", "arguments": {"text": "a line", "level": line_level},
                            "_meta": meta(extra)});
        let url = url.clone();
        async move { Messages::new(post(&url, json!(id), "tools/call", params, &[]).await).all().await }
    };
    let logs = |messages: &[Value]| messages.iter().filter(|m| m["method"] == "notifications/message").count();

    let below = call(1, "info", Some("warning")).await;
    assert_eq!(logs(&below), 0, "an info line below warning: {below:?}");
    assert_eq!(below.last().unwrap()["result"]["content"][0]["text"], "logged", "{below:?}");
    let above = call(2, "error", Some("warning")).await;
    assert_eq!(logs(&above), 1, "an error line at warning: {above:?}");
    let at = call(3, "warning", Some("warning")).await;
    assert_eq!(logs(&at), 1, "a warning line at warning: {at:?}");
    let unasked = call(4, "emergency", None).await;
    assert_eq!(logs(&unasked), 0, "no level asked, no log lines: {unasked:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn routing_headers_of_a_prefixed_tool_must_agree_with_its_body() {
    let gateway = start(vec![upstream("faulty", "tool-faults", GUARD, None)], Limits::default()).await;
    let url = serve(&gateway, &Limits::default()).await;
    let listed = Messages::new(post(&url, json!(1), "tools/list", json!({}), &[]).await).all().await;
    let tools = listed[0]["result"]["tools"].as_array().unwrap().clone();
    let routed = tools.iter().find(|tool| tool["name"] == "faulty_routed").expect("the prefixed tool is listed");
    // The exposed schema keeps the upstream's annotations: the header names a property, never the tool.
    assert_eq!(routed["inputSchema"]["properties"]["region"]["x-mcp-header"], "Region", "{routed}");

    let arguments = json!({"name": "faulty_routed", "arguments": {"region": "eu-west", "count": 42}});
    let call = |id: u64, headers: Vec<(&'static str, String)>| {
        let (url, arguments) = (url.clone(), arguments.clone());
        async move {
            let headers: Vec<(&str, &str)> = headers.iter().map(|(name, value)| (*name, value.as_str())).collect();
            let response = post(&url, json!(id), "tools/call", arguments, &headers).await;
            let status = response.status().as_u16();
            (status, Messages::new(response).all().await.pop().unwrap())
        }
    };
    let good = || vec![("Mcp-Param-Region", "eu-west".to_owned()), ("Mcp-Param-Count", "42".to_owned())];

    let (status, answer) = call(1, good()).await;
    assert_eq!((status, answer["result"]["content"][0]["text"].as_str()), (200, Some("routed eu-west 42")), "{answer}");
    let encoded = base64::engine::general_purpose::STANDARD.encode("faulty_routed");
    let mut named = good();
    named.push(("Mcp-Name", format!("=?base64?{encoded}?=")));
    let (status, answer) = call(2, named).await;
    assert_eq!(status, 200, "a base64 Mcp-Name that decodes to the name: {answer}");
    let numeric = vec![("Mcp-Param-Region", "=?base64?ZXUtd2VzdA==?=".to_owned()), ("Mcp-Param-Count", "42.0".into())];
    assert_eq!(call(3, numeric).await.0, 200, "an encoded string and a numerically equal integer");

    let other_name = base64::engine::general_purpose::STANDARD.encode("faulty_echo");
    let mut wrong_name = good();
    wrong_name.push(("Mcp-Name", format!("=?base64?{other_name}?=")));
    let refusals = [
        ("a base64 Mcp-Name naming another tool", wrong_name),
        ("another count", vec![good()[0].clone(), ("Mcp-Param-Count", "43".to_owned())]),
        ("a missing Mcp-Param header", vec![good()[0].clone()]),
        ("a malformed base64 value", vec![good()[1].clone(), ("Mcp-Param-Region", "=?base64?***?=".to_owned())]),
    ];
    for (id, (what, headers)) in (10..).zip(refusals) {
        let (status, answer) = call(id, headers).await;
        assert_eq!((status, answer["error"]["code"].as_i64()), (400, Some(-32020)), "{what}: {answer}");
        assert_eq!(answer["id"], id, "{what}: the error echoes the id");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn modern_requests_take_no_place_of_a_legacy_session() {
    let limits = Limits { max_sessions: 2, max_sessions_per_caller: 2, ..Limits::default() };
    let gateway = start(vec![upstream("relist", "relist", GUARD, None)], limits.clone()).await;
    let url = serve(&gateway, &limits).await;
    let open_legacy = |id: u64| {
        let url = url.clone();
        async move {
            let init = json!({"jsonrpc": "2.0", "id": id, "method": "initialize", "params": {
                "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "tests", "version": "0"}}});
            http()
                .post(&url)
                .header("accept", "application/json, text/event-stream")
                .header("content-type", "application/json")
                .body(init.to_string())
                .send()
                .await
                .unwrap()
                .status()
        }
    };
    assert_eq!(open_legacy(1).await, 200);
    // Two long-lived modern requests are open while the second legacy session asks for its place.
    let mut listens = Vec::new();
    for id in 0..2 {
        let filter = json!({"notifications": {"toolsListChanged": true}});
        let mut listen = Messages::new(post(&url, json!(id), "subscriptions/listen", filter, &[]).await);
        listen.wait_for("the acknowledgement", &mut Vec::new(), |_| true).await;
        listens.push(listen);
    }
    assert_eq!(open_legacy(2).await, 200, "the second legacy session finds its place");
    let listed = Messages::new(post(&url, json!(9), "tools/list", json!({}), &[]).await).all().await;
    assert!(listed[0]["result"]["tools"].is_array(), "a modern request beside full legacy places: {listed:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_modern_request_on_a_stdio_session_is_never_sent_a_request_whatever_the_session_declared() {
    let log = FixtureLog::new();
    let gateway = start(vec![upstream("faulty", "tool-faults", GUARD, Some(&log.path))], Limits::default()).await;
    // A legacy handshake declared elicitation for the session; the modern request declares nothing.
    let mut client = Client::connect_with(&gateway, Elicit::Hold).await;
    let params = json!({"name": "faulty_ask_then_cancel", "arguments": {"keep": true}, "_meta": meta(json!({}))});
    let answer = client.request(json!("modern"), "tools/call", params).await;
    // What the request did not declare fails its call (-32021) rather than reaching the client (`bridge`); this tool
    // withdraws its question and answers at once, so its answer may come first (the question is refused all the
    // same).
    if answer.get("error").is_some() {
        assert_eq!(answer["error"]["code"], -32021, "{answer}");
        assert_eq!(answer["error"]["data"]["requiredCapabilities"], json!({"elicitation": {"form": {}}}), "{answer}");
    } else {
        assert_eq!(answer["result"]["content"][0]["text"], "asked 1", "{answer}");
    }
    let refused = log
        .wait_for("the upstream's elicitation answered", |entry| {
            entry["id"].as_str().is_some_and(|id| id.starts_with("ask-")) && entry.get("error").is_some()
        })
        .await;
    let why = refused["error"]["message"].as_str().unwrap();
    assert!(why.contains("did not declare") || why.contains("has ended"), "{refused}");
    client.receive_until_quiet(Duration::from_millis(200)).await;
    assert!(client.elicitations.is_empty(), "the modern request was asked: {:?}", client.elicitations);

    // The same session's legacy request is still asked, as its handshake declared.
    client.start_call(json!("legacy"), "faulty_ask_then_cancel", json!({"keep": true}));
    client.response(&json!("legacy")).await;
    client.receive_until_quiet(Duration::from_millis(200)).await;
    assert_eq!(client.elicitations.len(), 1, "the legacy request's elicitation reaches the client");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_passed_through_upstream_is_seen_with_its_own_names_and_no_name_of_toolgates() {
    let mut relist = upstream("relist", "relist", GUARD, None);
    relist.prefix = toolgate_spec::Prefix::Passthrough;
    let gateway = start(vec![relist], Limits::default()).await;
    let mut client = Client::connect(&gateway).await;
    let tools: Vec<Value> = client.tools().await.iter().map(|tool| tool["name"].clone()).collect();
    assert_eq!(tools, [json!("update_record"), json!("read_records"), json!("change")], "the upstream's own names");
    let prompts = client.request(json!("prompts"), "prompts/list", json!({})).await;
    let names: Vec<&Value> = prompts["result"]["prompts"].as_array().unwrap().iter().map(|p| &p["name"]).collect();
    assert_eq!(names, [&json!("summarize")], "no toolgate_safety beside the upstream's prompts: {prompts}");
    let answer = client.call(json!("call"), "read_records", json!({})).await;
    assert_eq!(answer["result"]["content"][0]["text"], "called read_records", "{answer}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_passed_through_upstream_restarting_never_brings_toolgates_names_back() {
    let mut stubborn = upstream("stubborn", "stubborn", GUARD, None);
    stubborn.prefix = toolgate_spec::Prefix::Passthrough;
    let gateway = start(vec![stubborn.clone()], Limits::default()).await;
    let mut client = Client::connect(&gateway).await;
    // A reload changes its settings: it is withdrawn and restarted, and the old process (which ignores its stdin
    // closing and SIGTERM) holds the restart until it is killed, so there is a while with no upstream running.
    let mut changed = stubborn.clone();
    if let toolgate_spec::Endpoint::Stdio { env, .. } = &mut changed.endpoint {
        env.push(("TOOLGATE_TEST_RELOADED".into(), "1".into()));
    }
    let reloading = gateway.clone();
    let reload = tokio::spawn(async move { reloading.reload_upstreams(&[changed]).await });
    let mut listed = 0;
    let mut id = 0;
    loop {
        let finished = reload.is_finished();
        id += 1;
        let prompts = client.request(json!(id), "prompts/list", json!({})).await;
        assert!(
            !prompts.to_string().contains("toolgate_safety"),
            "toolgate's prompt beside a passed-through upstream: {prompts}"
        );
        id += 1;
        let safety = client.request(json!(id), "prompts/get", json!({"name": "toolgate_safety"})).await;
        assert!(
            safety.get("error").is_some() || safety["result"]["messages"].is_null(),
            "toolgate answered its own prompt: {safety}"
        );
        listed += 1;
        if finished {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(listed > 1, "the listing was never read while the reload ran");
    reload.await.unwrap();
    gateway.shutdown().await;
}
