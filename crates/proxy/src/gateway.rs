//! The gateway: upstream runtimes, the aggregated catalog, the open client sessions, and the routes that tie an
//! upstream request back to the client request that caused it.
//!
//! [`Gateway`] implements [`SessionFactory`], so any downstream transport can serve it. It owns no transport and
//! parses no config. Upstream lifecycles run in one task per upstream ([`Gateway::start`]); what they send is routed
//! by [`crate::routing`]; client requests are handled by [`crate::client`] and [`crate::pipeline`].

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock, Weak};
use std::time::Duration;

use serde::Serialize;
use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot, watch};
use tokio_util::sync::CancellationToken;
use toolgate_upstream::{EventSink, ListKind, Responder, UpstreamError};

use toolgate_core::ToolDefinition;
use toolgate_core::fingerprint::fingerprint_tool;
use toolgate_core::policy::{CompiledPolicy, PolicySpec, compile};
use toolgate_store::{AuditEntry, AuditKind, Store};

use crate::catalog::{Catalog, CatalogContext, UpstreamListing};
use crate::client::{GatewaySession, SessionShared};
use crate::guard::audit;
use crate::guard::pins::PinCheck;
use crate::session::{Caller, ClientBound, ClientSession, SessionFactory, TransportKind};
use crate::spec::GatewaySpec;
use crate::upstreams::{UpstreamRuntime, UpstreamStatus, attempts_after_disconnect, backoff, relist};

/// Where an upstream request came from: which session and which client request.
#[derive(Clone)]
pub(crate) struct CallRoute {
    pub(crate) session: Arc<SessionShared>,
    pub(crate) client_request_id: Value,
}

/// A progress token toolgate put on an upstream request, and the client's token it stands for.
#[derive(Clone)]
pub(crate) struct ProgressRoute {
    pub(crate) session: Arc<SessionShared>,
    pub(crate) client_token: Value,
    pub(crate) client_request_id: Value,
}

/// Everything shared by sessions, upstream tasks and transports.
pub(crate) struct GatewayInner {
    pub(crate) spec: GatewaySpec,
    pub(crate) upstreams: Vec<Arc<UpstreamRuntime>>,
    catalog: RwLock<Arc<Catalog>>,
    sessions: Mutex<HashMap<String, Arc<SessionShared>>>,
    pub(crate) calls: Mutex<HashMap<(usize, u64), CallRoute>>,
    pub(crate) progress: Mutex<HashMap<String, ProgressRoute>>,
    next_token: AtomicU64,
    pub(crate) shutdown: CancellationToken,
    settled: watch::Sender<usize>,
    /// Per upstream index, tools whose changed definition waits for a person (pinned upstreams).
    pub(crate) quarantined: Mutex<HashMap<usize, std::collections::HashSet<String>>>,
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
        Ok(Gateway {
            inner: Arc::new(GatewayInner {
                spec,
                upstreams,
                catalog: RwLock::new(Arc::new(Catalog::default())),
                sessions: Mutex::new(HashMap::new()),
                calls: Mutex::new(HashMap::new()),
                progress: Mutex::new(HashMap::new()),
                next_token: AtomicU64::new(1),
                shutdown: CancellationToken::new(),
                settled,
                quarantined: Mutex::new(HashMap::new()),
                policy: RwLock::new(Arc::new(policy)),
                store,
                inventory: Default::default(),
                metrics,
                known_tools: Default::default(),
            }),
        })
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
        let (outbox, receiver) = mpsc::channel(1024);
        let shared = Arc::new(SessionShared::new(uuid::Uuid::new_v4().simple().to_string(), outbox, caller));
        if let Ok(mut sessions) = self.inner.sessions.lock() {
            sessions.insert(shared.id.clone(), Arc::clone(&shared));
        }
        tracing::info!(session = %shared.id, ?transport, "client session opened");
        (Box::new(GatewaySession::new(Arc::clone(&self.inner), shared)), receiver)
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
    pub(crate) fn policy(&self) -> Arc<CompiledPolicy> {
        self.policy.read().map(|policy| Arc::clone(&policy)).unwrap_or_default()
    }

