//! The gateway: upstream runtimes, the aggregated catalog, the open client sessions, and the routes that tie an
//! upstream request back to the client request that caused it.
//!
//! [`Gateway`] implements [`SessionFactory`], so any downstream transport can serve it. It owns no transport and
//! parses no config. Upstream lifecycles run in one task per upstream ([`Gateway::start`],
//! [`crate::lifecycle::run`]), each the only writer of its upstream's connection and listing; what they send is
//! routed by [`crate::routing`]; client requests are handled by [`crate::client`] and [`crate::pipeline`].

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use serde::Serialize;
use serde_json::{Value, json};
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;
use toolgate_upstream::ListKind;

use toolgate_core::policy::{CompiledPolicy, PolicySpec, compile};
use toolgate_store::Store;

use crate::catalog::{Catalog, CatalogContext, CheckedListing};
use crate::client::{GatewaySession, SessionShared};
use crate::guard::waiting::ApprovalDirections;
use crate::lifecycle::run::{run_upstream, watch_quarantine};
use crate::session::{Caller, ClientBound, ClientSession, SessionFactory, TransportKind};
use crate::spec::GatewaySpec;
use crate::upstreams::{UpstreamRuntime, UpstreamStatus};

/// Where an upstream request came from: which session and which client request.
#[derive(Clone)]
pub(crate) struct CallRoute {
    pub(crate) session: Arc<SessionShared>,
    pub(crate) client_request_id: Value,
    /// The request went to an open-world source: what arrives under this route taints the session.
    pub(crate) open_world: bool,
}

/// Everything shared by sessions, upstream tasks and transports.
pub(crate) struct GatewayInner {
    pub(crate) spec: GatewaySpec,
    pub(crate) upstreams: Vec<Arc<UpstreamRuntime>>,
    /// The catalog and the number of the rebuild that made it (see [`GatewayInner::rebuild_catalog`]).
    catalog: RwLock<(u64, Arc<Catalog>)>,
    /// The number of the next catalog rebuild.
    rebuilds: AtomicU64,
    sessions: Mutex<HashMap<String, Arc<SessionShared>>>,
    /// The requests in flight to upstreams for clients, and what may be attributed to them.
    pub(crate) calls: crate::call_routes::CallRoutes,
    pub(crate) progress: crate::routing::ProgressRoutes,
    pub(crate) shutdown: CancellationToken,
    settled: watch::Sender<usize>,
    /// The compiled policy (replaced whole on a config reload).
    policy: RwLock<Arc<CompiledPolicy>>,
    /// Audit log, pins and approvals; `None` runs without them (pinned upstreams and the approval queue then
    /// fail closed).
    pub(crate) store: Option<Store>,
    /// Writes every tool of every upstream to the store after each catalog rebuild, for the console.
    inventory: crate::inventory::InventoryPublisher,
    /// Prometheus counters and histograms (`GET /metrics`).
    pub(crate) metrics: crate::metrics::GatewayMetrics,
    /// Each upstream's last listed tools, so a call during its reconnect is told so (`pipeline::call_tool`).
    pub(crate) known_tools: crate::known_tools::KnownTools,
    /// Places in the approval queue per session and per caller.
    pub(crate) approval_quota: Arc<crate::guard::approval_quota::ApprovalQuota>,
    /// The approvals calls are waiting on now, lapsed when the gateway stops.
    pub(crate) waiting_approvals: crate::guard::waiting::WaitingApprovals,
    /// Where a person decides a queued call, told to clients that cannot be asked (set once the console is bound).
    approval_directions: RwLock<ApprovalDirections>,
    /// Places for upstream requests relayed to clients, per session and per upstream.
    pub(crate) relay_quota: crate::relay_quota::RelayQuota,
}

/// The running gateway (cheap to clone).
#[derive(Clone)]
pub struct Gateway {
    pub(crate) inner: Arc<GatewayInner>,
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

    /// A gateway for `spec` that keeps its audit log, pins and approvals in `store`.
    pub fn with_store(spec: GatewaySpec, store: Option<Store>) -> Result<Gateway, GatewayError> {
        let policy = compile(&spec.guardrails.policy).map_err(|error| GatewayError::Policy(error.to_string()))?;
        let upstreams = spec
            .upstreams
            .iter()
            .enumerate()
            .map(|(index, upstream)| Arc::new(UpstreamRuntime::new(index, upstream.clone())))
            .collect();
        let (settled, _) = watch::channel(0);
        let metrics = crate::metrics::GatewayMetrics::new(spec.upstreams.iter().map(|upstream| upstream.name.as_str()));
        let relay_quota = crate::relay_quota::RelayQuota::new(
            spec.limits.max_relayed_requests_per_session,
            spec.limits.max_relayed_requests_per_upstream,
        );
        let approval_quota = Arc::new(crate::guard::approval_quota::ApprovalQuota::new(&spec.limits));
        Ok(Gateway {
            inner: Arc::new(GatewayInner {
                spec,
                upstreams,
                catalog: RwLock::new((0, Arc::new(Catalog::default()))),
                rebuilds: AtomicU64::new(1),
                sessions: Mutex::new(HashMap::new()),
                calls: Default::default(),
                progress: Default::default(),
                shutdown: CancellationToken::new(),
                settled,
                policy: RwLock::new(Arc::new(policy)),
                store,
                inventory: Default::default(),
                metrics,
                known_tools: Default::default(),
                approval_quota,
                waiting_approvals: Default::default(),
                approval_directions: RwLock::new(ApprovalDirections::default()),
                relay_quota,
            }),
        })
    }

