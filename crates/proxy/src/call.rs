//! The life of a `tools/call`, as named phases:
//!
//! 1. [`resolve`]: the exposed name becomes a route (upstream, original name) and the tool's effective hints;
//!    unknown or hidden names get the same `isError` result ("Unknown tool: NAME"), as the TypeScript and Python
//!    SDKs answer an unknown tool, so a hidden tool cannot be told from a missing one. A tool whose upstream is
//!    down and reconnecting (`known_tools`) is decided like a listed one and then answered "upstream NAME is
//!    reconnecting (attempt N)", audited and counted (outcome `upstream_unavailable`).
//! 2. [`decide`]: the policy's [`Decision`] (rules, mode, session taint, quarantine). Allow yields a [`Permitted`]
//!    call; confirm asks a person first (`guard::confirm`); deny is an `isError` result; hide looks unknown.
//! 3. [`forward`]: the permitted call goes upstream under the original name, with toolgate's progress token and
//!    the route registered for cancellation, progress and server requests; transport failures are retried only
//!    for tools that are read-only or idempotent by their trusted hints.
//! 4. [`post_process`]: the upstream's answer becomes the client's response; transport failures become `isError`
//!    results the model can read, JSON-RPC errors from the upstream stay JSON-RPC errors.
//! 5. [`record`]: session taint, the outcome and duration in the call's audit row, one structured event per call.
//!    That row is made durable (journaled) between 2 and 3: a call whose row cannot be written is not forwarded.
//!
//! Each phase is a function with one contract, so the guardrails (confirmation, retries, truncation, audit) slot in
//! without reshaping the others.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use toolgate_core::decision::{Decision, Reason, Verdict};
use toolgate_core::policy::taints_session;
use toolgate_store::{AuditKind, PendingCall};
use toolgate_upstream::UpstreamError;
use toolgate_upstream::jsonrpc::{self, codes};

use crate::access::{call_facts, decide_with, visible_to};
use crate::catalog::ExposedTool;
use crate::guard::confirm::{Confirmation, confirm};
use crate::guard::{audit, results};
use crate::metrics::registry::Outcome;
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

/// A call the policy allowed (or a person approved); only [`permit`] makes one, and only [`forward`] takes one.
pub(crate) struct Permitted {
    call: ResolvedCall,
    decision: Decision,
    approval_id: Option<String>,
}

/// What the upstream did with a forwarded call.
pub(crate) enum Forwarded {
    /// A response message (result or JSON-RPC error).
    Response(Value),
    /// The upstream could not be reached or failed; the text says which and how.
    Failed(String),
}

/// A name phase 1 did not find in the catalog, with the client's `params` given back.
pub(crate) struct Unresolved {
    name: String,
    params: Value,
}

impl Unresolved {
    /// What a client is told about a name that is missing or hidden.
    fn unknown_tool(&self) -> String {
        format!("Unknown tool: {}", self.name)
    }
}

/// Phase 1: finds the tool the client named, as this session may see it.
pub(crate) fn resolve(gateway: &Shared, session: &SessionShared, params: Value) -> Result<ResolvedCall, Unresolved> {
    let name = params.get("name").and_then(Value::as_str).unwrap_or_default().to_owned();
    match crate::access::resolve(&gateway.catalog(), &session.viewer(), &name) {
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
        Some((tool, attempt)) if visible_to(&tool, &session.viewer()) => {
            Ok((ResolvedCall { tool, params: unresolved.params }, attempt))
        }
        _ => Err(unresolved),
    }
}

/// Phase 2: the policy's decision. A quarantined tool (its definition changed since it was pinned, or it is new on
/// a pinned upstream) is decided on its untrusted hints (see `catalog`), and needs a person's approval even where
/// the rules would allow it.
pub(crate) fn decide(gateway: &Shared, session: &SessionShared, call: &ResolvedCall) -> Decision {
    decide_with(&gateway.policy(), &call.tool, &call_facts(&call.tool, &session.viewer()))
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
    permitted: &Permitted,
    cancel: &CancellationToken,
) -> Option<Forwarded> {
    let tool = &permitted.call.tool;
    let mut params = permitted.call.params.clone();
    params["name"] = Value::String(tool.original_name.clone());
    let retries = &gateway.spec.guardrails.retries;
    let retry_safe = tool.hints.is_idempotent();
    let timeout = gateway.upstreams.get(tool.upstream).map_or(Duration::ZERO, |runtime| runtime.spec.request_timeout);
    let deadline = Instant::now() + timeout;
    let mut backoff = retries.initial_backoff;
    let mut attempt = 1;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let answer =
            send_upstream(gateway, session, id, tool.upstream, "tools/call", params.clone(), cancel, Some(left));
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
            Err(error) => return Some(Forwarded::Failed(upstream_failure(&tool.upstream_name, &error))),
        }
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
            }
            response
        }
        Forwarded::Failed(message) => tool_error(id, &format!("toolgate: {message}")),
    }
}

