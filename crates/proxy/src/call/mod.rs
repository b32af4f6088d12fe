//! The life of a `tools/call`, as named phases, each handing the next a typed value, and one end phase that always
//! runs:
//!
//! 1. [`resolve`] (→ [`ResolvedCall`]): the exposed name becomes a route (upstream, original name) and the tool's
//!    effective hints. A tool whose upstream is down and reconnecting (`known_tools`) is decided like a listed one
//!    and then refused as [`Refusal::Reconnecting`] (outcome `upstream_unavailable`).
//! 2. [`decide`] (→ `Decision`, then [`Permitted`], which only `permit` makes): the policy's decision (rules, mode,
//!    session taint, quarantine). Allow is permitted; confirm asks a person first (`ask`, over `guard::confirm`,
//!    which journals the call's one row as the person is asked, into the `Trail`, and answers approved, refused or
//!    lapsed; a 2026-07-28 request that declared elicitation is asked by answering `input_required`, and its retry
//!    is approved, refused or lapsed by `guard::round_trip`); deny and hide are refusals.
//! 3. [`journal`] (→ [`Journaled`], the only thing [`forward`] takes): the call's audit row is made durable (an
//!    approved call's row, journaled as the person was asked, is journaled again as forwarded); a call whose row
//!    cannot be written is refused. Then [`forward`] (→ [`Forwarded`]): the call goes upstream under the
//!    original name, with toolgate's progress token and the route registered for cancellation, progress and server
//!    requests; transport failures are retried only for tools read-only or idempotent by their trusted hints.
//! 4. [`post_process`] (→ the client's response): truncation, undeclared structured fields; transport failures
//!    become `isError` results the model can read, JSON-RPC errors from the upstream stay JSON-RPC errors.
//! 5. [`finish::finish`], for every [`CallExit`] (answered, asked by `input_required`, refused for a typed
//!    [`Refusal`], cancelled): the
//!    exit's audit row, one metric increment, session taint, the span's outcome, one structured event, and the
//!    answer. Unknown and hidden names get the same `isError` result ("Unknown tool: NAME"), as the TypeScript and
//!    Python SDKs answer an unknown tool, so a hidden tool cannot be told from a missing one.
//!
//! The phases take the per-call context ([`CallContext`]) and what the previous phase handed on, and write what
//! the end phase needs into a `Trail`; none of them records an exit itself.

pub(crate) mod context;
pub(crate) mod finish;

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use toolgate_core::decision::{Decision, Reason, Verdict};
use toolgate_store::PendingCall;
use toolgate_upstream::UpstreamError;

use crate::access::{call_facts, decide_with, visible_to};
use crate::call::context::CallContext;
use crate::call::finish::{CallExit, Refusal, Trail, tool_error};
use crate::catalog::ExposedTool;
use crate::guard::confirm::{Confirmation, Question, confirm};
use crate::guard::{audit, results};
use crate::relay::{relay_response, send_upstream};
use crate::state::session::SessionShared;
use crate::state::shared::Shared;

/// A call whose tool was found and is visible to this session.
pub(crate) struct ResolvedCall {
    /// The exposed tool (route, hints, fingerprint).
    pub(crate) tool: Arc<ExposedTool>,
    /// The client's `params`, unchanged.
    pub(crate) params: Value,
}

impl ResolvedCall {
    fn arguments(&self) -> Value {
        self.params.get("arguments").cloned().unwrap_or_else(|| json!({}))
    }
}

/// A call the policy allowed (or a person approved); only `permit` makes one, and only [`journal`] takes one.
pub(crate) struct Permitted {
    call: ResolvedCall,
    decision: Decision,
    approval_id: Option<String>,
}

