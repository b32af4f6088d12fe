//! Issue 12, held calls attacked: a 2026-07-28 client through the real `toolgate serve` (HTTP, two callers by bearer
//! token) in front of the legacy fixture, whose `test_input_required_result_elicitation` asks the client its name
//! during the call, so toolgate holds the upstream call and answers `input_required` with a sealed state naming it.
//! Another caller's retry with that state, a state kept past `limits.held_call_timeout_seconds`, a state replayed
//! after its call finished and answers under keys toolgate never asked resume nothing; the caller who was asked
//! still can, once; each refused retry has its `state_refused` audit row with the reason, a `prompts/get` or
//! `resources/read` retry as a tool call's (a `request` row naming the method), a held call that expires has one
//! `request` row saying toolgate cancelled it (a tool call's too), and the chain verifies. Waits are hang guards,
//! and the one sleep waits out a one-second expiry.

use std::time::Duration;

use serde_json::{Value, json};
use toolgate_test_support::toolgate::{Serving, Setup, poll, raw_http, run, start_serve};

use super::bridging::{MODERN, asked, call_as, modern_params, text};

const ALICE: &str = "alice-token-5d1e";
const BOB: &str = "bob-token-8c4a";
const TOOL: &str = "test_input_required_result_elicitation";

/// `toolgate serve --config` in front of the fixture (passthrough, every call allowed), HTTP on a loopback port,
/// callers alice and bob by bearer token, held calls kept `held_seconds`.
fn toolgate(held_seconds: u64) -> (Setup, Serving) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let config = dir.path().join("gateway.toml");
    let text = format!(
        "[[upstream]]\nname = \"fixture\"\ncommand = {binary:?}\nargs = [\"--stdio\"]\npassthrough = true\n\n\
         [listen.http]\nbind = \"127.0.0.1:0\"\n\n\
         [limits]\nheld_call_timeout_seconds = {held_seconds}\n\n\
         [[caller]]\nname = \"alice\"\ntoken_env = \"ALICE_TOKEN\"\n\n\
         [[caller]]\nname = \"bob\"\ntoken_env = \"BOB_TOKEN\"\n\n\
         [[policy.rule]]\nid = \"all\"\neffect = \"allow\"\nmatch = {{ tool = \"*\" }}\n",
        binary = toolgate_test_support::fixture_binary(),
    );
    std::fs::write(&config, text).expect("write the config");
    let setup = Setup { dir, config };
    let serving = start_serve(&setup, &[("ALICE_TOKEN", ALICE), ("BOB_TOKEN", BOB)]);
    (setup, serving)
}

fn eliciting() -> Value {
    json!({"elicitation": {}})
}

fn named(key: &str, name: &str) -> Value {
    json!({key: {"action": "accept", "content": {"name": name}}})
}

fn retry(toolgate: &Serving, token: &str, id: u64, state: &str, answers: Value) -> (u16, Value) {
    let extra = json!({"requestState": state, "inputResponses": answers});
    call_as(toolgate, Some(token), id, TOOL, eliciting(), extra)
}

/// The reasons of the `state_refused` call rows of `TOOL` in the store of `setup`, sorted, once there are `count`.
fn refusal_reasons(setup: &Setup, count: usize) -> Vec<String> {
    let state = setup.state_arg();
    poll("the refused retries' audit rows", || {
        let rows = run(&["audit", "--json", "--kind", "call", "--state-dir", &state]);
        let mut reasons: Vec<String> = rows
            .stdout
            .lines()
            .filter_map(|line| serde_json::from_str::<Value>(line).ok())
            .filter(|row| row["tool"] == TOOL && row["outcome"] == "state_refused")
            .filter_map(|row| row["detail"]["reason"].as_str().map(str::to_owned))
            .collect();
        reasons.sort();
        (reasons.len() >= count).then_some(reasons)
    })
}

