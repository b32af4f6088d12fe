//! A person's confirmation of a 2026-07-28 call in URL mode: the question is not shown by the client but decided in
//! toolgate's console, signed in and under its approver rules. The first request queues a **detached** approval in
//! the store (no call waits on it in any process: `ApprovalStore::create_detached`) and is answered at once with
//! `input_required` holding a URL-mode elicitation whose `url` is the console's page for that approval
//! (`{console_url}/approvals/{id}`), and a sealed `requestState` (`tga1.`, `guard::request_state`) that binds the
//! caller, the tool's exposed name and fingerprint, the argument digest, an expiry and a single-use nonce to the
//! approval's id.
//!
//! The retry is resolved and decided afresh like any request; then the state is opened for that call (a tool that
//! changed lapses the approval), its nonce is used once in the store, and the approval is read from the store, so
//! the retry may reach any toolgate process on it: approved, it is consumed for the tool as it is now and the call
//! goes on; denied, refused; still pending, the retry waits a little for the decision (at most [`MAX_RETRY_WAIT`] or
//! the confirmation timeout) and is then asked again with the same approval under a fresh state, never a second
//! approval; past the approval's expiry, refused and the approval lapsed. The state outlives the approval by
//! [`RETRY_GRACE`] so a late retry gets that clear refusal rather than a bare "expired state" error. The client's own
//! answer to the URL question approves nothing (a person decides in the console); a `decline` or `cancel` withdraws
//! the call and lapses its approval.
//!
//! Nothing here forwards a call, writes an audit row or lapses anything but this call's own approval; every end is a
//! [`ConsoleRound`] that `guard::confirm` turns into its `Confirmation` (this module imports nothing of `confirm`).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};
use toolgate_store::{ApprovalId, ApprovalState, ApprovalWait, Store, StoreError};

use crate::access::Lapse;
use crate::call::context::CallContext;
use crate::catalog::ExposedTool;
use crate::guard::approval_quota::QuotaExceeded;
use crate::guard::request_state::{self, ConfirmationBinding, RequestStateError};
use crate::guard::round_trip::{
    CONFIRM_INPUT, NONCE_MARGIN, Opening, StateRefusal, open_round, refusal_of, unix_seconds,
};
use crate::guard::waiting::new_approval;

/// The longest a retry whose approval is still pending waits for a person before it is asked again: long enough
/// that a client retrying at once does not spin, short enough for an HTTP request to stay open.
pub(crate) const MAX_RETRY_WAIT: Duration = Duration::from_secs(30);

/// How long a URL round's state outlives its approval, so a retry after the approval expired is told so (and
/// audited as `timed_out`) instead of being refused as an expired state.
const RETRY_GRACE: Duration = Duration::from_secs(10 * 60);

/// How one request of a URL-mode confirmation ended.
pub(crate) enum ConsoleRound {
    /// Answer the request with this `input_required` result; the call waits on `approval` (its row names it).
    Ask { result: Value, approval: ApprovalId },
    /// A wrapped upstream round of this very call shows a person confirmed it already (`crate::upstream_rounds`).
    ConfirmedEarlier,
    /// A person approved it in the console (or with `toolgate approvals`), and the approval was used for this call.
    Approved { approval: ApprovalId },
    /// A person denied it.
    Denied { approval: ApprovalId, by: String },
    /// The client's user declined (or dismissed) opening the console: the approval lapsed.
    Declined { approval: ApprovalId, cancelled: bool },
    /// Nobody decided before the approval expired (after this long): it lapsed.
    Expired { approval: ApprovalId, after: Duration },
    /// The approval was used already.
    AlreadyUsed { approval: ApprovalId },
    /// The approval lapsed before anyone decided.
    LapsedUndecided { approval: ApprovalId },
    /// The tool changed since the person was asked: the approval lapsed.
    ToolChanged { approval: ApprovalId, lapse: Lapse },
    /// A person approved it, but the approval could not be used (`store_failed`: the store failed, rather than
    /// refusing the use for a reason a client may read).
    Unusable { approval: ApprovalId, by: String, error: String, store_failed: bool },
    /// The client withdrew the retry while it waited for the decision: the approval lapsed.
    Withdrawn { approval: ApprovalId },
    /// The state (or the answer) was refused.
    Refused(StateRefusal),
    /// The caller has as many approvals open as it may.
    QueueFull(QuotaExceeded),
    /// The approval could not be queued.
    CannotQueue(String),
    /// No store: no queue, nothing to seal with.
    NoStore,
}