/// Phase 5: session taint, the outcome in the call's audit row and one structured event per call.
///
/// `from_upstream` says whether the upstream answered (a result, an `isError` result or a JSON-RPC error): any of
/// them carries text from the tool into the session, so an open-world tool's answer taints it either way.
pub(crate) fn record(
    gateway: &Shared,
    session: &SessionShared,
    permitted: &Permitted,
    audit_row: Option<PendingCall>,
    response: &Value,
    from_upstream: bool,
    elapsed: Duration,
) {
    let outcome = if response.get("error").is_some() {
        "jsonrpc_error"
    } else if response.pointer("/result/isError") == Some(&Value::Bool(true)) {
        "is_error"
    } else {
        "ok"
    };
    let tool = &permitted.call.tool;
    if taints_session(&tool.hints, from_upstream) {
        session.taint();
    }
    let micros = u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX);
    tracing::Span::current().record("outcome", outcome);
    if let Some(audit_row) = audit_row {
        audit_row.finish(outcome, micros);
    }
    gateway.metrics.count_call(
        &tool.upstream_name,
        &tool.original_name,
        permitted.decision.verdict,
        Outcome::of(response),
    );
    // Debug, not info: one line per call on stderr would cost more than the relay itself; the audit log is the
    // product record of calls.
    tracing::debug!(
        session = %session.id,
        tool = %tool.original_name,
        upstream = %tool.upstream_name,
        verdict = ?permitted.decision.verdict,
        rule = permitted.decision.rule(),
        outcome,
        micros,
        "tools/call"
    );
}

/// Runs the phases for one `tools/call`.
pub(crate) async fn call_tool(
    gateway: &Arc<Shared>,
    session: &Arc<SessionShared>,
    id: &Value,
    params: Value,
    cancel: &CancellationToken,
) -> Option<Value> {
    let started = Instant::now();
    if params.get("name").and_then(Value::as_str).is_none() {
        return Some(jsonrpc::error_response(id, codes::INVALID_PARAMS, "tools/call needs a string `name`"));
    }
    let (resolved, reconnecting) = match resolve(gateway, session, params) {
        Ok(resolved) => (resolved, None),
        Err(unresolved) => match resolve_reconnecting(gateway, session, unresolved) {
            Ok((resolved, attempt)) => (resolved, Some(attempt)),
            Err(unresolved) => return Some(tool_error(id, &unresolved.unknown_tool())),
        },
    };
    let decision = decide(gateway, session, &resolved);
    let span = tracing::Span::current();
    span.record("tool", resolved.tool.exposed_name.as_str());
    span.record("upstream", resolved.tool.upstream_name.as_str());
    span.record("verdict", decision.verdict.as_str());
    // A call the policy would let through (or put to a person) cannot be made while its upstream reconnects: say
    // so now, rather than "Unknown tool" or a question to a person about a call that cannot run.
    if let Some(attempt) = reconnecting
        && matches!(decision.verdict, Verdict::Allow | Verdict::Confirm)
    {
        return Some(unavailable(gateway, session, id, &resolved, &decision, attempt, started));
    }
    // An allowed call's decision travels in its `call` row; every other verdict gets a row of its own here.
    if decision.verdict != Verdict::Allow {
        audit::record(gateway, audit::decision_entry(session, &resolved.tool, &decision, &resolved.arguments()));
    }
    let permitted = match decision.verdict {
        Verdict::Allow => permit(resolved, decision, None),
        Verdict::Hide => {
            count_refused(gateway, &resolved, Verdict::Hide);
            let name = resolved.params.get("name").and_then(Value::as_str).unwrap_or_default();
            return Some(tool_error(id, &format!("Unknown tool: {name}")));
        }
        Verdict::Deny => {
            count_refused(gateway, &resolved, Verdict::Deny);
            return Some(refusal(id, &decision));
        }
        Verdict::Confirm => {
            match confirm(gateway, session, id, &resolved.tool, &resolved.params, &decision, cancel).await? {
                // The tool as the catalog has it now (the same definition the person approved, re-resolved after
                // the wait), so the call goes where the catalog says and the audit row shows its current hints.
                Confirmation::Approved { approval_id, via, tool } => {
                    let mut decision = decision;
                    decision.reasons.insert(0, Reason::new("confirmed", format!("a person approved it ({via})")));
                    permit(ResolvedCall { tool, ..resolved }, decision, approval_id)
                }
                Confirmation::Refused(message) => {
                    count_refused(gateway, &resolved, Verdict::Confirm);
                    return Some(tool_error(id, &message));
                }
            }
        }
    };
    let mut entry = audit::call_entry(AuditKind::Call, session, &permitted.call.tool);
    entry.verdict = Some(permitted.decision.verdict);
    entry.reasons = permitted.decision.reasons.clone();
    entry.approval_id = permitted.approval_id.clone();
    entry.args = Some(permitted.call.arguments());
    let audit_row = match audit::record_call(gateway, entry).await {
        Ok(audit_row) => audit_row,
        Err(error) => {
            count_refused(gateway, &permitted.call, permitted.decision.verdict);
            return Some(tool_error(
                id,
                &format!("toolgate: the audit log cannot be written ({error}); the call was not made"),
            ));
        }
    };
    let relayed = Instant::now();
    let Some(forwarded) = forward(gateway, session, id, &permitted, cancel).await else {
        if let Some(audit_row) = audit_row {
            audit_row.finish("cancelled", u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX));
        }
        return None;
    };
    gateway.metrics.observe_relay(permitted.call.tool.upstream, relayed.elapsed());
    let from_upstream = matches!(forwarded, Forwarded::Response(_));
    let response = post_process(gateway, &permitted.call.tool, id, forwarded);
    record(gateway, session, &permitted, audit_row, &response, from_upstream, started.elapsed());
    Some(response)
}

