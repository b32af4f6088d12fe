//! Issue 17: an upstream that stops (SIGSTOP) or dies must cost its callers no more than their own timeout and must
//! not stall another upstream; a call made while an upstream reconnects is told so, audited and counted.
//!
//! An in-process gateway in front of `misbehave.py --mode tool-faults` upstreams; the fixture's pid comes from its
//! log, and the test stops, resumes or kills it. Each call's duration is measured against its own timeout with a
//! second of slack (behaviour: "the answer comes when the timeout says"), never against a speed target; every
//! other wait is a hang guard.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use serde_json::json;
use toolgate_core::decision::Verdict;
use toolgate_core::policy::{MatchSpec, PolicySpec, RuleSpec};
use toolgate_proxy::upstreams::UpstreamStatus;
use toolgate_spec::{GuardrailSpec, Limits, Prefix, UpstreamSpec};
use toolgate_store::AuditFilter;

use support::{Client, FixtureLog, GUARD, start, start_guarded, status_of, text_of, tool_error, upstream};

/// The stopped upstreams' request timeout: what each of their calls may take, plus [`SLACK`].
const STUCK_TIMEOUT: Duration = Duration::from_secs(2);
/// The healthy upstream's: generous, so a loaded machine cannot make it time out; it must answer every call.
const HEALTHY_TIMEOUT: Duration = Duration::from_secs(20);
/// How much later than its timeout a call may be answered.
const SLACK: Duration = Duration::from_secs(1);
/// Open-loop load: one call to each upstream every `TICK`, for `TICKS` ticks (40 calls/s each, 4 s).
const TICK: Duration = Duration::from_millis(25);
const TICKS: usize = 160;
/// A padded argument, so the stopped child's stdin pipe (64 KiB) fills after a few calls and the relay's queue
/// toward it fills next: the case where a caller used to wait for room until the child resumed.
const PADDING: usize = 4096;

fn signal(pid: u64, name: &str) {
    let status = std::process::Command::new("kill").arg(format!("-{name}")).arg(pid.to_string()).status().unwrap();
    assert!(status.success(), "kill -{name} {pid} failed");
}

async fn pid_of(log: &FixtureLog) -> u64 {
    log.wait_for("the fixture's pid", |entry| entry.get("pid").is_some()).await["pid"].as_u64().unwrap()
}

/// The test process's open file descriptors (the gateway runs in it: each socket toward an upstream is one).
fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").unwrap().count()
}

/// The conformance fixture serving Streamable HTTP on a free port, killed when dropped, and its MCP URL.
struct HttpFixture {
    child: std::process::Child,
    url: String,
}

impl HttpFixture {
    fn start() -> HttpFixture {
        use std::io::BufRead;
        let mut command = toolgate_test_support::fixture_http(0).command();
        command.stdin(std::process::Stdio::null()).stdout(std::process::Stdio::null());
        let mut child = command.stderr(std::process::Stdio::piped()).spawn().unwrap();
        let stderr = child.stderr.take().unwrap();
        let (sender, receiver) = std::sync::mpsc::channel();
        // Reads stderr to its end, so the fixture never blocks on a full pipe; the first URL goes to the test.
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stderr).lines().map_while(Result::ok) {
                if let Some(url) = line.split_whitespace().find(|word| word.starts_with("http://")) {
                    let _ = sender.send(url.to_owned());
                }
            }
        });
        let url = receiver.recv_timeout(GUARD).expect("the HTTP fixture says where it listens");
        HttpFixture { child, url }
    }
}

