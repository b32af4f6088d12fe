//! Every way a `tools/call` can end, through the in-process gateway with a state store opened as `toolgate serve`
//! opens it (with its audit journal) in front of `misbehave.py --mode tool-faults`: allowed, denied, hidden,
//! unknown, malformed (no string name), confirmation refused, confirmation cancelled, approval lapsed, upstream
//! failure and client cancel, a 2026-07-28 request that declared no elicitation approved in the queue, one asked by
//! `input_required` and one whose retry carries a forged request state, and besides approved
//! by the person asked, approved in the approval queue and refused
//! because the queue is full. Each exit leaves exactly one `toolgate_tool_calls_total` increment and exactly one
//! audit row (issue 14): a forwarded call its journaled `call` row completed with the outcome; a call put to a
//! person the `call` row journaled as the person was asked, completed with why it was not forwarded or forwarded
//! with it; any other exit one `decision` row.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::time::Duration;

use serde_json::{Value, json};
use toolgate_core::decision::Verdict;
use toolgate_core::policy::{MatchSpec, PolicySpec, RuleSpec};
use toolgate_proxy::Gateway;
use toolgate_spec::{ConfirmVia, GatewaySpec, GuardrailSpec, Limits};
use toolgate_store::{ApprovalDecision, ApprovalId, AuditFilter, Store};

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
    /// The person asked (by elicitation) approves: the call is forwarded with the row journaled as they were asked.
    ApprovedByPerson,
    /// A client that cannot be asked waits in the approval queue; a person approves it there.
    ApprovedInQueue,
    /// A client that cannot be asked, and the approval queue has no place for this session.
    QueueFull,
    /// A 2026-07-28 request (per-request `_meta`) for a call that needs a person, declaring no elicitation in its
    /// own `_meta`: never asked (neither pushed nor `input_required`), although the session could be asked, so it
    /// waits in the approval queue; a person approves it there.
    ModernConfirm,
    /// A 2026-07-28 request that declared elicitation: answered `input_required` with toolgate's question.
    ModernAsked,
    /// A 2026-07-28 retry whose `requestState` is forged: a JSON-RPC error, nothing forwarded.
    ModernForgedState,
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
        rows: &[("call", Some("allow"), Some("ok"))],
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
        rows: &[("call", Some("confirm"), Some("declined"))],
        series: ("faulty", "flood", "confirm", "is_error"),
    },
    Case {
        exit: Exit::ConfirmationCancelled,
        tool: "faulty_flood",
        rows: &[("call", Some("confirm"), Some("withdrawn"))],
        series: ("faulty", "flood", "confirm", "cancelled"),
    },
    Case {
        exit: Exit::ApprovalLapsed,
        tool: "faulty_flood",
        rows: &[("call", Some("confirm"), Some("tool_changed"))],
        series: ("faulty", "flood", "confirm", "is_error"),
    },
    Case {
        exit: Exit::UpstreamFailure,
        tool: "faulty_hang",
        rows: &[("call", Some("allow"), Some("is_error"))],
        series: ("faulty", "hang", "allow", "is_error"),
    },
    Case {
        exit: Exit::ClientCancel,
        tool: "faulty_hang",
        rows: &[("call", Some("allow"), Some("cancelled"))],
        series: ("faulty", "hang", "allow", "cancelled"),
    },
    Case {
        exit: Exit::ApprovedByPerson,
        tool: "faulty_flood",
        rows: &[("call", Some("confirm"), Some("ok"))],
        series: ("faulty", "flood", "confirm", "ok"),
    },
    Case {
        exit: Exit::ApprovedInQueue,
        tool: "faulty_flood",
        rows: &[("call", Some("confirm"), Some("ok"))],
        series: ("faulty", "flood", "confirm", "ok"),
    },
    Case {
        exit: Exit::QueueFull,
        tool: "faulty_flood",
        rows: &[("call", Some("confirm"), Some("queue_full"))],
        series: ("faulty", "flood", "confirm", "is_error"),
    },
    Case {
        exit: Exit::ModernConfirm,
        tool: "faulty_flood",
        rows: &[("call", Some("confirm"), Some("ok"))],
        series: ("faulty", "flood", "confirm", "ok"),
    },
    Case {
        exit: Exit::ModernAsked,
        tool: "faulty_flood",
        rows: &[("call", Some("confirm"), Some("input_required"))],
        series: ("faulty", "flood", "confirm", "input_required"),
    },
    Case {
        exit: Exit::ModernForgedState,
        tool: "faulty_flood",
        rows: &[("call", Some("confirm"), Some("state_refused"))],
        series: ("faulty", "flood", "confirm", "jsonrpc_error"),
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
/// `wrong_id` is confirmed too: the call that takes the approval queue's one place before the queue-full call.
fn policy(deny_flood: bool) -> PolicySpec {
    let flood = if deny_flood { Verdict::Deny } else { Verdict::Confirm };
    PolicySpec {
        rules: vec![
            rule(Verdict::Deny, "progress"),
            rule(Verdict::Hide, "log"),
            rule(flood, "flood"),
            rule(Verdict::Confirm, "wrong_id"),
            RuleSpec { id: None, effect: Verdict::Allow, matches: MatchSpec::default(), reason: None },
        ],
        ..PolicySpec::permissive()
    }
}

/// A gateway over one `tool-faults` upstream named `faulty` (its calls timing out after `timeout`), confirming by
/// elicitation (else in the approval queue, which has one place per session when `queue_full`), with its store in
/// `state`.
async fn start(state: &std::path::Path, timeout: Duration, queue_full: bool) -> (Gateway, Store) {
    let mut guardrails = GuardrailSpec { policy: policy(false), ..Default::default() };
    guardrails.confirmation.via = ConfirmVia::ElicitationWhenAvailable;
    let limits = if queue_full {
        Limits { max_pending_approvals_per_session: 1, ..Limits::default() }
    } else {
        Limits::default()
    };
    let spec = GatewaySpec {
        upstreams: vec![upstream("faulty", "tool-faults", timeout, None)],
        stdio: None,
        http: None,
        limits,
        guardrails,
        source: None,
        sandbox: Default::default(),
    };
    let store = support::gateway_store(state).await;
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
async fn run(case: &Case, gateway: &Gateway, store: &Store) -> Option<Value> {
    let elicit = match case.exit {
        Exit::ConfirmationRefused => Elicit::Decline,
        Exit::ApprovedByPerson => Elicit::Accept,
        // A client that cannot be asked: its call waits in the approval queue.
        Exit::ApprovedInQueue | Exit::QueueFull => Elicit::None,
        _ => Elicit::Hold,
    };
    let mut client = Client::connect_with(gateway, elicit).await;
    let id = json!(1);
    if case.exit == Exit::Malformed {
        // Not a name at all: the request is malformed, not a call of an unknown tool.
        client.send(id.clone(), "tools/call", json!({"name": 42, "arguments": {"text": "x"}}));
        return Some(client.response(&id).await);
    }
    if matches!(case.exit, Exit::ModernAsked | Exit::ModernForgedState) {
        let meta = json!({
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}},
        });
        let mut params = json!({"name": case.tool, "arguments": {"text": "x"}, "_meta": meta});
        if case.exit == Exit::ModernForgedState {
            params["requestState"] = json!("00.00");
            params["inputResponses"] = json!({"toolgate/confirm": {"action": "accept", "content": {"approve": true}}});
        }
        let answer = client.request(id.clone(), "tools/call", params).await;
        assert!(client.elicitations.is_empty(), "a modern request is never sent a question");
        return Some(answer);
    }
    if case.exit == Exit::ModernConfirm {
        let meta = json!({
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
        });
        client.send(id.clone(), "tools/call", json!({"name": case.tool, "arguments": {"text": "x"}, "_meta": meta}));
        let waiting = wait_pending(store).await;
        store.approvals().decide(&waiting, ApprovalDecision::Approve, "tester").await.expect("approved");
        let answer = client.response(&id).await;
        assert_eq!(answer["result"]["resultType"], "complete", "{answer}");
        assert!(client.elicitations.is_empty(), "a modern request is never sent a question");
        return Some(answer);
    }
    if case.exit != Exit::QueueFull {
        // `flood` answers after a short burst of log lines, when a call of it is let through.
        client.start_call(id.clone(), case.tool, json!({"text": "x", "lines": 1, "kind": "logs"}));
    }
    match case.exit {
        Exit::ApprovedInQueue => {
            let waiting = wait_pending(store).await;
            store.approvals().decide(&waiting, ApprovalDecision::Approve, "tester").await.expect("approved");
        }
        Exit::QueueFull => {
            // Already one call of this session waits in the queue (`wrong_id`, left out of what is counted).
            client.start_call(json!(0), "faulty_wrong_id", json!({}));
            wait_pending(store).await;
            client.start_call(id.clone(), case.tool, json!({"text": "x"}));
        }
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

/// Waits until one call waits in the approval queue; returns its approval's id.
async fn wait_pending(store: &Store) -> ApprovalId {
    for _ in 0..300 {
        if let Some(record) = store.approvals().list_pending().await.expect("the queue reads").pop() {
            return record.approval.id;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("no call ever waited in the approval queue");
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
        counts.retain(|(line, _)| !line.contains("tool=\"wrong_id\""));
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
async fn issue_14_every_exit_of_a_tools_call_leaves_exactly_one_audit_row_and_one_metric_increment() {
    let mut failures = Vec::new();
    for case in CASES {
        let state = tempfile::tempdir().unwrap();
        // Only the upstream failure waits for its timeout; a cancel must come first however slow the machine is.
        let timeout = if case.exit == Exit::UpstreamFailure { Duration::from_secs(1) } else { GUARD };
        let (gateway, store) = start(state.path(), timeout, case.exit == Exit::QueueFull).await;
        let answer = run(case, &gateway, &store).await;
        if let Some(answer) = &answer {
            if matches!(case.exit, Exit::Malformed | Exit::ModernForgedState) {
                assert_eq!(answer["error"]["code"], json!(-32602), "{case:?}: {answer}");
            } else if case.exit == Exit::ModernAsked {
                assert_eq!(answer["result"]["resultType"], "input_required", "{case:?}: {answer}");
            } else {
                let forwarded = matches!(
                    case.exit,
                    Exit::Allowed | Exit::ApprovedByPerson | Exit::ApprovedInQueue | Exit::ModernConfirm
                );
                assert_eq!(answer["result"]["isError"] == json!(true), !forwarded, "{case:?}: {answer}");
            }
        }
        // A cancelled call is recorded by its own task once it sees the cancel: wait for its count (bounded).
        let counts = wait_counted(&gateway, case.exit).await;
        gateway.shutdown().await;
        store.audit().flush().await.unwrap();
        if !store.verify_audit().await.unwrap().is_intact() {
            failures.push(format!("{:?}: the audit chain does not verify", case.exit));
        }
        // The rows of the call (the listing rows of the start are not a call's); the echo that follows a cancel
        // is allowed and `ok`, and leaves its own row.
        let all = store.query_audit(&AuditFilter::default()).await.unwrap();
        let calls: Vec<_> = all
            .into_iter()
            .filter(|row| row.kind != "listing")
            .filter(|row| case.exit == Exit::Allowed || row.tool.as_deref() != Some("faulty_echo"))
            .filter(|row| row.tool.as_deref() != Some("faulty_wrong_id"))
            .collect();
        let approvals: Vec<Option<&str>> = calls.iter().map(|row| row.approval_id.as_deref()).collect();
        if case.exit == Exit::ApprovedInQueue && approvals.iter().any(Option::is_none) {
            failures.push(format!("{:?}: a row names no approval: {approvals:?}", case.exit));
        }
        let rows: Vec<(String, Option<String>, Option<String>)> =
            calls.into_iter().map(|row| (row.kind, row.verdict, row.outcome)).collect();
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

/// The gateway forwards a call only once its row is journaled: a store without a journal could give a call two rows
/// (committed before, its outcome after) or none that is durable before it leaves, so the gateway refuses it.
#[tokio::test]
async fn the_gateway_refuses_a_state_store_without_an_audit_journal() {
    let state = tempfile::tempdir().unwrap();
    let store = Store::open(state.path()).await.unwrap();
    let spec = GatewaySpec {
        upstreams: Vec::new(),
        stdio: None,
        http: None,
        limits: Limits::default(),
        guardrails: GuardrailSpec::default(),
        source: None,
        sandbox: Default::default(),
    };
    let refused = Gateway::with_store(spec, Some(store)).map(|_| ());
    assert_eq!(refused, Err(toolgate_proxy::GatewayError::StoreWithoutJournal));
}

impl std::fmt::Debug for Case {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(formatter, "{:?}", self.exit)
    }
}
