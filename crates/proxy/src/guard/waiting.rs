//! A call waiting in the approval queue, kept truthful: the client is told at once where its call waits, and the
//! queue forgets the call as soon as the call stops waiting.
//!
//! A client that cannot show a form would otherwise wait in silence until the timeout; [`tell_where_it_waits`]
//! sends it a `notifications/message` (and `notifications/progress` when the call carried a progress token) naming
//! the console's approvals page and the exact `toolgate approvals approve|deny ID` commands. The approval id in that
//! notice is a locator, not a capability: approving needs the state store (the CLI) or a console login, never
//! anything a client or a model can send, and the notice travels as a log line or progress, never in a tool result.
//!
//! [`QueuedCall`] holds the approval while the call waits. However the wait ends without a decision being used (the
//! timeout, the client's cancel, the session closing, the task being dropped, the gateway stopping), the approval
//! is lapsed in the store with the reason, so `toolgate approvals list` and the console show only live calls and
//! approving a lapsed one says that nothing waits. This module never decides a call, never consumes an approval and
//! writes no audit row: the call's own row (journaled as the person was asked) is completed by the call's end phase
//! with why it stopped waiting, or, when the gateway stops or the task is dropped, with `unanswered`.
//!
//! [`new_approval`] is the one place an approval for a call is made, whether a call waits on it here or a
//! 2026-07-28 URL-mode round leaves it detached (`guard::console_round`).

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use toolgate_core::display::quoted;
use toolgate_store::{ApprovalId, PendingApproval, ToolRisk};

use crate::catalog::ExposedTool;
use crate::state::approvals::WaitingCall;
use crate::state::session::SessionShared;
use crate::state::shared::Shared;

/// Longest tool or upstream name in the notice.
const NAME_CHARS: usize = 80;

/// The approval a person is asked for about a call of `tool` by `session`: what the queue and the console show
/// (title, action, risk, the arguments as a person reads them, `summary`) and what it binds (the tool's fingerprint
/// and `args_digest`), expiring after the confirmation settings' approval lifetime.
pub(crate) fn new_approval(
    gateway: &Shared,
    session: &SessionShared,
    tool: &ExposedTool,
    summary: &str,
    args_digest: String,
) -> PendingApproval {
    let now = std::time::SystemTime::now();
    PendingApproval {
        id: ApprovalId::generate(),
        session: session.id.clone(),
        upstream: tool.upstream_name.clone(),
        tool: tool.exposed_name.clone(),
        title: tool.facts.display_title.clone(),
        action: tool.facts.action.clone(),
        risk: Some(ToolRisk::from_facts(&tool.facts)),
        args_summary: summary.to_owned(),
        tool_fingerprint: tool.fingerprint.clone(),
        args_digest,
        created: now,
        expires: now + gateway.spec.guardrails.confirmation.approval_ttl,
        caller: Some(session.caller.name.clone()),
    }
}

/// An approval a call is waiting on. Settle it with [`QueuedCall::used`] when a decision reached the call, or
/// [`QueuedCall::lapse`] when the call stops waiting; dropped unsettled (the task ended another way), it lapses in
/// the background.
pub(crate) struct QueuedCall {
    gateway: Arc<Shared>,
    session: Arc<SessionShared>,
    id: ApprovalId,
    cancel: CancellationToken,
    settled: bool,
}

impl QueuedCall {
    /// Registers `id` (already created in the store) as waited on by this call to a tool of upstream `upstream`.
    pub(crate) fn new(
        gateway: &Arc<Shared>,
        session: &Arc<SessionShared>,
        upstream: usize,
        id: &ApprovalId,
        cancel: &CancellationToken,
    ) -> QueuedCall {
        gateway.waiting_approvals.insert(WaitingCall { id: id.clone(), upstream });
        QueuedCall {
            gateway: Arc::clone(gateway),
            session: Arc::clone(session),
            id: id.clone(),
            cancel: cancel.clone(),
            settled: false,
        }
    }

    /// A decision reached the call (approved, denied, or already settled elsewhere): nothing to lapse.
    pub(crate) fn used(mut self) {
        self.settled = true;
        self.gateway.waiting_approvals.remove(&self.id);
    }

    /// The call stops waiting for `why`: the approval leaves the queue, lapsed with the reason (the call's end
    /// phase completes its audit row).
    pub(crate) async fn lapse(mut self, why: &str) {
        self.settled = true;
        self.gateway.waiting_approvals.remove(&self.id);
        lapse_now(&self.gateway, &self.id, why).await;
    }

