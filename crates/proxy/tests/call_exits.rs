//! Every way a `tools/call` can end, through the in-process gateway with a state store in front of
//! `misbehave.py --mode tool-faults`: allowed, denied, hidden, unknown, malformed (no string name), confirmation refused, confirmation cancelled,
//! approval lapsed, upstream failure and client cancel. Each exit leaves exactly one `toolgate_tool_calls_total`
//! increment and the audit rows that record it: one row for a call that was not forwarded (except a lapse: the
//! `decision` row written as the person is asked, which the console shows waiting calls from, then the
//! `confirmation` row saying why the approval lapsed), and for a forwarded call its journaled `call` row and the
//! `result` row that completes it with the outcome (issue 14).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::time::Duration;

use serde_json::{Value, json};
use toolgate_core::decision::Verdict;
use toolgate_core::policy::{MatchSpec, PolicySpec, RuleSpec};
use toolgate_proxy::Gateway;
use toolgate_spec::{ConfirmVia, GatewaySpec, GuardrailSpec, Limits};
use toolgate_store::{AuditFilter, Store};

use support::{Client, Elicit, GUARD, upstream};

/// How the test makes the call end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Exit {
    Allowed,
    Denied,
    Hidden,
    Unknown,
    /// A `tools/call` whose `name` is not a string: answered as invalid params, still recorded and counted.
    Malformed,
    ConfirmationRefused,
    ConfirmationCancelled,
    ApprovalLapsed,
    UpstreamFailure,
    ClientCancel,
}

/// One row of the table: the exit, the tool called, and what it must leave: the audit rows (kind, verdict,
/// outcome) and the one metric series counted.
struct Case {
    exit: Exit,
    tool: &'static str,
    rows: &'static [(&'static str, Option<&'static str>, Option<&'static str>)],
    series: (&'static str, &'static str, &'static str, &'static str),
}

const CASES: &[Case] = &[
    Case {
        exit: Exit::Allowed,
        tool: "faulty_echo",
        rows: &[("call", Some("allow"), None), ("result", Some("allow"), Some("ok"))],
        series: ("faulty", "echo", "allow", "ok"),
    },
    Case {
        exit: Exit::Denied,
        tool: "faulty_progress",
        rows: &[("decision", Some("deny"), None)],
        series: ("faulty", "progress", "deny", "is_error"),
    },
    Case {
        exit: Exit::Hidden,
        tool: "faulty_log",
        rows: &[("decision", Some("hide"), None)],
        series: ("faulty", "log", "hide", "is_error"),
    },
    Case {
        exit: Exit::Unknown,
        tool: "no_such_tool",
        rows: &[("decision", None, Some("unknown_tool"))],
        series: ("", "", "none", "is_error"),
    },
    Case {
        exit: Exit::Malformed,
        tool: "",
        rows: &[("decision", None, Some("invalid_params"))],
        series: ("", "", "none", "jsonrpc_error"),
    },
    Case {
        exit: Exit::ConfirmationRefused,
        tool: "faulty_flood",
        rows: &[("decision", Some("confirm"), None)],
        series: ("faulty", "flood", "confirm", "is_error"),
    },
    Case {
        exit: Exit::ConfirmationCancelled,
        tool: "faulty_flood",
        rows: &[("decision", Some("confirm"), None)],
        series: ("faulty", "flood", "confirm", "cancelled"),
    },
    Case {
        exit: Exit::ApprovalLapsed,
        tool: "faulty_flood",
        rows: &[("decision", Some("confirm"), None), ("confirmation", None, Some("tool_changed"))],
        series: ("faulty", "flood", "confirm", "is_error"),
    },
    Case {
        exit: Exit::UpstreamFailure,
        tool: "faulty_hang",
        rows: &[("call", Some("allow"), None), ("result", Some("allow"), Some("is_error"))],
        series: ("faulty", "hang", "allow", "is_error"),
    },
    Case {
        exit: Exit::ClientCancel,
        tool: "faulty_hang",
        rows: &[("call", Some("allow"), None), ("result", Some("allow"), Some("cancelled"))],
        series: ("faulty", "hang", "allow", "cancelled"),
    },
];

