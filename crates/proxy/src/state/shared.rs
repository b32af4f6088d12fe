//! [`Shared`]: everything one gateway's sessions, upstream tasks and transports share.
//!
//! Handles that are set once and never replaced (the spec as started, the store, the metrics recorder, the quota
//! counter, the shutdown token) are fields read as they are. What changes while the gateway runs (the upstreams,
//! which a config reload adds to and withdraws from, the catalog and its rebuild number, the policy, the open
//! sessions, the route table) is reached only through methods, so whoever writes it is found in one place. The
//! running upstreams' settings are their runtimes' (`upstreams`), never `spec.upstreams`, which is the start's. Nothing here decides a call or talks to an upstream.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use serde_json::json;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use toolgate_core::policy::CompiledPolicy;
use toolgate_spec::{GatewaySpec, Prefix, UpstreamSpec};
use toolgate_store::Store;
use toolgate_upstream::ListKind;

use crate::catalog::{Catalog, CheckedListing};
use crate::guard::approval_quota::ApprovalQuota;
use crate::inventory::InventoryPublisher;
use crate::known_tools::KnownTools;
use crate::metrics::registry::GatewayMetrics;
use crate::relay_quota::RelayQuota;
use crate::state::approvals::{ApprovalDirections, WaitingApprovals};
use crate::state::caller_taint::{CallerTaints, MAX_CALLERS};
use crate::state::routes::RouteTable;
use crate::state::session::SessionShared;
use crate::upstream_set::UpstreamSet;

/// Everything shared by sessions, upstream tasks and transports.
pub(crate) struct Shared {
    /// The spec the gateway started with (its upstreams as they were at start: read `upstreams` for the running ones).
    pub(crate) spec: GatewaySpec,
    /// Every upstream slot, by index (a reload appends and withdraws, never reuses an index).
    pub(crate) upstreams: UpstreamSet,
    /// The catalog and the number of the rebuild that made it (see [`Shared::install_catalog`]).
    catalog: RwLock<(u64, Arc<Catalog>)>,
    /// The number of the next catalog rebuild.
    rebuilds: AtomicU64,
    sessions: Mutex<HashMap<String, Arc<SessionShared>>>,
    /// Where upstream requests came from (calls and progress tokens).
    pub(crate) routes: RouteTable,
    pub(crate) shutdown: CancellationToken,
    settled: watch::Sender<usize>,
    /// The compiled policy (replaced whole on a config reload).
    policy: RwLock<Arc<CompiledPolicy>>,
    /// Audit log, pins and approvals; `None` runs without them (pinned upstreams and the approval queue then
    /// fail closed).
    pub(crate) store: Option<Store>,
    /// Writes every tool of every upstream to the store after each catalog rebuild, for the console.
    pub(crate) inventory: InventoryPublisher,
    /// Prometheus counters and histograms (`GET /metrics`).
    pub(crate) metrics: GatewayMetrics,
    /// Which authentication refusals get an audit row (one per reason and address per second).
    pub(crate) refusal_rows: crate::guard::refusal_rows::RefusalRows,
    /// Each upstream's last listed tools, so a call during its reconnect is told so (`call::call_tool`).
    pub(crate) known_tools: KnownTools,
    /// Places in the approval queue per session and per caller.
    pub(crate) approval_quota: Arc<ApprovalQuota>,
    /// The approvals calls are waiting on now, lapsed when the gateway stops.
    pub(crate) waiting_approvals: WaitingApprovals,
    /// Where a person decides a queued call, told to clients that cannot be asked (set once the console is bound).
    approval_directions: RwLock<ApprovalDirections>,
    /// Places for upstream requests relayed to clients, per session and per upstream.
    pub(crate) relay_quota: RelayQuota,
    /// The open `subscriptions/listen` requests per caller, and the upstream resource subscriptions they want.
    pub(crate) listens: super::listens::ListenRegistry,
    /// Each caller's taint for its 2026-07-28 requests, which outlives their one-request sessions.
    pub(crate) caller_taints: CallerTaints,
    /// Whether the configuration (at start, then as each reload applies it) passes its one upstream through as it
    /// is: read from the configuration, never from which upstreams are connected, so a passed-through upstream that
    /// is down or restarting never makes toolgate's own names appear beside it.
    passthrough: AtomicBool,
    /// Which process of a fleet this is (`/metrics`, the health endpoints); set once by `serve`.
    instance_id: RwLock<Option<String>>,
    /// The secret 2026-07-28 request states are sealed with, read from the store on first use
    /// (`guard::round_trip`).
    pub(crate) sealing_key: tokio::sync::OnceCell<Arc<Vec<u8>>>,
    /// The upstream calls of 2026-07-28 requests held for their retries (`crate::bridge`).
    pub(crate) held_calls: crate::state::held::HeldCalls,
}

