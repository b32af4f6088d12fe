//! The Prometheus recorder of one gateway and what the call path counts with it; `GET /metrics` renders it
//! (`crate::metrics`, docs/metrics.md). No HTTP here: it sits below the state that holds it.
//!
//! Each gateway owns its recorder (no global one), so two gateways in a process (or in a test binary) never mix
//! their counts. The hot path only touches pre-registered handles or one registry lookup for a call's label set;
//! gauges (upstream health, pending approvals, audit queue) are read when the exporter renders, so calls pay nothing
//! for them.

use std::sync::{Arc, RwLock};
use std::time::Duration;

use metrics::{Counter, Histogram, Key, Label, Metadata, Recorder};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle, PrometheusRecorder};
use toolgate_core::decision::Verdict;
use toolgate_upstream::{ExchangeCounts, ListKind, TokenFailure};

use toolgate_store::Store;

use crate::session::Refusal;
use crate::upstreams::{UpstreamRuntime, UpstreamStatus};

/// Tool calls by `upstream`, `tool` (the upstream's own name), `verdict` and `outcome`.
pub const TOOL_CALLS: &str = "toolgate_tool_calls_total";
/// Seconds from sending a permitted call upstream to its answer (or failure), by `upstream`.
pub const CALL_DURATION: &str = "toolgate_upstream_call_duration_seconds";
/// 1 when the upstream is connected and listed, 0 otherwise, by `upstream`.
pub const UPSTREAM_UP: &str = "toolgate_upstream_up";
/// Approvals waiting for a person in the state store.
pub const PENDING_APPROVALS: &str = "toolgate_pending_approvals";
/// Audit entries waiting in the writer's queue.
pub const AUDIT_QUEUED: &str = "toolgate_audit_queue_depth";
/// Audit entries refused because the queue was full.
pub const AUDIT_REJECTED: &str = "toolgate_audit_rejected_total";
/// Audit entries that could not be written after retrying.
pub const AUDIT_FAILED: &str = "toolgate_audit_failed_total";
/// Audit rows committed.
pub const AUDIT_WRITTEN: &str = "toolgate_audit_written_total";
/// Requests refused at once because the upstream already had `max_in_flight` requests waiting, by `upstream`.
pub const UPSTREAM_SATURATED: &str = "toolgate_upstream_saturated_total";
/// Requests waiting for the upstream's answers now, by `upstream`.
pub const UPSTREAM_IN_FLIGHT: &str = "toolgate_upstream_in_flight";
/// Times the upstream's connection ended after it was ready (a crash, a closed session), by `upstream`: a scrape
/// that misses a short down window still sees the count move.
pub const UPSTREAM_DISCONNECTS: &str = "toolgate_upstream_disconnects_total";
/// `notifications/cancelled` not sent because the upstream was not reading its input, by `upstream`, since its
/// current connection opened.
pub const UPSTREAM_CANCELS_DROPPED: &str = "toolgate_upstream_cancel_notices_dropped_total";
/// Re-listings after an upstream's `list_changed` (bursts are coalesced), by `upstream`.
pub const RELISTS: &str = "toolgate_upstream_relists_total";
/// Re-listings that failed (saturated, timed out, refused) and were asked again after a backoff, by `upstream`.
pub const RELIST_FAILURES: &str = "toolgate_upstream_relist_failures_total";
/// Requests from an upstream (sampling, elicitation, roots) refused because too many already waited for clients'
/// answers, by `upstream` and `reason` (`per_session`, `per_upstream`).
pub const RELAYED_REFUSED: &str = "toolgate_relayed_requests_refused_total";
/// Tools the upstream's last listing had beyond `limits.max_tools_per_upstream`, dropped, by `upstream`.
pub const TOOLS_DROPPED: &str = "toolgate_upstream_tools_dropped";
/// Items of the upstream's last listing beyond the limits (a count or `limits.max_listing_bytes_per_upstream`),
/// dropped, by `upstream` and `kind` (`tools`, `prompts`, `resources`, `resourceTemplates`).
pub const LIST_ITEMS_DROPPED: &str = "toolgate_upstream_list_items_dropped";
/// HTTP sessions refused, by `reason` (`per_caller`, `total`).
pub const SESSIONS_REFUSED: &str = "toolgate_sessions_refused_total";
/// HTTP requests refused at OAuth authentication, by `reason` (`toolgate_auth::TokenError::reason`, or
/// `insufficient_scope`): a fixed set, never the caller (subjects are unbounded).
pub const AUTHENTICATION_REFUSED: &str = "toolgate_authentication_refused_total";
/// Of those, the ones that wrote no audit row because a row of the same reason and remote address was written less
/// than a second before, by `reason`.
pub const AUTHENTICATION_ROWS_SUPPRESSED: &str = "toolgate_authentication_rows_suppressed_total";
/// HTTP connections refused, by `reason` (`connection_limit`, `fd_limit`).
pub const CONNECTIONS_REFUSED: &str = "toolgate_connections_refused_total";
/// Notifications dropped because their client was not reading (its queue was full).
pub const CLIENT_MESSAGES_DROPPED: &str = "toolgate_client_messages_dropped_total";
/// Sessions closed because a response found no room for a minute: their client read nothing.
pub const CLIENT_SESSIONS_STALLED: &str = "toolgate_client_sessions_stalled_total";
/// Bytes (estimated) queued toward clients over all sessions: the gateway's queues and what transports hold.
pub const CLIENT_QUEUED_BYTES: &str = "toolgate_client_queued_bytes";
/// Bytes of the audit database and its write-ahead log.
pub const AUDIT_BYTES: &str = "toolgate_audit_bytes";
/// Bytes free on the state directory's filesystem.
pub const AUDIT_DISK_FREE: &str = "toolgate_audit_disk_free_bytes";
/// 1 while the audit writer's attempts fail (it retries until they succeed).
pub const AUDIT_FAILING: &str = "toolgate_audit_writer_failing";
/// Audit rows pruned by retention.
pub const AUDIT_PRUNED: &str = "toolgate_audit_pruned_total";
/// RFC 8693 exchanges the issuer granted for a token exchange upstream's callers, by `upstream`.
pub const TOKEN_EXCHANGES: &str = "toolgate_token_exchanges_total";
/// Requests to a token exchange upstream sent with a cached exchanged token (no exchange), by `upstream`.
pub const TOKEN_EXCHANGE_CACHE_HITS: &str = "toolgate_token_exchange_cache_hits_total";
/// Exchanges that failed, by `upstream` and `kind` (`discovery`, `unreachable`, `refused`, `bad_answer`,
/// `no_caller_token`).
pub const TOKEN_EXCHANGE_FAILURES: &str = "toolgate_token_exchange_failures_total";
/// Always 1, labelled with the process's `instance` id, so a scrape of one process of a fleet says which it is.
pub const INSTANCE_INFO: &str = "toolgate_instance_info";

