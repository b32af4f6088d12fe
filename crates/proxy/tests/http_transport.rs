//! The Streamable HTTP transport toward clients, driven over loopback with reqwest against a fake session factory.
//!
//! The fake answers `initialize`, echoes `test/echo`, sends a related progress notification before answering
//! `test/slow`, streams `count` notifications for `test/many`, sends an unsolicited notification for
//! `test/unsolicited`, never answers `test/hang`, and records every delivered message and every close. These tests
//! check the transport's framing and session rules only; they never reach a real gateway or the network.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot};
use toolgate_proxy::downstream::http;
use toolgate_proxy::session::{Caller, ClientBound, ClientSession, SessionFactory, TransportKind};
use toolgate_spec::{HttpListenerSpec, Limits};

const BOTH: &str = "application/json, text/event-stream";

/// What the test can see of one fake session.
struct Probe {
    id: String,
    closed: AtomicBool,
    delivered: Mutex<Vec<Value>>,
    version: Mutex<Option<String>>,
    sender: mpsc::Sender<ClientBound>,
}

impl Probe {
    async fn send(&self, message: ClientBound) {
        let _ = self.sender.send(message).await;
    }

    async fn answer(self: Arc<Self>, message: Value) {
        let (Some(id), Some(method)) = (message.get("id").cloned(), message["method"].as_str()) else {
            return;
        };
        let params = message.get("params").cloned().unwrap_or(Value::Null);
        let respond = |result: Value| ClientBound::Response {
            request_id: id.clone(),
            message: json!({"jsonrpc": "2.0", "id": id, "result": result}),
        };
        let progress = |n: u64| ClientBound::Related {
            request_id: id.clone(),
            message: json!({"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progress": n}}),
        };
        let delay = Duration::from_millis(params["delayMs"].as_u64().unwrap_or(0));
        match method {
            "initialize" if params["fail"] == true => {
                let error = json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32602, "message": "no"}});
                self.send(ClientBound::Response { request_id: id.clone(), message: error }).await;
            }
            "initialize" => {
                let version = params["protocolVersion"].as_str().unwrap_or("2025-11-25").to_owned();
                *self.version.lock().unwrap() = Some(version.clone());
                self.send(respond(
                    json!({"protocolVersion": version, "capabilities": {}, "serverInfo": {"name": "fake"}}),
                ))
                .await;
            }
            "test/echo" => {
                tokio::time::sleep(delay).await;
                self.send(respond(json!({"echo": params}))).await;
            }
            "test/slow" => {
                self.send(progress(1)).await;
                tokio::time::sleep(delay).await;
                self.send(respond(json!({"slow": true}))).await;
            }
            "test/many" => {
                for n in 0..params["count"].as_u64().unwrap_or(1) {
                    self.send(progress(n)).await;
                    tokio::time::sleep(delay).await;
                }
                self.send(respond(json!({"many": true}))).await;
            }
            "test/unsolicited" => {
                let note = json!({"jsonrpc": "2.0", "method": "notifications/message", "params": params});
                self.send(ClientBound::Unsolicited(note)).await;
                self.send(respond(json!({}))).await;
            }
            "test/hang" => {}
            _ => {
                let error =
                    json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32601, "message": "method not found"}});
                self.send(ClientBound::Response { request_id: id.clone(), message: error }).await;
            }
        }
    }
}

struct FakeSession(Arc<Probe>);

impl ClientSession for FakeSession {
    fn id(&self) -> &str {
        &self.0.id
    }

    fn deliver(&self, message: Value) {
        self.0.delivered.lock().unwrap().push(message.clone());
        if !self.0.closed.load(Ordering::SeqCst) {
            tokio::spawn(Arc::clone(&self.0).answer(message));
        }
    }

    fn protocol_version(&self) -> Option<String> {
        self.0.version.lock().unwrap().clone()
    }