impl Drop for HttpFixture {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One call sent under load: where it went, when, and the timeout it runs under.
struct Sent {
    tool: &'static str,
    text: String,
    at: Instant,
    timeout: Duration,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue_17_a_stopped_upstream_under_open_loop_load_costs_no_call_more_than_its_timeout_and_stalls_no_other() {
    let stuck_log = FixtureLog::new();
    let saturated_log = FixtureLog::new();
    // `stuck` keeps the default limit, so its queue fills before its limit does; `saturated` has a small limit,
    // so it refuses at once instead.
    let stuck = upstream("stuck", "tool-faults", STUCK_TIMEOUT, Some(&stuck_log.path));
    let saturated = UpstreamSpec {
        max_in_flight: 8,
        ..upstream("saturated", "tool-faults", STUCK_TIMEOUT, Some(&saturated_log.path))
    };
    let healthy = upstream("healthy", "tool-faults", HEALTHY_TIMEOUT, None);
    let gateway = start(vec![stuck, saturated, healthy], Limits::default()).await;
    let pids = [pid_of(&stuck_log).await, pid_of(&saturated_log).await];
    let mut client = Client::connect(&gateway).await.open_loop();

    for pid in pids {
        signal(pid, "STOP");
    }
    let padding = "x".repeat(PADDING);
    let mut sent: HashMap<String, Sent> = HashMap::new();
    let mut next_tick = tokio::time::Instant::now();
    for tick in 0..TICKS {
        for (tool, timeout) in
            [("stuck_echo", STUCK_TIMEOUT), ("saturated_echo", STUCK_TIMEOUT), ("healthy_echo", HEALTHY_TIMEOUT)]
        {
            let id = format!("{tool}-{tick}");
            let text = format!("{id} {padding}");
            let at = Instant::now();
            client.send(json!(id), "tools/call", json!({"name": tool, "arguments": {"text": text}}));
            sent.insert(id, Sent { tool, text, at, timeout });
        }
        next_tick += TICK;
        tokio::time::sleep_until(next_tick).await;
    }

    // Every call is answered, each within its own timeout and a second, while the two upstreams are still stopped.
    let mut late = Vec::new();
    let mut outcomes: HashMap<(&str, &str), usize> = HashMap::new();
    let mut answered = 0;
    while answered < sent.len() {
        let (response, arrived) = client
            .arrival()
            .await
            .unwrap_or_else(|| panic!("only {answered} of {} calls answered within the hang guard", sent.len()));
        answered += 1;
        let id = response["id"].as_str().unwrap().to_owned();
        let call = &sent[&id];
        let took = arrived - call.at;
        if took > call.timeout + SLACK {
            late.push(format!("{id}: {took:?}"));
        }
        let kind = match call.tool {
            "healthy_echo" => {
                assert_eq!(text_of(&response), call.text, "the healthy upstream answers every call: {response}");
                "answered"
            }
            tool => {
                let text = tool_error(&response);
                let name = tool.trim_end_matches("_echo");
                assert!(text.contains(&format!("upstream `{name}`")), "the error names the upstream: {text}");
                if text.contains("is saturated") {
                    assert!(
                        text.contains("8 calls are already in flight, its `max_in_flight`"),
                        "names the limit: {text}"
                    );
                    "saturated"
                } else if text.contains("could not be sent") {
                    "not sent"
                } else {
                    assert!(text.contains("no answer to `tools/call`"), "{text}");
                    "timed out"
                }
            }
        };
        *outcomes.entry((call.tool, kind)).or_default() += 1;
    }
    assert!(late.is_empty(), "{} calls outlived their timeout by more than {SLACK:?}: {late:?}", late.len());
    assert_eq!(outcomes.get(&("healthy_echo", "answered")), Some(&TICKS), "{outcomes:?}");
    // The stopped upstream with the default limit filled its queue: callers past it were told it was not sent.
    assert!(outcomes.contains_key(&("stuck_echo", "not sent")), "{outcomes:?}");
    assert!(outcomes.contains_key(&("stuck_echo", "timed out")), "{outcomes:?}");
    // The one with a limit of 8 refused at once, and its refusals are counted under its name.
    assert!(outcomes.get(&("saturated_echo", "saturated")).is_some_and(|count| *count > TICKS / 2), "{outcomes:?}");
    let metrics = gateway.render_metrics().await;
    let refused = outcomes[&("saturated_echo", "saturated")];
    assert!(
        metrics.contains(&format!("toolgate_upstream_saturated_total{{upstream=\"saturated\"}} {refused}")),
        "{metrics}"
    );
    assert!(metrics.contains("toolgate_upstream_saturated_total{upstream=\"healthy\"} 0"), "{metrics}");
    assert!(metrics.contains("toolgate_upstream_in_flight{upstream=\"healthy\"} 0"), "{metrics}");

    // Resumed, both serve again (after working off what was sent to them before they stopped).
    for pid in pids {
        signal(pid, "CONT");
    }
    let mut after = Client::connect(&gateway).await;
    for tool in ["stuck_echo", "saturated_echo"] {
        let deadline = tokio::time::Instant::now() + GUARD;
        loop {
            let response = after.call(json!(format!("{tool}-after")), tool, json!({"text": "back"})).await;
            if response["result"]["isError"] != json!(true) {
                assert_eq!(text_of(&response), "back");
                break;
            }
            assert!(tokio::time::Instant::now() < deadline, "{tool} never answered after resuming: {response}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    gateway.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue_17_a_call_during_a_reconnect_is_told_so_audited_and_counted() {
    let state = tempfile::tempdir().unwrap();
    let store = support::gateway_store(state.path()).await;
    let log = FixtureLog::new();
    let marker = tempfile::tempdir().unwrap();
    let mut flaky = upstream("flaky", "tool-faults", Duration::from_secs(5), Some(&log.path));
    if let toolgate_upstream::Endpoint::Stdio { env, .. } = &mut flaky.endpoint {
        env.push(("MISBEHAVE_STATE".into(), marker.path().to_string_lossy().into_owned()));
    }
    // `log` is hidden: during the reconnect it must stay as unknown as it was while the upstream was up.
    let hide_log = RuleSpec {
        id: None,
        effect: Verdict::Hide,
        matches: MatchSpec { tool: Some(vec!["log".into()]), ..MatchSpec::default() },
        reason: None,
    };
    let mut policy = PolicySpec::permissive();
    policy.rules.insert(0, hide_log);
    let guardrails = GuardrailSpec { policy, ..GuardrailSpec::default() };
    let gateway = start_guarded(vec![flaky], guardrails, Some(store.clone())).await;
    let mut client = Client::connect(&gateway).await;
    assert_eq!(text_of(&client.call(json!(1), "flaky_echo", json!({"text": "up"})).await), "up");

    // The child dies and, while the marker exists, every restart fails: the upstream stays down, reconnecting.
    std::fs::write(marker.path().join("refuse-start"), "").unwrap();
    signal(pid_of(&log).await, "KILL");
    let deadline = tokio::time::Instant::now() + GUARD;
    while !matches!(status_of(&gateway, "flaky"), UpstreamStatus::Down { .. }) {
        assert!(tokio::time::Instant::now() < deadline, "flaky never went down: {:?}", gateway.status());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    let text = tool_error(&client.call(json!(2), "flaky_echo", json!({"text": "during"})).await);
    assert!(text.contains("upstream `flaky` is reconnecting (attempt "), "{text}");
    assert!(text.ends_with("); retry later"), "{text}");
    // A name the upstream never listed is still unknown, and so is the hidden tool.
    let unknown = tool_error(&client.call(json!(3), "flaky_nothing", json!({})).await);
    assert_eq!(unknown, "Unknown tool: flaky_nothing");
    let hidden = tool_error(&client.call(json!("hidden"), "flaky_log", json!({"text": "x"})).await);
    assert_eq!(hidden, "Unknown tool: flaky_log");

    let metrics = gateway.render_metrics().await;
    let counted = "toolgate_tool_calls_total{upstream=\"flaky\",tool=\"echo\",verdict=\"allow\",\
                   outcome=\"upstream_unavailable\"} 1";
    assert!(metrics.contains(counted), "{metrics}");
    assert!(metrics.contains("toolgate_upstream_disconnects_total{upstream=\"flaky\"} 1"), "{metrics}");
    store.audit().flush().await.unwrap();
    let filter = AuditFilter { upstream: Some("flaky".into()), ..AuditFilter::default() };
    let rows = store.query_audit(&filter).await.unwrap();
    let row = rows
        .iter()
        .find(|row| row.outcome.as_deref() == Some("upstream_unavailable"))
        .unwrap_or_else(|| panic!("no audit row for the call during the reconnect: {rows:#?}"));
    assert_eq!((row.tool.as_deref(), row.verdict.as_deref()), (Some("flaky_echo"), Some("allow")), "{row:?}");
    assert!(row.args_digest.is_some(), "{row:?}");

    // Once restarts succeed again, the tool answers.
    std::fs::remove_file(marker.path().join("refuse-start")).unwrap();
    let deadline = tokio::time::Instant::now() + GUARD;
    while !matches!(status_of(&gateway, "flaky"), UpstreamStatus::Ready { .. }) {
        assert!(tokio::time::Instant::now() < deadline, "flaky never came back: {:?}", gateway.status());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(text_of(&client.call(json!(4), "flaky_echo", json!({"text": "back"})).await), "back");
    gateway.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue_17_a_stopped_http_upstream_holds_neither_callers_nor_sockets_past_their_time() {
    // Eight calls at a time for a second each: 4 s of load would leave some 30 POSTs hanging if they outlived
    // their calls.
    const LIMIT: usize = 8;
    const HTTP_TIMEOUT: Duration = Duration::from_secs(1);
    let fixture = HttpFixture::start();
    let remote = UpstreamSpec {
        name: "remote".into(),
        endpoint: toolgate_upstream::Endpoint::http(fixture.url.clone()),
        prefix: Prefix::With("remote".into()),
        overrides: Default::default(),
        initialize_timeout: GUARD,
        request_timeout: HTTP_TIMEOUT,
        max_in_flight: LIMIT,
        trust: Default::default(),
        sandbox: Default::default(),
        era: Default::default(),
        credentials: None,
    };
    let gateway = start(vec![remote], Limits::default()).await;
    let mut client = Client::connect(&gateway).await.open_loop();
    client.send(json!("first"), "tools/call", json!({"name": "remote_test_simple_text", "arguments": {}}));
    let (first, _) = client.arrival().await.unwrap();
    assert!(first["result"]["isError"] != json!(true), "the fixture answers while running: {first}");
    let fds_before = open_fds();

    // Stopped, the server's kernel still accepts connections and takes the bytes; nothing ever answers.
    signal(u64::from(fixture.child.id()), "STOP");
    let mut sent = HashMap::new();
    let mut next_tick = tokio::time::Instant::now();
    for tick in 0..TICKS {
        let id = format!("remote-{tick}");
        sent.insert(id.clone(), Instant::now());
        client.send(json!(id), "tools/call", json!({"name": "remote_test_simple_text", "arguments": {}}));
        next_tick += TICK;
        tokio::time::sleep_until(next_tick).await;
    }
    let mut late = Vec::new();
    for _ in 0..sent.len() {
        let (response, arrived) = client.arrival().await.unwrap();
        let took = arrived - sent[response["id"].as_str().unwrap()];
        if took > HTTP_TIMEOUT + SLACK {
            late.push(format!("{}: {took:?}", response["id"]));
        }
        assert!(tool_error(&response).contains("upstream `remote`"), "{response}");
    }
    assert!(late.is_empty(), "{} calls outlived their timeout by more than {SLACK:?}: {late:?}", late.len());
    // Every POST ended with its call: a few sockets may still be closing, but not one per call sent.
    let deadline = tokio::time::Instant::now() + GUARD;
    while open_fds() > fds_before + LIMIT + 2 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{} descriptors open after {} calls to a stopped server ({fds_before} before)",
            open_fds(),
            sent.len()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    signal(u64::from(fixture.child.id()), "CONT");
    gateway.shutdown().await;
}
