//! Running the upstreams: connect in parallel, list what each offers, react to their events, and reconnect with
//! backoff when one dies. One failing upstream never stops the others: its tools are absent and its status says why.
//!
//! Each upstream has one long-lived connection shared by every client session, and one run task
//! (`crate::lifecycle`) that alone writes its connection and listing. What others want re-listed is asked of that
//! task through `ListingRequests`, which holds at most one pending request per kind, so a burst of `list_changed`
//! costs a re-listing or two, not one each. Routing of what an upstream sends is the gateway's.

use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use serde::Serialize;
use serde_json::{Value, json};
use tokio::sync::Notify;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use toolgate_sandbox::HintNeeds;
use toolgate_spec::{Limits, SandboxEnvironment, UpstreamCredentials, UpstreamSpec};
use toolgate_upstream::{ConnectOptions, Connection, EventSink, ListKind, TokenExchanger, TokenSource, UpstreamError};

use crate::catalog::{CheckedListing, UpstreamListing};
use crate::sandboxing::{self, Confinement, SupersedableSink};

/// The capabilities toolgate declares to upstreams: everything it can relay to a client.
pub fn relayed_client_capabilities() -> Value {
    json!({
        "roots": {"listChanged": true},
        "sampling": {},
        "elicitation": {"form": {}, "url": {}},
        "extensions": {"io.modelcontextprotocol/ui": {"mimeTypes": ["text/html;profile=mcp-app"]}}
    })
}

/// What an upstream is doing, for `toolgate status` and logs.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum UpstreamStatus {
    /// Connecting or listing.
    Starting,
    /// Connected and listed.
    Ready {
        /// `serverInfo.name` and version.
        server: String,
        /// The negotiated protocol version.
        protocol_version: String,
        /// How many tools it lists (at most the configured maximum).
        tools: usize,
        /// Why it is not served whole (tools beyond the configured maximum were dropped), if so.
        #[serde(skip_serializing_if = "Option::is_none")]
        warning: Option<String>,
    },
    /// Not connected; the gateway retries after a delay.
    Down {
        /// Why it is down.
        reason: String,
        /// Failed attempts in a row.
        attempts: u32,
    },
}

/// One upstream's live state.
pub struct UpstreamRuntime {
    /// Position in the spec (and in the catalog).
    pub index: usize,
    /// Its configuration.
    pub spec: UpstreamSpec,
    state: RwLock<State>,
    /// What its run task is asked to re-list or re-check.
    pub(crate) requests: ListingRequests,
    /// Stops its run task (cancelled when the gateway stops, or when a config reload withdraws it).
    pub(crate) stop: CancellationToken,
    /// Cancelled when a config reload withdraws it: requests waiting for its answers stop waiting at once.
    pub(crate) withdrawal: CancellationToken,
    /// Its run task, once started: awaited when it is withdrawn, so its process is gone when the reload is done.
    task: Mutex<Option<JoinHandle<()>>>,
    /// The sandbox of the live connection's process (`None`: unsandboxed), and what its tools' hints were last
    /// known to need, so a reconnect starts with the right profile at once.
    sandbox: Mutex<SandboxState>,
    /// toolgate's own OAuth token source for it, kept across reconnects so its cached token is reused; the error
    /// when one could not be made (every connect then fails with it).
    credentials: Option<Result<Arc<TokenSource>, UpstreamError>>,
    /// A token exchange upstream's exchanger (its per-caller tokens cached across reconnects), or why none could be
    /// made.
    exchange: Option<Result<Arc<TokenExchanger>, UpstreamError>>,
}

struct SandboxState {
    confinement: Option<Confinement>,
    needs: HintNeeds,
}

struct State {
    connection: Option<Arc<Connection>>,
    listing: Option<Arc<CheckedListing>>,
    status: UpstreamStatus,
    /// Why a config reload took it out of service, for good: nothing is published for it again.
    withdrawn: Option<String>,
}

impl UpstreamRuntime {
    /// A runtime that has not connected yet, stopped only by `UpstreamRuntime::stop_and_wait`.
    pub fn new(index: usize, spec: UpstreamSpec) -> UpstreamRuntime {
        UpstreamRuntime::under(index, spec, &CancellationToken::new())
    }