    fn close(&self) {
        self.0.closed.store(true, Ordering::SeqCst);
    }
}

#[derive(Default)]
struct FakeFactory {
    probes: Mutex<Vec<Arc<Probe>>>,
    opened: AtomicUsize,
}

impl FakeFactory {
    fn probe(&self, id: &str) -> Arc<Probe> {
        self.probes.lock().unwrap().iter().find(|probe| probe.id == id).cloned().expect("no such session")
    }
}

impl SessionFactory for FakeFactory {
    fn open_session(
        &self,
        transport: TransportKind,
        _caller: Caller,
    ) -> (Box<dyn ClientSession>, mpsc::Receiver<ClientBound>) {
        assert_eq!(transport, TransportKind::Http);
        let n = self.opened.fetch_add(1, Ordering::SeqCst);
        let (sender, receiver) = mpsc::channel(64);
        let probe = Arc::new(Probe {
            id: format!("session-{n}-{}", uuid_like(n)),
            closed: AtomicBool::new(false),
            delivered: Mutex::new(Vec::new()),
            version: Mutex::new(None),
            sender,
        });
        self.probes.lock().unwrap().push(Arc::clone(&probe));
        (Box::new(FakeSession(probe)), receiver)
    }
}

fn uuid_like(n: usize) -> String {
    format!("{:08x}", n.wrapping_mul(2_654_435_761))
}

struct Server {
    url: String,
    addr: SocketAddr,
    factory: Arc<FakeFactory>,
    client: reqwest::Client,
    stop: Option<oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<std::io::Result<()>>,
}

fn spec(addr: SocketAddr) -> HttpListenerSpec {
    HttpListenerSpec {
        allowed_origins: vec!["https://app.example.com".into()],
        allowed_hosts: vec!["gateway.internal".into()],
        ..HttpListenerSpec::new(addr)
    }
}

async fn start(limits: Limits) -> Server {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let factory = Arc::new(FakeFactory::default());
    let router = http::router(Arc::clone(&factory) as Arc<dyn SessionFactory>, &spec(addr), &limits, &[]);
    let (stop, stopped) = oneshot::channel::<()>();
    let task = tokio::spawn(http::serve(listener, router, async move {
        let _ = stopped.await;
    }));
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = reqwest::Client::builder().no_proxy().build().unwrap();
    Server { url: format!("http://{addr}/mcp"), addr, factory, client, stop: Some(stop), task }
}

impl Server {
    fn post(&self, session: Option<&str>, version: Option<&str>, body: &Value) -> reqwest::RequestBuilder {
        self.post_as("application/json", BOTH, session, version, body.to_string())
    }

    fn post_as(
        &self,
        content_type: &str,
        accept: &str,
        session: Option<&str>,
        version: Option<&str>,
        body: String,
    ) -> reqwest::RequestBuilder {
        let mut request =
            self.client.post(&self.url).header("content-type", content_type).header("accept", accept).body(body);
        if let Some(session) = session {
            request = request.header("mcp-session-id", session);
        }
        if let Some(version) = version {
            request = request.header("mcp-protocol-version", version);
        }
        request
    }

    async fn initialize(&self, version: &str) -> String {
        let body = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": version}});
        let response = self.post(None, None, &body).send().await.unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        let id = response.headers()["mcp-session-id"].to_str().unwrap().to_owned();
        let notification = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        let accepted = self.post(Some(&id), Some(version), &notification).send().await.unwrap();
        assert_eq!(accepted.status(), StatusCode::ACCEPTED);
        id
    }

    async fn request(&self, session: &str, version: &str, id: u64, method: &str, params: Value) -> reqwest::Response {
        let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        self.post(Some(session), Some(version), &body).send().await.unwrap()
    }

    fn get(&self, session: &str) -> reqwest::RequestBuilder {
        self.client.get(&self.url).header("accept", "text/event-stream").header("mcp-session-id", session)
    }
}

