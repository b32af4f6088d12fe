//! The gateway's facade: build it, start it, ask its status, reload its policy and its upstreams, open sessions on
//! it, shut it down.
//!
//! [`Gateway`] implements [`SessionFactory`], so any downstream transport can serve it. It owns no transport and
//! parses no config. What it holds is [`crate::state::shared::Shared`]; upstream lifecycles run in one task per
//! upstream ([`Gateway::start`], [`crate::lifecycle::run`]), each the only writer of its upstream's connection and
//! listing; what they send is routed by [`crate::upstream_events`]; client requests are handled by
//! [`crate::intake`], [`crate::methods`] and [`crate::call`]. Nothing below imports this file.

use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use tokio::sync::mpsc;
use toolgate_core::policy::{PolicySpec, compile};
use toolgate_spec::GatewaySpec;
use toolgate_store::Store;
use toolgate_upstream::ListKind;

use crate::guard::waiting::lapse_all;
use crate::intake::GatewaySession;
use crate::lifecycle::catalog::republish_inventory;
use crate::lifecycle::reload::{apply_upstreams, start_upstream};
use crate::lifecycle::run::watch_quarantine;
use crate::session::{Caller, ClientBound, ClientSession, SessionFactory, TransportKind};
use crate::state::approvals::ApprovalDirections;
use crate::state::session::SessionShared;
use crate::state::shared::Shared;
use crate::upstream_set::UpstreamChange;
use crate::upstreams::UpstreamStatus;

/// The running gateway (cheap to clone).
#[derive(Clone)]
pub struct Gateway {
    pub(crate) shared: Arc<Shared>,
}

/// What `toolgate status` shows.
#[derive(Debug, Clone, Serialize)]
pub struct GatewayStatus {
    /// Each upstream by name, in configuration order.
    pub upstreams: Vec<NamedStatus>,
    /// Names hidden by collisions.
    pub collisions: Vec<String>,
    /// Open client sessions.
    pub sessions: usize,
    /// Tools in the catalog.
    pub tools: usize,
}

/// One upstream's status with its name.
#[derive(Debug, Clone, Serialize)]
pub struct NamedStatus {
    /// The upstream's configured name.
    pub name: String,
    /// What it is doing.
    #[serde(flatten)]
    pub status: UpstreamStatus,
}

impl Gateway {
    /// A gateway for `spec` without a state store; nothing runs until [`Gateway::start`].
    pub fn new(spec: GatewaySpec) -> Result<Gateway, GatewayError> {
        Gateway::with_store(spec, None)
    }

    /// A gateway for `spec` that keeps its audit log, pins and approvals in `store`, which must keep an audit
    /// journal (`StoreOptions::journal`): the gateway forwards a call, or asks a person about it, only once the
    /// call's one audit row is journaled, and a store without a journal cannot hold a row that way.
    pub fn with_store(spec: GatewaySpec, store: Option<Store>) -> Result<Gateway, GatewayError> {
        if store.as_ref().is_some_and(|store| !store.audit().journaled()) {
            return Err(GatewayError::StoreWithoutJournal);
        }
        let policy = compile(&spec.guardrails.policy).map_err(|error| GatewayError::Policy(error.to_string()))?;
        Ok(Gateway { shared: Arc::new(Shared::new(spec, policy, store)) })
    }

    /// Says where a person decides a queued call (the console's address, the state directory to name), for the
    /// notice a client without elicitation gets when its call starts waiting.
    pub fn set_approval_directions(&self, directions: ApprovalDirections) {
        self.shared.set_approval_directions(directions);
    }

    /// Names this process among several serving the same store (shown by `/metrics` and the health endpoints).
    pub fn set_instance_id(&self, id: impl Into<String>) {
        self.shared.set_instance_id(id.into());
    }

    /// This process's instance id, once set.
    pub fn instance_id(&self) -> Option<String> {
        self.shared.instance_id()
    }

    /// Where a person decides a queued call, as last set.
    pub fn approval_directions(&self) -> ApprovalDirections {
        self.shared.approval_directions()
    }

    /// Replaces the policy (a config reload): visibility is decided again and every session is told to re-list.
    pub fn reload_policy(&self, spec: &PolicySpec) -> Result<(), GatewayError> {
        let policy = compile(spec).map_err(|error| GatewayError::Policy(error.to_string()))?;
        self.shared.replace_policy(policy);
        republish_inventory(&self.shared);
        self.shared.notify_list_changed(&[ListKind::Tools]);
        Ok(())
    }

    /// Starts every upstream in parallel (one task each), and the watch that releases quarantined tools once a
    /// person approves them, here or in another process (the store's change feed, `watch_quarantine`).
    pub fn start(&self) {
        for runtime in self.shared.upstreams.all().iter() {
            start_upstream(&self.shared, runtime);
        }
        if self.shared.store.is_some() {
            tokio::spawn(watch_quarantine(Arc::clone(&self.shared)));
        }
    }

