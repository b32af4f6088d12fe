//! Issue 12, bridging: a 2026-07-28 client through the real `toolgate serve` (HTTP) in front of the legacy fixture,
//! whose tools ask the client during the call (`crates/fixture/src/mid_call.rs`). A capability the request did not
//! declare is -32021 (HTTP 400) and the client is never asked; a declared one is asked by `input_required` and the
//! held upstream call resumes on the retry: elicitation accepted and declined, sampling, roots, two rounds, three
//! requests sent at once asked in one round, a `prompts/get`, the rounds cap; a request's input key is the one the
//! upstream named (`toolgate/inputKey` in its `_meta`), else toolgate's `<upstream>/<kind>`; a retry naming a call
//! this process does not hold (used already, or held by another toolgate process) is refused and never replayed.

use serde_json::{Value, json};
use toolgate_test_support::toolgate::{Serving, raw_http};
use toolgate_test_support::{Peers, fixture_stdio};

pub(super) const MODERN: &str = "2026-07-28";

/// POSTs a modern `tools/call` of `tool` declaring `capabilities`, with `extra` params (`requestState`,
/// `inputResponses`); returns the HTTP status and the response.
pub(super) fn call(toolgate: &Serving, id: u64, tool: &str, capabilities: Value, extra: Value) -> (u16, Value) {
    call_as(toolgate, None, id, tool, capabilities, extra)
}

/// [`call`] with `Authorization: Bearer TOKEN` when a token is given.
pub(super) fn call_as(
    toolgate: &Serving,
    token: Option<&str>,
    id: u64,
    tool: &str,
    capabilities: Value,
    extra: Value,
) -> (u16, Value) {
    let mut params = modern_params(("name", tool), capabilities, extra);
    params["arguments"] = json!({});
    let body = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params});
    let bearer = token.map(|token| format!("Bearer {token}"));
    let mut headers = vec![("MCP-Protocol-Version", MODERN), ("Mcp-Method", "tools/call"), ("Mcp-Name", tool)];
    if let Some(bearer) = &bearer {
        headers.push(("Authorization", bearer));
    }
    let reply = raw_http::post(&toolgate.authority, &headers, &body).expect("toolgate answers");
    let response = reply.response(&json!(id)).unwrap_or_else(|| panic!("no response to {id}: {reply:?}"));
    (reply.status, response)
}

/// The params of a modern request naming `target` (`("name", tool or prompt)` or `("uri", resource)`), declaring
/// `capabilities` in its `_meta`, with `extra` params (`requestState`, `inputResponses`).
pub(super) fn modern_params(target: (&str, &str), capabilities: Value, extra: Value) -> Value {
    let (field, value) = target;
    let mut params = json!({
        field: value,
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": MODERN,
            "io.modelcontextprotocol/clientCapabilities": capabilities,
        },
    });
    for (key, extra) in extra.as_object().cloned().unwrap_or_default() {
        params[key] = extra;
    }
    params
}

/// The one input request of an `input_required` answer: its key, the request, and the state.
pub(super) fn asked(response: &Value) -> (String, Value, String) {
    let result = &response["result"];
    assert_eq!(result["resultType"], "input_required", "{response}");
    let requests = result["inputRequests"].as_object().unwrap_or_else(|| panic!("inputRequests: {response}"));
    assert_eq!(requests.len(), 1, "{response}");
    let (key, request) = requests.iter().next().unwrap();
    (key.clone(), request.clone(), result["requestState"].as_str().expect("a state").to_owned())
}

pub(super) fn text(response: &Value) -> &str {
    response["result"]["content"][0]["text"].as_str().unwrap_or_else(|| panic!("no text: {response}"))
}

fn retry(toolgate: &Serving, id: u64, tool: &str, capabilities: Value, state: &str, answers: Value) -> (u16, Value) {
    call(toolgate, id, tool, capabilities, json!({"requestState": state, "inputResponses": answers}))
}

fn toolgate() -> Serving {
    super::toolgate_in_front_of(&fixture_stdio(), &Peers::locate())
}

#[test]
fn a_capability_the_request_did_not_declare_is_32021_and_the_client_is_never_asked() {
    let toolgate = toolgate();
    // The request declares elicitation, not sampling: the fixture's sampling request is never relayed.
    let (status, response) = call(&toolgate, 1, "test_missing_capability", json!({"elicitation": {}}), json!({}));
    assert_eq!(status, 400, "{response}");
    assert_eq!(response["error"]["code"], -32021, "{response}");
    assert_eq!(response["error"]["data"]["requiredCapabilities"], json!({"sampling": {}}), "{response}");
    assert!(response.get("result").is_none(), "{response}");
    // The same for an elicitation: a request that declared none, or only URL mode, is not asked a form question.
    let tool = "test_input_required_result_elicitation";
    for (id, declared) in [(3, json!({"sampling": {}})), (4, json!({"elicitation": {"url": {}}}))] {
        let (status, response) = call(&toolgate, id, tool, declared.clone(), json!({}));
        assert_eq!(status, 400, "{declared}: {response}");
        assert_eq!(response["error"]["code"], -32021, "{declared}: {response}");
        assert_eq!(response["error"]["data"]["requiredCapabilities"], json!({"elicitation": {"form": {}}}));
    }
    // Undeclared roots are no roots, as for a legacy session (a server's own roots/list over stdio is attributed
    // to the call in flight by elimination, and must not fail it).
    let (status, response) = call(&toolgate, 5, "test_input_required_result_list_roots", json!({}), json!({}));
    assert_eq!((status, text(&response)), (200, "Roots: "), "{response}");
}