/// What is asked: the tool as resolved for this request, the request's params, the console's base URL, the
/// `elicitation/create` params toolgate would show (`message`, `_meta`; the mode and URL are added here) and the
/// arguments as a person reads them.
pub(crate) struct UrlQuestion<'a> {
    pub(crate) tool: &'a ExposedTool,
    pub(crate) params: &'a Value,
    pub(crate) console_url: &'a str,
    pub(crate) question: Value,
    pub(crate) summary: &'a str,
}

/// One request of a URL-mode confirmation; see the module's comment.
pub(crate) async fn confirm(context: &CallContext<'_>, asked: &UrlQuestion<'_>) -> ConsoleRound {
    let UrlQuestion { tool, params, .. } = *asked;
    let (store, key, call, state) = match open_round(context, tool, params).await {
        Opening::NoStore => return ConsoleRound::NoStore,
        Opening::Refused(refusal) => return ConsoleRound::Refused(refusal),
        Opening::ConfirmedEarlier => return ConsoleRound::ConfirmedEarlier,
        Opening::First { store, key, call } => return first_round(context, asked, store, &key, call).await,
        Opening::Retry { store, key, call, state } => (store, key, call, state),
    };
    let (sealed, approval) = match request_state::open_approval_round(&key, state) {
        Ok(opened) => opened,
        Err(error) => return ConsoleRound::Refused(refusal_of(&error)),
    };
    let approval = ApprovalId::from_text(&approval);
    let opened = match request_state::check_binding(sealed, &call, unix_seconds(SystemTime::now())) {
        Ok(opened) => opened,
        Err(RequestStateError::ToolChanged { asked }) => {
            // The person decides (or decided) about a definition the call no longer reaches: nothing may use it.
            let lapse = Lapse {
                why: "its definition changed",
                current_fingerprint: Some(tool.fingerprint.clone()),
                approved_fingerprint: Some(asked),
            };
            lapse_approval(store, &approval, "the tool changed before the call was retried").await;
            return ConsoleRound::ToolChanged { approval, lapse };
        }
        Err(error) => return ConsoleRound::Refused(refusal_of(&error)),
    };
    // Used before the approval is read: this state opens no second time, here or on another process.
    let expires = UNIX_EPOCH + Duration::from_secs(opened.expires_at) + NONCE_MARGIN;
    match store.request_states().use_nonce(&opened.nonce, expires).await {
        Ok(true) => {}
        Ok(false) => return ConsoleRound::Refused(StateRefusal::Replayed),
        Err(error) => return ConsoleRound::Refused(StateRefusal::Unavailable(error.to_string())),
    }
    // The client's answer says only whether its user went to the console; a decline withdraws the call.
    if let Some(answer) = params.get("inputResponses").and_then(|responses| responses.get(CONFIRM_INPUT)) {
        match answer.get("action").and_then(Value::as_str) {
            Some("accept") => {}
            Some(action @ ("decline" | "cancel")) => {
                lapse_approval(store, &approval, "the client's user declined to open the console").await;
                return ConsoleRound::Declined { approval, cancelled: action == "cancel" };
            }
            _ => return ConsoleRound::Refused(StateRefusal::MalformedAnswer),
        }
    }
    read_decision(context, asked, store, &key, call, approval).await
}

