//! toolgate toward 2026-07-28 upstreams, through the in-process gateway: the era probe (a modern server is spoken
//! to without `initialize`; a legacy one, even one that exits on a request before `initialize`, still gets a
//! session), a legacy client's call to a modern upstream (the per-request envelope, and the upstream's
//! `input_required` bridged into a real `elicitation/create` to the client and retried with the answer), and a
//! legacy upstream that never sees the 2026-07-28 envelope a modern client sent toolgate, and a modern client's
//! call to a modern upstream that asks for input (the round passed on with the upstream's state wrapped in
//! toolgate's: accepted, echoed exactly, tampered and replayed states refused, toolgate's own confirmation first), and
//! attacked: an upstream that asks forever is stopped after ten rounds, the upstream's state altered inside
//! toolgate's wrapper is refused, an answer to a question the upstream never asked is not sent to it, a client is
//! never asked what it did not declare on the request, and a store that cannot check a state says nothing of why;
//! a prompt toolgate refuses while its upstream asks has its `request` row (a tool call's is its call row).
//!
//! The modern upstream is `fixtures/modern.py` on PyPI `mcp` 2.3 (the peers' venv; `TOOLGATE_PEERS_DIR`); the
//! server that exits is `misbehave.py --mode initialize-first`. Waits are hang guards; nothing asserts durations.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::time::Duration;

use serde_json::{Value, json};
use toolgate_proxy::upstreams::UpstreamStatus;
use toolgate_spec::{Prefix, UpstreamEra, UpstreamSpec};
use toolgate_store::{AuditFilter, AuditKind, Store};
use toolgate_test_support::{PeerCommand, Peers};
use toolgate_upstream::Endpoint;

use support::{
    Client, Elicit, FixtureLog, STORE_SECRET, break_used_nonces, gateway_store, start, start_guarded, status_of,
    text_of, upstream,
};

/// An upstream that runs `command`, unprefixed, spoken to in `era`.
fn upstream_of(name: &str, command: PeerCommand, era: UpstreamEra) -> UpstreamSpec {
    let endpoint = Endpoint::Stdio {
        program: command.program.to_string_lossy().into_owned(),
        args: command.args.clone(),
        env: command.env.clone(),
        cwd: None,
    };
    UpstreamSpec {
        prefix: Prefix::None,
        initialize_timeout: Duration::from_secs(30),
        era,
        ..UpstreamSpec::new(name, endpoint)
    }
}

fn modern_upstream(era: UpstreamEra) -> UpstreamSpec {
    upstream_of("notes", toolgate_test_support::modern_fixture(&Peers::locate()), era)
}

fn protocol_version(status: &UpstreamStatus) -> String {
    match status {
        UpstreamStatus::Ready { protocol_version, .. } => protocol_version.clone(),
        other => panic!("not ready: {other:?}"),
    }
}