/// Asserts an invalid-params refusal (HTTP 400) whose message says `why`.
fn assert_refused(status: u16, response: &Value, why: &str) {
    assert_eq!(status, 400, "{response}");
    assert_eq!(response["error"]["code"], -32602, "{response}");
    let message = response["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains(why), "{why}: {response}");
}

#[test]
fn another_callers_retry_a_replay_and_answers_to_no_question_resume_nothing() {
    let (setup, toolgate) = toolgate(120);
    let (_, first) = call_as(&toolgate, Some(ALICE), 1, TOOL, eliciting(), json!({}));
    let (key, _, state) = asked(&first);

    // Bob holds Alice's state and answers it: refused, and Alice's call is still hers.
    let (status, stolen) = retry(&toolgate, BOB, 2, &state, named(&key, "Mallory"));
    assert_refused(status, &stolen, "another caller");

    // Answered only under a key toolgate never asked: nothing reaches the upstream, the question is asked again
    // under a new state, and the old one is spent.
    let (_, again) = retry(&toolgate, ALICE, 3, &state, named("fixture/never-asked", "Mallory"));
    let (again_key, request, again_state) = asked(&again);
    assert_eq!(again_key, key, "{again}");
    assert!(request["params"]["message"].as_str().unwrap_or_default().contains("What is your name?"), "{again}");
    assert_ne!(again_state, state, "{again}");
    let (status, spent) = retry(&toolgate, ALICE, 4, &state, named(&key, "Alice"));
    assert_refused(status, &spent, "does not hold");

    // The real answer, with a stray one beside it: only the asked key is answered upstream.
    let mut answers = named(&key, "Alice");
    answers["fixture/never-asked"] = json!({"action": "accept", "content": {"name": "Mallory"}});
    let (_, done) = retry(&toolgate, ALICE, 5, &again_state, answers);
    assert_eq!(text(&done), "Hello, Alice!", "{done}");

    // Replayed after the call finished, by its own caller or by another: refused, nothing sent again.
    let (status, replayed) = retry(&toolgate, ALICE, 6, &again_state, named(&key, "Alice"));
    assert_refused(status, &replayed, "does not hold");
    assert!(
        replayed["error"]["message"].as_str().unwrap_or_default().ends_with("nothing was sent upstream for this retry")
    );
    let (status, replayed) = retry(&toolgate, BOB, 7, &again_state, named(&key, "Alice"));
    assert_refused(status, &replayed, "another caller");

    // Each refused retry is audited with its reason.
    assert_eq!(refusal_reasons(&setup, 4), ["not_held", "not_held", "other_caller", "other_caller"]);
}

#[test]
fn a_held_call_not_resumed_in_time_is_cancelled_and_its_state_refused() {
    let (setup, toolgate) = toolgate(1);
    let (_, first) = call_as(&toolgate, Some(ALICE), 1, TOOL, eliciting(), json!({}));
    let (key, _, state) = asked(&first);
    // Past the one-second hold (the state's expiry is whole seconds): waited out, not timed.
    std::thread::sleep(Duration::from_millis(2_500));
    let (status, late) = retry(&toolgate, ALICE, 2, &state, named(&key, "Alice"));
    assert_refused(status, &late, "expired");
    assert_eq!(refusal_reasons(&setup, 1), ["expired"]);
    // The gateway goes on: a new call is asked afresh and resumes.
    let (_, fresh) = call_as(&toolgate, Some(ALICE), 3, TOOL, eliciting(), json!({}));
    let (_, _, fresh_state) = asked(&fresh);
    let (_, done) = retry(&toolgate, ALICE, 4, &fresh_state, named(&key, "Alice"));
    assert_eq!(text(&done), "Hello, Alice!", "{done}");
}

/// A modern `method` request (`prompts/get` of `name`, or `resources/read` of `uri`) as `token`'s caller, declaring
/// elicitation, with `extra` params; returns the HTTP status and the response.
fn request_as(
    toolgate: &Serving,
    token: &str,
    id: u64,
    method: &str,
    target: (&str, &str),
    extra: Value,
) -> (u16, Value) {
    request_declaring(toolgate, token, id, (method, target), eliciting(), extra)
}

/// [`request_as`] declaring `capabilities`.
fn request_declaring(
    toolgate: &Serving,
    token: &str,
    id: u64,
    (method, target): (&str, (&str, &str)),
    capabilities: Value,
    extra: Value,
) -> (u16, Value) {
    let params = modern_params(target, capabilities, extra);
    let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
    let bearer = format!("Bearer {token}");
    // `Mcp-Name` carries the prompt's name or the resource's URI alike.
    let headers = [
        ("MCP-Protocol-Version", MODERN),
        ("Mcp-Method", method),
        ("Mcp-Name", target.1),
        ("Authorization", bearer.as_str()),
    ];
    let reply = raw_http::post(&toolgate.authority, &headers, &body).expect("toolgate answers");
    let response = reply.response(&json!(id)).unwrap_or_else(|| panic!("no response to {id}: {reply:?}"));
    (reply.status, response)
}

/// The `request` rows in the store of `setup` (toolgate's refusals of requests that are not tool calls) as
/// `(method, target, outcome, reason)`, sorted, once there are `count`.
fn request_refusals(setup: &Setup, count: usize) -> Vec<(String, String, String, String)> {
    let state = setup.state_arg();
    poll("the refused requests' audit rows", || {
        let rows = run(&["audit", "--json", "--kind", "request", "--state-dir", &state]);
        let field = |row: &Value, pointer: &str| row.pointer(pointer).and_then(Value::as_str).unwrap_or("").to_owned();
        let mut refusals: Vec<_> = rows
            .stdout
            .lines()
            .filter_map(|line| serde_json::from_str::<Value>(line).ok())
            .map(|row| {
                (
                    field(&row, "/detail/method"),
                    field(&row, "/tool"),
                    field(&row, "/outcome"),
                    field(&row, "/detail/reason"),
                )
            })
            .collect();
        refusals.sort();
        (refusals.len() >= count).then_some(refusals)
    })
}

#[test]
fn refused_prompt_and_resource_retries_are_audited_like_a_tool_calls_and_the_chain_verifies() {
    const PROMPT: &str = "test_input_required_result_prompt";
    let (setup, toolgate) = toolgate(120);
    let prompt = ("name", PROMPT);
    let (_, first) = request_as(&toolgate, ALICE, 1, "prompts/get", prompt, json!({}));
    let (key, _, state) = asked(&first);
    let answer = json!({key.clone(): {"action": "accept", "content": {"context": "tests"}}});

    // Bob retries Alice's held prompt: refused, and nothing is sent upstream.
    let extra = json!({"requestState": state, "inputResponses": answer});
    let (status, stolen) = request_as(&toolgate, BOB, 2, "prompts/get", prompt, extra.clone());
    assert_refused(status, &stolen, "another caller");
    // Alice's own retry resumes it; replayed, the same state is refused.
    let (_, done) = request_as(&toolgate, ALICE, 3, "prompts/get", prompt, extra.clone());
    assert_eq!(done["result"]["messages"][0]["content"]["text"], "Use this context: tests", "{done}");
    let (status, replayed) = request_as(&toolgate, ALICE, 4, "prompts/get", prompt, extra);
    assert_refused(status, &replayed, "does not hold");
    // A resource read naming a held call that was never sealed, and a prompt nobody serves.
    let forged = json!({"requestState": "held.not-a-sealed-state"});
    let (status, read) = request_as(&toolgate, ALICE, 5, "resources/read", ("uri", "test://static-text"), forged);
    assert_refused(status, &read, "not one toolgate issued");
    let (_, unknown) = request_as(&toolgate, ALICE, 6, "prompts/get", ("name", "no_such_prompt"), json!({}));
    assert_eq!(unknown["error"]["code"], -32602, "{unknown}");

    let owned = |(method, target, outcome, reason): (&str, &str, &str, &str)| {
        (method.to_owned(), target.to_owned(), outcome.to_owned(), reason.to_owned())
    };
    let expected: Vec<_> = [
        ("prompts/get", "no_such_prompt", "unknown_prompt", ""),
        ("prompts/get", PROMPT, "state_refused", "not_held"),
        ("prompts/get", PROMPT, "state_refused", "other_caller"),
        ("resources/read", "test://static-text", "state_refused", "malformed"),
    ]
    .into_iter()
    .map(owned)
    .collect();
    assert_eq!(request_refusals(&setup, expected.len()), expected);
    let verify = run(&["audit", "verify", "--state-dir", &setup.state_arg()]);
    assert_eq!(verify.code, Some(0), "{verify:?}");
    assert!(verify.stdout.contains("chain intact"), "{verify:?}");
}

#[test]
fn a_bridged_prompt_toolgate_refuses_itself_has_one_request_row_and_a_tool_call_none() {
    const PROMPT: &str = "test_input_required_result_prompt";
    let (setup, toolgate) = toolgate(120);
    // A tool call declaring no elicitation first: -32021, recorded by its own call row and by no `request` row.
    let (_, tool_call) = call_as(&toolgate, Some(ALICE), 1, TOOL, json!({}), json!({}));
    assert_eq!(tool_call["error"]["code"], -32021, "{tool_call}");
    let state = setup.state_arg();
    poll("the tool call's row", || {
        let rows = run(&["audit", "--json", "--kind", "call", "--state-dir", &state]);
        rows.stdout.contains(TOOL).then_some(())
    });

    // The same prompt declaring nothing: the fixture's question is never asked, the prompt is refused (-32021).
    let prompt = ("prompts/get", ("name", PROMPT));
    let (_, undeclared) = request_declaring(&toolgate, ALICE, 2, prompt, json!({}), json!({}));
    assert_eq!(undeclared["error"]["code"], -32021, "{undeclared}");
    assert_eq!(undeclared["error"]["data"]["requiredCapabilities"], json!({"elicitation": {"form": {}}}));
    // Declaring elicitation it is asked; a retry answering with something other than an object is refused.
    let (_, first) = request_declaring(&toolgate, ALICE, 3, prompt, eliciting(), json!({}));
    let (key, _, state_of_call) = asked(&first);
    let extra = json!({"requestState": state_of_call, "inputResponses": {key: "tests"}});
    let (status, malformed) = request_declaring(&toolgate, ALICE, 4, prompt, eliciting(), extra);
    assert_refused(status, &malformed, "not an object");

    let owned = |(method, target, outcome, reason): (&str, &str, &str, &str)| {
        (method.to_owned(), target.to_owned(), outcome.to_owned(), reason.to_owned())
    };
    let expected: Vec<_> = [
        ("prompts/get", PROMPT, "bridge_refused", "malformed_input"),
        ("prompts/get", PROMPT, "bridge_refused", "missing_capability"),
    ]
    .into_iter()
    .map(owned)
    .collect();
    assert_eq!(request_refusals(&setup, expected.len()), expected);
}

#[test]
fn a_held_call_that_expires_has_one_request_row_saying_toolgate_cancelled_it() {
    const PROMPT: &str = "test_input_required_result_prompt";
    let (setup, toolgate) = toolgate(1);
    // A tool call, then a prompt, each held and not retried: the one-second hold lapses (one at a time, since
    // over stdio toolgate tells two requests' questions apart only within one session).
    let expired = |(method, target): (&str, &str)| {
        (method.to_owned(), target.to_owned(), "bridge_refused".to_owned(), "held_call_expired".to_owned())
    };
    let (_, call) = call_as(&toolgate, Some(ALICE), 1, TOOL, eliciting(), json!({}));
    let (key, _, state_of_call) = asked(&call);
    // The cancel upstream is the expiry's row, a tool call's too.
    assert_eq!(request_refusals(&setup, 1), [("tools/call", TOOL)].map(expired));
    let (_, prompt) = request_as(&toolgate, ALICE, 2, "prompts/get", ("name", PROMPT), json!({}));
    asked(&prompt);
    let expected = [("prompts/get", PROMPT), ("tools/call", TOOL)].map(expired);
    assert_eq!(request_refusals(&setup, 2), expected);
    // The tool call's own row ended when the client was asked, and says nothing of the cancel.
    let state = setup.state_arg();
    let calls = run(&["audit", "--json", "--kind", "call", "--state-dir", &state]);
    let outcomes: Vec<Value> = calls
        .stdout
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|row| row["tool"] == TOOL)
        .map(|row| row["outcome"].clone())
        .collect();
    assert_eq!(outcomes, [json!("input_required")], "{calls:?}");

    // A late retry is refused by its own row (a call row); the expiry wrote no second one.
    let (status, late) = retry(&toolgate, ALICE, 3, &state_of_call, named(&key, "Alice"));
    assert_refused(status, &late, "expired");
    assert_eq!(refusal_reasons(&setup, 1), ["expired"]);
    assert_eq!(request_refusals(&setup, 2), expected);
    let verify = run(&["audit", "verify", "--state-dir", &state]);
    assert_eq!(verify.code, Some(0), "{verify:?}");
    assert!(verify.stdout.contains("chain intact"), "{verify:?}");
}