/// The retry's approval as the store has it, waiting (bounded) for a decision while it is pending.
async fn read_decision(
    context: &CallContext<'_>,
    asked: &UrlQuestion<'_>,
    store: &Store,
    key: &[u8],
    call: ConfirmationBinding,
    approval: ApprovalId,
) -> ConsoleRound {
    let CallContext { gateway, cancel, .. } = *context;
    let approvals = store.approvals();
    let record = match approvals.get(&approval).await {
        Ok(Some(record)) => record,
        Ok(None) => return ConsoleRound::LapsedUndecided { approval },
        Err(error) => return ConsoleRound::Refused(StateRefusal::Unavailable(error.to_string())),
    };
    // The state binds the caller already; the row must agree, or it is not this call's approval.
    if record.approval.caller.as_deref() != Some(call.caller.as_str()) {
        return ConsoleRound::Refused(StateRefusal::OtherCaller);
    }
    if !record.detached {
        return ConsoleRound::Refused(StateRefusal::Malformed);
    }
    let lifetime = record.approval.expires.duration_since(record.approval.created).unwrap_or_default();
    let decision = match record.state {
        ApprovalState::Approved => ApprovalWait::Approved { by: record.decided_by.unwrap_or_default() },
        ApprovalState::Denied => ApprovalWait::Denied { by: record.decided_by.unwrap_or_default() },
        ApprovalState::Consumed => ApprovalWait::AlreadyConsumed,
        ApprovalState::Lapsed => ApprovalWait::Lapsed,
        ApprovalState::Pending => {
            let wait = gateway.spec.guardrails.confirmation.timeout.min(MAX_RETRY_WAIT);
            tokio::select! {
                () = cancel.cancelled() => {
                    // Its state is used: no later retry can name this approval, so nothing may decide it.
                    lapse_approval(store, &approval, "the client withdrew its retry").await;
                    return ConsoleRound::Withdrawn { approval };
                }
                decision = approvals.wait(&approval, wait) => match decision {
                    Ok(decision) => decision,
                    Err(error) => return ConsoleRound::Refused(StateRefusal::Unavailable(error.to_string())),
                },
            }
        }
    };
    match decision {
        ApprovalWait::Approved { by } => {
            // Used for the tool as this retry resolved it: the store checks the fingerprint and arguments again.
            match approvals.consume(&approval, &asked.tool.fingerprint, &call.args_digest).await {
                Ok(()) => ConsoleRound::Approved { approval },
                Err(error) => {
                    lapse_approval(store, &approval, "the approval could not be used").await;
                    let store_failed = !matches!(error, StoreError::ApprovalRefused { .. });
                    if store_failed {
                        tracing::error!(%error, %approval, "an approved call's approval cannot be used");
                    }
                    ConsoleRound::Unusable { approval, by, error: error.to_string(), store_failed }
                }
            }
        }
        ApprovalWait::Denied { by } => ConsoleRound::Denied { approval, by },
        ApprovalWait::AlreadyConsumed => ConsoleRound::AlreadyUsed { approval },
        ApprovalWait::Lapsed => ConsoleRound::LapsedUndecided { approval },
        ApprovalWait::Expired => {
            lapse_approval(store, &approval, "nobody decided before it expired").await;
            ConsoleRound::Expired { approval, after: lifetime }
        }
        // Still undecided: asked again about the same approval, under a fresh state (its nonce is new).
        ApprovalWait::TimedOut => {
            let expires = record.approval.expires;
            ConsoleRound::Ask { result: ask(key, call, &approval, expires, asked), approval }
        }
    }
}