    /// Says where a person decides a queued call (the console's address, the state directory to name), for the
    /// notice a client without elicitation gets when its call starts waiting.
    pub fn set_approval_directions(&self, directions: ApprovalDirections) {
        if let Ok(mut current) = self.inner.approval_directions.write() {
            *current = directions;
        }
    }

    /// Where a person decides a queued call, as last set.
    pub fn approval_directions(&self) -> ApprovalDirections {
        self.inner.approval_directions()
    }

    /// Replaces the policy (a config reload): visibility is decided again and every session is told to re-list.
    pub fn reload_policy(&self, spec: &PolicySpec) -> Result<(), GatewayError> {
        let policy = compile(spec).map_err(|error| GatewayError::Policy(error.to_string()))?;
        if let Ok(mut current) = self.inner.policy.write() {
            *current = Arc::new(policy);
        }
        self.inner.republish_inventory();
        self.inner.notify_list_changed(&[ListKind::Tools]);
        Ok(())
    }

    /// Starts every upstream in parallel (one task each), and the watch that releases quarantined tools once a
    /// person approves them (`toolgate pins approve` writes to the store from another process).
    pub fn start(&self) {
        for index in 0..self.inner.upstreams.len() {
            tokio::spawn(run_upstream(Arc::clone(&self.inner), index));
        }
        if self.inner.store.is_some() {
            tokio::spawn(watch_quarantine(Arc::clone(&self.inner)));
        }
    }

    /// Waits until every upstream has either connected or failed once, at most `timeout`.
    pub async fn wait_settled(&self, timeout: Duration) {
        let mut receiver = self.inner.settled.subscribe();
        let total = self.inner.upstreams.len();
        let _ = tokio::time::timeout(timeout, receiver.wait_for(|settled| *settled >= total)).await;
    }

    /// Upstream states, collisions and counts.
    pub fn status(&self) -> GatewayStatus {
        let catalog = self.inner.catalog();
        GatewayStatus {
            upstreams: self
                .inner
                .upstreams
                .iter()
                .map(|runtime| NamedStatus { name: runtime.spec.name.clone(), status: runtime.status() })
                .collect(),
            collisions: catalog.collisions.clone(),
            sessions: self.inner.sessions.lock().map(|sessions| sessions.len()).unwrap_or(0),
            tools: catalog.tools().len(),
        }
    }

    /// Stops everything: sessions end, upstreams are closed politely (stdin, TERM, KILL).
    pub async fn shutdown(&self) {
        self.inner.shutdown.cancel();
        // Before the sessions close: their call tasks may not run again once the process is on its way out.
        if let Some(store) = &self.inner.store {
            self.inner.waiting_approvals.lapse_all(store, "the gateway stopped").await;
        }
        let sessions: Vec<Arc<SessionShared>> =
            self.inner.sessions.lock().map(|sessions| sessions.values().cloned().collect()).unwrap_or_default();
        for session in sessions {
            session.close();
        }
        let closing = self
            .inner
            .upstreams
            .iter()
            .filter_map(|runtime| runtime.connection())
            .map(|connection| tokio::spawn(async move { connection.close().await }));
        for task in closing.collect::<Vec<_>>() {
            let _ = task.await;
        }
    }
}

impl SessionFactory for Gateway {
    fn open_session(
        &self,
        transport: TransportKind,
        caller: Caller,
    ) -> (Box<dyn ClientSession>, mpsc::Receiver<ClientBound>) {
        let (sender, receiver) = mpsc::channel(1024);
        let dropped = self.inner.metrics.client_messages_dropped();
        let stalled = self.inner.metrics.client_sessions_stalled();
        let max_bytes = self.inner.spec.limits.max_client_queue_bytes;
        let outbox = crate::outbox::Outbox::new(sender, max_bytes, dropped, stalled);
        let shared = Arc::new(SessionShared::new(uuid::Uuid::new_v4().simple().to_string(), outbox, caller));
        if let Ok(mut sessions) = self.inner.sessions.lock() {
            sessions.insert(shared.id.clone(), Arc::clone(&shared));
        }
        tracing::info!(session = %shared.id, ?transport, "client session opened");
        (Box::new(GatewaySession::new(Arc::clone(&self.inner), shared)), receiver)
    }