/// `(id, data)` of every event in an SSE text, comments skipped.
fn events(text: &str) -> Vec<(Option<String>, String)> {
    text.split("\n\n")
        .filter_map(|block| {
            let mut id = None;
            let mut data = None;
            for line in block.lines() {
                if let Some(value) = line.strip_prefix("id:") {
                    id = Some(value.trim().to_owned());
                } else if let Some(value) = line.strip_prefix("data:") {
                    data = Some(value.trim().to_owned());
                }
            }
            data.map(|data| (id, data))
        })
        .collect()
}

/// Reads a streaming body until `predicate` holds for the text so far.
async fn read_until(response: &mut reqwest::Response, predicate: impl Fn(&str) -> bool) -> String {
    let mut text = String::new();
    tokio::time::timeout(Duration::from_secs(5), async {
        while !predicate(&text) {
            let chunk = response.chunk().await.unwrap().expect("stream ended early");
            text.push_str(std::str::from_utf8(&chunk).unwrap());
        }
    })
    .await
    .expect("timed out reading the stream");
    text
}

async fn error_of(response: reqwest::Response) -> (StatusCode, Value) {
    let status = response.status();
    assert_eq!(response.headers()["content-type"], "application/json", "{status}");
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["jsonrpc"], "2.0");
    assert!(body["error"]["message"].is_string(), "{body}");
    (status, body)
}

#[tokio::test]
async fn initialize_opens_a_session_and_requests_take_the_json_fast_path() {
    let server = start(Limits::default()).await;
    let body = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": "2025-11-25"}});
    let response = server.post(None, None, &body).send().await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let session = response.headers()["mcp-session-id"].to_str().unwrap().to_owned();
    assert_eq!(response.headers()["content-type"], "application/json");
    let answer: Value = response.json().await.unwrap();
    assert_eq!(answer["result"]["protocolVersion"], "2025-11-25");
    let probe = server.factory.probe(&session);

    let response = server.request(&session, "2025-11-25", 1, "test/echo", json!({"x": 1})).await;
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(response.headers()["content-type"], "application/json");
    assert!(response.headers().get("mcp-session-id").is_none());
    let answer: Value = response.json().await.unwrap();
    assert_eq!(answer, json!({"jsonrpc": "2.0", "id": 1, "result": {"echo": {"x": 1}}}));

    // server/discover is not the transport's business: delivered like any request, answered by the gateway.
    let response = server.request(&session, "2025-11-25", 2, "server/discover", json!({})).await;
    let answer: Value = response.json().await.unwrap();
    assert_eq!(answer["error"]["code"], -32601);
    let methods: Vec<Value> = probe.delivered.lock().unwrap().iter().map(|message| message["method"].clone()).collect();
    assert_eq!(methods, [json!("initialize"), json!("test/echo"), json!("server/discover")]);
}

