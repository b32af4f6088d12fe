//! Issue 12, "real clients end to end": the Python SDK 2.3 `Client` through the real `toolgate serve`, over stdio
//! and Streamable HTTP, in auto mode (it probes `server/discover`) and pinned to 2026-07-28, to server-everything
//! (a legacy upstream) and to the modern fixture (`fixtures/modern.py`, PyPI `mcp` 2.3, reached with `era =
//! "auto"`); and the same client pinned to the legacy handshake against the modern fixture.
//!
//! One run of `relay_clients/modern_sdk.py` walks one connection through a listing, a read, a call, a
//! confirmation accepted and one declined, progress and a cancelled call; the test asserts on what the client saw
//! and on toolgate's own audit of the run: the calls' rows show the `input_required` rounds that only the modern
//! wire has (a client that fell back to a session is pushed `elicitation/create` instead and leaves no such row),
//! so a silent fallback fails the test even where the client's output looks the same. Every wait is a hang guard;
//! nothing asserts how long anything took.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tempfile::TempDir;
use toolgate_test_support::toolgate::Serving;
use toolgate_test_support::{PeerCommand, Peers, modern_fixture};

use crate::support::{HANG_GUARD, PythonReach, Via, run_guarded, run_python_client, temp_dir};

/// The version a modern client and toolgate speak.
pub(crate) const MODERN: &str = "2026-07-28";

/// Which upstream a run talks to, and so which tools the script uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Upstream {
    /// server-everything (npm), a legacy server; its `get-sum` is the tool the config puts to a person.
    Everything,
    /// `fixtures/modern.py`, which answers both eras; its `erase_note` is put to a person.
    Modern,
}

impl Upstream {
    fn profile(self) -> &'static str {
        match self {
            Upstream::Everything => "everything",
            Upstream::Modern => "modern",
        }
    }

    fn confirmed_tool(self) -> &'static str {
        match self {
            Upstream::Everything => "get-sum",
            Upstream::Modern => "erase_note",
        }
    }
}

/// A toolgate configuration of one upstream and its state directory: `[policy]` confirms one tool and allows the
/// rest, so the confirmations are the config's and not a side effect of inference.
pub(crate) struct Gate {
    state: TempDir,
    config: PathBuf,
    /// The modern fixture's request log (`MODERN_LOG`), when the upstream is the fixture.
    upstream_log: Option<PathBuf>,
    peer_env: Vec<(String, String)>,
}

impl Gate {
    /// The config says how clients reach toolgate: `[listen.stdio]`, or `[listen.http]` on a loopback port it picks
    /// (`--listen` cannot be combined with `--config`).
    pub(crate) fn new(upstream: Upstream, via: Via) -> Gate {
        let peers = Peers::locate();
        let state = temp_dir();
        let (peer, era, upstream_log): (PeerCommand, &str, Option<PathBuf>) = match upstream {
            Upstream::Everything => (peers.server_everything(), "legacy", None),
            Upstream::Modern => {
                let log = state.path().join("modern.log");
                (modern_fixture(&peers).env("MODERN_LOG", log.to_string_lossy()), "auto", Some(log))
            }
        };
        // JSON strings are valid TOML basic strings, so paths need no escaping of their own.
        let env: Vec<String> =
            peer.env.iter().map(|(key, value)| format!("{} = {}", json!(key), json!(value))).collect();
        let config = format!(
            "[[upstream]]\nname = \"up\"\ncommand = {command}\nargs = {args}\nenv = {{ {env} }}\nera = \"{era}\"\n\n\
             [confirmation]\ntimeout_seconds = 60\n\n\
             [policy]\nsession_taint = false\n\n\
             [[policy.rule]]\neffect = \"confirm\"\nmatch = {{ tool = \"{confirmed}\" }}\n\n\
             [[policy.rule]]\neffect = \"allow\"\nmatch = {{ tool = \"*\" }}\n{listen}",
            command = json!(peer.program.to_string_lossy()),
            args = json!(peer.args),
            env = env.join(", "),
            confirmed = upstream.confirmed_tool(),
            listen = if via == Via::Stdio { "\n[listen.stdio]\n" } else { "\n[listen.http]\nbind = \"127.0.0.1:0\"\n" },
        );
        let path = state.path().join("toolgate.toml");
        std::fs::write(&path, config).expect("the config is written");
        Gate { state, config: path, upstream_log, peer_env: peer.env }
    }

    fn serve_args(&self) -> Vec<String> {
        vec![
            "--config".into(),
            self.config.to_string_lossy().into_owned(),
            "--state-dir".into(),
            self.state.path().to_string_lossy().into_owned(),
        ]
    }