    /// The current catalog snapshot.
    pub(crate) fn catalog(&self) -> Arc<Catalog> {
        self.catalog.read().map(|catalog| Arc::clone(&catalog)).unwrap_or_default()
    }

    /// Rebuilds the catalog from every upstream's current listing.
    pub(crate) fn rebuild_catalog(&self) {
        let listings: Vec<_> = self.upstreams.iter().map(|runtime| runtime.listing()).collect();
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
        let context = CatalogContext {
            resource_servers,
            quarantined: self.quarantined.lock().map(|quarantined| quarantined.clone()).unwrap_or_default(),
            quarantine: self.spec.guardrails.pins.quarantine,
        };
        let catalog = Arc::new(Catalog::build_with(&self.spec.upstreams, &listings, &context));
        for collision in &catalog.collisions {
            tracing::warn!("{collision}");
        }
        if let Ok(mut current) = self.catalog.write() {
            *current = Arc::clone(&catalog);
        }
        self.known_tools.remember(&catalog, &self.upstreams);
        self.publish_inventory(listings, catalog, context.quarantined);
    }

    /// Hands the console's tool inventory of `catalog` to the store, in the background (with the policy in force,
    /// which says what each caller may do with each tool).
    fn publish_inventory(
        &self,
        listings: Vec<Option<Arc<UpstreamListing>>>,
        catalog: Arc<Catalog>,
        quarantined: HashMap<usize, HashSet<String>>,
    ) {
        let Some(store) = &self.store else { return };
        let inputs = crate::inventory::InventoryInputs {
            specs: self.spec.upstreams.clone(),
            listings,
            catalog,
            quarantined,
            policy: self.policy(),
            identities: self.spec.identities(),
        };
        self.inventory.publish(store, inputs);
    }

    /// Rewrites the inventory from the current catalog (after the policy changed: who may do what changed too).
    fn republish_inventory(&self) {
        let listings = self.upstreams.iter().map(|runtime| runtime.listing()).collect();
        let quarantined = self.quarantined.lock().map(|quarantined| quarantined.clone()).unwrap_or_default();
        self.publish_inventory(listings, self.catalog(), quarantined);
    }

    pub(crate) fn forget_session(&self, id: &str) {
        if let Ok(mut sessions) = self.sessions.lock() {
            sessions.remove(id);
        }
        tracing::info!(session = %id, "client session closed");
    }

    /// Compares an upstream's current listing with its pins, updates its quarantine, and writes the `listing` audit
    /// row: always for a new listing, and for a re-check only when the quarantine changed or a tightening was pinned
    /// (a re-check runs every second while anything waits for a person). True when the quarantine changed.
    pub(crate) async fn check_listing(&self, index: usize, trigger: ListingTrigger) -> bool {
        let Some(runtime) = self.upstreams.get(index) else { return false };
        let Some(listing) = runtime.listing() else { return false };
        let check = crate::guard::pins::check_pins(self, index, &listing).await;
        let before = self.quarantined.lock().ok().and_then(|mut all| all.insert(index, check.quarantined.clone()));
        let changed = before.unwrap_or_default() != check.quarantined;
        if trigger == ListingTrigger::Recheck && !changed && check.accepted_tightening.is_empty() {
            return changed;
        }
        if self.store.is_some() {
            audit::record(self, listing_entry(&runtime.spec.name, trigger, &listing, &check));
        }
        if !check.quarantined.is_empty() {
            tracing::warn!(
                upstream = %runtime.spec.name,
                quarantined = check.quarantined.len(),
                "tool definitions wait for approval: run `toolgate pins list`"
            );
        }
        changed
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

    /// A fresh progress token for an upstream request.
    pub(crate) fn next_progress_token(&self) -> String {
        format!("toolgate-{}", self.next_token.fetch_add(1, Ordering::Relaxed))
    }

    fn mark_settled(&self) {
        self.settled.send_modify(|settled| *settled += 1);
    }
}

/// Why an upstream's tools were compared with its pins, as its `listing` audit row says (`detail.trigger`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ListingTrigger {
    /// The first listing after the gateway started.
    Start,
    /// The listing after a reconnect.
    Reconnect,
    /// The re-listing after the upstream's `tools/list_changed`.
    ListChanged,
    /// The same listing checked again, to see a person's pin decision (or after another kind of list changed).
    Recheck,
}