#[test]
fn a_bridged_elicitation_is_asked_by_input_required_and_the_held_call_resumes_accepted_or_declined() {
    let toolgate = toolgate();
    let eliciting = json!({"elicitation": {}});
    let tool = "test_input_required_result_elicitation";
    let (status, first) = call(&toolgate, 1, tool, eliciting.clone(), json!({}));
    assert_eq!(status, 200, "{first}");
    let (key, request, state) = asked(&first);
    assert_eq!(key, "user_name", "the key the upstream named in its request's _meta: {first}");
    assert!(request["params"]["_meta"].get("toolgate/inputKey").is_none(), "the hint is toolgate's: {first}");
    assert_eq!(request["method"], "elicitation/create", "{first}");
    assert!(request["params"]["message"].as_str().unwrap_or_default().contains("What is your name?"), "{first}");
    let accept = json!({key.clone(): {"action": "accept", "content": {"name": "Alice"}}});
    let (status, done) = retry(&toolgate, 2, tool, eliciting.clone(), &state, accept.clone());
    assert_eq!(status, 200, "{done}");
    assert_eq!(text(&done), "Hello, Alice!", "{done}");
    assert_eq!(done["result"]["resultType"], "complete", "{done}");

    // Used: the same state again is refused, never replayed upstream.
    let (_, replayed) = retry(&toolgate, 3, tool, eliciting.clone(), &state, accept);
    assert_eq!(replayed["error"]["code"], -32602, "{replayed}");
    let message = replayed["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("does not hold"), "{replayed}");
    // The first round did run upstream: the refusal says only that this retry went nowhere.
    assert!(message.ends_with("nothing was sent upstream for this retry"), "{replayed}");

    let (_, first) = call(&toolgate, 4, tool, eliciting.clone(), json!({}));
    let (key, _, state) = asked(&first);
    let (_, declined) = retry(&toolgate, 5, tool, eliciting, &state, json!({key: {"action": "decline"}}));
    assert_eq!(text(&declined), "No answer: action=decline", "{declined}");
}

#[test]
fn bridged_sampling_roots_and_two_rounds_resume_their_held_calls() {
    let toolgate = toolgate();
    let sampling = json!({"sampling": {}});
    let (_, first) = call(&toolgate, 1, "test_input_required_result_sampling", sampling.clone(), json!({}));
    let (key, request, state) = asked(&first);
    assert_eq!(request["method"], "sampling/createMessage", "{first}");
    let sample = json!({"role": "assistant", "content": {"type": "text", "text": "Paris"}, "model": "m"});
    let (_, done) = retry(&toolgate, 2, "test_input_required_result_sampling", sampling, &state, json!({key: sample}));
    assert_eq!(text(&done), "LLM response: Paris", "{done}");

    let roots = json!({"roots": {}});
    let (_, first) = call(&toolgate, 3, "test_input_required_result_list_roots", roots.clone(), json!({}));
    let (key, request, state) = asked(&first);
    assert_eq!(request["method"], "roots/list", "{first}");
    let answer = json!({key: {"roots": [{"uri": "file:///test/root", "name": "Test Root"}]}});
    let (_, done) = retry(&toolgate, 4, "test_input_required_result_list_roots", roots, &state, answer);
    assert_eq!(text(&done), "Roots: file:///test/root", "{done}");

    let eliciting = json!({"elicitation": {}});
    let tool = "test_input_required_result_multi_round";
    let (_, first) = call(&toolgate, 5, tool, eliciting.clone(), json!({}));
    let (key, _, state) = asked(&first);
    let (_, second) = retry(
        &toolgate,
        6,
        tool,
        eliciting.clone(),
        &state,
        json!({key: {"action": "accept", "content": {"name": "Bo"}}}),
    );
    let (key, request, second_state) = asked(&second);
    assert_ne!(second_state, state, "each round has its own state");
    assert!(request["params"]["message"].as_str().unwrap_or_default().contains("favorite color"), "{second}");
    let answer = json!({key: {"action": "accept", "content": {"color": "green"}}});
    let (_, done) = retry(&toolgate, 7, tool, eliciting, &second_state, answer);
    assert_eq!(text(&done), "Hello Bo, your favorite color is green.", "{done}");
}

#[test]
fn an_upstream_that_keeps_asking_is_stopped_after_ten_rounds() {
    let toolgate = toolgate();
    let eliciting = json!({"elicitation": {}});
    let (_, mut response) = call(&toolgate, 1, "test_keeps_asking", eliciting.clone(), json!({}));
    let mut rounds = 0;
    while response["result"]["resultType"] == "input_required" {
        rounds += 1;
        assert!(rounds <= 10, "more than ten rounds: {response}");
        let (key, _, state) = asked(&response);
        // This tool names no key (as a server that knows no gateway): toolgate names it by upstream and kind.
        assert!(key.ends_with("/elicitation") && key != "toolgate/elicitation", "{key}");
        let answer = json!({key: {"action": "accept", "content": {"name": "again"}}});
        response = retry(&toolgate, 1 + rounds, "test_keeps_asking", eliciting.clone(), &state, answer).1;
    }
    assert_eq!(rounds, 10, "{response}");
    assert!(response["error"]["message"].as_str().unwrap_or_default().contains("more than 10 times"), "{response}");
}

#[test]
fn a_retry_that_reaches_another_toolgate_process_is_refused_not_replayed() {
    let (one, other) = (toolgate(), toolgate());
    let eliciting = json!({"elicitation": {}});
    let tool = "test_input_required_result_elicitation";
    let (_, first) = call(&one, 1, tool, eliciting.clone(), json!({}));
    let (key, _, state) = asked(&first);
    let accept = json!({key.clone(): {"action": "accept", "content": {"name": "Alice"}}});
    let (status, elsewhere) = retry(&other, 2, tool, eliciting.clone(), &state, accept.clone());
    assert_eq!(status, 400, "{elsewhere}");
    assert_eq!(elsewhere["error"]["code"], -32602, "{elsewhere}");
    assert!(elsewhere["error"]["message"].as_str().unwrap_or_default().contains("another toolgate"), "{elsewhere}");
    // A state altered by the client opens nowhere either.
    let tampered = format!("{state}00");
    let (_, altered) = retry(&one, 3, tool, eliciting.clone(), &tampered, accept.clone());
    assert_eq!(altered["error"]["code"], -32602, "{altered}");
    // The process that holds the call still resumes it.
    let (_, done) = retry(&one, 4, tool, eliciting, &state, accept);
    assert_eq!(text(&done), "Hello, Alice!", "{done}");
}

#[test]
fn requests_an_upstream_sends_at_once_are_asked_in_one_round_under_its_keys() {
    let toolgate = toolgate();
    let everything = json!({"elicitation": {}, "sampling": {}, "roots": {}});
    let tool = "test_input_required_result_multiple_inputs";
    let (status, first) = call(&toolgate, 1, tool, everything.clone(), json!({}));
    assert_eq!(status, 200, "{first}");
    assert_eq!(first["result"]["resultType"], "input_required", "{first}");
    let requests = first["result"]["inputRequests"].as_object().unwrap_or_else(|| panic!("{first}"));
    let mut methods: Vec<(&str, &str)> =
        requests.iter().map(|(key, request)| (key.as_str(), request["method"].as_str().unwrap_or_default())).collect();
    methods.sort_unstable();
    assert_eq!(
        methods,
        [("client_roots", "roots/list"), ("greeting", "sampling/createMessage"), ("user_name", "elicitation/create")],
        "all three in the first round: {first}"
    );
    let state = first["result"]["requestState"].as_str().expect("a state");
    let answers = json!({
        "user_name": {"action": "accept", "content": {"name": "Alice"}},
        "greeting": {"role": "assistant", "content": {"type": "text", "text": "Hi"}, "model": "m"},
        "client_roots": {"roots": [{"uri": "file:///test/root", "name": "Test Root"}]},
    });
    let (_, done) = retry(&toolgate, 2, tool, everything, state, answers);
    assert_eq!(text(&done), "name=Alice; LLM response: Hi; roots=file:///test/root", "{done}");
}

#[test]
fn a_prompt_that_asks_during_prompts_get_is_bridged_and_resumes() {
    let toolgate = toolgate();
    let get = |id: u64, extra: Value| {
        let params = modern_params(("name", "test_input_required_result_prompt"), json!({"elicitation": {}}), extra);
        let body = json!({"jsonrpc": "2.0", "id": id, "method": "prompts/get", "params": params});
        let headers = [
            ("MCP-Protocol-Version", MODERN),
            ("Mcp-Method", "prompts/get"),
            ("Mcp-Name", "test_input_required_result_prompt"),
        ];
        let reply = raw_http::post(&toolgate.authority, &headers, &body).expect("toolgate answers");
        reply.response(&json!(id)).unwrap_or_else(|| panic!("no response to {id}: {reply:?}"))
    };
    let first = get(1, json!({}));
    let (key, request, state) = asked(&first);
    assert_eq!((key.as_str(), request["method"].as_str()), ("user_context", Some("elicitation/create")), "{first}");
    let answer = json!({key: {"action": "accept", "content": {"context": "tests"}}});
    let done = get(2, json!({"requestState": state, "inputResponses": answer}));
    assert_eq!(done["result"]["resultType"], "complete", "{done}");
    assert_eq!(done["result"]["messages"][0]["content"]["text"], "Use this context: tests", "{done}");
}