#[tokio::test]
async fn a_failed_initialize_forgets_its_session() {
    let server = start(Limits::default()).await;
    let body = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"fail": true}});
    let response = server.post(None, None, &body).send().await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert!(response.headers().get("mcp-session-id").is_none());
    let answer: Value = response.json().await.unwrap();
    assert_eq!(answer["error"]["code"], -32602);
    let probe = server.factory.probes.lock().unwrap()[0].clone();
    assert!(probe.closed.load(Ordering::SeqCst));
    let response = server.request(&probe.id, "2025-11-25", 1, "test/echo", json!({})).await;
    assert_eq!(response.status(), StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn related_messages_switch_to_sse_with_a_priming_event_from_2025_11_25() {
    let server = start(Limits::default()).await;
    let session = server.initialize("2025-11-25").await;
    let response = server.request(&session, "2025-11-25", 5, "test/slow", json!({"delayMs": 20})).await;
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    let events = events(&response.text().await.unwrap());
    assert_eq!(events.len(), 3, "{events:?}");
    assert!(events[0].0.is_some() && events[0].1.is_empty(), "priming event first: {events:?}");
    let progress: Value = serde_json::from_str(&events[1].1).unwrap();
    assert_eq!(progress["method"], "notifications/progress");
    let answer: Value = serde_json::from_str(&events[2].1).unwrap();
    assert_eq!(answer, json!({"jsonrpc": "2.0", "id": 5, "result": {"slow": true}}));
    let ids: std::collections::HashSet<_> = events.iter().map(|event| event.0.clone().unwrap()).collect();
    assert_eq!(ids.len(), 3, "event ids are unique");
}

#[tokio::test]
async fn older_versions_get_sse_without_priming() {
    let server = start(Limits::default()).await;
    let session = server.initialize("2025-06-18").await;
    let response = server.request(&session, "2025-06-18", 5, "test/slow", json!({})).await;
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    let events = events(&response.text().await.unwrap());
    assert_eq!(events.len(), 2, "{events:?}");
    assert!(events.iter().all(|(id, _)| id.is_none()));
    assert_eq!(serde_json::from_str::<Value>(&events[1].1).unwrap()["id"], 5);

    // Without the header the negotiated version decides (2025-06-18 here: still no priming).
    let body = json!({"jsonrpc": "2.0", "id": 6, "method": "test/slow"});
    let response = server.post(Some(&session), None, &body).send().await.unwrap();
    assert_eq!(events_of(response).await.len(), 2);
}

async fn events_of(response: reqwest::Response) -> Vec<(Option<String>, String)> {
    events(&response.text().await.unwrap())
}

#[tokio::test]
async fn notifications_and_responses_get_202_and_are_delivered() {
    let server = start(Limits::default()).await;
    let session = server.initialize("2025-11-25").await;
    let answer = json!({"jsonrpc": "2.0", "id": "server-1", "result": {"action": "accept"}});
    let response = server.post(Some(&session), Some("2025-11-25"), &answer).send().await.unwrap();
    assert_eq!(response.status(), StatusCode::ACCEPTED);
    assert!(response.bytes().await.unwrap().is_empty());
    let delivered = server.factory.probe(&session).delivered.lock().unwrap().clone();
    assert_eq!(delivered[1]["method"], "notifications/initialized");
    assert_eq!(delivered[2], answer);
}

#[tokio::test]
async fn rejections_have_their_status_and_a_json_rpc_error() {
    let server = start(Limits { max_message_bytes: 1000, ..Limits::default() }).await;
    let session = server.initialize("2025-11-25").await;
    let echo = json!({"jsonrpc": "2.0", "id": 1, "method": "test/echo"});

    let (status, _) = error_of(server.post(None, None, &echo).send().await.unwrap()).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "missing session");
    let (status, body) = error_of(server.post(Some("nope"), None, &echo).send().await.unwrap()).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "unknown session");
    assert_eq!(body["id"], Value::Null);
    let (status, _) = error_of(server.post(Some(&session), Some("2024-01-01"), &echo).send().await.unwrap()).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "unsupported version");

    let response = server.client.put(&server.url).header("mcp-session-id", &session).send().await.unwrap();
    assert_eq!(response.headers()["allow"], "GET, POST, DELETE");
    assert_eq!(error_of(response).await.0, StatusCode::METHOD_NOT_ALLOWED);

    let json_only = server.post_as("application/json", "application/json", Some(&session), None, echo.to_string());
    assert_eq!(error_of(json_only.send().await.unwrap()).await.0, StatusCode::NOT_ACCEPTABLE);
    let get_json =
        server.client.get(&server.url).header("accept", "application/json").header("mcp-session-id", &session);
    assert_eq!(error_of(get_json.send().await.unwrap()).await.0, StatusCode::NOT_ACCEPTABLE);

    let text = server.post_as("text/plain", BOTH, Some(&session), None, echo.to_string());
    assert_eq!(error_of(text.send().await.unwrap()).await.0, StatusCode::UNSUPPORTED_MEDIA_TYPE);

    let big = json!({"jsonrpc": "2.0", "id": 1, "method": "test/echo", "params": {"pad": "x".repeat(2000)}});
    assert_eq!(
        error_of(server.post(Some(&session), None, &big).send().await.unwrap()).await.0,
        StatusCode::PAYLOAD_TOO_LARGE
    );

    let malformed = server.post_as("application/json", BOTH, Some(&session), None, "{\"jsonrpc\":".into());
    let (status, body) = error_of(malformed.send().await.unwrap()).await;
    assert_eq!(
        (status, body["error"]["code"].clone(), body["id"].clone()),
        (StatusCode::BAD_REQUEST, json!(-32700), Value::Null)
    );
    let batch = json!([echo.clone()]);
    let (status, body) = error_of(server.post(Some(&session), None, &batch).send().await.unwrap()).await;
    assert_eq!((status, body["error"]["code"].clone()), (StatusCode::BAD_REQUEST, json!(-32600)));

    let no_session = server.client.get(&server.url).header("accept", "text/event-stream");
    assert_eq!(error_of(no_session.send().await.unwrap()).await.0, StatusCode::BAD_REQUEST);
    assert_eq!(error_of(server.get("nope").send().await.unwrap()).await.0, StatusCode::NOT_FOUND);
    let first = server.get(&session).send().await.unwrap();
    assert_eq!(first.status(), StatusCode::OK);
    assert_eq!(error_of(server.get(&session).send().await.unwrap()).await.0, StatusCode::CONFLICT);
    drop(first);

    let wrong_path = server.client.post(format!("http://{}/other", server.addr)).send().await.unwrap();
    assert_eq!(wrong_path.status(), StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn foreign_hosts_and_origins_are_forbidden() {
    let server = start(Limits::default()).await;
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {}});
    let (status, body) =
        error_of(server.post(None, None, &init).header("host", "evil.example").send().await.unwrap()).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert_eq!(body["id"], Value::Null);
    let evil_origin = server.post(None, None, &init).header("origin", "http://evil.example");
    assert_eq!(error_of(evil_origin.send().await.unwrap()).await.0, StatusCode::FORBIDDEN);
    let get = server.client.get(&server.url).header("host", "evil.example:80");
    assert_eq!(error_of(get.send().await.unwrap()).await.0, StatusCode::FORBIDDEN);
    assert_eq!(server.factory.opened.load(Ordering::SeqCst), 0, "nothing reached the gateway");

    for (host, origin) in [
        (format!("localhost:{}", server.addr.port()), "http://localhost:5173"),
        ("gateway.internal".to_owned(), "https://app.example.com"),
        ("[::1]:9".to_owned(), "http://127.0.0.1"),
    ] {
        let request = server.post(None, None, &init).header("host", host.as_str()).header("origin", origin);
        assert_eq!(request.send().await.unwrap().status(), StatusCode::OK, "{host} {origin}");
    }
}