    fn count_refusal(&self, refusal: crate::session::Refusal) {
        self.inner.metrics.count_refusal(refusal);
    }
}

/// Why a gateway could not be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GatewayError {
    /// The policy does not compile.
    #[error("invalid policy: {0}")]
    Policy(String),
}

impl GatewayInner {
    /// The current policy.
    /// Where a person decides a queued call, as last set.
    pub(crate) fn approval_directions(&self) -> ApprovalDirections {
        self.approval_directions.read().map(|directions| directions.clone()).unwrap_or_default()
    }

    pub(crate) fn policy(&self) -> Arc<CompiledPolicy> {
        self.policy.read().map(|policy| Arc::clone(&policy)).unwrap_or_default()
    }

    /// The current catalog snapshot.
    pub(crate) fn catalog(&self) -> Arc<Catalog> {
        self.catalog.read().map(|catalog| Arc::clone(&catalog.1)).unwrap_or_default()
    }

    /// Rebuilds the catalog from every upstream's current checked listing (each listing with the pin check made of
    /// it, read as one value).
    ///
    /// Rebuilds run in the tasks that changed something, in parallel; each takes a number before it reads the
    /// listings, and a catalog replaces the current one only when its number is higher, so a rebuild that read
    /// older listings never replaces one built from newer ones.
    pub(crate) fn rebuild_catalog(&self) {
        let number = self.rebuilds.fetch_add(1, Ordering::SeqCst);
        let listings: Vec<_> = self.upstreams.iter().map(|runtime| runtime.checked_listing()).collect();
        let resource_servers: Vec<usize> = self
            .upstreams
            .iter()
            .filter(|runtime| {
                runtime.connection().is_some_and(|connection| {
                    connection.initialize_outcome().capabilities.get("resources").is_some_and(|value| !value.is_null())
                })
            })
            .map(|runtime| runtime.index)
            .collect();
        let context = CatalogContext { resource_servers, quarantine: self.spec.guardrails.pins.quarantine };
        let catalog = Arc::new(Catalog::build_with(&self.spec.upstreams, &listings, &context));
        let replaced = match self.catalog.write() {
            Ok(mut current) if current.0 < number => {
                *current = (number, Arc::clone(&catalog));
                // Under the catalog's lock, so what is remembered follows the catalogs' order.
                self.known_tools.remember(&catalog, &self.upstreams);
                true
            }
            _ => false,
        };
        if !replaced {
            return;
        }
        for collision in &catalog.collisions {
            tracing::warn!("{collision}");
        }
        self.publish_inventory(listings, catalog);
    }

    /// Hands the console's tool inventory of `catalog` to the store, in the background (with the policy in force,
    /// which says what each caller may do with each tool).
    fn publish_inventory(&self, listings: Vec<Option<Arc<CheckedListing>>>, catalog: Arc<Catalog>) {
        let Some(store) = &self.store else { return };
        let inputs = crate::inventory::InventoryInputs {
            specs: self.spec.upstreams.clone(),
            listings,
            catalog,
            policy: self.policy(),
            identities: self.spec.identities(),
        };
        self.inventory.publish(store, inputs);
    }

    /// Rewrites the inventory from the current catalog (after the policy changed: who may do what changed too).
    fn republish_inventory(&self) {
        let listings = self.upstreams.iter().map(|runtime| runtime.checked_listing()).collect();
        self.publish_inventory(listings, self.catalog());
    }

    /// The upstream `index` said its list of `kind` changed: its run task re-lists it.
    pub(crate) fn list_changed(&self, index: usize, kind: ListKind) {
        if let Some(runtime) = self.upstreams.get(index) {
            runtime.requests.list_changed(kind);
        }
    }

    pub(crate) fn forget_session(&self, id: &str) {
        if let Ok(mut sessions) = self.sessions.lock() {
            sessions.remove(id);
        }
        tracing::info!(session = %id, "client session closed");
    }

    /// Every open session.
    pub(crate) fn sessions(&self) -> Vec<Arc<SessionShared>> {
        self.sessions.lock().map(|sessions| sessions.values().cloned().collect()).unwrap_or_default()
    }

    /// Tells every initialized session that a list changed.
    pub(crate) fn notify_list_changed(&self, kinds: &[ListKind]) {
        for session in self.sessions() {
            if !session.is_initialized() {
                continue;
            }
            for kind in kinds {
                let method = match kind {
                    ListKind::Tools => "notifications/tools/list_changed",
                    ListKind::Prompts => "notifications/prompts/list_changed",
                    ListKind::Resources | ListKind::ResourceTemplates => "notifications/resources/list_changed",
                };
                session.send_unsolicited(json!({"jsonrpc": "2.0", "method": method}));
            }
        }
    }

    pub(crate) fn mark_settled(&self) {
        self.settled.send_modify(|settled| *settled += 1);
    }
}
