//! Audit records of listings, decisions, confirmations, calls and results, written through the store.
//!
//! Listings and decisions go through the bounded queue (`try_record`): a full queue is logged as an error and
//! counted, never silently dropped. A forwarded call has one row: journaled before the call leaves toolgate (one
//! append to the store's journal, recovered at the next start), so after a crash every forwarded call has its row,
//! and committed with the outcome and duration when the call ends; if it cannot be journaled the call is not
//! forwarded. A call put to a person has that same one row, journaled as the person is asked ([`record_waiting`]):
//! approved, the call forwards with it; otherwise it is completed with why. A request that is not a tool call
//! (`prompts/get`, `resources/read`, `resources/subscribe`, `completion/complete`) and that toolgate refuses itself
//! has a `request` row ([`record_request_refusal`]), so every refusal the gateway makes is in the log whatever the
//! method.

use serde_json::Value;
use toolgate_core::decision::Decision;
use toolgate_store::{AuditEntry, AuditKind, Caller, PendingCall};

use crate::catalog::ExposedTool;
use crate::guard::refusal_rows::RefusalRow;
use crate::state::session::SessionShared;
use crate::state::shared::Shared;

/// An entry about one tool call, with the session, caller, tool and hint sources filled in.
pub(crate) fn call_entry(kind: AuditKind, session: &SessionShared, tool: &ExposedTool) -> AuditEntry {
    let mut entry = AuditEntry::new(kind);
    entry.session = Some(session.id.clone());
    entry.caller = Some(audit_caller(&session.caller));
    entry.upstream = Some(tool.upstream_name.clone());
    entry.tool = Some(tool.exposed_name.clone());
    entry.hint_sources = Some(tool.hints);
    entry
}

/// How a caller is named in the audit log: its name (an OAuth subject, a configured caller), scopes, and the
/// display name a token gave. Never its token.
pub(crate) fn audit_caller(caller: &toolgate_spec::Caller) -> Caller {
    Caller { identity: Some(caller.name.clone()), scopes: caller.scopes.clone(), display: caller.display.clone() }
}

/// The entry for a decision.
pub(crate) fn decision_entry(
    session: &SessionShared,
    tool: &ExposedTool,
    decision: &Decision,
    arguments: &Value,
) -> AuditEntry {
    let mut entry = call_entry(AuditKind::Decision, session, tool);
    entry.verdict = Some(decision.verdict);
    entry.reasons = decision.reasons.clone();
    entry.args = Some(arguments.clone());
    entry
}

/// Queues the row of a request refused at authentication, unless a row of the same reason and remote address was
/// queued less than a second ago (`refusal_rows`): a flood of bad tokens then writes one row a second per address,
/// each saying how many it stands for, and never crowds other rows out of the bounded queue. Every refusal is
/// counted in the metrics, written or not.
pub(crate) fn record_authentication_refusal(
    gateway: &Shared,
    caller: Option<&toolgate_spec::Caller>,
    reason: &'static str,
    remote: Option<std::net::IpAddr>,
) {
    gateway.metrics.count_authentication_refusal(reason);
    let suppressed_before = match gateway.refusal_rows.admit(reason, remote, std::time::Instant::now()) {
        RefusalRow::Write { suppressed_before } => suppressed_before,
        RefusalRow::Suppress => {
            gateway.metrics.count_authentication_row_suppressed(reason);
            return;
        }
    };
    let mut entry = AuditEntry::new(AuditKind::Authentication);
    entry.caller = caller.map(audit_caller);
    entry.outcome = Some(match suppressed_before {
        0 => format!("refused: {reason}"),
        more => format!("refused: {reason} (and {more} more from this address without a row)"),
    });
    record(gateway, entry);
}

/// Longest prompt name or resource URI a `request` row keeps (the client chose it).
const TARGET_CHARS: usize = 200;