#[tokio::test]
async fn the_get_stream_carries_unsolicited_messages() {
    let server = start(Limits::default()).await;
    let session = server.initialize("2025-11-25").await;
    // Sent before any GET stream: kept in the backlog and handed to the stream when it opens.
    let early = server.request(&session, "2025-11-25", 1, "test/unsolicited", json!({"n": "early"})).await;
    assert_eq!(early.status(), StatusCode::OK);
    let mut stream = server.get(&session).send().await.unwrap();
    assert_eq!(stream.status(), StatusCode::OK);
    assert_eq!(stream.headers()["content-type"], "text/event-stream");
    let text = read_until(&mut stream, |text| !events(text).is_empty()).await;
    assert_eq!(serde_json::from_str::<Value>(&events(&text)[0].1).unwrap()["params"]["n"], "early");

    let answer = server.request(&session, "2025-11-25", 2, "test/unsolicited", json!({"n": "late"})).await;
    // The request's own answer is plain JSON: the unsolicited message went to the GET stream.
    assert_eq!(answer.json::<Value>().await.unwrap()["id"], 2);
    let text = read_until(&mut stream, |text| !events(text).is_empty()).await;
    let late: Value = serde_json::from_str(&events(&text)[0].1).unwrap();
    assert_eq!(late["method"], "notifications/message");
    assert_eq!(late["params"]["n"], "late");

    // Once the stream is gone a new GET may open.
    drop(stream);
    tokio::time::sleep(Duration::from_millis(50)).await;
    let _ = server.request(&session, "2025-11-25", 3, "test/echo", json!({})).await;
    assert_eq!(server.get(&session).send().await.unwrap().status(), StatusCode::OK);
}