impl ListingTrigger {
    fn as_str(self) -> &'static str {
        match self {
            ListingTrigger::Start => "start",
            ListingTrigger::Reconnect => "reconnect",
            ListingTrigger::ListChanged => "list_changed",
            ListingTrigger::Recheck => "recheck",
        }
    }
}

/// The `listing` audit row: which upstream, why, how many tools, each tool's fingerprint by its original name (the
/// fingerprint the catalog puts in `_meta`), and for pinned upstreams what stays quarantined and which tightenings
/// were pinned.
fn listing_entry(upstream: &str, trigger: ListingTrigger, listing: &UpstreamListing, check: &PinCheck) -> AuditEntry {
    let fingerprints: serde_json::Map<String, Value> = listing
        .tools
        .iter()
        .filter_map(|raw| {
            let tool = ToolDefinition::from_value(raw.clone()).ok()?;
            let fingerprint = fingerprint_tool(&tool).ok()?;
            Some((tool.name().to_owned(), Value::String(fingerprint.whole)))
        })
        .collect();
    let mut quarantined: Vec<&String> = check.quarantined.iter().collect();
    quarantined.sort();
    let mut entry = AuditEntry::new(AuditKind::Listing);
    entry.upstream = Some(upstream.to_owned());
    entry.detail = Some(json!({
        "trigger": trigger.as_str(),
        "tools": listing.tools.len(),
        "fingerprints": fingerprints,
        "quarantined": quarantined,
        "acceptedTightening": check.accepted_tightening,
    }));
    entry
}

/// Routes what one upstream sends on its own (see [`crate::routing`]) and tells its manager when it ends.
struct UpstreamSink {
    gateway: Weak<GatewayInner>,
    index: usize,
    ended: Mutex<Option<oneshot::Sender<String>>>,
}

impl EventSink for UpstreamSink {
    fn notification(&self, message: Value, related: Option<u64>) {
        if let Some(gateway) = self.gateway.upgrade() {
            crate::routing::on_notification(&gateway, self.index, message, related);
        }
    }

    fn request(&self, message: Value, related: Option<u64>, responder: Responder) {
        if let Some(gateway) = self.gateway.upgrade() {
            tokio::spawn(crate::routing::on_request(gateway, self.index, message, related, responder));
        }
    }

    fn ended(&self, error: UpstreamError) {
        if let Some(sender) = self.ended.lock().ok().and_then(|mut ended| ended.take()) {
            let _ = sender.send(error.to_string());
        }
    }
}