/// What the upstream did with a forwarded call.
pub(crate) enum Forwarded {
    /// A response message (result or JSON-RPC error).
    Response(Value),
    /// The upstream could not be reached or failed; the text says which and how. `unsent` names toolgate's own
    /// reason for not sending the call at all, for its audit row (see [`unsent_reason`]).
    Failed { message: String, unsent: Option<&'static str> },
}

/// A name phase 1 did not find in the catalog, with the client's `params` given back.
pub(crate) struct Unresolved {
    name: String,
    params: Value,
}

/// Phase 1: finds the tool the client named, as this session may see it.
pub(crate) fn resolve(gateway: &Shared, session: &SessionShared, params: Value) -> Result<ResolvedCall, Unresolved> {
    let name = params.get("name").and_then(Value::as_str).unwrap_or_default().to_owned();
    match crate::access::resolve(&gateway.catalog(), &session.viewer_for(&params), &name) {
        Some(tool) => Ok(ResolvedCall { tool, params }),
        None => Err(Unresolved { name, params }),
    }
}

/// Phase 1 for a name the catalog does not know: the tool as its upstream last listed it, when that upstream is
/// down and reconnecting now and the session could see it, with the reconnect attempt.
fn resolve_reconnecting(
    gateway: &Shared,
    session: &SessionShared,
    unresolved: Unresolved,
) -> Result<(ResolvedCall, u32), Unresolved> {
    match gateway.known_tools.reconnecting(&unresolved.name, &gateway.upstreams) {
        Some((tool, attempt)) if visible_to(&tool, &session.viewer_for(&unresolved.params)) => {
            Ok((ResolvedCall { tool, params: unresolved.params }, attempt))
        }
        _ => Err(unresolved),
    }
}

/// Phase 2: the policy's decision. A quarantined tool (its definition changed since it was pinned, or it is new on
/// a pinned upstream) is decided on its untrusted hints (see `catalog`), and needs a person's approval even where
/// the rules would allow it.
pub(crate) fn decide(gateway: &Shared, session: &SessionShared, call: &ResolvedCall) -> Decision {
    decide_with(&gateway.policy(), &call.tool, &call_facts(&call.tool, &session.viewer_for(&call.params)))
}

/// Turns an allowing or approved decision into a [`Permitted`] call.
fn permit(call: ResolvedCall, decision: Decision, approval_id: Option<String>) -> Permitted {
    Permitted { call, decision, approval_id }
}

/// Phase 3: sends the permitted call upstream under the tool's original name, retrying transport failures only
/// when the tool is read-only or idempotent by its trusted hints. `None` when the client cancelled.
///
/// Every attempt and backoff together stay within the upstream's request timeout: a retry runs only in the time
/// that is left, so a call that timed out is not tried again, and the client's answer never comes later than the
/// configured timeout.
pub(crate) async fn forward(
    gateway: &Arc<Shared>,
    session: &Arc<SessionShared>,
    id: &Value,
    journaled: &Journaled,
    cancel: &CancellationToken,
) -> Option<Forwarded> {
    let permitted = &journaled.permitted;
    let tool = &permitted.call.tool;
    let mut params = permitted.call.params.clone();
    params["name"] = Value::String(tool.original_name.clone());
    let retries = &gateway.spec.guardrails.retries;
    let retry_safe = tool.hints.is_idempotent();
    // Permitted under a confirm verdict: a person approved it (toolgate's state was checked on the way here).
    let confirmed = permitted.decision.verdict == Verdict::Confirm;
    let timeout = gateway.upstreams.get(tool.upstream).map_or(Duration::ZERO, |runtime| runtime.spec.request_timeout);
    let deadline = Instant::now() + timeout;
    let mut backoff = retries.initial_backoff;
    let mut attempt = 1;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let answer = send_upstream(
            gateway,
            session,
            id,
            tool.upstream,
            "tools/call",
            params.clone(),
            cancel,
            Some(left),
            confirmed,
        );
        match answer.await? {
            Ok(response) => return Some(Forwarded::Response(response)),
            Err(error)
                if retry_safe
                    && error.is_transient()
                    && attempt < retries.max_attempts
                    && deadline.saturating_duration_since(Instant::now()) > backoff =>
            {
                tracing::info!(tool = %tool.exposed_name, attempt, %error, "retrying a call that is safe to repeat");
                tokio::select! {
                    () = cancel.cancelled() => return None,
                    () = tokio::time::sleep(backoff) => {}
                }
                backoff = backoff.saturating_mul(2).min(Duration::from_secs(10));
                attempt += 1;
            }
            Err(error) => {
                let message = upstream_failure(&tool.upstream_name, &error);
                return Some(Forwarded::Failed { message, unsent: unsent_reason(&error) });
            }
        }
    }
}

/// Why toolgate sent a permitted call nowhere, as a stable word for its audit row (`detail.unsent`): it had no
/// credentials to send it with, the caller's own token to exchange (`no_caller_token`) or an upstream token from
/// the issuer (`no_upstream_credentials`). Other failures reached the upstream or the network, and their text (which
/// may quote the upstream) stays out of the audit log.
fn unsent_reason(error: &UpstreamError) -> Option<&'static str> {
    match error {
        UpstreamError::NoCallerToken { .. } => Some("no_caller_token"),
        UpstreamError::Credentials { .. } => Some("no_upstream_credentials"),
        _ => None,
    }
}

fn upstream_failure(upstream: &str, error: &UpstreamError) -> String {
    match error {
        UpstreamError::Saturated { limit } => format!(
            "upstream `{upstream}` is saturated: {limit} calls are already in flight, its `max_in_flight` limit; this \
             call was not sent, retry later"
        ),
        _ => format!("upstream `{upstream}` failed: {error}"),
    }
}