#[tokio::test]
async fn delete_ends_the_session() {
    let server = start(Limits::default()).await;
    let session = server.initialize("2025-11-25").await;
    let mut stream = server.get(&session).send().await.unwrap();
    let response = server.client.delete(&server.url).header("mcp-session-id", &session).send().await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert!(server.factory.probe(&session).closed.load(Ordering::SeqCst));
    // The GET stream ends with the session.
    let ended =
        tokio::time::timeout(Duration::from_secs(5), async { while stream.chunk().await.unwrap().is_some() {} }).await;
    assert!(ended.is_ok());
    let again = server.client.delete(&server.url).header("mcp-session-id", &session).send().await.unwrap();
    assert_eq!(again.status(), StatusCode::NOT_FOUND);
    let response = server.request(&session, "2025-11-25", 1, "test/echo", json!({})).await;
    assert_eq!(error_of(response).await.0, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn many_requests_in_flight_on_one_session_each_get_their_own_answer() {
    let server = Arc::new(start(Limits::default()).await);
    let session = server.initialize("2025-11-25").await;
    let mut tasks = Vec::new();
    for id in 1..=200u64 {
        let server = Arc::clone(&server);
        let session = session.clone();
        tasks.push(tokio::spawn(async move {
            let method = if id % 2 == 0 { "test/echo" } else { "test/slow" };
            let response =
                server.request(&session, "2025-11-25", id, method, json!({"delayMs": 200 - id, "id": id})).await;
            let answer: Value = if id % 2 == 0 {
                response.json().await.unwrap()
            } else {
                serde_json::from_str(&events_of(response).await.last().unwrap().1).unwrap()
            };
            assert_eq!(answer["id"], id);
            if id % 2 == 0 {
                assert_eq!(answer["result"]["echo"]["id"], id);
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
}

#[tokio::test]
async fn a_request_id_in_flight_cannot_be_reused() {
    let server = Arc::new(start(Limits::default()).await);
    let session = server.initialize("2025-11-25").await;
    let hanging = {
        let server = Arc::clone(&server);
        let session = session.clone();
        tokio::spawn(async move { server.request(&session, "2025-11-25", 7, "test/hang", json!({})).await })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    let response = server.request(&session, "2025-11-25", 7, "test/echo", json!({})).await;
    let (status, body) = error_of(response).await;
    assert_eq!((status, body["error"]["code"].clone()), (StatusCode::BAD_REQUEST, json!(-32600)));
    // A string id "7" is a different id.
    let body = json!({"jsonrpc": "2.0", "id": "7", "method": "test/echo"});
    assert_eq!(server.post(Some(&session), None, &body).send().await.unwrap().status(), StatusCode::OK);
    // Ending the session answers the request still in flight with an error instead of leaving it hanging.
    server.client.delete(&server.url).header("mcp-session-id", &session).send().await.unwrap();
    let answer: Value = hanging.await.unwrap().json().await.unwrap();
    assert_eq!((answer["id"].clone(), answer["error"]["code"].clone()), (json!(7), json!(-32603)));
}

#[tokio::test]
async fn a_client_that_disconnects_mid_stream_keeps_its_session() {
    let server = start(Limits::default()).await;
    let session = server.initialize("2025-11-25").await;
    let mut response =
        server.request(&session, "2025-11-25", 9, "test/many", json!({"count": 50, "delayMs": 10})).await;
    read_until(&mut response, |text| events(text).len() >= 3).await;
    drop(response);
    tokio::time::sleep(Duration::from_millis(700)).await;
    let probe = server.factory.probe(&session);
    assert!(!probe.closed.load(Ordering::SeqCst), "a disconnect is not a cancel");
    assert!(!probe.delivered.lock().unwrap().iter().any(|message| message["method"] == "notifications/cancelled"));
    let answer: Value = server.request(&session, "2025-11-25", 10, "test/echo", json!({})).await.json().await.unwrap();
    assert_eq!(answer["id"], 10);
    // The same id may be used again once its first request is over.
    let again = server.request(&session, "2025-11-25", 9, "test/echo", json!({})).await;
    assert_eq!(again.json::<Value>().await.unwrap()["id"], 9);
}

#[tokio::test]
async fn sessions_beyond_the_limit_are_refused_until_one_ends() {
    let server = start(Limits { max_sessions: 2, ..Limits::default() }).await;
    let first = server.initialize("2025-11-25").await;
    let _second = server.initialize("2025-11-25").await;
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {}});
    let (status, _) = error_of(server.post(None, None, &init).send().await.unwrap()).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    server.client.delete(&server.url).header("mcp-session-id", &first).send().await.unwrap();
    assert_eq!(server.post(None, None, &init).send().await.unwrap().status(), StatusCode::OK);
}

#[tokio::test]
async fn idle_sessions_are_closed() {
    let server = start(Limits { session_idle_timeout: Duration::from_secs(1), ..Limits::default() }).await;
    let idle = server.initialize("2025-11-25").await;
    let busy = server.initialize("2025-11-25").await;
    // A session with an open GET stream is in use even when no request comes.
    let _stream = server.get(&busy).send().await.unwrap();
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert!(server.factory.probe(&idle).closed.load(Ordering::SeqCst));
    let response = server.request(&idle, "2025-11-25", 1, "test/echo", json!({})).await;
    assert_eq!(response.status(), StatusCode::NOT_FOUND);
    assert!(!server.factory.probe(&busy).closed.load(Ordering::SeqCst));
    assert_eq!(server.request(&busy, "2025-11-25", 1, "test/echo", json!({})).await.status(), StatusCode::OK);
}

#[tokio::test]
async fn shutdown_ends_streams_and_closes_sessions() {
    let mut server = start(Limits::default()).await;
    let session = server.initialize("2025-11-25").await;
    let mut stream = server.get(&session).send().await.unwrap();
    server.stop.take().unwrap().send(()).unwrap();
    tokio::time::timeout(Duration::from_secs(4), async { while let Ok(Some(_)) = stream.chunk().await {} })
        .await
        .expect("the GET stream ended");
    let result = tokio::time::timeout(Duration::from_secs(4), &mut server.task).await.expect("serve returned");
    result.unwrap().unwrap();
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(server.factory.probe(&session).closed.load(Ordering::SeqCst));
}

#[tokio::test]
async fn a_client_listing_event_stream_first_gets_sse_even_for_a_lone_response() {
    let server = start(Limits::default()).await;
    let session = server.initialize("2025-11-25").await;
    let body = json!({"jsonrpc": "2.0", "id": 7, "method": "test/echo", "params": {"x": 1}});
    let response = server
        .post_as(
            "application/json",
            "text/event-stream, application/json",
            Some(&session),
            Some("2025-11-25"),
            body.to_string(),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    let text = response.text().await.unwrap();
    let events = events(&text);
    assert_eq!(events.first().map(|(_, data)| data.as_str()), Some(""), "a priming event comes first: {text}");
    let last: Value = serde_json::from_str(&events.last().unwrap().1).unwrap();
    assert_eq!(last["id"], 7, "{text}");
}

#[tokio::test]
async fn a_session_in_use_past_its_idle_timeout_stays_open_and_closes_once_idle() {
    // The idle timer is kept and moved forward (`demultiplex`): requests over 2.5 timeouts keep the session.
    let server = start(Limits { session_idle_timeout: Duration::from_secs(1), ..Limits::default() }).await;
    let session = server.initialize("2025-11-25").await;
    for id in 1..=10 {
        tokio::time::sleep(Duration::from_millis(250)).await;
        let response = server.request(&session, "2025-11-25", id, "test/echo", json!({})).await;
        assert_eq!(response.status(), StatusCode::OK, "request {id} of a session in use");
    }
    assert!(!server.factory.probe(&session).closed.load(Ordering::SeqCst));
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert!(server.factory.probe(&session).closed.load(Ordering::SeqCst), "the idle session was closed");
}

/// Writes one HTTP/1.1 POST on `stream` and reads its answer: the status, the session header and the body.
async fn raw_post(
    stream: &mut TcpStream,
    addr: SocketAddr,
    session: Option<&str>,
    body: &Value,
) -> (u16, Option<String>) {
    let body = body.to_string();
    let session = session.map(|id| format!("mcp-session-id: {id}\r\n")).unwrap_or_default();
    let request = format!(
        "POST /mcp HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\naccept: {BOTH}\r\n\
         mcp-protocol-version: 2025-11-25\r\n{session}content-length: {}\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    let (mut received, mut chunk) = (Vec::new(), [0u8; 4096]);
    loop {
        let read = stream.read(&mut chunk).await.unwrap();
        assert!(read > 0, "the connection closed before the answer");
        received.extend_from_slice(&chunk[..read]);
        let text = String::from_utf8_lossy(&received).into_owned();
        let Some(end) = text.find("\r\n\r\n") else { continue };
        let head = text[..end].to_ascii_lowercase();
        let header = |name: &str| {
            head.lines().find_map(|line| line.strip_prefix(&format!("{name}: ")).map(|value| value.trim().to_owned()))
        };
        if received.len() >= end + 4 + header("content-length").map_or(0, |length| length.parse().unwrap()) {
            return (head.split(' ').nth(1).unwrap().parse().unwrap(), header("mcp-session-id"));
        }
    }
}

#[tokio::test]
async fn a_keep_alive_connection_in_use_outlives_the_header_timeout_and_is_closed_once_idle() {
    // The connection's header-read timer moves forward per request (`header_timer`): 2.5 timeouts of use pass.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let factory = Arc::new(FakeFactory::default());
    let router = http::router(factory as Arc<dyn SessionFactory>, &spec(addr), &Limits::default(), &[]);
    let options =
        http::ServeOptions { max_connections: 16, header_read_timeout: Duration::from_secs(1), on_refusal: None };
    let (_stop, stopped) = oneshot::channel::<()>();
    let shutdown = async move { drop(stopped.await) };
    tokio::spawn(http::serve_with(listener, router, shutdown, options));
    let mut stream = TcpStream::connect(addr).await.unwrap();
    let initialize =
        json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": "2025-11-25"}});
    let session = raw_post(&mut stream, addr, None, &initialize).await.1.expect("a session id");
    for id in 1..=10 {
        tokio::time::sleep(Duration::from_millis(250)).await;
        let echo = json!({"jsonrpc": "2.0", "id": id, "method": "test/echo", "params": {}});
        assert_eq!(raw_post(&mut stream, addr, Some(&session), &echo).await.0, 200, "request {id} on one connection");
    }
    let closed = tokio::time::timeout(Duration::from_secs(20), stream.read_to_end(&mut Vec::new())).await;
    assert!(closed.is_ok(), "the idle connection was not closed");
}
