//! The life of a `tools/call`, as named phases:
//!
//! 1. [`resolve`]: the exposed name becomes a route (upstream, original name) and the tool's effective hints;
//!    unknown or hidden names get the same `isError` result ("Unknown tool: NAME"), as the TypeScript and Python
//!    SDKs answer an unknown tool, so a hidden tool cannot be told from a missing one.
//! 2. [`decide`]: the policy's [`Decision`] (today: allow everything); only an allow yields a [`Permitted`] call.
//! 3. [`forward`]: the permitted call goes upstream under the original name, with toolgate's progress token and
//!    the route registered for cancellation, progress and server requests.
//! 4. [`post_process`]: the upstream's answer becomes the client's response; transport failures become `isError`
//!    results the model can read, JSON-RPC errors from the upstream stay JSON-RPC errors.
//! 5. [`record`]: one structured event per call with its decision, route, duration and outcome.
//!
//! Each phase is a function with one contract, so the guardrails (confirmation, retries, truncation, audit) slot in
//! without reshaping the others.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use toolgate_core::decision::{Decision, Verdict, allow_everything};
use toolgate_upstream::jsonrpc::{self, codes};

use crate::catalog::ExposedTool;
use crate::client::SessionShared;
use crate::dispatch::{relay_response, send_upstream};
use crate::gateway::GatewayInner;

/// A call whose tool was found and is visible to this session.
pub(crate) struct ResolvedCall {
    /// The exposed tool (route, hints, fingerprint).
    pub tool: Arc<ExposedTool>,
    /// The client's `params`, unchanged.
    pub params: Value,
}

/// A call the policy allowed; only [`decide`] can make one, and only [`forward`] takes one.
pub(crate) struct Permitted {
    call: ResolvedCall,
    decision: Decision,
}

/// What the upstream did with a forwarded call.
pub(crate) enum Forwarded {
    /// A response message (result or JSON-RPC error).
    Response(Value),
    /// The upstream could not be reached or failed; the text says which and how.
    Failed(String),
}

/// Phase 1: finds the tool the client named, as this session may see it.
pub(crate) fn resolve(gateway: &GatewayInner, session: &SessionShared, params: Value) -> Result<ResolvedCall, String> {
    let name = params.get("name").and_then(Value::as_str).unwrap_or_default().to_owned();
    let catalog = gateway.catalog();
    let visible =
        catalog.tool(&name).filter(|tool| !tool.task_required && (!tool.app_only || session.declares_apps())).cloned();
    match visible {
        Some(tool) => Ok(ResolvedCall { tool, params }),
        None => Err(format!("Unknown tool: {name}")),
    }
}

/// Phase 2: the policy decides; a verdict other than allow is returned as the refusal.
pub(crate) fn decide(call: ResolvedCall) -> Result<Permitted, (ResolvedCall, Decision)> {
    let decision = allow_everything(&call.tool.hints);
    match decision.verdict {
        Verdict::Allow => Ok(Permitted { call, decision }),
        Verdict::Confirm | Verdict::Deny | Verdict::Hide => Err((call, decision)),
    }
}

/// Phase 3: sends the permitted call upstream under the tool's original name. `None` when the client cancelled.
pub(crate) async fn forward(
    gateway: &Arc<GatewayInner>,
    session: &Arc<SessionShared>,
    id: &Value,
    permitted: &Permitted,
    cancel: &CancellationToken,
) -> Option<Forwarded> {
    let tool = &permitted.call.tool;
    let mut params = permitted.call.params.clone();
    params["name"] = Value::String(tool.original_name.clone());
    let outcome = send_upstream(gateway, session, id, tool.upstream, "tools/call", params, cancel).await?;
    Some(match outcome {
        Ok(response) => Forwarded::Response(response),
        Err(message) => Forwarded::Failed(message),
    })
}

/// Phase 4: the client's response for what the upstream did.
pub(crate) fn post_process(id: &Value, forwarded: Forwarded) -> Value {
    match forwarded {
        Forwarded::Response(response) => relay_response(id, response),
        Forwarded::Failed(message) => jsonrpc::response(
            id,
            json!({"content": [{"type": "text", "text": format!("toolgate: {message}")}], "isError": true}),
        ),
    }
}

/// Phase 5: one structured event per call.
pub(crate) fn record(session: &SessionShared, permitted: &Permitted, response: &Value, elapsed: Duration) {
    let outcome = if response.get("error").is_some() {
        "protocol_error"
    } else if response.pointer("/result/isError") == Some(&Value::Bool(true)) {
        "tool_error"
    } else {
        "ok"
    };
    let tool = &permitted.call.tool;
    let rule = permitted.decision.reasons.first().map(|reason| reason.rule.as_str()).unwrap_or_default();
    // Debug, not info: one line per call on stderr would cost more than the relay itself; the audit log is the
    // product record of calls.
    tracing::debug!(
        session = %session.id,
        tool = %tool.original_name,
        upstream = tool.upstream,
        verdict = ?permitted.decision.verdict,
        rule,
        outcome,
        micros = u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX),
        "tools/call"
    );
}

/// Runs the phases for one `tools/call`.
pub(crate) async fn call_tool(
    gateway: &Arc<GatewayInner>,
    session: &Arc<SessionShared>,
    id: &Value,
    params: Value,
    cancel: &CancellationToken,
) -> Option<Value> {
    let started = Instant::now();
    if params.get("name").and_then(Value::as_str).is_none() {
        return Some(jsonrpc::error_response(id, codes::INVALID_PARAMS, "tools/call needs a string `name`"));
    }
    let resolved = match resolve(gateway, session, params) {
        Ok(resolved) => resolved,
        Err(message) => return Some(unknown_tool(id, &message)),
    };
    let permitted = match decide(resolved) {
        Ok(permitted) => permitted,
        Err((call, decision)) => return Some(refusal(id, &call, &decision)),
    };
    let forwarded = forward(gateway, session, id, &permitted, cancel).await?;
    let response = post_process(id, forwarded);
    record(session, &permitted, &response, started.elapsed());
    Some(response)
}

/// The answer to a call the policy did not allow: hidden tools look unknown, denials are `isError` results.
fn refusal(id: &Value, call: &ResolvedCall, decision: &Decision) -> Value {
    if decision.verdict == Verdict::Hide {
        let name = call.params.get("name").and_then(Value::as_str).unwrap_or_default();
        return unknown_tool(id, &format!("Unknown tool: {name}"));
    }
    let reasons: Vec<&str> = decision.reasons.iter().map(|reason| reason.detail.as_str()).collect();
    jsonrpc::response(
        id,
        json!({"content": [{"type": "text", "text": format!("toolgate refused this call: {}", reasons.join("; "))}], "isError": true}),
    )
}

/// The answer for a name that is not (visibly) in the catalog: an `isError` result, as the TypeScript and Python
/// SDKs answer it, so the model can read it and a hidden tool is indistinguishable from a missing one.
fn unknown_tool(id: &Value, message: &str) -> Value {
    jsonrpc::response(id, json!({"content": [{"type": "text", "text": message}], "isError": true}))
}