/// Phase 4: the client's response for what the upstream did: results post-processed (truncation, undeclared
/// structured fields), JSON-RPC errors unchanged, transport failures as `isError` results.
pub(crate) fn post_process(gateway: &Shared, tool: &ExposedTool, id: &Value, forwarded: Forwarded) -> Value {
    match forwarded {
        Forwarded::Response(response) => {
            let mut response = relay_response(id, response);
            if let Some(result) = response.get_mut("result") {
                let output_schema = tool.definition.get("outputSchema");
                results::post_process(result, output_schema, &gateway.spec.guardrails.results);
                if result.get("isError").and_then(Value::as_bool) == Some(true)
                    && let Some(confinement) = gateway.upstreams.get(tool.upstream).and_then(|up| up.confinement())
                {
                    crate::sandboxing::annotate_refusal(result, &tool.upstream_name, &confinement);
                }
            }
            response
        }
        Forwarded::Failed { message, .. } => tool_error(id, &format!("toolgate: {message}")),
    }
}

/// Runs the phases for one `tools/call`; every way it ends goes through [`finish::finish`].
pub(crate) async fn call_tool(
    gateway: &Arc<Shared>,
    session: &Arc<SessionShared>,
    id: &Value,
    params: Value,
    cancel: &CancellationToken,
) -> Option<Value> {
    let Some(name) = params.get("name").and_then(Value::as_str).map(str::to_owned) else {
        // Not a call at all: a malformed request, answered as one, but still recorded and counted by the end phase.
        let trail = Trail::new(String::new(), Instant::now());
        return finish::finish(gateway, session, id, trail, CallExit::Refused(Refusal::Malformed));
    };
    let context = CallContext { gateway, session, id, cancel };
    let mut trail = Trail::new(name, Instant::now());
    let exit = run_phases(&context, params, &mut trail).await;
    finish::finish(gateway, session, id, trail, exit)
}

/// Phases 1 to 4, each handing the next a typed value; what they learn goes into `trail` for the end phase.
async fn run_phases(context: &CallContext<'_>, params: Value, trail: &mut Trail) -> CallExit {
    let CallContext { gateway, session, id, cancel } = *context;
    let (resolved, reconnecting) = match resolve(gateway, session, params) {
        Ok(resolved) => (resolved, None),
        Err(unresolved) => match resolve_reconnecting(gateway, session, unresolved) {
            Ok((resolved, attempt)) => (resolved, Some(attempt)),
            Err(_) => return CallExit::Refused(Refusal::Unknown),
        },
    };
    let decision = decide(gateway, session, &resolved);
    let span = tracing::Span::current();
    span.record("tool", resolved.tool.exposed_name.as_str());
    span.record("upstream", resolved.tool.upstream_name.as_str());
    span.record("verdict", decision.verdict.as_str());
    trail.tool = Some((Arc::clone(&resolved.tool), resolved.arguments()));
    trail.decision = Some(decision.clone());
    // A call the policy would let through (or put to a person) cannot be made while its upstream reconnects: say
    // so now, rather than "Unknown tool" or a question to a person about a call that cannot run.
    if let Some(attempt) = reconnecting
        && matches!(decision.verdict, Verdict::Allow | Verdict::Confirm)
    {
        return CallExit::Refused(Refusal::Reconnecting(attempt));
    }
    // A retry of a call held for a legacy upstream's input (`crate::bridge`): refused here, with its row, when this
    // process does not hold it for this caller and call; otherwise it resumes without a second confirmation, as the
    // call went upstream after its first (the state binds the caller, the tool's fingerprint and the arguments).
    let resumes_held = crate::bridge::names_held_call(&resolved.params);
    if resumes_held && matches!(decision.verdict, Verdict::Allow | Verdict::Confirm) {
        let mut upstream_params = resolved.params.clone();
        upstream_params["name"] = Value::String(resolved.tool.original_name.clone());
        let caller = &session.caller.name;
        if let Err(refusal) =
            crate::bridge::check(gateway, caller, resolved.tool.upstream, "tools/call", &upstream_params)
        {
            return CallExit::Refused(Refusal::BadState(refusal));
        }
    }
    let permitted = match decision.verdict {
        Verdict::Allow => permit(resolved, decision, None),
        Verdict::Confirm if resumes_held => permit(resolved, decision, None),
        Verdict::Hide => return CallExit::Refused(Refusal::Hidden),
        Verdict::Deny => return CallExit::Refused(Refusal::Denied),
        // The row journaled as the person is asked goes into the trail: however the call ends, it is that row.
        Verdict::Confirm => match ask(context, resolved, decision, &mut trail.row).await {
            Ok(permitted) => permitted,
            Err(exit) => return exit,
        },
    };
    trail.decision = Some(permitted.decision.clone());
    let journaled = match journal(gateway, session, permitted, trail.row.take()).await {
        Ok(journaled) => journaled,
        Err((refusal, waiting)) => {
            trail.row = waiting;
            return CallExit::Refused(refusal);
        }
    };
    let relayed = Instant::now();
    let forwarded = forward(gateway, session, id, &journaled, cancel).await;
    // The row travels with the call to the end phase, which completes it however the call ended.
    let Journaled { permitted, row } = journaled;
    trail.row = row;
    let Some(forwarded) = forwarded else { return CallExit::Cancelled };
    gateway.metrics.observe_relay(permitted.call.tool.upstream, relayed.elapsed());
    // A bridged call that asks for input (`crate::bridge`) was not answered yet: the round's exit says so.
    if let Forwarded::Response(response) = &forwarded
        && let Some(result) = response.get("result")
        && result.get("resultType").and_then(Value::as_str) == Some("input_required")
        && session.envelope_of(id).is_some()
    {
        return CallExit::InputRequired(result.clone());
    }
    let from_upstream = matches!(forwarded, Forwarded::Response(_));
    let unsent = match &forwarded {
        Forwarded::Failed { unsent, .. } => *unsent,
        Forwarded::Response(_) => None,
    };
    let response = post_process(gateway, &permitted.call.tool, id, forwarded);
    CallExit::Answered { response, from_upstream, unsent }
}