    /// A runtime that has not connected yet, stopped also when `parent` is cancelled (the gateway stops).
    pub(crate) fn under(index: usize, spec: UpstreamSpec, parent: &CancellationToken) -> UpstreamRuntime {
        let credentials = spec.credentials.as_ref().map(|credentials| TokenSource::new(credentials).map(Arc::new));
        let exchange = match &spec.credentials {
            Some(UpstreamCredentials::TokenExchange(exchange)) => Some(TokenExchanger::new(exchange).map(Arc::new)),
            _ => None,
        };
        UpstreamRuntime {
            index,
            credentials,
            exchange,
            spec,
            state: RwLock::new(State {
                connection: None,
                listing: None,
                status: UpstreamStatus::Starting,
                withdrawn: None,
            }),
            requests: ListingRequests::default(),
            stop: parent.child_token(),
            withdrawal: CancellationToken::new(),
            task: Mutex::new(None),
            sandbox: Mutex::new(SandboxState { confinement: None, needs: sandboxing::BEFORE_LISTING }),
        }
    }

    /// Remembers its run task, for `UpstreamRuntime::stop_and_wait`.
    pub(crate) fn set_task(&self, task: JoinHandle<()>) {
        if let Ok(mut slot) = self.task.lock() {
            *slot = Some(task);
        }
    }

    /// Stops its run task and waits until it has ended (its connection closed, a child process reaped).
    pub(crate) async fn stop_and_wait(&self) {
        self.stop.cancel();
        let task = self.task.lock().ok().and_then(|mut task| task.take());
        if let Some(task) = task {
            let _ = task.await;
        }
    }

    /// Takes it out of service for good (a config reload removed or replaced it): the connection and listing are
    /// dropped at once, so the next catalog has none of its tools and no call finds a connection to it, and nothing
    /// its run task publishes afterwards counts. Says whether it was in service.
    pub(crate) fn withdraw(&self, why: String) -> bool {
        let Ok(mut state) = self.state.write() else { return false };
        if state.withdrawn.is_some() {
            return false;
        }
        state.connection = None;
        state.listing = None;
        state.status = UpstreamStatus::Down { reason: why.clone(), attempts: 0 };
        state.withdrawn = Some(why);
        self.withdrawal.cancel();
        true
    }

    /// What its token exchanger did so far, for a token exchange upstream whose exchanger could be made.
    pub(crate) fn exchange_counts(&self) -> Option<toolgate_upstream::ExchangeCounts> {
        match &self.exchange {
            Some(Ok(exchanger)) => Some(exchanger.counts()),
            _ => None,
        }
    }

    /// Why a config reload took it out of service, if it did.
    pub(crate) fn withdrawn(&self) -> Option<String> {
        self.state.read().ok().and_then(|state| state.withdrawn.clone())
    }

    /// Whether a config reload took it out of service.
    pub(crate) fn is_withdrawn(&self) -> bool {
        self.state.read().map(|state| state.withdrawn.is_some()).unwrap_or(true)
    }

    /// The sandbox of the live connection's process, when it has one.
    pub(crate) fn confinement(&self) -> Option<Confinement> {
        self.sandbox.lock().ok().and_then(|state| state.confinement.clone())
    }

    /// Records what a re-listing's tools need of the sandbox. A running process keeps its profile: an open-world
    /// tool added to an upstream without the network gets it at the next start, and until then its calls are
    /// refused by the sandbox with toolgate's note; this warns once per change.
    pub(crate) fn note_relisted_needs(&self, tools: &[Value]) {
        let needs = sandboxing::hint_needs(&self.spec, tools);
        let Ok(mut state) = self.sandbox.lock() else { return };
        let Some(confinement) = &state.confinement else { return };
        if needs.network && !confinement.profile.has_network() && !state.needs.network {
            tracing::warn!(
                upstream = %self.spec.name,
                "a re-listing added an open-world tool, but the sandbox started without the network: it gets the \
                 network at its next start (restart or reconnect); until then its connections are refused"
            );
        }
        state.needs = needs;
    }