fn rule(effect: Verdict, tool: &str) -> RuleSpec {
    RuleSpec {
        id: None,
        effect,
        matches: MatchSpec { tool: Some(vec![tool.to_owned()]), ..MatchSpec::default() },
        reason: None,
    }
}

/// `progress` denied, `log` hidden, `flood` confirmed, everything else allowed; with `deny_flood`, `flood` denied.
fn policy(deny_flood: bool) -> PolicySpec {
    let flood = if deny_flood { Verdict::Deny } else { Verdict::Confirm };
    PolicySpec {
        rules: vec![
            rule(Verdict::Deny, "progress"),
            rule(Verdict::Hide, "log"),
            rule(flood, "flood"),
            RuleSpec { id: None, effect: Verdict::Allow, matches: MatchSpec::default(), reason: None },
        ],
        ..PolicySpec::permissive()
    }
}

/// A gateway over one `tool-faults` upstream named `faulty` (its calls timing out after `timeout`), confirming by
/// elicitation, with its store in `state`.
async fn start(state: &std::path::Path, timeout: Duration) -> (Gateway, Store) {
    let mut guardrails = GuardrailSpec { policy: policy(false), ..Default::default() };
    guardrails.confirmation.via = ConfirmVia::ElicitationWhenAvailable;
    let spec = GatewaySpec {
        upstreams: vec![upstream("faulty", "tool-faults", timeout, None)],
        stdio: None,
        http: None,
        limits: Limits::default(),
        guardrails,
        source: None,
        sandbox: Default::default(),
    };
    let store = Store::open(state).await.expect("the store opens");
    let gateway = support::start_spec(spec, Some(store.clone())).await;
    (gateway, store)
}

/// Receives until the held client has a question to answer; returns it.
async fn question(client: &mut Client) -> Value {
    while client.elicitations.is_empty() {
        assert!(client.receive_one(GUARD).await, "no confirmation question arrived");
    }
    client.elicitations.remove(0)
}