/// Phase 2 for a call that needs a person: the question (which journals the call's one row into `row` as the
/// person is asked, so the console's queue and a crash both find it); approved, the call is permitted with the
/// tool as the catalog has it now.
async fn ask(
    context: &CallContext<'_>,
    resolved: ResolvedCall,
    decision: Decision,
    row: &mut Option<PendingCall>,
) -> Result<Permitted, CallExit> {
    let question = Question { tool: &resolved.tool, params: &resolved.params, decision: &decision };
    match confirm(context, &question, row).await {
        None => Err(CallExit::Cancelled),
        // The tool as the catalog has it now (the same definition the person approved, re-resolved after the
        // wait), so the call goes where the catalog says and the audit row shows its current hints.
        Some(Confirmation::Approved { approval_id, via, tool }) => {
            let mut decision = decision;
            let reason = Reason::new("confirmed", format!("a person approved it ({})", via.as_str()));
            decision.reasons.insert(0, reason);
            Ok(permit(ResolvedCall { tool, ..resolved }, decision, approval_id))
        }
        Some(Confirmation::Refused(not_approved)) => Err(CallExit::Refused(Refusal::NotApproved(not_approved))),
        Some(Confirmation::Lapsed { lapse, approval_id }) => {
            Err(CallExit::Refused(Refusal::Lapsed { lapse, approval_id }))
        }
        Some(Confirmation::Unrecorded(error)) => Err(CallExit::Refused(Refusal::AuditUnwritable(error))),
        Some(Confirmation::InputRequired(result)) => Err(CallExit::InputRequired(result)),
        Some(Confirmation::StateRefused(refusal)) => Err(CallExit::Refused(Refusal::BadState(refusal))),
    }
}

/// A permitted call whose audit row is durable: only [`journal`] makes one, and only [`forward`] takes one, so no
/// call leaves toolgate without its row.
pub(crate) struct Journaled {
    permitted: Permitted,
    /// The row to complete when the call ends (`None` without a store).
    row: Option<PendingCall>,
}

/// Phase 3a: makes the call's audit row durable (the store's journal); a call whose row cannot be written is
/// refused, not forwarded. A call a person approved forwards with the row journaled as they were asked (`waiting`),
/// journaled again now with the approval and the tool as it is; if that fails, the row is handed back with the
/// refusal, for the end phase to complete.
async fn journal(
    gateway: &Shared,
    session: &SessionShared,
    permitted: Permitted,
    waiting: Option<PendingCall>,
) -> Result<Journaled, (Refusal, Option<PendingCall>)> {
    let call = &permitted.call;
    let entry =
        audit::call_row(session, &call.tool, &permitted.decision, &call.arguments(), permitted.approval_id.clone());
    if let Some(mut row) = waiting {
        return match row.forwarding(entry) {
            Ok(()) => Ok(Journaled { permitted, row: Some(row) }),
            Err(error) => {
                tracing::error!(%error, "audit record not written; the approved call is not forwarded");
                Err((Refusal::AuditUnwritable(error.to_string()), Some(row)))
            }
        };
    }
    match audit::record_call(gateway, entry).await {
        Ok(row) => Ok(Journaled { permitted, row }),
        Err(error) => Err((Refusal::AuditUnwritable(error), None)),
    }
}
