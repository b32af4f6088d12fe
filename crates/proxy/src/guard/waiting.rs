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
//! approving a lapsed one says that nothing waits. This module never decides a call and never consumes an approval.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use toolgate_core::display::quoted;
use toolgate_store::{ApprovalId, AuditKind, Store};

use crate::catalog::ExposedTool;
use crate::client::SessionShared;
use crate::gateway::GatewayInner;
use crate::guard::audit;

/// Longest tool or upstream name in the notice.
const NAME_CHARS: usize = 80;

/// Where a person decides a queued call, as the process that runs the gateway knows it: the console exists only
/// when an HTTP listener serves it (its address is known once it is bound), and `toolgate approvals` needs
/// `--state-dir` only when the gateway's state is not where the command looks by default.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ApprovalDirections {
    /// The console's approvals page (`http://HOST:PORT/console`).
    pub console_url: Option<String>,
    /// The state directory to name with `--state-dir`, when it is not the default one.
    pub state_dir: Option<String>,
}

impl ApprovalDirections {
    /// The exact command that decides approval `id` (`verb`: `approve` or `deny`).
    pub fn command(&self, verb: &str, id: &ApprovalId) -> String {
        match &self.state_dir {
            Some(dir) => format!("toolgate approvals {verb} {id} --state-dir {}", shell_word(dir)),
            None => format!("toolgate approvals {verb} {id}"),
        }
    }
}

/// `text` as one shell word: unchanged when it holds only characters no shell treats specially, else single-quoted.
fn shell_word(text: &str) -> String {
    let plain = !text.is_empty()
        && text.chars().all(|character| character.is_ascii_alphanumeric() || "/._-+:,@%".contains(character));
    if plain { text.to_owned() } else { format!("'{}'", text.replace('\'', r"'\''")) }
}

/// The approvals this gateway is waiting on, so stopping it lapses them before the process ends (a call task may
/// never run again once the runtime shuts down).
#[derive(Debug, Default)]
pub(crate) struct WaitingApprovals {
    ids: Mutex<HashSet<String>>,
}

impl WaitingApprovals {
    fn insert(&self, id: &ApprovalId) {
        if let Ok(mut ids) = self.ids.lock() {
            ids.insert(id.as_str().to_owned());
        }
    }

    fn remove(&self, id: &ApprovalId) {
        if let Ok(mut ids) = self.ids.lock() {
            ids.remove(id.as_str());
        }
    }

    /// Lapses every approval still waited on: the gateway is stopping and nothing will use them.
    pub(crate) async fn lapse_all(&self, store: &Store, why: &str) {
        let ids: Vec<String> = self.ids.lock().map(|mut ids| ids.drain().collect()).unwrap_or_default();
        for id in ids {
            if let Err(error) = store.approvals().lapse(&ApprovalId::from_text(&id), why).await {
                tracing::warn!(%error, approval = %id, "cannot lapse an approval nothing waits for");
            }
        }
    }
}

/// An approval a call is waiting on. Settle it with [`QueuedCall::used`] when a decision reached the call, or
/// [`QueuedCall::lapse`] when the call stops waiting; dropped unsettled (the task ended another way), it lapses in
/// the background.
pub(crate) struct QueuedCall {
    gateway: Arc<GatewayInner>,
    session: Arc<SessionShared>,
    tool: Arc<ExposedTool>,
    id: ApprovalId,
    cancel: CancellationToken,
    settled: bool,
}