/// A request other than a tool call that toolgate refused itself: before anything was sent upstream for it, or while
/// its upstream call asked for input (a bridged call then cancelled, a modern upstream's round not passed on); and a
/// held bridged call, a tool call's too, that expired and was cancelled upstream.
pub(crate) struct RefusedRequest<'a> {
    /// The request's method (`prompts/get`, `resources/read`, `resources/subscribe`, `completion/complete`; a
    /// `tools/call` only for a held call's expiry, which its call row does not record).
    pub(crate) method: &'a str,
    /// Its params as the client sent them: the target (`name` or `uri`) and a prompt's `arguments` are kept.
    pub(crate) params: &'a Value,
    /// The upstream it would have gone to, when one was found.
    pub(crate) upstream: Option<String>,
    /// Why, as the row's outcome: `state_refused`, `held_for_review`, `unknown_prompt`, `unknown_resource`,
    /// `unknown_reference` (a completion's), `bridge_refused`, `input_refused`.
    pub(crate) outcome: &'static str,
    /// The finer reason, for a refused state (`not_held`, `other_caller`, ...), a bridged call
    /// (`missing_capability`, `held_call_expired`, ...) or a modern upstream's round (`too_many_rounds`, ...).
    pub(crate) reason: Option<&'static str>,
}

/// Queues the `request` row of a refused request that is not a tool call: the same facts a refused tool call's
/// row has (session, caller, upstream, target, arguments, outcome and reason), with the request's method.
pub(crate) fn record_request_refusal(gateway: &Shared, session: &SessionShared, refused: &RefusedRequest<'_>) {
    // A completion names its prompt or resource in `ref`.
    fn named(params: &Value) -> Option<&str> {
        params.get("name").or_else(|| params.get("uri")).and_then(Value::as_str)
    }
    let target = named(refused.params).or_else(|| refused.params.get("ref").and_then(named));
    let mut entry = AuditEntry::new(AuditKind::Request);
    entry.session = Some(session.id.clone());
    entry.caller = Some(audit_caller(&session.caller));
    entry.upstream = refused.upstream.clone();
    entry.tool = target.map(|target| toolgate_core::display::bounded(target, TARGET_CHARS));
    entry.args = refused.params.get("arguments").cloned();
    entry.outcome = Some(refused.outcome.to_owned());
    let mut detail = serde_json::json!({"method": refused.method});
    if let Some(reason) = refused.reason {
        detail["reason"] = Value::from(reason);
    }
    entry.detail = Some(detail);
    record(gateway, entry);
}

/// Queues an entry; a full or closed queue is an error in the log, never a silent drop.
pub(crate) fn record(gateway: &Shared, entry: AuditEntry) {
    let Some(store) = &gateway.store else { return };
    if let Err(error) = store.audit().try_record(entry) {
        tracing::error!(%error, "audit record not written: the audit queue refused it");
    }
}

/// Makes a call's row survive a crash of toolgate before returning (the store's journal: one write, no commit on
/// the call path) and returns the handle that completes the row with the call's outcome; `None` without a store,
/// `Err` when it could not be written.
pub(crate) async fn record_call(gateway: &Shared, entry: AuditEntry) -> Result<Option<PendingCall>, String> {
    let Some(store) = &gateway.store else { return Ok(None) };
    match store.audit().record_journaled(entry).await {
        Ok(pending) => Ok(Some(pending)),
        Err(error) => {
            tracing::error!(%error, "audit record not written; the call is not forwarded");
            Err(error.to_string())
        }
    }
}

/// As [`record_call`], for a call about to be put to a person: its row, journaled as not forwarded (a crash while
/// it waits leaves it `unanswered`). `Err` when it could not be written: then nobody is asked.
pub(crate) async fn record_waiting(gateway: &Shared, entry: AuditEntry) -> Result<Option<PendingCall>, String> {
    let Some(store) = &gateway.store else { return Ok(None) };
    match store.audit().record_waiting(entry).await {
        Ok(pending) => Ok(Some(pending)),
        Err(error) => {
            tracing::error!(%error, "audit record not written; nobody is asked and the call is not made");
            Err(error.to_string())
        }
    }
}

/// The row of a call (kind `call`): the decision that let it through or put it to a person, the approval that
/// let it through (if any) and its arguments. One row per call: journaled before it is forwarded or as a person is
/// asked, completed however the call ends.
pub(crate) fn call_row(
    session: &SessionShared,
    tool: &ExposedTool,
    decision: &Decision,
    arguments: &Value,
    approval_id: Option<String>,
) -> AuditEntry {
    let mut entry = call_entry(AuditKind::Call, session, tool);
    entry.verdict = Some(decision.verdict);
    entry.reasons = decision.reasons.clone();
    entry.approval_id = approval_id;
    entry.args = Some(arguments.clone());
    entry
}