/// Latency buckets in seconds: a relayed call costs well under a millisecond; tools may take a minute.
const LATENCY_BUCKETS: [f64; 15] =
    [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0];

static METADATA: Metadata<'static> = Metadata::new(module_path!(), metrics::Level::INFO, Some(module_path!()));

/// What a client got for a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// A result without `isError`.
    Ok,
    /// An `isError` result (a refusal, a transport failure, or the tool's own error).
    IsError,
    /// A JSON-RPC error from the upstream.
    JsonRpcError,
    /// Not sent: the tool's upstream is down and reconnecting (the client gets an `isError` result saying so).
    UpstreamUnavailable,
    /// The client cancelled the call (or closed its session) before it was answered: nothing was sent back.
    Cancelled,
    /// Not sent yet: a 2026-07-28 request was answered `input_required` (a person's answer is needed first).
    InputRequired,
}

impl Outcome {
    /// The outcome of a client-bound response.
    pub(crate) fn of(response: &serde_json::Value) -> Outcome {
        if response.get("error").is_some() {
            Outcome::JsonRpcError
        } else if response.pointer("/result/isError") == Some(&serde_json::Value::Bool(true)) {
            Outcome::IsError
        } else {
            Outcome::Ok
        }
    }

    pub(crate) fn label(self) -> &'static str {
        match self {
            Outcome::Ok => "ok",
            Outcome::IsError => "is_error",
            Outcome::JsonRpcError => "jsonrpc_error",
            Outcome::UpstreamUnavailable => "upstream_unavailable",
            Outcome::Cancelled => "cancelled",
            Outcome::InputRequired => "input_required",
        }
    }
}