/// The `_meta` the modern fixture's `echo_meta` saw on its own request.
fn echoed_meta(response: &Value) -> Value {
    serde_json::from_str(text_of(response)).unwrap_or_else(|error| panic!("echo_meta answered {response}: {error}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auto_speaks_modern_to_a_modern_server_and_a_legacy_client_uses_it() {
    let gateway = start(vec![modern_upstream(UpstreamEra::Auto)], Default::default()).await;
    assert_eq!(protocol_version(&status_of(&gateway, "notes")), "2026-07-28");
    let mut client = Client::connect(&gateway).await;
    let tools = client.tools().await;
    let names: Vec<&str> = tools.iter().filter_map(|tool| tool["name"].as_str()).collect();
    for expected in ["read_note", "erase_note", "ask_name", "echo_meta"] {
        assert!(names.contains(&expected), "{expected} missing from {names:?}");
    }
    let read = client.call(json!(1), "read_note", json!({"name": "first"})).await;
    assert_eq!(text_of(&read), "note first: hello", "{read}");
    // The upstream hop's envelope stays on the hop.
    assert!(read["result"].get("resultType").is_none(), "{read}");
    // Every request carries the modern envelope, with what this client declared and toolgate relays.
    let meta = echoed_meta(&client.call(json!(2), "echo_meta", json!({})).await);
    assert_eq!(meta["io.modelcontextprotocol/protocolVersion"], "2026-07-28", "{meta}");
    assert_eq!(meta["io.modelcontextprotocol/clientInfo"]["name"], "toolgate", "{meta}");
    assert_eq!(meta["io.modelcontextprotocol/clientCapabilities"], json!({}), "{meta}");
    gateway.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_modern_upstreams_input_required_becomes_an_elicitation_for_a_legacy_client() {
    let gateway = start(vec![modern_upstream(UpstreamEra::Modern)], Default::default()).await;
    let mut client = Client::connect_declaring(&gateway, Elicit::Manual, json!({"elicitation": {"form": {}}})).await;
    let meta = echoed_meta(&client.call(json!(1), "echo_meta", json!({})).await);
    assert_eq!(meta["io.modelcontextprotocol/clientCapabilities"], json!({"elicitation": {"form": {}}}), "{meta}");

    for (id, answer, expected) in [
        (2, json!({"action": "accept", "content": {"name": "Ada"}}), "hello Ada"),
        (3, json!({"action": "decline"}), "declined"),
    ] {
        client.start_call(json!(id), "ask_name", json!({}));
        let question =
            client.wait_for("the upstream's question", |message| message["method"] == "elicitation/create").await;
        let text = question["params"]["message"].as_str().unwrap_or_default();
        assert!(text.contains("notes") && text.contains("What is your name?"), "labelled with its asker: {question}");
        client.deliver(json!({"jsonrpc": "2.0", "id": question["id"], "result": answer}));
        let response = client
            .wait_for("the call's answer", |message| message["id"] == id && message.get("method").is_none())
            .await;
        assert_eq!(text_of(&response), expected, "{response}");
    }
    gateway.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_legacy_upstream_never_sees_a_modern_clients_envelope() {
    // The same server, spoken to as a legacy session: what its echo_meta shows is what a legacy upstream got.
    let gateway = start(vec![modern_upstream(UpstreamEra::Legacy)], Default::default()).await;
    assert_ne!(protocol_version(&status_of(&gateway, "notes")), "2026-07-28");
    let mut client = Client::connect(&gateway).await;
    let params = json!({"name": "echo_meta", "arguments": {}, "_meta": {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"sampling": {}},
        "io.modelcontextprotocol/clientInfo": {"name": "modern-client", "version": "1"},
        "io.modelcontextprotocol/logLevel": "debug",
        "progressToken": "p1"}});
    let response = client.request(json!(1), "tools/call", params).await;
    let meta = echoed_meta(&response);
    for key in [
        "io.modelcontextprotocol/protocolVersion",
        "io.modelcontextprotocol/clientCapabilities",
        "io.modelcontextprotocol/clientInfo",
        "io.modelcontextprotocol/logLevel",
    ] {
        assert!(meta.get(key).is_none(), "{key} reached a legacy upstream: {meta}");
    }
    // (The SDK shows the progress token, which toolgate maps to its own, under its Python name.)
    assert!(meta.get("progressToken").or(meta.get("progress_token")).is_some(), "own keys stay: {meta}");
    gateway.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auto_falls_back_to_initialize_for_a_server_that_exits_on_the_probe() {
    let log = FixtureLog::new();
    let mut spec = upstream("strict", "initialize-first", Duration::from_secs(20), Some(&log.path));
    spec.era = UpstreamEra::Auto;
    let gateway = start(vec![spec], Default::default()).await;
    assert_ne!(protocol_version(&status_of(&gateway, "strict")), "2026-07-28");
    let methods: Vec<String> =
        log.entries().iter().filter_map(|entry| entry["method"].as_str().map(str::to_owned)).collect();
    assert_eq!(methods.first().map(String::as_str), Some("server/discover"), "probed first: {methods:?}");
    assert!(methods.iter().any(|method| method == "initialize"), "then a session: {methods:?}");
    let mut client = Client::connect(&gateway).await;
    let response = client.call(json!(1), "strict_echo", json!({})).await;
    assert_eq!(text_of(&response), "called echo", "{response}");
    gateway.shutdown().await;
}

/// A gateway with a store (states are sealed with its secret, nonces used in it) over the modern conformance fixture,
/// unprefixed, under `policy` (a policy spec as JSON).
async fn modern_to_modern(state: &std::path::Path, policy: Value) -> toolgate_proxy::Gateway {
    modern_to_modern_with_store(state, policy).await.0
}

/// [`modern_to_modern`], with its store (to read the audit log).
async fn modern_to_modern_with_store(state: &std::path::Path, policy: Value) -> (toolgate_proxy::Gateway, Store) {
    let fixture = toolgate_test_support::modern_conformance_fixture(&Peers::locate());
    let guardrails = toolgate_spec::GuardrailSpec {
        policy: serde_json::from_value(policy).expect("a valid policy"),
        ..Default::default()
    };
    let store = gateway_store(state).await;
    let upstreams = vec![upstream_of("conformance", fixture, UpstreamEra::Modern)];
    (start_guarded(upstreams, guardrails, Some(store.clone())).await, store)
}

/// A 2026-07-28 `tools/call` of `tool` declaring form elicitation, with `extra` (a retry's state and responses).
fn modern_call(tool: &str, extra: Value) -> Value {
    modern_call_with(tool, json!({}), json!({"elicitation": {}}), extra)
}

/// A 2026-07-28 `tools/call` of `tool` with `arguments`, declaring `capabilities`, with `extra` merged in.
fn modern_call_with(tool: &str, arguments: Value, capabilities: Value, extra: Value) -> Value {
    let mut params = json!({"name": tool, "arguments": arguments, "_meta": {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": capabilities,
    }});
    for (key, value) in extra.as_object().cloned().unwrap_or_default() {
        params[key] = value;
    }
    params
}

/// The `input_required` result of `response`, asserting it is one asking under `key`; returns the state.
fn asked_under(response: &Value, key: &str) -> String {
    let result = &response["result"];
    assert_eq!(result["resultType"], "input_required", "{response}");
    assert_eq!(result["inputRequests"][key]["method"], "elicitation/create", "{response}");
    result["requestState"].as_str().expect("a state").to_owned()
}

const STATE_TOOL: &str = "test_input_required_result_request_state";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_modern_upstreams_input_required_reaches_a_modern_client_and_its_state_comes_back_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let gateway = modern_to_modern(dir.path(), json!({"rule": [{"id": "all", "effect": "allow"}]})).await;
    let mut client = Client::connect(&gateway).await;
    let asked = client.request(json!(1), "tools/call", modern_call(STATE_TOOL, json!({}))).await;
    // The upstream's own key, unchanged; its question labelled with its name; its state wrapped in toolgate's.
    let state = asked_under(&asked, "confirm");
    let message = asked["result"]["inputRequests"]["confirm"]["params"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("conformance") && message.contains("Please confirm"), "{asked}");
    assert!(state.starts_with("tgu1."), "toolgate's wrapper, never the upstream's bare state: {state}");

    let answer = json!({"confirm": {"action": "accept", "content": {"ok": true}}, "unasked": {"action": "accept"}});
    let retry = json!({"requestState": state, "inputResponses": answer});
    let done = client.request(json!(2), "tools/call", modern_call(STATE_TOOL, retry.clone())).await;
    // The fixture answers state-ok only when the SDK opened its own sealed state: it came back byte for byte.
    assert!(text_of(&done).contains("state-ok"), "{done}");
    assert_eq!(done["result"]["resultType"], "complete", "{done}");

    // The same state again is a replay: refused, nothing sent upstream.
    let replayed = client.request(json!(3), "tools/call", modern_call(STATE_TOOL, retry)).await;
    assert_eq!(replayed["error"]["code"], -32602, "{replayed}");
    assert!(replayed["error"]["message"].as_str().unwrap_or_default().contains("used already"), "{replayed}");
    gateway.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tampered_wrapped_state_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let gateway = modern_to_modern(dir.path(), json!({"rule": [{"id": "all", "effect": "allow"}]})).await;
    let mut client = Client::connect(&gateway).await;
    let asked = client.request(json!(1), "tools/call", modern_call(STATE_TOOL, json!({}))).await;
    let state = asked_under(&asked, "confirm");
    // One hex digit of the sealed payload changed (the wrapper's form kept), and a state that is not toolgate's.
    let (payload, tag) = state.trim_start_matches("tgu1.").split_once('.').expect("payload.tag");
    let flipped = if payload.ends_with('0') { '1' } else { '0' };
    let tampered = format!("tgu1.{}{flipped}.{tag}", &payload[..payload.len() - 1]);
    for (id, bad, why) in [(2, tampered, "altered or forged"), (3, "round-1".to_owned(), "not one toolgate issued")] {
        let answer = json!({"confirm": {"action": "accept", "content": {"ok": true}}});
        let retry = json!({"requestState": bad, "inputResponses": answer});
        let refused = client.request(json!(id), "tools/call", modern_call(STATE_TOOL, retry)).await;
        assert_eq!(refused["error"]["code"], -32602, "{refused}");
        assert!(refused["error"]["message"].as_str().unwrap_or_default().contains(why), "{refused}");
    }
    gateway.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn toolgates_own_confirmation_comes_before_the_upstreams_round() {
    let dir = tempfile::tempdir().unwrap();
    let policy = json!({"rule": [
        {"id": "ask", "effect": "confirm", "match": {"tool": STATE_TOOL}},
        {"id": "rest", "effect": "allow"}
    ]});
    let gateway = modern_to_modern(dir.path(), policy).await;
    let mut client = Client::connect(&gateway).await;
    let asked = client.request(json!(1), "tools/call", modern_call(STATE_TOOL, json!({}))).await;
    let toolgate_state = asked_under(&asked, "toolgate/confirm");
    let approve = json!({"toolgate/confirm": {"action": "accept", "content": {"approve": true}}});
    let retry = json!({"requestState": toolgate_state, "inputResponses": approve});
    // Approved: the call goes upstream as a first round (toolgate's state and answer stay with toolgate), and the
    // upstream's own question comes back.
    let upstream_asks = client.request(json!(2), "tools/call", modern_call(STATE_TOOL, retry)).await;
    let wrapped = asked_under(&upstream_asks, "confirm");
    let answer = json!({"confirm": {"action": "accept", "content": {"ok": true}}});
    let retry = json!({"requestState": wrapped, "inputResponses": answer});
    // The person's approval holds for this call's later rounds: no second question from toolgate.
    let done = client.request(json!(3), "tools/call", modern_call(STATE_TOOL, retry)).await;
    assert!(text_of(&done).contains("state-ok"), "{done}");
    gateway.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstreams_missing_capability_error_reaches_a_modern_client_that_lacks_it() {
    let dir = tempfile::tempdir().unwrap();
    let gateway = modern_to_modern(dir.path(), json!({"rule": [{"id": "all", "effect": "allow"}]})).await;
    let mut client = Client::connect(&gateway).await;
    // The request declared no sampling: the upstream's -32021 is true of it, and it gets it as it is.
    let missing = client.request(json!(1), "tools/call", modern_call("test_missing_capability", json!({}))).await;
    assert_eq!(missing["error"]["code"], -32021, "{missing}");
    assert!(missing["error"]["data"]["requiredCapabilities"].get("sampling").is_some(), "{missing}");
    // Declared (and relayed by toolgate): the upstream runs it.
    let mut params = modern_call("test_missing_capability", json!({}));
    params["_meta"]["io.modelcontextprotocol/clientCapabilities"] = json!({"sampling": {}});
    let declared = client.request(json!(2), "tools/call", params).await;
    assert_eq!(text_of(&declared), "sampling declared", "{declared}");
    // A legacy client has no such error code: it gets toolgate's internal error that names the hop.
    let legacy = client.call(json!(3), "test_missing_capability", json!({})).await;
    assert_eq!(legacy["error"]["code"], -32603, "{legacy}");
    gateway.shutdown().await;
}

const ALLOW_ALL: &str = r#"{"rule": [{"id": "all", "effect": "allow"}]}"#;

fn allow_all() -> Value {
    serde_json::from_str(ALLOW_ALL).unwrap()
}

/// Asserts an invalid-params refusal saying `why` and that nothing went upstream.
fn assert_not_sent(response: &Value, why: &str) {
    assert_eq!(response["error"]["code"], -32602, "{response}");
    let message = response["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains(why) && message.ends_with("the request was not sent upstream"), "{why}: {response}");
}

/// Sends `method` with `params` (given what a round adds: nothing at first, then the state and the answer) and answers
/// every round the fixture's `again` question asks, until the answer is not `input_required`; the number of rounds
/// answered and the last response. Fails past ten rounds.
async fn answer_every_round(client: &mut Client, method: &str, params: impl Fn(Value) -> Value) -> (usize, Value) {
    let mut response = client.request(json!(0), method, params(json!({}))).await;
    let mut rounds = 0;
    while response["result"]["resultType"] == "input_required" {
        rounds += 1;
        assert!(rounds <= 10, "more than ten rounds: {response}");
        let state = asked_under(&response, "again");
        let answer = json!({"again": {"action": "accept", "content": {"name": "again"}}});
        let retry = json!({"requestState": state, "inputResponses": answer});
        response = client.request(json!(rounds), method, params(retry)).await;
    }
    (rounds, response)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_modern_upstream_that_keeps_asking_is_stopped_after_ten_rounds() {
    let dir = tempfile::tempdir().unwrap();
    let gateway = modern_to_modern(dir.path(), allow_all()).await;
    let mut client = Client::connect(&gateway).await;
    let (rounds, response) =
        answer_every_round(&mut client, "tools/call", |extra| modern_call("test_keeps_asking", extra)).await;
    assert_eq!(rounds, 10, "{response}");
    assert!(response["error"]["message"].as_str().unwrap_or_default().contains("more than 10 times"), "{response}");
    gateway.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_modern_upstreams_prompt_that_keeps_asking_is_stopped_after_ten_rounds_with_one_request_row() {
    const PROMPT: &str = "test_keeps_asking_prompt";
    let dir = tempfile::tempdir().unwrap();
    let (gateway, store) = modern_to_modern_with_store(dir.path(), allow_all()).await;
    let mut client = Client::connect(&gateway).await;
    let prompt = |extra: Value| {
        let mut params = modern_call(PROMPT, extra);
        params.as_object_mut().unwrap().remove("arguments");
        params
    };
    let (rounds, response) = answer_every_round(&mut client, "prompts/get", prompt).await;
    assert_eq!(rounds, 10, "{response}");
    assert!(response["error"]["message"].as_str().unwrap_or_default().contains("more than 10 times"), "{response}");
    let expected = (Some(PROMPT.to_owned()), Some("input_refused".to_owned()), json!("prompts/get"));
    let expected = (expected.0, expected.1, expected.2, json!("too_many_rounds"));
    assert_eq!(request_rows(&store, 1).await, [expected]);
    gateway.shutdown().await;
}

/// The `request` rows of `store` as `(tool, outcome, method, reason)`, once there are `count` (or the hang guard).
async fn request_rows(store: &Store, count: usize) -> Vec<(Option<String>, Option<String>, Value, Value)> {
    let filter = AuditFilter { kind: Some(AuditKind::Request), ..AuditFilter::default() };
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let rows = loop {
        store.audit().flush().await.unwrap();
        let rows = store.query_audit(&filter).await.unwrap();
        if rows.len() >= count || tokio::time::Instant::now() > deadline {
            break rows;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    rows.iter()
        .map(|row| {
            let detail = row.detail.clone().unwrap_or_default();
            (row.tool.clone(), row.outcome.clone(), detail["method"].clone(), detail["reason"].clone())
        })
        .collect()
}

fn unhex(text: &str) -> Vec<u8> {
    (0..text.len()).step_by(2).map(|at| u8::from_str_radix(&text[at..at + 2], 16).unwrap()).collect()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_upstreams_state_altered_inside_toolgates_wrapper_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let gateway = modern_to_modern(dir.path(), allow_all()).await;
    let mut client = Client::connect(&gateway).await;
    let asked = client.request(json!(1), "tools/call", modern_call(STATE_TOOL, json!({}))).await;
    let wrapped = asked_under(&asked, "confirm");
    // The wrapper is sealed, not encrypted: the client reads the upstream's state inside it, swaps it for one of
    // its own choosing (another round's, say) and keeps toolgate's tag.
    let (payload, tag) = wrapped.trim_start_matches("tgu1.").split_once('.').expect("payload.tag");
    let mut round: Value = serde_json::from_slice(&unhex(payload)).unwrap();
    let inner = round["upstream_round"]["state"].as_str().expect("the upstream's state inside").to_owned();
    round["upstream_round"]["state"] = json!(format!("{inner}x"));
    let swapped = format!("tgu1.{}.{tag}", hex(&serde_json::to_vec(&round).unwrap()));
    let answer = json!({"confirm": {"action": "accept", "content": {"ok": true}}});
    let retry = json!({"requestState": swapped, "inputResponses": answer.clone()});
    let refused = client.request(json!(2), "tools/call", modern_call(STATE_TOOL, retry)).await;
    assert_not_sent(&refused, "altered or forged");
    // The untouched wrapper still works, once.
    let retry = json!({"requestState": wrapped, "inputResponses": answer});
    let done = client.request(json!(3), "tools/call", modern_call(STATE_TOOL, retry)).await;
    assert!(text_of(&done).contains("state-ok"), "{done}");
    gateway.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_to_a_question_the_upstream_never_asked_is_not_sent_to_it() {
    let dir = tempfile::tempdir().unwrap();
    let gateway = modern_to_modern(dir.path(), allow_all()).await;
    let mut client = Client::connect(&gateway).await;
    let tool = "test_echo_input_responses";
    let asked = client.request(json!(1), "tools/call", modern_call(tool, json!({}))).await;
    let state = asked_under(&asked, "user_name");
    let answers = json!({
        "user_name": {"action": "accept", "content": {"name": "Ada"}},
        "smuggled": {"action": "accept", "content": {"approve": true}},
        "toolgate/confirm": {"action": "accept", "content": {"approve": true}},
    });
    let retry = json!({"requestState": state, "inputResponses": answers});
    let done = client.request(json!(2), "tools/call", modern_call(tool, retry)).await;
    // The fixture names every response key it received: only the one it asked.
    assert_eq!(text_of(&done), r#"received: ["user_name"]"#, "{done}");
    gateway.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_modern_client_is_never_asked_what_it_did_not_declare_on_the_request() {
    let dir = tempfile::tempdir().unwrap();
    let gateway = modern_to_modern(dir.path(), allow_all()).await;
    // The session declared everything at `initialize`; only what each request declares counts.
    let everything = json!({"elicitation": {"form": {}, "url": {}}, "sampling": {}, "roots": {}});
    let mut client = Client::connect_declaring(&gateway, Elicit::Manual, everything).await;
    let cases = [
        ("elicitation", json!({})),
        ("elicitation", json!({"elicitation": {"url": {}}})),
        ("url_elicitation", json!({"elicitation": {}})),
        ("sampling", json!({"elicitation": {}, "roots": {}})),
        ("roots", json!({"elicitation": {}, "sampling": {}})),
    ];
    for (id, (kind, declared)) in cases.into_iter().enumerate() {
        let params = modern_call_with("test_asks_regardless", json!({"kind": kind}), declared.clone(), json!({}));
        let response = client.request(json!(id), "tools/call", params).await;
        assert!(response.get("result").is_none(), "{kind} asked of a request declaring {declared}: {response}");
        assert!(response["error"]["message"].as_str().unwrap_or_default().contains("did not declare"), "{response}");
    }
    assert!(client.elicitations.is_empty(), "nothing was pushed to the session either");
    // Declared, the same question is passed on.
    let declared = json!({"elicitation": {"url": {}}});
    let params = modern_call_with("test_asks_regardless", json!({"kind": "url_elicitation"}), declared, json!({}));
    let asked = client.request(json!("url"), "tools/call", params).await;
    assert_eq!(asked["result"]["inputRequests"]["url_elicitation"]["params"]["mode"], "url", "{asked}");
    gateway.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_that_cannot_check_a_wrapped_state_tells_the_client_nothing_of_its_error() {
    let dir = tempfile::tempdir().unwrap();
    let gateway = modern_to_modern(dir.path(), allow_all()).await;
    let mut client = Client::connect(&gateway).await;
    let asked = client.request(json!(1), "tools/call", modern_call(STATE_TOOL, json!({}))).await;
    let state = asked_under(&asked, "confirm");
    break_used_nonces(dir.path()).await;
    let answer = json!({"confirm": {"action": "accept", "content": {"ok": true}}});
    let retry = json!({"requestState": state, "inputResponses": answer});
    let refused = client.request(json!(2), "tools/call", modern_call(STATE_TOOL, retry)).await;
    assert_eq!(refused["error"]["code"], -32603, "{refused}");
    assert!(refused["error"]["message"].as_str().unwrap_or_default().contains("cannot check"), "{refused}");
    for secret in [STORE_SECRET, "secret-volume", "db-host", "used_request_states"] {
        assert!(!refused.to_string().contains(secret), "{secret} leaked: {refused}");
    }
    gateway.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prompt_toolgate_refuses_while_its_modern_upstream_asks_has_one_request_row_and_a_tool_call_none() {
    const PROMPT: &str = "test_input_required_result_prompt";
    let dir = tempfile::tempdir().unwrap();
    let (gateway, store) = modern_to_modern_with_store(dir.path(), allow_all()).await;
    // The session declares no elicitation, and neither do the requests: the fixture asks regardless.
    let mut client = Client::connect(&gateway).await;
    let undeclared = modern_call_with("test_asks_regardless", json!({"kind": "elicitation"}), json!({}), json!({}));
    let tool_call = client.request(json!(1), "tools/call", undeclared).await;
    let mut prompt = modern_call_with(PROMPT, json!({}), json!({}), json!({}));
    prompt.as_object_mut().unwrap().remove("arguments");
    // A modern client's round refused before it is passed on (`upstream_rounds`), and a legacy request's question
    // refused before it is asked (`upstream_input`).
    let modern = client.request(json!(2), "prompts/get", prompt).await;
    let legacy = client.request(json!(3), "prompts/get", json!({"name": PROMPT})).await;
    for response in [&tool_call, &modern, &legacy] {
        assert!(response["error"]["message"].as_str().unwrap_or_default().contains("did not declare"), "{response}");
    }

    let seen = request_rows(&store, 2).await;
    let expected = (Some(PROMPT.to_owned()), Some("input_refused".to_owned()), json!("prompts/get"));
    let expected = (expected.0, expected.1, expected.2, json!("missing_capability"));
    // One row for each prompt; the tool call's refusal is its call row's.
    assert_eq!(seen, [expected.clone(), expected]);
    gateway.shutdown().await;
}
