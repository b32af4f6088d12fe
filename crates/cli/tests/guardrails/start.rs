//! Starting with an upstream that never answers `initialize`: `toolgate serve` still opens its listener at once
//! (after at most a short wait for the other upstreams), a client's `initialize` and `tools/list` are answered, and
//! the fast upstream's tools are in that first listing; the hanging one is logged as still starting.

use std::time::{Duration, Instant};

use serde_json::json;

use crate::support::{HttpSession, Setup, start_serve};

/// Far below the 30 s a start used to wait for every upstream, and far above the short wait `serve` allows the
/// upstreams that answer: a hang guard for this test's whole start, not a performance figure.
const UNBLOCKED: Duration = Duration::from_secs(20);

#[test]
fn an_upstream_that_never_answers_initialize_does_not_hold_up_clients() {
    let silent = toolgate_test_support::misbehave("silent");
    assert!(silent.env.iter().all(|(key, _)| key == "PYTHONUNBUFFERED"), "extra variables: {:?}", silent.env);
    // It would wait an hour for the handshake, so only toolgate's own start wait can end the wait for it.
    let extra = format!(
        "[[upstream]]\nname = \"silent\"\ncommand = {program:?}\nargs = {args}\ninitialize_timeout_seconds = 3600\n",
        program = silent.program.to_string_lossy(),
        args = json!(silent.args),
    );
    let setup = Setup::demo(&extra);
    let started = Instant::now();
    let serve = start_serve(&setup, &[]);

    let mut session = HttpSession::open(&serve.authority, &[]).expect("initialize is answered");
    let listed = session.request("tools/list", json!({})).expect("tools/list is answered");
    let answered = started.elapsed();
    assert!(
        answered < UNBLOCKED,
        "the first client waited {answered:?} for the silent upstream; stderr:\n{}",
        serve.stderr_text()
    );

    let names: Vec<&str> = listed["result"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("no tools in {listed}"))
        .iter()
        .filter_map(|tool| tool["name"].as_str())
        .collect();
    assert!(names.contains(&"demo_list_notes"), "the fast upstream's tools are listed: {names:?}");
    assert!(names.iter().all(|name| name.starts_with("demo_")), "{names:?}");
    let stderr = serve.stderr_text();
    assert!(
        stderr
            .lines()
            .any(|line| line.contains("upstream status") && line.contains("silent") && line.contains("Starting")),
        "the start logs the silent upstream as still starting:\n{stderr}"
    );
}
