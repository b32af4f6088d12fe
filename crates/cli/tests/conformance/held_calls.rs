//! Issue 12, held calls attacked: a 2026-07-28 client through the real `toolgate serve` (HTTP, two callers by bearer
//! token) in front of the legacy fixture, whose `test_input_required_result_elicitation` asks the client its name
//! during the call, so toolgate holds the upstream call and answers `input_required` with a sealed state naming it.
//! Another caller's retry with that state, a state kept past `limits.held_call_timeout_seconds`, a state replayed
//! after its call finished and answers under keys toolgate never asked resume nothing; the caller who was asked
//! still can, once; each refused retry has its `state_refused` audit row with the reason. Waits are hang guards,
//! and the one sleep waits out a one-second expiry.

use std::time::Duration;

use serde_json::{Value, json};
use toolgate_test_support::toolgate::{Serving, Setup, poll, run, start_serve};

use super::bridging::{asked, call_as, text};

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