impl QueuedCall {
    /// Registers `id` (already created in the store) as waited on by this call.
    pub(crate) fn new(
        gateway: &Arc<GatewayInner>,
        session: &Arc<SessionShared>,
        tool: &Arc<ExposedTool>,
        id: &ApprovalId,
        cancel: &CancellationToken,
    ) -> QueuedCall {
        gateway.waiting_approvals.insert(id);
        QueuedCall {
            gateway: Arc::clone(gateway),
            session: Arc::clone(session),
            tool: Arc::clone(tool),
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

    /// The call stops waiting for `why`: the approval leaves the queue, with a `confirmation` audit row
    /// (outcome `lapsed`).
    pub(crate) async fn lapse(mut self, why: &str) {
        self.settled = true;
        self.gateway.waiting_approvals.remove(&self.id);
        lapse_now(&self.gateway, &self.session, &self.tool, &self.id, why, true).await;
    }

    /// As [`QueuedCall::lapse`], for a caller that writes its own audit row about why.
    pub(crate) async fn lapse_unaudited(mut self, why: &str) {
        self.settled = true;
        self.gateway.waiting_approvals.remove(&self.id);
        lapse_now(&self.gateway, &self.session, &self.tool, &self.id, why, false).await;
    }

    /// Why the call stopped waiting, as far as its task can tell.
    pub(crate) fn why_it_ended(&self) -> &'static str {
        if self.gateway.shutdown.is_cancelled() {
            "the gateway stopped"
        } else if self.session.closed.is_cancelled() {
            "the client went away (its session closed)"
        } else if self.cancel.is_cancelled() {
            "the client cancelled the call"
        } else {
            "the call ended"
        }
    }
}

impl Drop for QueuedCall {
    fn drop(&mut self) {
        if self.settled {
            return;
        }
        self.gateway.waiting_approvals.remove(&self.id);
        let why = self.why_it_ended();
        let (gateway, session, tool, id) =
            (Arc::clone(&self.gateway), Arc::clone(&self.session), Arc::clone(&self.tool), self.id.clone());
        // Outside a runtime (a shutdown dropped the task) nothing can run: the gateway's own shutdown lapses it.
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move { lapse_now(&gateway, &session, &tool, &id, why, true).await });
        }
    }
}

async fn lapse_now(
    gateway: &GatewayInner,
    session: &SessionShared,
    tool: &ExposedTool,
    id: &ApprovalId,
    why: &str,
    audited: bool,
) {
    let Some(store) = &gateway.store else { return };
    match store.approvals().lapse(id, why).await {
        Ok(false) => {}
        Ok(true) if !audited => {}
        Ok(true) => {
            let mut entry = audit::call_entry(AuditKind::Confirmation, session, tool);
            entry.approval_id = Some(id.as_str().to_owned());
            entry.outcome = Some("lapsed".into());
            entry.detail = Some(json!({"reason": why}));
            audit::record(gateway, entry);
        }
        Err(error) => tracing::warn!(%error, approval = %id, why, "cannot lapse an approval nothing waits for"),
    }
}

/// Tells the client at once where its call waits: a `notifications/message` (level `warning`, logger `toolgate`)
/// and, when the call carried a progress token, a `notifications/progress`, both tied to the call's request.
pub(crate) fn tell_where_it_waits(
    gateway: &GatewayInner,
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
    let log = json!({"jsonrpc": "2.0", "method": "notifications/message",
                     "params": {"level": "warning", "logger": "toolgate", "data": data}});
    session.offer_related(request_id.clone(), log);
    if let Some(token) = params.pointer("/_meta/progressToken").filter(|token| token.is_string() || token.is_number()) {
        let progress = json!({"jsonrpc": "2.0", "method": "notifications/progress",
                              "params": {"progressToken": token, "progress": 0, "message": text}});
        session.offer_related(request_id.clone(), progress);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_names_the_state_directory_only_when_needed_and_quotes_it() {
        let id = ApprovalId::from_text("abc");
        assert_eq!(ApprovalDirections::default().command("approve", &id), "toolgate approvals approve abc");
        let plain = ApprovalDirections { state_dir: Some("/srv/toolgate".into()), ..ApprovalDirections::default() };
        assert_eq!(plain.command("deny", &id), "toolgate approvals deny abc --state-dir /srv/toolgate");
        let spaced = ApprovalDirections { state_dir: Some("/my state/it's".into()), ..ApprovalDirections::default() };
        assert_eq!(spaced.command("approve", &id), r"toolgate approvals approve abc --state-dir '/my state/it'\''s'");
    }
}