impl Shared {
    /// The shared parts of a gateway for `spec` with `policy` compiled from it; nothing runs yet.
    pub(crate) fn new(spec: GatewaySpec, policy: CompiledPolicy, store: Option<Store>) -> Shared {
        let shutdown = CancellationToken::new();
        let upstreams = UpstreamSet::new(&spec.upstreams, &shutdown);
        let (settled, _) = watch::channel(0);
        let metrics = GatewayMetrics::new(spec.upstreams.iter().map(|upstream| upstream.name.as_str()));
        let approval_quota = Arc::new(ApprovalQuota::new(&spec.limits));
        let relay_quota = RelayQuota::new(
            spec.limits.max_relayed_requests_per_session,
            spec.limits.max_relayed_requests_per_upstream,
        );
        let caller_taints = CallerTaints::new(spec.limits.session_idle_timeout, MAX_CALLERS);
        let passthrough = AtomicBool::new(configures_passthrough(&spec.upstreams));
        Shared {
            spec,
            upstreams,
            catalog: RwLock::new((0, Arc::new(Catalog::default()))),
            rebuilds: AtomicU64::new(1),
            sessions: Mutex::new(HashMap::new()),
            routes: RouteTable::default(),
            shutdown,
            settled,
            policy: RwLock::new(Arc::new(policy)),
            store,
            inventory: InventoryPublisher::default(),
            metrics,
            refusal_rows: crate::guard::refusal_rows::RefusalRows::default(),
            known_tools: KnownTools::default(),
            approval_quota,
            waiting_approvals: WaitingApprovals::default(),
            approval_directions: RwLock::new(ApprovalDirections::default()),
            relay_quota,
            listens: super::listens::ListenRegistry::default(),
            caller_taints,
            passthrough,
            instance_id: RwLock::new(None),
            sealing_key: tokio::sync::OnceCell::new(),
            held_calls: crate::state::held::HeldCalls::default(),
        }
    }

    /// The current policy.
    pub(crate) fn policy(&self) -> Arc<CompiledPolicy> {
        self.policy.read().map(|policy| Arc::clone(&policy)).unwrap_or_default()
    }

    /// Replaces the policy (a config reload).
    pub(crate) fn replace_policy(&self, policy: CompiledPolicy) {
        if let Ok(mut current) = self.policy.write() {
            *current = Arc::new(policy);
        }
    }

    /// Where a person decides a queued call, as last set.
    pub(crate) fn approval_directions(&self) -> ApprovalDirections {
        self.approval_directions.read().map(|directions| directions.clone()).unwrap_or_default()
    }

    /// Says where a person decides a queued call.
    pub(crate) fn set_approval_directions(&self, directions: ApprovalDirections) {
        if let Ok(mut current) = self.approval_directions.write() {
            *current = directions;
        }
    }

    /// True when the configuration passes its one upstream through as it is (`Prefix::Passthrough`).
    pub(crate) fn passthrough(&self) -> bool {
        self.passthrough.load(Ordering::Acquire)
    }