    /// The live connection, when ready.
    pub fn connection(&self) -> Option<Arc<Connection>> {
        self.state.read().ok().and_then(|state| state.connection.clone())
    }

    /// The last complete listing, when ready.
    pub fn listing(&self) -> Option<Arc<UpstreamListing>> {
        self.checked_listing().map(|checked| Arc::clone(&checked.listing))
    }

    /// The last complete listing with its pin check, when ready: the only input a catalog is built from.
    pub fn checked_listing(&self) -> Option<Arc<CheckedListing>> {
        self.state.read().ok().and_then(|state| state.listing.clone())
    }

    /// The current status.
    pub fn status(&self) -> UpstreamStatus {
        self.state.read().map(|state| state.status.clone()).unwrap_or(UpstreamStatus::Starting)
    }

    /// Publishes a new connection with its first checked listing (the run task's, once checked). The status is
    /// left as it was: the run task rebuilds the catalog from this listing first and only then says ready
    /// ([`UpstreamRuntime::mark_ready`]), so whoever sees `Ready` finds the upstream's tools in the catalog.
    pub(crate) fn publish(&self, connection: Arc<Connection>, listing: Arc<CheckedListing>) {
        if let Ok(mut state) = self.state.write()
            && state.withdrawn.is_none()
        {
            state.connection = Some(connection);
            state.listing = Some(listing);
        }
    }

    /// Says ready, for the connection and listing [`UpstreamRuntime::publish`] stored (nothing when there is none).
    pub(crate) fn mark_ready(&self) {
        let Ok(mut state) = self.state.write() else { return };
        // A withdrawn upstream has neither.
        let (Some(connection), Some(listing)) = (&state.connection, &state.listing) else { return };
        let outcome = connection.initialize_outcome();
        let server = format!(
            "{} {}",
            outcome.server_info.get("name").and_then(Value::as_str).unwrap_or("(unnamed)"),
            outcome.server_info.get("version").and_then(Value::as_str).unwrap_or("")
        )
        .trim()
        .to_owned();
        state.status = UpstreamStatus::Ready {
            server,
            protocol_version: outcome.protocol_version.clone(),
            tools: listing.listing.tools.len(),
            warning: dropped_warning(listing),
        };
    }

    /// Replaces the listing after a re-listing or a re-check, keeping the connection (the run task's only).
    pub(crate) fn replace_listing(&self, listing: Arc<CheckedListing>) {
        self.note_relisted_needs(&listing.listing.tools);
        if let Ok(mut state) = self.state.write()
            && state.withdrawn.is_none()
        {
            if let UpstreamStatus::Ready { tools, warning, .. } = &mut state.status {
                *tools = listing.listing.tools.len();
                *warning = dropped_warning(&listing);
            }
            state.listing = Some(listing);
        }
    }

