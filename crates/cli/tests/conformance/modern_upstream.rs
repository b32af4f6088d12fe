//! The 2026-07-28 conformance suite through toolgate in front of a modern upstream: `fixtures/modern_conformance.py`
//! on PyPI `mcp` 2.3, spoken to as 2026-07-28 (`era = "modern"`) and served as it is (`passthrough = true`, so the
//! scenarios find their fixed names), against its own list of the checks expected to fail, each with its reason.
//! The fixture alone passes every scored scenario, so every listed failure is toolgate's.
//!
//! A missing suite or venv fails loudly (test-support panics): it is never skipped.

use toolgate_test_support::toolgate::Serving;
use toolgate_test_support::{PeerCommand, Peers, modern_conformance_fixture};

/// Scored checks (`scenario/check-id`) that fail through toolgate in front of the modern fixture, and why: none.
const EXPECTED_FAILURES: [(&str, &str); 0] = [];

/// `toolgate serve --config` with the modern fixture as its only upstream: era modern, passthrough, every call
/// allowed (the relay is under test here; the guardrails have their own tests), state in `dir`.
fn toolgate_in_front_of_modern(upstream: &PeerCommand, peers: &Peers, dir: &std::path::Path) -> Serving {
    let argv = upstream.argv();
    let config = dir.join("gateway.toml");
    let text = format!(
        "[[upstream]]\nname = \"conformance\"\ncommand = {program:?}\nargs = {args:?}\nera = \"modern\"\n\
         passthrough = true\ninitialize_timeout_seconds = 60\n\n\
         [listen.http]\nbind = \"127.0.0.1:0\"\n\n\
         [policy]\nsession_taint = false\n\n[[policy.rule]]\nid = \"permissive\"\neffect = \"allow\"\n",
        program = argv[0],
        args = &argv[1..],
    );
    std::fs::write(&config, text).unwrap();
    let mut command = toolgate_test_support::toolgate::command();
    command.args(["serve", "--config"]).arg(&config).arg("--state-dir").arg(dir.join("state"));
    command.env("PATH", peers.path_env()).env("TOOLGATE_LOG", "warn");
    for (key, value) in &upstream.env {
        command.env(key, value);
    }
    Serving::start(command)
}

#[test]
fn the_2026_suite_through_toolgate_in_front_of_a_modern_upstream_fails_only_the_listed_checks() {
    let peers = Peers::locate();
    let dir = tempfile::tempdir().unwrap();
    let toolgate = toolgate_in_front_of_modern(&modern_conformance_fixture(&peers), &peers, dir.path());
    super::modern::fails_only_these_checks(&peers, &toolgate.url, &EXPECTED_FAILURES);
}