    /// A reload is applying `upstreams`: from now on the configuration is theirs (before any upstream of the old
    /// one is withdrawn, so the restart of a passed-through upstream is not a moment without passthrough).
    pub(crate) fn configure_upstreams(&self, upstreams: &[UpstreamSpec]) {
        self.passthrough.store(configures_passthrough(upstreams), Ordering::Release);
    }

    /// Which process of a fleet this is, when told.
    pub(crate) fn instance_id(&self) -> Option<String> {
        self.instance_id.read().ok().and_then(|id| id.clone())
    }

    /// Names this process for `/metrics` and the health endpoints.
    pub(crate) fn set_instance_id(&self, id: String) {
        if let Ok(mut current) = self.instance_id.write() {
            *current = Some(id);
        }
    }

    /// The current catalog snapshot.
    pub(crate) fn catalog(&self) -> Arc<Catalog> {
        self.catalog.read().map(|catalog| Arc::clone(&catalog.1)).unwrap_or_default()
    }

    /// The number a catalog rebuild takes before it reads the listings it is built from.
    pub(crate) fn next_rebuild(&self) -> u64 {
        self.rebuilds.fetch_add(1, Ordering::SeqCst)
    }

    /// Makes `catalog` (built by rebuild `number`) the current one, unless a rebuild with a higher number got there
    /// first (it read newer listings); says whether it did. Each upstream's tools are remembered under the same
    /// lock, from `listings` (the ones the catalog was built from), so what [`KnownTools`] holds follows the
    /// catalogs' order.
    pub(crate) fn install_catalog(
        &self,
        number: u64,
        catalog: &Arc<Catalog>,
        listings: &[Option<Arc<CheckedListing>>],
    ) -> bool {
        match self.catalog.write() {
            Ok(mut current) if current.0 < number => {
                *current = (number, Arc::clone(catalog));
                self.known_tools.remember(catalog, listings);
                true
            }
            _ => false,
        }
    }

    /// Adds an opened session.
    pub(crate) fn insert_session(&self, session: Arc<SessionShared>) {
        if let Ok(mut sessions) = self.sessions.lock() {
            sessions.insert(session.id.clone(), session);
        }
    }

    /// Removes a closed session.
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

    /// How many sessions are open.
    pub(crate) fn session_count(&self) -> usize {
        self.sessions.lock().map(|sessions| sessions.len()).unwrap_or(0)
    }

    /// Tells every initialized session that a list changed, and every `subscriptions/listen` that asked for that
    /// kind (on its own stream, tagged).
    pub(crate) fn notify_list_changed(&self, kinds: &[ListKind]) {
        for session in self.sessions() {
            for kind in kinds {
                let method = match kind {
                    ListKind::Tools => "notifications/tools/list_changed",
                    ListKind::Prompts => "notifications/prompts/list_changed",
                    ListKind::Resources | ListKind::ResourceTemplates => "notifications/resources/list_changed",
                };
                let message = json!({"jsonrpc": "2.0", "method": method});
                session.offer_to_listens(&message);
                if session.is_initialized() {
                    session.send_unsolicited(message);
                }
            }
        }
    }

    /// The upstream `index` said its list of `kind` changed: its run task re-lists it.
    pub(crate) fn list_changed(&self, index: usize, kind: ListKind) {
        if let Some(runtime) = self.upstreams.get(index) {
            runtime.requests.list_changed(kind);
        }
    }

    /// One more upstream has connected or failed once.
    pub(crate) fn mark_settled(&self) {
        self.settled.send_modify(|settled| *settled += 1);
    }

    /// Watches how many upstreams have settled.
    pub(crate) fn settled(&self) -> watch::Receiver<usize> {
        self.settled.subscribe()
    }
}

/// Whether `upstreams` (a configuration's) pass an upstream through as it is; config validation allows that only
/// for a single upstream.
fn configures_passthrough(upstreams: &[UpstreamSpec]) -> bool {
    upstreams.iter().any(|upstream| upstream.prefix == Prefix::Passthrough)
}