fn verdict_label(verdict: Verdict) -> &'static str {
    match verdict {
        Verdict::Allow => "allow",
        Verdict::Confirm => "confirm",
        Verdict::Deny => "deny",
        Verdict::Hide => "hide",
    }
}

/// One gateway's recorder and the handles its hot path uses.
pub(crate) struct GatewayMetrics {
    recorder: PrometheusRecorder,
    handle: PrometheusHandle,
    /// Per upstream index, the latency histogram and the refusals for saturation and ended connections
    /// (registered up front, so they read 0 before anything happened rather than being absent; an upstream a
    /// reload adds gets its own at the next index).
    per_upstream: RwLock<Vec<UpstreamHandles>>,
}

/// The hot path's handles of one upstream slot.
struct UpstreamHandles {
    latency: Histogram,
    saturated: Counter,
    disconnects: Counter,
}

impl GatewayMetrics {
    /// A recorder with a latency histogram pre-registered for each upstream, in configuration order.
    pub(crate) fn new<'a>(upstreams: impl Iterator<Item = &'a str>) -> GatewayMetrics {
        let builder = PrometheusBuilder::new();
        // Only fails on an empty bucket list.
        let builder = builder
            .set_buckets_for_metric(Matcher::Full(CALL_DURATION.to_owned()), &LATENCY_BUCKETS)
            .unwrap_or_else(|_| PrometheusBuilder::new());
        let recorder = builder.build_recorder();
        let handle = recorder.handle();
        describe(&recorder);
        let metrics = GatewayMetrics { recorder, handle, per_upstream: RwLock::new(Vec::new()) };
        for name in upstreams {
            metrics.add_upstream(name);
        }
        metrics
    }

    /// Registers the handles of the next upstream slot (a config reload added or restarted `name`).
    pub(crate) fn add_upstream(&self, name: &str) {
        let key = |metric: &'static str| Key::from_parts(metric, vec![Label::new("upstream", name.to_owned())]);
        let handles = UpstreamHandles {
            latency: self.recorder.register_histogram(&key(CALL_DURATION), &METADATA),
            saturated: self.recorder.register_counter(&key(UPSTREAM_SATURATED), &METADATA),
            disconnects: self.recorder.register_counter(&key(UPSTREAM_DISCONNECTS), &METADATA),
        };
        if let Ok(mut per_upstream) = self.per_upstream.write() {
            per_upstream.push(handles);
        }
    }

    fn with_upstream(&self, index: usize, record: impl FnOnce(&UpstreamHandles)) {
        if let Some(handles) = self.per_upstream.read().ok().as_ref().and_then(|handles| handles.get(index)) {
            record(handles);
        }
    }

    /// Counts a request refused because upstream `index` had `max_in_flight` requests waiting.
    pub(crate) fn count_saturated(&self, index: usize) {
        self.with_upstream(index, |handles| handles.saturated.increment(1));
    }

    /// Counts the end of upstream `index`'s connection after it was ready.
    pub(crate) fn count_disconnect(&self, index: usize) {
        self.with_upstream(index, |handles| handles.disconnects.increment(1));
    }

    /// Counts one tools/call, however it ended; one that reached no verdict (its name leads to no tool) has verdict
    /// `none` and empty `upstream` and `tool` (the name is the client's choice: as a label it would be unbounded).
    pub(crate) fn count_call(&self, upstream: &str, tool: &str, verdict: Option<Verdict>, outcome: Outcome) {
        let key = Key::from_parts(
            TOOL_CALLS,
            vec![
                Label::new("upstream", upstream.to_owned()),
                Label::new("tool", tool.to_owned()),
                Label::from_static_parts("verdict", verdict.map_or("none", verdict_label)),
                Label::from_static_parts("outcome", outcome.label()),
            ],
        );
        self.recorder.register_counter(&key, &METADATA).increment(1);
    }

    /// The counter of notifications dropped for clients that do not read (one handle, shared by every session).
    pub(crate) fn client_messages_dropped(&self) -> metrics::Counter {
        self.recorder.register_counter(&Key::from_static_name(CLIENT_MESSAGES_DROPPED), &METADATA)
    }

    /// The counter of sessions closed because their client read nothing while a response waited for room.
    pub(crate) fn client_sessions_stalled(&self) -> metrics::Counter {
        self.recorder.register_counter(&Key::from_static_name(CLIENT_SESSIONS_STALLED), &METADATA)
    }

    /// Counts a session or connection the HTTP listener turned away.
    pub(crate) fn count_refusal(&self, refusal: Refusal) {
        let name = match refusal {
            Refusal::SessionsPerCaller | Refusal::SessionsTotal => SESSIONS_REFUSED,
            Refusal::ConnectionLimit | Refusal::DescriptorLimit => CONNECTIONS_REFUSED,
        };
        let key = Key::from_parts(name, vec![Label::from_static_parts("reason", refusal.label())]);
        self.recorder.register_counter(&key, &METADATA).increment(1);
    }

    /// Counts a request refused at OAuth authentication; `reason` is one of a fixed set.
    pub(crate) fn count_authentication_refusal(&self, reason: &'static str) {
        let key = Key::from_parts(AUTHENTICATION_REFUSED, vec![Label::from_static_parts("reason", reason)]);
        self.recorder.register_counter(&key, &METADATA).increment(1);
    }

    /// Counts a refusal at authentication that wrote no audit row (`guard::refusal_rows`).
    pub(crate) fn count_authentication_row_suppressed(&self, reason: &'static str) {
        let key = Key::from_parts(AUTHENTICATION_ROWS_SUPPRESSED, vec![Label::from_static_parts("reason", reason)]);
        self.recorder.register_counter(&key, &METADATA).increment(1);
    }

    /// Records how long upstream `index` took to answer a relayed call.
    pub(crate) fn observe_relay(&self, index: usize, elapsed: Duration) {
        self.with_upstream(index, |handles| handles.latency.record(elapsed.as_secs_f64()));
    }

    /// Counts an upstream request refused because `reason`'s bound on relayed requests was full.
    pub(crate) fn count_relay_refused(&self, upstream: &str, reason: &'static str) {
        let labels = vec![Label::new("upstream", upstream.to_owned()), Label::from_static_parts("reason", reason)];
        self.recorder.register_counter(&Key::from_parts(RELAYED_REFUSED, labels), &METADATA).increment(1);
    }

    /// Counts one re-listing of `upstream` that failed (it is retried after a backoff).
    pub(crate) fn count_relist_failure(&self, upstream: &str) {
        let key = Key::from_parts(RELIST_FAILURES, vec![Label::new("upstream", upstream.to_owned())]);
        self.recorder.register_counter(&key, &METADATA).increment(1);
    }

    /// Counts one re-listing of `upstream`.
    pub(crate) fn count_relist(&self, upstream: &str) {
        let key = Key::from_parts(RELISTS, vec![Label::new("upstream", upstream.to_owned())]);
        self.recorder.register_counter(&key, &METADATA).increment(1);
    }

    /// A token exchange upstream's counts, as its exchanger keeps them (since the upstream's runtime was made).
    fn render_exchange(&self, upstream: &str, counts: &ExchangeCounts) {
        let upstream = || Label::new("upstream", upstream.to_owned());
        let counter = |name: &'static str, labels: Vec<Label>, value: u64| {
            self.recorder.register_counter(&Key::from_parts(name, labels), &METADATA).absolute(value);
        };
        counter(TOKEN_EXCHANGES, vec![upstream()], counts.exchanged);
        counter(TOKEN_EXCHANGE_CACHE_HITS, vec![upstream()], counts.cache_hits);
        for kind in TokenFailure::ALL {
            let labels = vec![upstream(), Label::from_static_parts("kind", kind.label())];
            counter(TOKEN_EXCHANGE_FAILURES, labels, counts.failed(kind));
        }
    }

    fn gauge(&self, name: &'static str, labels: Vec<Label>, value: f64) {
        self.recorder.register_gauge(&Key::from_parts(name, labels), &METADATA).set(value);
    }

    fn absolute(&self, name: &'static str, value: u64) {
        self.recorder.register_counter(&Key::from_static_name(name), &METADATA).absolute(value);
    }
}