/// One upstream's life: connect, list, relay events, and reconnect with backoff when it ends. The backoff starts
/// again only after a connection that stayed up ([`attempts_after_disconnect`]), so a crash loop slows down.
async fn run_upstream(gateway: Arc<GatewayInner>, index: usize) {
    let Some(runtime) = gateway.upstreams.get(index).cloned() else { return };
    let mut attempts: u32 = 0;
    let mut settled = false;
    let mut trigger = ListingTrigger::Start;
    loop {
        let (ended_sender, ended) = oneshot::channel();
        let sink =
            Arc::new(UpstreamSink { gateway: Arc::downgrade(&gateway), index, ended: Mutex::new(Some(ended_sender)) });
        let connected = tokio::select! {
            () = gateway.shutdown.cancelled() => return,
            connected = runtime.connect(gateway.spec.limits.max_message_bytes, sink) => connected,
        };
        match connected {
            Ok(connection) => {
                let connected_at = tokio::time::Instant::now();
                tracing::info!(upstream = %runtime.spec.name, status = ?runtime.status(), "upstream ready");
                gateway.check_listing(index, std::mem::replace(&mut trigger, ListingTrigger::Reconnect)).await;
                gateway.rebuild_catalog();
                gateway.notify_list_changed(&[ListKind::Tools, ListKind::Prompts, ListKind::Resources]);
                if !std::mem::replace(&mut settled, true) {
                    gateway.mark_settled();
                }
                let reason = tokio::select! {
                    () = gateway.shutdown.cancelled() => {
                        connection.close().await;
                        return;
                    }
                    reason = ended => reason.unwrap_or_else(|_| "the connection stopped".to_owned()),
                };
                connection.close().await;
                attempts = attempts_after_disconnect(attempts, connected_at.elapsed());
                tracing::warn!(
                    upstream = %runtime.spec.name,
                    %reason,
                    attempts,
                    "upstream went down; reconnecting with backoff"
                );
                runtime.mark_down(reason, attempts);
                gateway.metrics.count_disconnect(index);
                gateway.rebuild_catalog();
                gateway.notify_list_changed(&[ListKind::Tools, ListKind::Prompts, ListKind::Resources]);
            }
            Err(error) => {
                attempts = attempts.saturating_add(1);
                tracing::warn!(upstream = %runtime.spec.name, %error, attempts, "upstream failed to start");
                runtime.mark_down(error.to_string(), attempts);
                if !std::mem::replace(&mut settled, true) {
                    gateway.mark_settled();
                }
            }
        }
        tokio::select! {
            () = gateway.shutdown.cancelled() => return,
            () = tokio::time::sleep(backoff(attempts)) => {}
        }
    }
}

/// How often quarantined tools are checked against the store for a person's decision.
const QUARANTINE_POLL: Duration = Duration::from_secs(1);

/// Re-checks the pins of upstreams with quarantined tools; when a decision changed the set, the catalog is rebuilt
/// and every session told to re-list. A re-check that changes nothing writes no audit row.
async fn watch_quarantine(gateway: Arc<GatewayInner>) {
    loop {
        tokio::select! {
            () = gateway.shutdown.cancelled() => return,
            () = tokio::time::sleep(QUARANTINE_POLL) => {}
        }
        let waiting: Vec<usize> = gateway
            .quarantined
            .lock()
            .map(|all| all.iter().filter(|(_, names)| !names.is_empty()).map(|(index, _)| *index).collect())
            .unwrap_or_default();
        let mut changed = false;
        for index in waiting {
            changed |= gateway.check_listing(index, ListingTrigger::Recheck).await;
        }
        if changed {
            gateway.rebuild_catalog();
            gateway.notify_list_changed(&[ListKind::Tools]);
        }
    }
}

/// Re-lists one kind of one upstream after its `list_changed`, rebuilds the catalog and tells every session.
pub(crate) async fn refresh_listing(gateway: Arc<GatewayInner>, index: usize, kind: ListKind) {
    let Some(runtime) = gateway.upstreams.get(index).cloned() else { return };
    let (Some(connection), Some(listing)) = (runtime.connection(), runtime.listing()) else { return };
    let mut kinds = vec![kind];
    if kind == ListKind::Resources {
        kinds.push(ListKind::ResourceTemplates);
    }
    let mut updated = (*listing).clone();
    for kind in &kinds {
        match relist(&connection, &updated, *kind).await {
            Ok(listing) => updated = listing,
            Err(error) => {
                tracing::warn!(upstream = %runtime.spec.name, %error, "re-listing after list_changed failed");
                return;
            }
        }
    }
    runtime.replace_listing(Arc::new(updated));
    // Only a tools listing is a new listing to record; after another kind, the tools are merely checked again.
    let trigger = if kind == ListKind::Tools { ListingTrigger::ListChanged } else { ListingTrigger::Recheck };
    gateway.check_listing(index, trigger).await;
    gateway.rebuild_catalog();
    gateway.notify_list_changed(&[kind]);
}