    /// Connects and lists (each kind's pages until its maxima in `limits` are reached); what the upstream sends on
    /// its own goes to `events`. Nothing is published: the run task checks the listing first
    /// (`UpstreamRuntime::publish`).
    pub async fn connect(
        &self,
        limits: &Limits,
        sandbox: &SandboxEnvironment,
        events: Arc<dyn EventSink>,
    ) -> Result<(Arc<Connection>, UpstreamListing), UpstreamError> {
        let max_message_bytes = limits.max_message_bytes;
        let credentials = match &self.credentials {
            Some(Ok(source)) => Some(Arc::clone(source)),
            Some(Err(error)) => return Err(error.clone()),
            None => None,
        };
        let exchange = match &self.exchange {
            Some(Ok(exchanger)) => Some(Arc::clone(exchanger)),
            Some(Err(error)) => return Err(error.clone()),
            None => None,
        };
        let options = ConnectOptions {
            name: self.spec.name.clone(),
            initialize_timeout: self.spec.initialize_timeout,
            request_timeout: self.spec.request_timeout,
            max_in_flight: self.spec.max_in_flight,
            max_message_bytes,
            capabilities: relayed_client_capabilities(),
            events: Some(Arc::clone(&events)),
            era: self.spec.era,
            credentials,
            exchange,
            ..ConnectOptions::default()
        };
        let needs = self.sandbox.lock().map(|state| state.needs).unwrap_or(sandboxing::BEFORE_LISTING);
        let (endpoint, confinement) = sandboxing::sandboxed_endpoint(&self.spec, sandbox, needs)?;
        let Some(confinement) = confinement else {
            self.set_confinement(None, needs);
            let connection = Arc::new(Connection::connect(&endpoint, options).await?);
            return list_or_close(connection, limits).await;
        };
        let sink = Arc::new(SupersedableSink::new(events));
        let first = ConnectOptions { events: Some(sink.clone()), ..options.clone() };
        let connection = Arc::new(Connection::connect(&endpoint, first).await?);
        let (connection, listing) = list_or_close(connection, limits).await?;
        let wanted = sandboxing::hint_needs(&self.spec, &listing.tools);
        if !sandboxing::needs_restart(&self.spec, sandbox, &confinement, wanted) {
            self.set_confinement(Some(confinement), wanted);
            return Ok((connection, listing));
        }
        // Its tools ask for another profile (the network for an open-world tool, or no writable path when every
        // tool is read-only): start it once more with that profile, before anyone saw the first.
        tracing::info!(upstream = %self.spec.name, "its tools' hints need another sandbox profile; starting it again");
        sink.supersede();
        connection.close().await;
        let (endpoint, confinement) = sandboxing::sandboxed_endpoint(&self.spec, sandbox, wanted)?;
        self.set_confinement(confinement, wanted);
        let connection = Arc::new(Connection::connect(&endpoint, options).await?);
        list_or_close(connection, limits).await
    }

    fn set_confinement(&self, confinement: Option<Confinement>, needs: HintNeeds) {
        if let Ok(mut state) = self.sandbox.lock() {
            *state = SandboxState { confinement, needs };
        }
    }

    /// Marks the upstream down.
    pub fn mark_down(&self, reason: String, attempts: u32) {
        if let Ok(mut state) = self.state.write()
            && state.withdrawn.is_none()
        {
            state.connection = None;
            state.listing = None;
            state.status = UpstreamStatus::Down { reason, attempts };
        }
    }
}

/// Lists everything on a new connection, closing it when the listing fails.
async fn list_or_close(
    connection: Arc<Connection>,
    limits: &Limits,
) -> Result<(Arc<Connection>, UpstreamListing), UpstreamError> {
    match list_everything(&connection, limits).await {
        Ok(listing) => Ok((connection, listing)),
        Err(error) => {
            connection.close().await;
            Err(error)
        }
    }
}

/// What the status says about items dropped at the maxima, one sentence per kind that lost any.
fn dropped_warning(checked: &CheckedListing) -> Option<String> {
    let sentences: Vec<String> = ListKind::ALL
        .iter()
        .filter_map(|kind| {
            let (noun, setting) = match kind {
                ListKind::Tools => ("tools", "limits.max_tools_per_upstream"),
                ListKind::Prompts => ("prompts", "limits.max_list_items_per_upstream"),
                ListKind::Resources => ("resources", "limits.max_list_items_per_upstream"),
                ListKind::ResourceTemplates => ("resource templates", "limits.max_list_items_per_upstream"),
            };
            let served = listing_items(&checked.listing, *kind).len();
            match (*checked.dropped.get(*kind), *checked.listing.unread_pages.get(*kind)) {
                (0, false) => None,
                (dropped, false) => Some(format!(
                    "{dropped} more {noun} than {setting} or limits.max_listing_mib_per_upstream allow ({served} \
                     served) were dropped"
                )),
                (dropped, true) => Some(format!(
                    "at least {} more {noun} than {setting} or limits.max_listing_mib_per_upstream allow ({served} \
                     served) were dropped (further pages were not read)",
                    dropped.max(1)
                )),
            }
        })
        .collect();
    (!sentences.is_empty()).then(|| sentences.join("; "))
}