    /// Makes the running upstreams those of `upstreams` (a config reload): each removed one is stopped (its tools
    /// gone from the catalog first, approvals waiting on them lapsed, calls in flight answered with an error, its
    /// process ended), each changed one is stopped and started again with its new settings, each added one is
    /// started; clients are told to re-list. Returns the changes applied; an unchanged upstream keeps running
    /// untouched. Reload the policy first, so a new upstream's tools are never decided by the old rules.
    pub async fn reload_upstreams(&self, upstreams: &[toolgate_spec::UpstreamSpec]) -> Vec<UpstreamChange> {
        apply_upstreams(&self.shared, upstreams).await
    }

    /// Waits until every upstream has either connected or failed once, at most `timeout`.
    pub async fn wait_settled(&self, timeout: Duration) {
        let mut receiver = self.shared.settled();
        let total = self.shared.upstreams.len();
        let _ = tokio::time::timeout(timeout, receiver.wait_for(|settled| *settled >= total)).await;
    }

    /// Upstream states, collisions and counts.
    pub fn status(&self) -> GatewayStatus {
        let catalog = self.shared.catalog();
        GatewayStatus {
            upstreams: self
                .shared
                .upstreams
                .live()
                .iter()
                .map(|runtime| NamedStatus { name: runtime.spec.name.clone(), status: runtime.status() })
                .collect(),
            collisions: catalog.collisions.clone(),
            sessions: self.shared.session_count(),
            tools: catalog.tools().len(),
        }
    }

    /// Stops everything: sessions end, upstreams are closed politely (stdin, TERM, KILL).
    pub async fn shutdown(&self) {
        self.shared.shutdown.cancel();
        // Before the sessions close: their call tasks may not run again once the process is on its way out, so
        // the approvals are lapsed here (each call's row is completed by its task, else as `unanswered`).
        lapse_all(&self.shared, "the gateway stopped").await;
        for session in self.shared.sessions() {
            session.close();
        }
        let upstreams = self.shared.upstreams.all();
        let closing = upstreams
            .iter()
            .filter_map(|runtime| runtime.connection())
            .map(|connection| tokio::spawn(async move { connection.close().await }));
        for task in closing.collect::<Vec<_>>() {
            let _ = task.await;
        }
    }
}

impl Gateway {
    /// Opens a session; one whose taint is its caller's when `caller_taint` is given.
    fn open(
        &self,
        transport: TransportKind,
        caller: Caller,
        caller_taint: Option<Arc<crate::state::caller_taint::CallerTaint>>,
    ) -> (Box<dyn ClientSession>, mpsc::Receiver<ClientBound>) {
        let (sender, receiver) = mpsc::channel(1024);
        let dropped = self.shared.metrics.client_messages_dropped();
        let stalled = self.shared.metrics.client_sessions_stalled();
        let max_bytes = self.shared.spec.limits.max_client_queue_bytes;
        let outbox = crate::outbox::Outbox::new(sender, max_bytes, dropped, stalled);
        let session = SessionShared::new(uuid::Uuid::new_v4().simple().to_string(), outbox, caller)
            .with_caller_taint(caller_taint);
        let session = Arc::new(session);
        self.shared.insert_session(Arc::clone(&session));
        tracing::info!(session = %session.id, ?transport, "client session opened");
        (Box::new(GatewaySession::new(Arc::clone(&self.shared), session)), receiver)
    }
}

impl SessionFactory for Gateway {
    fn open_session(
        &self,
        transport: TransportKind,
        caller: Caller,
    ) -> (Box<dyn ClientSession>, mpsc::Receiver<ClientBound>) {
        self.open(transport, caller, None)
    }

    fn open_request_session(
        &self,
        transport: TransportKind,
        caller: Caller,
    ) -> (Box<dyn ClientSession>, mpsc::Receiver<ClientBound>) {
        // The session ends with its one request; its taint must not (it is the caller's).
        let taint = self.shared.caller_taints.cell(&caller.name);
        self.open(transport, caller, taint)
    }

    fn count_refusal(&self, refusal: crate::session::Refusal) {
        self.shared.metrics.count_refusal(refusal);
    }

    fn record_authentication_refusal(
        &self,
        caller: Option<&Caller>,
        reason: &'static str,
        remote: Option<std::net::IpAddr>,
    ) {
        crate::guard::audit::record_authentication_refusal(&self.shared, caller, reason, remote);
    }
}

/// Why a gateway could not be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GatewayError {
    /// The policy does not compile.
    #[error("invalid policy: {0}")]
    Policy(String),
    /// The state store was opened without an audit journal, so no call could be journaled before it is forwarded.
    #[error("the gateway's state store must keep an audit journal (open it with `journal` set)")]
    StoreWithoutJournal,
}