fn describe(recorder: &PrometheusRecorder) {
    let help: [(&'static str, &'static str); 32] = [
        (TOOL_CALLS, "Tool calls by upstream, tool, verdict and outcome."),
        (CALL_DURATION, "Seconds from forwarding a permitted call upstream to its answer, by upstream."),
        (UPSTREAM_UP, "1 when the upstream is connected and listed, 0 otherwise."),
        (PENDING_APPROVALS, "Approvals waiting for a person in the state store."),
        (AUDIT_QUEUED, "Audit entries waiting in the writer's queue."),
        (AUDIT_REJECTED, "Audit entries refused because the queue was full."),
        (AUDIT_FAILED, "Audit entries that could not be written after retrying."),
        (AUDIT_WRITTEN, "Audit rows committed since the store was opened."),
        (UPSTREAM_SATURATED, "Requests refused at once because the upstream had max_in_flight requests waiting."),
        (UPSTREAM_IN_FLIGHT, "Requests waiting for the upstream's answers."),
        (UPSTREAM_DISCONNECTS, "Times the upstream's connection ended after it was ready."),
        (UPSTREAM_CANCELS_DROPPED, "Cancellation notices dropped because the upstream was not reading its input."),
        (RELISTS, "Re-listings after an upstream's list_changed (bursts coalesced), by upstream."),
        (RELAYED_REFUSED, "Upstream requests refused because too many waited for clients' answers, by reason."),
        (RELIST_FAILURES, "Re-listings that failed and were retried after a backoff, by upstream."),
        (TOOLS_DROPPED, "Tools beyond limits.max_tools_per_upstream dropped from the upstream's last listing."),
        (
            LIST_ITEMS_DROPPED,
            "Items of each kind beyond a count or byte limit dropped from the upstream's last listing.",
        ),
        (SESSIONS_REFUSED, "HTTP sessions refused at a session limit, by reason (per_caller, total)."),
        (CONNECTIONS_REFUSED, "HTTP connections refused, by reason (connection_limit, fd_limit)."),
        (AUTHENTICATION_REFUSED, "HTTP requests refused at OAuth authentication, by reason (expired, ...)."),
        (
            AUTHENTICATION_ROWS_SUPPRESSED,
            "Refusals at authentication without an audit row (one row per reason and address per second), by reason.",
        ),
        (CLIENT_MESSAGES_DROPPED, "Notifications dropped because their client was not reading."),
        (CLIENT_SESSIONS_STALLED, "Sessions closed because their client read nothing while a response waited."),
        (CLIENT_QUEUED_BYTES, "Bytes (estimated) queued toward clients, all sessions, wherever they wait."),
        (AUDIT_BYTES, "Bytes of the audit database and its write-ahead log."),
        (AUDIT_DISK_FREE, "Bytes free on the state directory's filesystem."),
        (AUDIT_FAILING, "1 while the audit writer's attempts fail; it retries until they succeed."),
        (AUDIT_PRUNED, "Audit rows pruned by retention since the store was opened."),
        (INSTANCE_INFO, "1, labelled with this process's instance id (one of several serving the same store)."),
        (TOKEN_EXCHANGES, "Token exchanges (RFC 8693) the issuer granted for callers of the upstream."),
        (TOKEN_EXCHANGE_CACHE_HITS, "Requests to the upstream sent with a cached exchanged token."),
        (TOKEN_EXCHANGE_FAILURES, "Token exchanges that failed, by upstream and kind."),
    ];
    for (name, text) in help {
        // The kind is irrelevant to the exporter's descriptions; one call describes any kind.
        recorder.describe_counter(name.into(), None, text.into());
    }
}