/// The items of one kind in `listing`.
pub(crate) fn listing_items(listing: &UpstreamListing, kind: ListKind) -> &Vec<Value> {
    match kind {
        ListKind::Tools => &listing.tools,
        ListKind::Prompts => &listing.prompts,
        ListKind::Resources => &listing.resources,
        ListKind::ResourceTemplates => &listing.templates,
    }
}

/// What an upstream's run task is asked to do besides keeping its connection: re-list some kinds after the
/// upstream's `list_changed`, or check its listing against the pins again. At most one request per kind waits, so
/// any burst costs at most the re-listing in flight and one more.
#[derive(Default)]
pub(crate) struct ListingRequests {
    pending: Mutex<Requested>,
    wake: Notify,
}

/// The requests waiting for an upstream's run task.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Requested {
    /// Re-list tools.
    pub(crate) tools: bool,
    /// Re-list prompts.
    pub(crate) prompts: bool,
    /// Re-list resources and resource templates.
    pub(crate) resources: bool,
    /// Check the tools against the pins again (a person may have decided).
    pub(crate) recheck: bool,
}

impl Requested {
    /// The kinds to list again, in listing order.
    pub(crate) fn kinds(self) -> Vec<ListKind> {
        let mut kinds = Vec::new();
        if self.tools {
            kinds.push(ListKind::Tools);
        }
        if self.prompts {
            kinds.push(ListKind::Prompts);
        }
        if self.resources {
            kinds.extend([ListKind::Resources, ListKind::ResourceTemplates]);
        }
        kinds
    }
}

impl ListingRequests {
    /// The upstream said a list of this kind changed.
    pub(crate) fn list_changed(&self, kind: ListKind) {
        self.update(|requested| match kind {
            ListKind::Tools => requested.tools = true,
            ListKind::Prompts => requested.prompts = true,
            ListKind::Resources | ListKind::ResourceTemplates => requested.resources = true,
        });
    }

    /// Asks again for what a failed re-listing did not deliver (merged with anything asked meanwhile).
    pub(crate) fn again(&self, failed: Requested) {
        self.update(|requested| {
            requested.tools |= failed.tools;
            requested.prompts |= failed.prompts;
            requested.resources |= failed.resources;
            requested.recheck |= failed.recheck;
        });
    }

    /// A person's pin decision may have changed what is quarantined.
    pub(crate) fn recheck(&self) {
        self.update(|requested| requested.recheck = true);
    }

    fn update(&self, change: impl FnOnce(&mut Requested)) {
        if let Ok(mut pending) = self.pending.lock() {
            change(&mut pending);
        }
        // Stores a permit when the run task is busy, so a request made meanwhile is never missed.
        self.wake.notify_one();
    }

    /// Forgets what was requested: a fresh connection lists everything anyway.
    pub(crate) fn clear(&self) {
        self.take();
    }

    fn take(&self) -> Requested {
        self.pending.lock().map(|mut pending| std::mem::take(&mut *pending)).unwrap_or_default()
    }

    /// Waits for requests and takes every one waiting.
    pub(crate) async fn next(&self) -> Requested {
        loop {
            let requested = self.take();
            if requested != Requested::default() {
                return requested;
            }
            self.wake.notified().await;
        }
    }
}

/// Lists every kind the server declared a capability for, each only until its maxima in `limits` are reached.
pub async fn list_everything(connection: &Connection, limits: &Limits) -> Result<UpstreamListing, UpstreamError> {
    let mut listing = relist(connection, &UpstreamListing::default(), &ListKind::ALL, limits).await?;
    // Kept with the lists, so what is pinned and what is relayed in `initialize` are the same text.
    listing.instructions = connection.initialize_outcome().instructions.clone();
    Ok(listing)
}

/// The most items of `kind` served from one upstream.
pub(crate) fn max_items(limits: &Limits, kind: ListKind) -> usize {
    match kind {
        ListKind::Tools => limits.max_tools_per_upstream,
        _ => limits.max_list_items_per_upstream,
    }
}