/// The first request: a detached approval queued (within the caller's cap) and the URL question asked about it.
async fn first_round(
    context: &CallContext<'_>,
    asked: &UrlQuestion<'_>,
    store: &Store,
    key: &[u8],
    call: ConfirmationBinding,
) -> ConsoleRound {
    let CallContext { gateway, session, .. } = *context;
    let tool = asked.tool;
    // The in-process place is held only while the approval is queued, so a burst in this process is counted one at
    // a time against the store's count of the caller's open approvals (no call holds a place while it waits).
    let _slot = match gateway.approval_quota.reserve(&session.id, &session.caller.name) {
        Ok(slot) => slot,
        Err(exceeded) => return ConsoleRound::QueueFull(exceeded),
    };
    let limit = gateway.spec.limits.max_pending_approvals_per_caller.max(1);
    match store.approvals().count_detached_open(&session.caller.name).await {
        Ok(open) if open >= u64::try_from(limit).unwrap_or(u64::MAX) => {
            return ConsoleRound::QueueFull(QuotaExceeded::Caller(limit));
        }
        Ok(_) => {}
        Err(error) => return ConsoleRound::CannotQueue(error.to_string()),
    }
    let pending = new_approval(gateway, session, tool, asked.summary, call.args_digest.clone());
    if let Err(error) = store.approvals().create_detached(&pending).await {
        tracing::error!(%error, "cannot queue a detached approval");
        return ConsoleRound::CannotQueue(error.to_string());
    }
    tracing::warn!(
        tool = %tool.exposed_name,
        upstream = %tool.upstream_name,
        approval = %pending.id,
        "a 2026-07-28 call waits for approval in the console; its client retries once it is decided"
    );
    let result = ask(key, call, &pending.id, pending.expires, asked);
    ConsoleRound::Ask { result, approval: pending.id }
}

/// The `input_required` result: a URL-mode elicitation to the console's page of `approval` under [`CONFIRM_INPUT`],
/// and a fresh state naming it, valid until [`RETRY_GRACE`] after the approval expires.
fn ask(
    key: &[u8],
    mut call: ConfirmationBinding,
    approval: &ApprovalId,
    expires: SystemTime,
    asked: &UrlQuestion<'_>,
) -> Value {
    call.expires_at = unix_seconds(expires + RETRY_GRACE);
    call.nonce = uuid::Uuid::new_v4().to_string();
    let sealed = request_state::seal_approval_round(key, &call, approval.as_str());
    let mut params = asked.question.clone();
    if let Value::Object(object) = &mut params {
        object.insert("mode".into(), json!("url"));
        object.insert("url".into(), json!(approval_page(asked.console_url, approval)));
        // 2026-07-28 removed `elicitationId`: the approval is named in the URL and, for a program, in `_meta`.
        if let Some(Value::Object(meta)) = object.get_mut("_meta") {
            meta.insert("toolgate/approval".into(), json!(approval.as_str()));
        }
    }
    json!({
        "resultType": "input_required",
        "inputRequests": {CONFIRM_INPUT: {"method": "elicitation/create", "params": params}},
        "requestState": sealed,
    })
}

/// The console's page of one approval.
pub(crate) fn approval_page(console_url: &str, approval: &ApprovalId) -> String {
    format!("{}/approvals/{}", console_url.trim_end_matches('/'), approval.as_str())
}

/// Lapses this call's approval (conditional in the store: a decided or used one stays as it is); logged, not
/// returned, since the call's answer does not depend on it.
async fn lapse_approval(store: &Store, approval: &ApprovalId, why: &str) {
    let lapsed: Result<bool, StoreError> = store.approvals().lapse(approval, why).await;
    if let Err(error) = lapsed {
        tracing::warn!(%error, %approval, why, "cannot lapse a detached approval");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_of_an_approval_is_under_the_console_url() {
        let id = ApprovalId::from_text("abc");
        assert_eq!(
            approval_page("https://gate.example.com/console", &id),
            "https://gate.example.com/console/approvals/abc"
        );
        assert_eq!(approval_page("http://127.0.0.1:8080/console/", &id), "http://127.0.0.1:8080/console/approvals/abc");
    }
}