impl GatewayMetrics {
    /// The metrics in the Prometheus text format: counters and histograms as recorded, gauges read now from
    /// `upstreams`, `store` and the bytes `queued` toward clients, labelled with the `instance` id when set.
    pub(crate) async fn render(
        &self,
        upstreams: &[Arc<UpstreamRuntime>],
        store: Option<&Store>,
        queued: usize,
        instance: Option<String>,
    ) -> String {
        let metrics = self;
        if let Some(instance) = instance {
            metrics.gauge(INSTANCE_INFO, vec![Label::new("instance", instance)], 1.0);
        }
        for runtime in upstreams {
            let up = matches!(runtime.status(), UpstreamStatus::Ready { .. });
            let labels = vec![Label::new("upstream", runtime.spec.name.clone())];
            metrics.gauge(UPSTREAM_UP, labels, if up { 1.0 } else { 0.0 });
            let connection = runtime.connection();
            let in_flight = connection.as_ref().map_or(0, |connection| connection.in_flight());
            let labels = vec![Label::new("upstream", runtime.spec.name.clone())];
            metrics.gauge(UPSTREAM_IN_FLIGHT, labels.clone(), in_flight as f64);
            let dropped = runtime.checked_listing().map(|listing| listing.dropped).unwrap_or_default();
            metrics.gauge(TOOLS_DROPPED, labels, dropped.tools as f64);
            for kind in ListKind::ALL {
                let labels = vec![
                    Label::new("upstream", runtime.spec.name.clone()),
                    Label::from_static_parts("kind", kind.result_key()),
                ];
                metrics.gauge(LIST_ITEMS_DROPPED, labels, *dropped.get(kind) as f64);
            }
            let dropped = connection.as_ref().map_or(0, |connection| connection.cancel_notices_dropped());
            let key =
                Key::from_parts(UPSTREAM_CANCELS_DROPPED, vec![Label::new("upstream", runtime.spec.name.clone())]);
            metrics.recorder.register_counter(&key, &METADATA).absolute(dropped);
            if let Some(counts) = runtime.exchange_counts() {
                metrics.render_exchange(&runtime.spec.name, &counts);
            }
        }
        metrics.gauge(CLIENT_QUEUED_BYTES, Vec::new(), queued as f64);
        if let Some(store) = store {
            let stats = store.audit().stats();
            metrics.gauge(AUDIT_QUEUED, Vec::new(), stats.queued as f64);
            metrics.absolute(AUDIT_REJECTED, stats.rejected);
            metrics.absolute(AUDIT_FAILED, stats.failed);
            metrics.absolute(AUDIT_WRITTEN, stats.written);
            metrics.gauge(AUDIT_BYTES, Vec::new(), stats.database_bytes as f64);
            if let Some(free) = stats.disk_free_bytes {
                metrics.gauge(AUDIT_DISK_FREE, Vec::new(), free as f64);
            }
            metrics.gauge(AUDIT_FAILING, Vec::new(), if stats.failing { 1.0 } else { 0.0 });
            metrics.absolute(AUDIT_PRUNED, stats.pruned);
            match store.approvals().list_pending().await {
                Ok(pending) => metrics.gauge(PENDING_APPROVALS, Vec::new(), pending.len() as f64),
                Err(error) => tracing::warn!(%error, "metrics: cannot count pending approvals"),
            }
        }
        metrics.handle.render()
    }
}