    /// Why the call stopped waiting, as far as its task can tell.
    pub(crate) fn why_it_ended(&self) -> &'static str {
        if self.cancel.is_cancelled() || self.gateway.shutdown.is_cancelled() || self.session.closed.is_cancelled() {
            why_withdrawn(&self.gateway, &self.session)
        } else {
            "the call ended"
        }
    }
}

/// Why a call that was waiting for a person ended without an answer, its client having cancelled it: the gateway
/// stopping or the session closing cancel every call, so they are named first.
pub(crate) fn why_withdrawn(gateway: &Shared, session: &SessionShared) -> &'static str {
    if gateway.shutdown.is_cancelled() {
        "the gateway stopped"
    } else if session.closed.is_cancelled() {
        "the client went away (its session closed)"
    } else {
        "the client cancelled the call"
    }
}

impl Drop for QueuedCall {
    fn drop(&mut self) {
        if self.settled {
            return;
        }
        self.gateway.waiting_approvals.remove(&self.id);
        let why = self.why_it_ended();
        let (gateway, id) = (Arc::clone(&self.gateway), self.id.clone());
        // Outside a runtime (a shutdown dropped the task) nothing can run: the gateway's own shutdown lapses it.
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move { lapse_now(&gateway, &id, why).await });
        }
    }
}

/// Lapses every approval a call still waits on: the gateway is stopping, and the calls' own tasks may never run
/// again (when one does, its approval is already lapsed). Their rows, journaled as the person was asked, are
/// completed as `unanswered` when their tasks are dropped, or recovered so at the next start.
pub(crate) async fn lapse_all(gateway: &Shared, why: &str) {
    for call in gateway.waiting_approvals.take_all() {
        lapse_now(gateway, &call.id, why).await;
    }
}

/// Lapses every approval a call waits on for a tool of one of `upstreams`: a config reload took those upstreams out
/// of service, so no decision could be used. The waiting call sees its approval lapsed and completes its row so.
pub(crate) async fn lapse_for_upstreams(gateway: &Shared, upstreams: &[usize], why: &str) {
    for call in gateway.waiting_approvals.take_for_upstreams(upstreams) {
        lapse_now(gateway, &call.id, why).await;
    }
}

async fn lapse_now(gateway: &Shared, id: &ApprovalId, why: &str) {
    let Some(store) = &gateway.store else { return };
    if let Err(error) = store.approvals().lapse(id, why).await {
        tracing::warn!(%error, approval = %id, why, "cannot lapse an approval nothing waits for");
    }
}

/// Tells the client at once where its call waits: a `notifications/message` (level `warning`, logger `toolgate`)
/// and, when the call carried a progress token, a `notifications/progress`, both tied to the call's request.
pub(crate) fn tell_where_it_waits(
    gateway: &Shared,
    session: &SessionShared,
    request_id: &Value,
    params: &Value,
    tool: &ExposedTool,
    id: &ApprovalId,
    timeout: Duration,
) {
    let directions = gateway.approval_directions();
    let approve = directions.command("approve", id);
    let deny = directions.command("deny", id);
    let mut text = format!(
        "toolgate: this call to {} on upstream {} waits for a person's approval (at most {} s). Approve it with `{}` \
         or deny it with `{}`",
        quoted(&tool.exposed_name, NAME_CHARS),
        quoted(&tool.upstream_name, NAME_CHARS),
        timeout.as_secs(),
        approve,
        deny
    );
    if let Some(url) = &directions.console_url {
        text.push_str(&format!(", or in the console: {url}"));
    }
    text.push('.');
    let mut data = json!({
        "message": text,
        "approval": id.as_str(),
        "approve": approve,
        "deny": deny,
        "waitsSeconds": timeout.as_secs(),
    });
    if let Some(url) = &directions.console_url {
        data["console"] = Value::String(url.clone());
    }
    // A 2026-07-28 request gets log lines only at the level its own `_meta` asked for (none without one); the
    // progress notification below still tells it, when it carried a progress token.
    let logs_wanted =
        crate::era::RequestEnvelope::of(Some(params)).is_none_or(|envelope| envelope.admits_log(Some("warning")));
    if logs_wanted {
        let log = json!({"jsonrpc": "2.0", "method": "notifications/message",
                         "params": {"level": "warning", "logger": "toolgate", "data": data}});
        session.offer_related(request_id.clone(), log);
    }
    if let Some(token) = params.pointer("/_meta/progressToken").filter(|token| token.is_string() || token.is_number()) {
        let progress = json!({"jsonrpc": "2.0", "method": "notifications/progress",
                              "params": {"progressToken": token, "progress": 0, "message": text}});
        session.offer_related(request_id.clone(), progress);
    }
}