    /// Runs `modern_sdk.py` against this gate (over stdio the script starts `toolgate serve`; over HTTP the test
    /// does) and returns its findings and the toolgate serving it over HTTP, if any (kept alive for the audit).
    pub(crate) fn run_client(
        &self,
        via: Via,
        mode: &str,
        upstream: Upstream,
        scenario: &str,
    ) -> (Value, Option<Serving>) {
        let args = ["--mode", mode, "--profile", upstream.profile(), "--scenario", scenario];
        let what = format!("modern_sdk.py {mode} {scenario} to {upstream:?} over {via:?}");
        match via {
            Via::Stdio => {
                let reach = PythonReach::Spawn { env: &self.peer_env, serve_args: self.serve_args(), server: None };
                (run_python_client("modern_sdk.py", &args, reach, &what), None)
            }
            Via::Http => {
                let mut serve = toolgate_test_support::toolgate::command();
                serve.arg("serve").args(self.serve_args());
                let serving = Serving::start(serve);
                let found = run_python_client("modern_sdk.py", &args, PythonReach::Url(&serving.url), &what);
                (found, Some(serving))
            }
        }
    }

    /// The `call` rows of toolgate's audit, oldest first, once there are `count` of them that are complete (rows are
    /// committed by a writer behind the call, so the last may trail the client's answer).
    pub(crate) fn call_rows(&self, count: usize) -> Vec<Value> {
        let deadline = Instant::now() + HANG_GUARD;
        loop {
            let mut command = toolgate_test_support::toolgate::command();
            command.args(["audit", "--kind", "call", "--json", "--state-dir"]).arg(self.state.path());
            let run = run_guarded(command, "toolgate audit");
            let rows: Vec<Value> = run.stdout.lines().filter_map(|line| serde_json::from_str(line).ok()).collect();
            let settled = rows.iter().filter(|row| row["outcome"].is_string()).count();
            if settled >= count || Instant::now() > deadline {
                return rows;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// The modern fixture's log entries.
    fn upstream_log(&self) -> Vec<Value> {
        let Some(path) = &self.upstream_log else { return Vec::new() };
        std::fs::read_to_string(path)
            .unwrap_or_default()
            .lines()
            .filter_map(|line| serde_json::from_str(line).ok())
            .collect()
    }
}

pub(crate) fn texts(result: &Value) -> String {
    result["texts"]
        .as_array()
        .map(|texts| texts.iter().filter_map(Value::as_str).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

/// `(tool, outcome)` of each row, sorted: a row is committed when its call ends (an `input_required` round's
/// after the person's answer was already on its way), so the log's order is not the calls' order.
fn outcomes(rows: &[Value]) -> Vec<(String, String)> {
    let mut outcomes: Vec<(String, String)> = rows
        .iter()
        .map(|row| {
            (
                row["tool"].as_str().unwrap_or_default().to_owned(),
                row["outcome"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    outcomes.sort();
    outcomes
}

/// `expected` as [`outcomes`] gives it.
fn sorted(expected: &[(&str, &str)]) -> Vec<(String, String)> {
    let mut expected: Vec<(String, String)> =
        expected.iter().map(|(tool, outcome)| ((*tool).to_owned(), (*outcome).to_owned())).collect();
    expected.sort();
    expected
}

/// What each upstream answers to the tour's steps.
fn assert_tour_answers(findings: &Value, upstream: Upstream) {
    let tools: Vec<&str> = findings["tools"].as_array().expect("tools").iter().filter_map(Value::as_str).collect();
    assert!(tools.contains(&upstream.confirmed_tool()), "{findings}");
    match upstream {
        Upstream::Everything => {
            assert!(findings["read"][0].as_str().is_some_and(|text| !text.is_empty()), "{findings}");
            assert_eq!(texts(&findings["call"]), "Echo: hello through toolgate", "{findings}");
            assert!(texts(&findings["accepted"]).contains('3'), "the sum of 1 and 2: {findings}");
            assert!(texts(&findings["progress"]).starts_with("Long running operation completed"), "{findings}");
            assert_eq!(texts(&findings["after_cancel"]), "Echo: hello through toolgate", "{findings}");
        }
        Upstream::Modern => {
            assert_eq!(findings["read"], json!(["hello"]), "{findings}");
            assert_eq!(texts(&findings["call"]), "note first: hello", "{findings}");
            assert_eq!(texts(&findings["accepted"]), "erased first", "{findings}");
            assert_eq!(texts(&findings["progress"]), "counted 3", "{findings}");
            assert_eq!(texts(&findings["after_cancel"]), "note first: hello", "{findings}");
        }
    }
    assert_eq!(findings["call"]["isError"], false, "{findings}");
    // The person was asked once for each confirmation, by toolgate (its question names the upstream).
    for answer in ["accepted", "declined"] {
        let asked = findings[answer]["asked"].as_array().expect("asked");
        assert_eq!(asked.len(), 1, "{answer}: {findings}");
        assert!(asked[0]["message"].as_str().is_some_and(|question| question.contains("up")), "{findings}");
    }
    assert_eq!(findings["accepted"]["isError"], false, "{findings}");
    assert_eq!(findings["declined"]["isError"], true, "{findings}");
    assert!(texts(&findings["declined"]).contains("declin"), "{findings}");
    // Progress reached the client, in order.
    let progress: Vec<f64> =
        findings["progress"]["progress"].as_array().expect("progress").iter().filter_map(Value::as_f64).collect();
    assert!(!progress.is_empty() && progress.windows(2).all(|pair| pair[0] < pair[1]), "{findings}");
    assert_eq!(findings["cancel"]["call"], "cancelled", "{findings}");
    assert!(findings["cancel"]["progress_before_cancel"].as_u64().unwrap_or(0) >= 1, "{findings}");
}

/// The modern fixture saw the cancellation of `wait_for_cancel` (it logs it from its cancelled handler).
fn assert_upstream_cancelled(gate: &Gate) {
    let deadline = Instant::now() + HANG_GUARD;
    loop {
        let log = gate.upstream_log();
        if log.iter().any(|entry| entry["tool"] == "wait_for_cancel" && entry["cancelled"] == true) {
            return;
        }
        assert!(Instant::now() < deadline, "the upstream never saw the call cancelled: {log:?}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// A modern client (auto or pinned) on the modern wire: it says 2026-07-28, and toolgate's audit shows each
/// confirmation as an `input_required` round followed by its outcome, and the cancelled call as `cancelled`.
fn modern_tour(via: Via, mode: &str, upstream: Upstream) {
    let gate = Gate::new(upstream, via);
    let (findings, serving) = gate.run_client(via, mode, upstream, "tour");
    assert_eq!(findings["protocolVersion"], MODERN, "the client negotiated the modern era: {findings}");
    assert_tour_answers(&findings, upstream);
    let call = upstream.confirmed_tool();
    let (plain, slow, cancelled) = match upstream {
        Upstream::Everything => ("echo", "trigger-long-running-operation", "trigger-long-running-operation"),
        Upstream::Modern => ("read_note", "count_slowly", "wait_for_cancel"),
    };
    let expected = sorted(&[
        (plain, "ok"),
        (call, "input_required"),
        (call, "ok"),
        (call, "input_required"),
        (call, "declined"),
        (slow, "ok"),
        (cancelled, "cancelled"),
        (plain, "ok"),
    ]);
    let rows = gate.call_rows(expected.len());
    assert_eq!(outcomes(&rows), expected, "toolgate's call rows: {rows:#?}");
    if upstream == Upstream::Modern {
        assert_upstream_cancelled(&gate);
    }
    drop(serving);
}

#[test]
fn auto_client_over_stdio_to_everything() {
    modern_tour(Via::Stdio, "auto", Upstream::Everything);
}

#[test]
fn auto_client_over_http_to_everything() {
    modern_tour(Via::Http, "auto", Upstream::Everything);
}

#[test]
fn pinned_client_over_stdio_to_everything() {
    modern_tour(Via::Stdio, MODERN, Upstream::Everything);
}

#[test]
fn pinned_client_over_http_to_everything() {
    modern_tour(Via::Http, MODERN, Upstream::Everything);
}

#[test]
fn auto_client_over_stdio_to_the_modern_server() {
    modern_tour(Via::Stdio, "auto", Upstream::Modern);
}

#[test]
fn auto_client_over_http_to_the_modern_server() {
    modern_tour(Via::Http, "auto", Upstream::Modern);
}

#[test]
fn pinned_client_over_stdio_to_the_modern_server() {
    modern_tour(Via::Stdio, MODERN, Upstream::Modern);
}

#[test]
fn pinned_client_over_http_to_the_modern_server() {
    modern_tour(Via::Http, MODERN, Upstream::Modern);
}

/// The SDK pinned to the legacy handshake, to the modern fixture: a 2025-11-25 session; toolgate pushes its
/// confirmations as `elicitation/create` (no `input_required` rows), and the upstream's own `input_required`
/// (`ask_name`) reaches the client as a real elicitation too.
fn legacy_tour(via: Via) {
    let gate = Gate::new(Upstream::Modern, via);
    let (findings, serving) = gate.run_client(via, "legacy", Upstream::Modern, "tour");
    assert_eq!(findings["protocolVersion"], "2025-11-25", "{findings}");
    assert_tour_answers(&findings, Upstream::Modern);
    assert_eq!(texts(&findings["ask_name"]), "hello Ada", "{findings}");
    assert_eq!(findings["ask_name"]["asked"].as_array().map(Vec::len), Some(1), "{findings}");
    let expected = sorted(&[
        ("read_note", "ok"),
        ("erase_note", "ok"),
        ("erase_note", "declined"),
        ("count_slowly", "ok"),
        ("wait_for_cancel", "cancelled"),
        ("read_note", "ok"),
        ("ask_name", "ok"),
    ]);
    let rows = gate.call_rows(expected.len());
    assert_eq!(outcomes(&rows), expected, "toolgate's call rows: {rows:#?}");
    assert_upstream_cancelled(&gate);
    drop(serving);
}

#[test]
fn legacy_client_over_stdio_to_the_modern_server() {
    legacy_tour(Via::Stdio);
}

#[test]
fn legacy_client_over_http_to_the_modern_server() {
    legacy_tour(Via::Http);
}