/// The answer to a call whose upstream is down and reconnecting: an `isError` result naming the upstream and the
/// attempt, one `decision` audit row with the verdict and outcome `upstream_unavailable`, and the call counted with
/// that outcome.
fn unavailable(
    gateway: &Shared,
    session: &SessionShared,
    id: &Value,
    call: &ResolvedCall,
    decision: &Decision,
    attempt: u32,
    started: Instant,
) -> Value {
    let tool = &call.tool;
    let mut entry = audit::decision_entry(session, tool, decision, &call.arguments());
    entry.outcome = Some(Outcome::UpstreamUnavailable.label().to_owned());
    entry.duration_us = Some(u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX));
    audit::record(gateway, entry);
    gateway.metrics.count_call(
        &tool.upstream_name,
        &tool.original_name,
        decision.verdict,
        Outcome::UpstreamUnavailable,
    );
    tracing::Span::current().record("outcome", Outcome::UpstreamUnavailable.label());
    tracing::debug!(session = %session.id, tool = %tool.original_name, upstream = %tool.upstream_name, attempt,
        "tools/call while the upstream reconnects");
    tool_error(
        id,
        &format!("toolgate: upstream `{}` is reconnecting (attempt {attempt}); retry later", tool.upstream_name),
    )
}

/// Counts a call that ended before reaching its upstream (its client gets an `isError` result).
fn count_refused(gateway: &Shared, call: &ResolvedCall, verdict: Verdict) {
    gateway.metrics.count_call(&call.tool.upstream_name, &call.tool.original_name, verdict, Outcome::IsError);
}

/// An `isError` result the model reads. Unknown and hidden tools get the same one, as the TypeScript and Python
/// SDKs answer an unknown tool, so a hidden tool cannot be told from a missing one.
fn tool_error(id: &Value, message: &str) -> Value {
    jsonrpc::response(id, json!({"content": [{"type": "text", "text": message}], "isError": true}))
}

/// The answer to a denied call: an `isError` result with the policy's reasons.
fn refusal(id: &Value, decision: &Decision) -> Value {
    let reasons: Vec<&str> = decision.reasons.iter().take(3).map(|reason| reason.detail.as_str()).collect();
    tool_error(id, &format!("toolgate refused this call: {}", reasons.join("; ")))
}
