//! The end phase of every `tools/call`: however a call ends ([`CallExit`]: answered, refused for a typed
//! [`Refusal`], or cancelled), [`finish`] runs once and does all of its bookkeeping: the audit row that records the
//! exit, one `toolgate_tool_calls_total` increment, the session's taint, the span's outcome and one structured event,
//! then the client's answer.
//!
//! The phases before it only hand over what they found ([`Trail`]) and how the call ended; none of them writes an
//! audit row of an exit or counts a call, so no exit can be left without a record or counted twice. Every exit has
//! exactly one row: a call forwarded or put to a person has the row journaled before (`store::PendingCall`, in the
//! trail), completed here with its outcome; any other exit gets one row written here.

use std::sync::Arc;
use std::time::Instant;

use serde_json::{Value, json};
use toolgate_core::decision::Decision;
use toolgate_core::display::bounded;
use toolgate_core::policy::taints_session;
use toolgate_store::{AuditEntry, AuditKind, PendingCall};
use toolgate_upstream::jsonrpc::{self, codes};

use crate::access::Lapse;
use crate::catalog::ExposedTool;
use crate::guard::audit;
use crate::guard::confirm::NotApproved;
use crate::guard::round_trip::StateRefusal;
use crate::guard::waiting::why_withdrawn;
use crate::metrics::registry::Outcome;
use crate::state::session::SessionShared;
use crate::state::shared::Shared;

/// Longest tool name an audit row keeps of a name that leads to no tool (the client chose it).
const UNKNOWN_NAME_CHARS: usize = 200;

/// Why a call was not made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// The request has no string `name`: not a call of any tool (answered as invalid params).
    Malformed,
    /// The name leads to no tool this session may see.
    Unknown,
    /// The policy hides the tool (answered exactly as an unknown name).
    Hidden,
    /// The policy denies it.
    Denied,
    /// It needed a person's approval and did not get it.
    NotApproved(NotApproved),
    /// A person approved it (in the queue: `approval_id`), but the tool changed while they thought.
    Lapsed { lapse: Lapse, approval_id: Option<String> },
    /// Its upstream is down and reconnecting (this attempt).
    Reconnecting(u32),
    /// Its audit row could not be written.
    AuditUnwritable(String),
    /// A 2026-07-28 retry whose request state (or answer) was refused (answered as invalid params).
    BadState(StateRefusal),
}

/// How a call ended.
pub(crate) enum CallExit {
    /// The upstream was asked: its answer (or the failure to get one, `from_upstream` false), as the client gets it.
    /// `unsent`: toolgate's reason for sending it nowhere (no credentials), recorded in the audit row.
    Answered { response: Value, from_upstream: bool, unsent: Option<&'static str> },
    /// It was not made yet: a 2026-07-28 request asked for a person's answer with this `input_required` result.
    InputRequired(Value),
    /// It was not made.
    Refused(Refusal),
    /// The client cancelled it (or its session closed): no answer is sent.
    Cancelled,
}

/// What a call got to before it ended.
pub(crate) struct Trail {
    /// The name the client asked for.
    pub(crate) name: String,
    /// The tool it led to and the arguments (`None`: no tool).
    pub(crate) tool: Option<(Arc<ExposedTool>, Value)>,
    /// The decision, once there was one.
    pub(crate) decision: Option<Decision>,
    /// The call's journaled row, once it was written.
    pub(crate) row: Option<PendingCall>,
    pub(crate) started: Instant,
}

impl Trail {
    /// A call of `name` that has got nowhere yet.
    pub(crate) fn new(name: String, started: Instant) -> Trail {
        Trail { name, tool: None, decision: None, row: None, started }
    }