/// Lists `kinds` again into a copy of `listing` (after `list_changed`); each kind's pages only until its count or
/// byte maximum is reached, so a server listing without end costs at most one page beyond them (the cut itself is
/// `lifecycle::listing::cap_listing`'s).
pub async fn relist(
    connection: &Connection,
    listing: &UpstreamListing,
    kinds: &[ListKind],
    limits: &Limits,
) -> Result<UpstreamListing, UpstreamError> {
    let mut updated = listing.clone();
    for kind in kinds {
        if !has_capability(connection, *kind) {
            continue;
        }
        let listed =
            connection.list_within(*kind, max_items(limits, *kind), limits.max_listing_bytes_per_upstream).await?;
        *listing_slot(&mut updated, *kind) = listed.items;
        *updated.unread_pages.get_mut(*kind) = listed.unread_pages;
    }
    Ok(updated)
}

fn has_capability(connection: &Connection, kind: ListKind) -> bool {
    let capabilities = &connection.initialize_outcome().capabilities;
    let key = match kind {
        ListKind::Tools => "tools",
        ListKind::Prompts => "prompts",
        ListKind::Resources | ListKind::ResourceTemplates => "resources",
    };
    capabilities.get(key).is_some_and(|value| !value.is_null())
}

fn listing_slot(listing: &mut UpstreamListing, kind: ListKind) -> &mut Vec<Value> {
    match kind {
        ListKind::Tools => &mut listing.tools,
        ListKind::Prompts => &mut listing.prompts,
        ListKind::Resources => &mut listing.resources,
        ListKind::ResourceTemplates => &mut listing.templates,
    }
}

/// The delay before reconnect attempt `attempts` (1, 2, 4 ... capped at 30 seconds).
pub fn backoff(attempts: u32) -> Duration {
    let seconds = 1u64 << attempts.saturating_sub(1).min(5);
    Duration::from_secs(seconds.min(30))
}

/// How long a connection must have stayed up for its end to start the backoff again from the first step.
pub(crate) const STABLE_UPTIME: Duration = Duration::from_secs(30);

/// Failed attempts in a row once a connection that stayed up for `uptime` has ended, given `attempts` before it
/// (the input of [`backoff`]). A connection that lasted [`STABLE_UPTIME`] starts the count again; a shorter one
/// adds to it, so a child that initializes and then dies backs off like one that fails to start, up to the cap,
/// instead of being restarted every second.
pub(crate) fn attempts_after_disconnect(attempts: u32, uptime: Duration) -> u32 {
    if uptime >= STABLE_UPTIME { 1 } else { attempts.saturating_add(1) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_and_caps() {
        let delays: Vec<u64> = (1..=8).map(|attempt| backoff(attempt).as_secs()).collect();
        assert_eq!(delays, [1, 2, 4, 8, 16, 30, 30, 30]);
    }

    #[test]
    fn a_connection_that_stayed_up_starts_the_backoff_again_and_a_short_one_adds_to_it() {
        let check = |attempts: u32, uptime_ms: u64, expected: u32| {
            let after = attempts_after_disconnect(attempts, Duration::from_millis(uptime_ms));
            assert_eq!(after, expected, "{attempts} attempts, up for {uptime_ms} ms");
        };
        check(0, 10, 1);
        check(1, 10, 2);
        check(5, 29_999, 6);
        check(5, 30_000, 1);
        check(9, 7_200_000, 1);
        check(u32::MAX, 10, u32::MAX);
    }

    #[test]
    fn a_child_that_dies_right_after_starting_is_restarted_ever_more_slowly_up_to_the_cap() {
        let mut attempts = 0;
        let delays: Vec<u64> = (0..8)
            .map(|_| {
                attempts = attempts_after_disconnect(attempts, Duration::from_secs(1));
                backoff(attempts).as_secs()
            })
            .collect();
        assert_eq!(delays, [1, 2, 4, 8, 16, 30, 30, 30]);
        // Once a connection lasts, the next failure is retried quickly again.
        attempts = attempts_after_disconnect(attempts, STABLE_UPTIME);
        assert_eq!(backoff(attempts).as_secs(), 1);
    }
}