/// Makes one call end as `case` says; returns the client's answer, if any.
async fn run(case: &Case, gateway: &Gateway) -> Option<Value> {
    let elicit = match case.exit {
        Exit::ConfirmationRefused => Elicit::Decline,
        _ => Elicit::Hold,
    };
    let mut client = Client::connect_with(gateway, elicit).await;
    let id = json!(1);
    if case.exit == Exit::Malformed {
        // Not a name at all: the request is malformed, not a call of an unknown tool.
        client.send(id.clone(), "tools/call", json!({"name": 42, "arguments": {"text": "x"}}));
        return Some(client.response(&id).await);
    }
    client.start_call(id.clone(), case.tool, json!({"text": "x"}));
    match case.exit {
        Exit::ConfirmationCancelled | Exit::ClientCancel => {
            if case.exit == Exit::ConfirmationCancelled {
                question(&mut client).await;
            } else {
                // Forwarded: the upstream holds it until the client gives up.
                wait_in_flight(gateway).await;
            }
            let params = json!({"requestId": id, "reason": "the user gave up"});
            client.session.deliver(json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": params}));
            // The call's end is recorded once its task has seen the cancel; nothing comes back.
            let echoed = client.call(json!("after"), "faulty_echo", json!({"text": "after"})).await;
            assert_eq!(echoed["result"]["content"][0]["text"], "after");
            assert_eq!(client.stashed_responses(&id), 0, "a cancelled call gets no response");
            return None;
        }
        Exit::ApprovalLapsed => {
            let asked = question(&mut client).await;
            // While the person reads, the policy changes: the approval no longer covers the call.
            gateway.reload_policy(&policy(true)).expect("the policy compiles");
            let answer = json!({"action": "accept", "content": {"approve": true}});
            client.session.deliver(json!({"jsonrpc": "2.0", "id": asked["id"], "result": answer}));
        }
        _ => {}
    }
    Some(client.response(&id).await)
}

/// Waits until the upstream has a call in flight.
async fn wait_in_flight(gateway: &Gateway) {
    let series = "toolgate_upstream_in_flight{upstream=\"faulty\"}";
    for _ in 0..300 {
        if value(&gateway.render_metrics().await, series).is_some_and(|in_flight| in_flight >= 1.0) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the call never reached the upstream");
}

/// The value of the exposition line whose name and labels are exactly `series`.
fn value(exposition: &str, series: &str) -> Option<f64> {
    exposition.lines().find_map(|line| line.strip_prefix(series)?.strip_prefix(' ')?.trim().parse().ok())
}

/// The `toolgate_tool_calls_total` series counted for the call of `exit`, once there is one (the echo that follows
/// a cancel is counted on its own and left out).
async fn wait_counted(gateway: &Gateway, exit: Exit) -> Vec<(String, f64)> {
    let started = std::time::Instant::now();
    loop {
        let mut counts = counted(&gateway.render_metrics().await);
        counts.retain(|(line, _)| exit == Exit::Allowed || !line.contains("tool=\"echo\""));
        if !counts.is_empty() || started.elapsed() > Duration::from_secs(10) {
            return counts;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Every `toolgate_tool_calls_total` series with its count.
fn counted(exposition: &str) -> Vec<(String, f64)> {
    exposition
        .lines()
        .filter(|line| line.starts_with("toolgate_tool_calls_total{"))
        .filter_map(|line| {
            let (series, count) = line.rsplit_once(' ')?;
            Some((series.to_owned(), count.parse().ok()?))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue_14_every_exit_of_a_tools_call_leaves_its_audit_rows_and_exactly_one_metric_increment() {
    let mut failures = Vec::new();
    for case in CASES {
        let state = tempfile::tempdir().unwrap();
        // Only the upstream failure waits for its timeout; a cancel must come first however slow the machine is.
        let timeout = if case.exit == Exit::UpstreamFailure { Duration::from_secs(1) } else { GUARD };
        let (gateway, store) = start(state.path(), timeout).await;
        let answer = run(case, &gateway).await;
        if let Some(answer) = &answer {
            if case.exit == Exit::Malformed {
                assert_eq!(answer["error"]["code"], json!(-32602), "{case:?}: {answer}");
            } else {
                assert_eq!(
                    answer["result"]["isError"] == json!(true),
                    case.exit != Exit::Allowed,
                    "{case:?}: {answer}"
                );
            }
        }
        // A cancelled call is recorded by its own task once it sees the cancel: wait for its count (bounded).
        let counts = wait_counted(&gateway, case.exit).await;
        gateway.shutdown().await;
        store.audit().flush().await.unwrap();
        // The rows of the call (the listing rows of the start are not a call's); the echo that follows a cancel
        // is allowed and `ok`, and leaves its own row.
        let rows: Vec<(String, Option<String>, Option<String>)> = store
            .query_audit(&AuditFilter::default())
            .await
            .unwrap()
            .into_iter()
            .filter(|row| row.kind != "listing")
            .filter(|row| case.exit == Exit::Allowed || row.tool.as_deref() != Some("faulty_echo"))
            .map(|row| (row.kind, row.verdict, row.outcome))
            .collect();
        let wanted: Vec<(String, Option<String>, Option<String>)> = case
            .rows
            .iter()
            .map(|(kind, verdict, outcome)| {
                ((*kind).to_owned(), verdict.map(str::to_owned), outcome.map(str::to_owned))
            })
            .collect();
        if rows != wanted {
            failures.push(format!("{:?}: audit rows {rows:?}, wanted {wanted:?}", case.exit));
        }
        let (upstream, tool, verdict, outcome) = case.series;
        let series = format!(
            "toolgate_tool_calls_total{{upstream=\"{upstream}\",tool=\"{tool}\",verdict=\"{verdict}\",outcome=\"{outcome}\"}}"
        );
        if counts != vec![(series.clone(), 1.0)] {
            failures.push(format!("{:?}: counted {counts:?}, wanted {series} once", case.exit));
        }
    }
    assert!(failures.is_empty(), "exits not recorded once:\n{}", failures.join("\n"));
}

impl std::fmt::Debug for Case {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(formatter, "{:?}", self.exit)
    }
}