    fn micros(&self) -> u64 {
        u64::try_from(self.started.elapsed().as_micros()).unwrap_or(u64::MAX)
    }
}

/// The end phase: records how the call ended and returns the client's answer (`None` for a cancelled call).
pub(crate) fn finish(
    gateway: &Shared,
    session: &SessionShared,
    id: &Value,
    mut trail: Trail,
    exit: CallExit,
) -> Option<Value> {
    let row = trail.row.take();
    let outcome = match &exit {
        CallExit::Answered { response, .. } => Outcome::of(response),
        CallExit::Refused(Refusal::Reconnecting(_)) => Outcome::UpstreamUnavailable,
        CallExit::Refused(Refusal::Malformed | Refusal::BadState(_)) => Outcome::JsonRpcError,
        CallExit::InputRequired(_) => Outcome::InputRequired,
        CallExit::Refused(_) => Outcome::IsError,
        CallExit::Cancelled => Outcome::Cancelled,
    };
    let verdict = trail.decision.as_ref().map(|decision| decision.verdict);
    let (upstream, tool_name) = match &trail.tool {
        Some((tool, _)) => (tool.upstream_name.as_str(), tool.original_name.as_str()),
        None => ("", ""),
    };
    gateway.metrics.count_call(upstream, tool_name, verdict, outcome);
    let span = tracing::Span::current();
    span.record("outcome", outcome.label());
    record_exit(gateway, session, &trail, row, &exit, outcome);
    tracing::debug!(
        session = %session.id,
        tool = %tool_name,
        upstream = %upstream,
        verdict = ?verdict,
        rule = trail.decision.as_ref().map(Decision::rule),
        outcome = outcome.label(),
        micros = trail.micros(),
        "tools/call"
    );
    match exit {
        CallExit::Answered { response, from_upstream, .. } => {
            if let Some((tool, _)) = &trail.tool
                && taints_session(&tool.hints, from_upstream)
            {
                session.taint();
            }
            Some(response)
        }
        CallExit::Refused(Refusal::Malformed) => {
            Some(jsonrpc::error_response(id, codes::INVALID_PARAMS, "tools/call needs a string `name`"))
        }
        CallExit::Refused(Refusal::BadState(refusal)) => {
            Some(jsonrpc::error_response(id, refusal.code(), &refusal.message()))
        }
        CallExit::InputRequired(result) => Some(jsonrpc::response(id, result)),
        CallExit::Refused(refusal) => Some(tool_error(id, &message(&trail, &refusal))),
        CallExit::Cancelled => None,
    }
}

/// The audit row that records the exit: the call's journaled row completed, or one row written now.
fn record_exit(
    gateway: &Shared,
    session: &SessionShared,
    trail: &Trail,
    row: Option<PendingCall>,
    exit: &CallExit,
    outcome: Outcome,
) {
    let micros = trail.micros();
    log_refusal(session, trail, exit);
    if let Some(row) = row {
        if row.is_waiting() {
            // Put to a person and never forwarded: the row journaled as they were asked says why.
            let (outcome, detail) = not_forwarded(gateway, session, trail, exit, outcome);
            row.finish_with(outcome, micros, detail);
        } else {
            // A forwarded call has one row, completed with the outcome (ok, is_error, jsonrpc_error, cancelled), and
            // why it went nowhere when toolgate had no credentials to send it with.
            match exit {
                CallExit::Answered { unsent: Some(reason), .. } => {
                    row.finish_with(outcome.label(), micros, Some(json!({ "unsent": reason })));
                }
                _ => row.finish(outcome.label(), micros),
            }
        }
        return;
    }
    let (Some((tool, arguments)), Some(decision)) = (&trail.tool, &trail.decision) else {
        // No tool: the name the client asked for, bounded (the client chose it), and that it leads nowhere (or,
        // without a string name, that the request was malformed).
        let mut entry = AuditEntry::new(AuditKind::Decision);
        entry.session = Some(session.id.clone());
        entry.caller = Some(crate::guard::audit::audit_caller(&session.caller));
        if matches!(exit, CallExit::Refused(Refusal::Malformed)) {
            entry.outcome = Some("invalid_params".into());
        } else {
            entry.tool = Some(bounded(&trail.name, UNKNOWN_NAME_CHARS));
            entry.outcome = Some("unknown_tool".into());
        }
        entry.duration_us = Some(micros);
        audit::record(gateway, entry);
        return;
    };
    match exit {
        CallExit::Refused(Refusal::Hidden | Refusal::Denied) => {
            audit::record(gateway, audit::decision_entry(session, tool, decision, arguments));
        }
        CallExit::Refused(Refusal::Reconnecting(_)) => {
            let mut entry = audit::decision_entry(session, tool, decision, arguments);
            entry.outcome = Some(outcome.label().to_owned());
            entry.duration_us = Some(micros);
            audit::record(gateway, entry);
        }
        // Refused before anyone was asked (too many approvals wait, the queue cannot be written), or a 2026-07-28
        // round trip (asked, or its retry refused: nothing waits in this process, so nothing was journaled): the
        // call's one row, written now, as a row put to a person would have been completed.
        CallExit::Refused(Refusal::NotApproved(_) | Refusal::Lapsed { .. } | Refusal::BadState(_))
        | CallExit::InputRequired(_) => {
            let approval_id = match exit {
                CallExit::Refused(Refusal::Lapsed { approval_id, .. }) => approval_id.clone(),
                _ => None,
            };
            let mut entry = audit::call_row(session, tool, decision, arguments, approval_id);
            let (outcome, detail) = not_forwarded(gateway, session, trail, exit, outcome);
            entry.outcome = Some(outcome.to_owned());
            entry.detail = detail;
            entry.duration_us = Some(micros);
            audit::record(gateway, entry);
        }
        // Nothing can be recorded: the audit log cannot be written.
        CallExit::Refused(Refusal::AuditUnwritable(_)) => {}
        // With a store every answered call, and every call put to a person, has its journaled row (above); without
        // one nothing is recorded.
        CallExit::Answered { .. } | CallExit::Cancelled => {}
        // A name that leads to no tool, or no name at all, has no tool (above).
        CallExit::Refused(Refusal::Unknown | Refusal::Malformed) => {}
    }
}

/// The outcome and detail of a call that needed a person and was not forwarded. None of these outcomes is a
/// forwarded call's (`ok`, `is_error`, `jsonrpc_error`, `cancelled`, `abandoned`, `not_recorded`): a client that
/// gives up while its call waits has `withdrawn` it.
fn not_forwarded(
    gateway: &Shared,
    session: &SessionShared,
    trail: &Trail,
    exit: &CallExit,
    outcome: Outcome,
) -> (&'static str, Option<Value>) {
    match exit {
        CallExit::Refused(Refusal::NotApproved(not_approved)) => (not_approved.outcome(), not_approved.detail()),
        CallExit::Refused(Refusal::Lapsed { lapse, .. }) => {
            let asked = trail.tool.as_ref().map(|(tool, _)| tool.fingerprint.as_str());
            let approved = lapse.approved_fingerprint.as_deref().or(asked);
            let detail = json!({
                "reason": lapse.why,
                "approvedFingerprint": approved,
                "currentFingerprint": lapse.current_fingerprint,
            });
            ("tool_changed", Some(detail))
        }
        CallExit::Refused(Refusal::AuditUnwritable(error)) => ("audit_unwritable", Some(json!({"error": error}))),
        CallExit::Refused(Refusal::BadState(refusal)) => {
            let mut detail = json!({"reason": refusal.reason()});
            if let StateRefusal::Unavailable(error) = refusal {
                detail["error"] = json!(error);
            }
            ("state_refused", Some(detail))
        }
        CallExit::InputRequired(_) => ("input_required", None),
        CallExit::Cancelled => ("withdrawn", Some(json!({"reason": why_withdrawn(gateway, session)}))),
        CallExit::Answered { .. } | CallExit::Refused(_) => (outcome.label(), None),
    }
}

/// The operator's log line for a refusal a person should act on.
fn log_refusal(session: &SessionShared, trail: &Trail, exit: &CallExit) {
    let Some((tool, _)) = &trail.tool else { return };
    match exit {
        CallExit::Refused(Refusal::Lapsed { lapse, .. }) => tracing::warn!(
            tool = %tool.exposed_name,
            upstream = %tool.upstream_name,
            why = lapse.why,
            "an approved call is not made: the tool changed while it waited"
        ),
        CallExit::Refused(Refusal::NotApproved(NotApproved::QueueFull(exceeded))) => {
            let (scope, limit, setting) = exceeded.setting();
            tracing::warn!(
                tool = %tool.exposed_name,
                upstream = %tool.upstream_name,
                caller = %session.caller.name,
                scope,
                limit,
                "a call needing approval was refused: too many approvals already wait (raise [limits] {setting})"
            );
        }
        // The store's error is the operator's: the client was told only that the state cannot be checked now.
        CallExit::Refused(Refusal::BadState(StateRefusal::Unavailable(error))) => tracing::error!(
            tool = %tool.exposed_name,
            upstream = %tool.upstream_name,
            caller = %session.caller.name,
            %error,
            "a retry's requestState cannot be checked: the store is unavailable; the call was not made"
        ),
        _ => {}
    }
}

/// What the model is told about a refused call.
fn message(trail: &Trail, refusal: &Refusal) -> String {
    let exposed = trail.tool.as_ref().map(|(tool, _)| tool.exposed_name.as_str()).unwrap_or(&trail.name);
    match refusal {
        // The same words for both, as the TypeScript and Python SDKs answer an unknown tool, so a hidden tool
        // cannot be told from a missing one.
        Refusal::Unknown | Refusal::Hidden => format!("Unknown tool: {}", trail.name),
        Refusal::Malformed => "tools/call needs a string `name`".to_owned(),
        Refusal::Denied => {
            let reasons: Vec<&str> = trail
                .decision
                .iter()
                .flat_map(|decision| decision.reasons.iter().take(3))
                .map(|reason| reason.detail.as_str())
                .collect();
            format!("toolgate refused this call: {}", reasons.join("; "))
        }
        Refusal::NotApproved(not_approved) => not_approved.message(exposed),
        Refusal::Lapsed { lapse, .. } => format!(
            "toolgate: the tool {exposed} changed while this call waited for approval ({}); the call was not made",
            lapse.why
        ),
        Refusal::Reconnecting(attempt) => {
            let upstream = trail.tool.as_ref().map(|(tool, _)| tool.upstream_name.as_str()).unwrap_or_default();
            format!("toolgate: upstream `{upstream}` is reconnecting (attempt {attempt}); retry later")
        }
        Refusal::AuditUnwritable(error) => {
            format!("toolgate: the audit log cannot be written ({error}); the call was not made")
        }
        Refusal::BadState(refusal) => refusal.message(),
    }
}

/// An `isError` result the model reads.
pub(crate) fn tool_error(id: &Value, message: &str) -> Value {
    jsonrpc::response(id, json!({"content": [{"type": "text", "text": message}], "isError": true}))
}
