//! One task per upstream: connect, check and publish the listing, serve re-listing requests, reconnect with
//! backoff when the connection ends; on each connection, the resource subscriptions clients still hold are sent again
//! (`crate::listen::resubscribe`).
//!
//! The task is the only writer of its upstream's connection and listing. A `list_changed` from the upstream (and a
//! re-check after a person's pin decision) is a request to it ([`crate::upstreams::ListingRequests`]), served one at
//! a time from the listing it published last: a tools change and a prompts change announced together both land, a
//! request from a connection that has ended is answered by the next connection's full listing, and a burst costs
//! the re-listing in flight and one more. A re-listing that fails while the connection lives (the upstream was
//! saturated, a page timed out) is asked again after a backoff (1 s doubling to 30 s, counted in
//! `toolgate_upstream_relist_failures_total`), so a change is never lost until the next `list_changed`. It must not decide calls or touch sessions beyond telling them a list
//! changed (and reading which URIs they subscribed).

use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use serde_json::Value;
use tokio::sync::{broadcast, oneshot};
use toolgate_store::{PinKind, StoreChange};
use toolgate_upstream::{Connection, EventSink, ListKind, Responder, UpstreamError};

use crate::catalog::CheckedListing;
use crate::lifecycle::listing::{self, ListingTrigger};
use crate::state::shared::Shared;
use crate::upstreams::{Requested, UpstreamRuntime, attempts_after_disconnect, backoff, relist};

/// How often quarantined tools are re-checked when no change arrives on SQLite, where another process's decision
/// (`toolgate pins approve`) reaches no feed: the re-read is the only way to see it.
const SQLITE_RECHECK: Duration = Duration::from_secs(1);
/// The same on PostgreSQL, where every decision arrives as a notification: only the fallback for one lost while
/// the store's listener reconnected, so a lost notification delays a release by this much at worst.
const POSTGRES_RECHECK: Duration = Duration::from_secs(30);

/// Routes what one upstream sends on its own (see [`crate::upstream_events`]) and tells its run task when it ends.
struct UpstreamSink {
    gateway: Weak<Shared>,
    index: usize,
    ended: Mutex<Option<oneshot::Sender<String>>>,
}

impl EventSink for UpstreamSink {
    fn notification(&self, message: Value, related: Option<u64>) {
        if let Some(gateway) = self.gateway.upgrade() {
            crate::upstream_events::on_notification(&gateway, self.index, message, related);
        }
    }

    fn request(&self, message: Value, related: Option<u64>, responder: Responder) {
        if let Some(gateway) = self.gateway.upgrade() {
            tokio::spawn(crate::upstream_events::on_request(gateway, self.index, message, related, responder));
        }
    }

    fn ended(&self, error: UpstreamError) {
        if let Some(sender) = self.ended.lock().ok().and_then(|mut ended| ended.take()) {
            let _ = sender.send(error.to_string());
        }
    }
}

/// One upstream's life: connect, list, check, publish, serve re-listing requests, and reconnect with backoff when
/// the connection ends. The backoff starts again only after a connection that stayed up
/// ([`attempts_after_disconnect`]), so a crash loop slows down.
///
/// It stops when the gateway does or when a config reload withdraws the upstream (`runtime.stop`, a child of the
/// gateway's shutdown), closing the connection it holds before it ends.
pub(crate) async fn run_upstream(gateway: Arc<Shared>, runtime: Arc<UpstreamRuntime>) {
    let index = runtime.index;
    let mut attempts: u32 = 0;
    let mut settled = false;
    let mut trigger = ListingTrigger::Start;
    loop {
        let (ended_sender, mut ended) = oneshot::channel();
        let sink =
            Arc::new(UpstreamSink { gateway: Arc::downgrade(&gateway), index, ended: Mutex::new(Some(ended_sender)) });
        // What was asked of the last connection, this one's full listing answers; what this one announces while it
        // is being listed stays asked.
        runtime.requests.clear();
        let limits = &gateway.spec.limits;
        let connected = tokio::select! {
            () = runtime.stop.cancelled() => return,
            connected = runtime.connect(limits, &gateway.spec.sandbox, sink) => connected,
        };
        match connected {
            Ok((connection, mut listed)) => {
                let connected_at = tokio::time::Instant::now();
                let dropped = listing::cap_listing(&runtime.spec.name, &mut listed, limits, &ListKind::ALL);
                let checked = listing::check(&gateway, index, Arc::new(listed), dropped, None).await;
                let trigger = std::mem::replace(&mut trigger, ListingTrigger::Reconnect);
                listing::record(&gateway, &runtime.spec.name, trigger, None, &checked);
                runtime.publish(Arc::clone(&connection), Arc::new(checked.listing));
                // The catalog first, then the status: whoever sees `Ready` finds this listing's tools (a call made as
                // soon as the status said ready got "Unknown tool" when the status came first).
                crate::lifecycle::catalog::rebuild_catalog(&gateway);
                runtime.mark_ready();
                tracing::info!(upstream = %runtime.spec.name, status = ?runtime.status(), "upstream ready");
                gateway.notify_list_changed(&[ListKind::Tools, ListKind::Prompts, ListKind::Resources]);
                // A new connection holds none of the subscriptions clients made through toolgate: send them again
                // (in a task of its own, so re-listing requests are not held up behind them).
                let resubscribing = Arc::clone(&gateway);
                tokio::spawn(async move { crate::listen::resubscribe(&resubscribing, index).await });
                if !std::mem::replace(&mut settled, true) {
                    gateway.mark_settled();
                }
                let ended = serve_requests(&gateway, &runtime, &connection, &mut ended).await;
                connection.close().await;
                let Some(reason) = ended else { return };
                attempts = attempts_after_disconnect(attempts, connected_at.elapsed());
                tracing::warn!(
                    upstream = %runtime.spec.name,
                    %reason,
                    attempts,
                    "upstream went down; reconnecting with backoff"
                );
                runtime.mark_down(reason, attempts);
                gateway.metrics.count_disconnect(index);
                crate::lifecycle::catalog::rebuild_catalog(&gateway);
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
            () = runtime.stop.cancelled() => return,
            () = tokio::time::sleep(backoff(attempts)) => {}
        }
    }
}

/// Serves re-listing requests on `connection` until it ends (`Some(reason)`) or the gateway shuts down (`None`).
async fn serve_requests(
    gateway: &Shared,
    runtime: &UpstreamRuntime,
    connection: &Connection,
    ended: &mut oneshot::Receiver<String>,
) -> Option<String> {
    let stopped = |reason: Result<String, oneshot::error::RecvError>| {
        Some(reason.unwrap_or_else(|_| "the connection stopped".to_owned()))
    };
    // Re-listings that failed in a row: the backoff before the next attempt.
    let mut failures: u32 = 0;
    loop {
        let requested = tokio::select! {
            () = runtime.stop.cancelled() => return None,
            reason = &mut *ended => return stopped(reason),
            requested = runtime.requests.next() => requested,
        };
        let served = tokio::select! {
            () = runtime.stop.cancelled() => return None,
            reason = &mut *ended => return stopped(reason),
            served = serve(gateway, runtime, connection, requested) => served,
        };
        match served {
            Ok(()) => failures = 0,
            Err(RelistFailed) => {
                failures = failures.saturating_add(1);
                gateway.metrics.count_relist_failure(&runtime.spec.name);
                // Asked again after the wait; whatever the upstream announces meanwhile joins the same attempt.
                tokio::select! {
                    () = runtime.stop.cancelled() => return None,
                    reason = &mut *ended => return stopped(reason),
                    () = tokio::time::sleep(backoff(failures)) => runtime.requests.again(requested),
                }
            }
        }
    }
}

/// A re-listing that did not complete: what was requested is asked again.
struct RelistFailed;

/// Re-lists what was requested into a copy of the published listing, checks it, records it, and publishes it with
/// a rebuilt catalog when anything a catalog depends on changed. Sessions hear of every kind re-listed (the upstream
/// said it changed), and of the tools after a re-check only when the quarantine changed.
async fn serve(
    gateway: &Shared,
    runtime: &UpstreamRuntime,
    connection: &Connection,
    requested: Requested,
) -> Result<(), RelistFailed> {
    let Some(current) = runtime.checked_listing() else { return Ok(()) };
    let name = &runtime.spec.name;
    let kinds = requested.kinds();
    let (listed, dropped) = if kinds.is_empty() {
        (Arc::clone(&current.listing), current.dropped)
    } else {
        gateway.metrics.count_relist(name);
        let limits = &gateway.spec.limits;
        let mut listed = match relist(connection, &current.listing, &kinds, limits).await {
            Ok(listed) => listed,
            Err(error) => {
                // If the connection is ending its successor lists everything; otherwise this is asked again.
                tracing::warn!(upstream = %name, %error, "re-listing after list_changed failed; it will be retried");
                return Err(RelistFailed);
            }
        };
        // The kinds re-listed are cut again; the others keep what was dropped of them.
        let cut = listing::cap_listing(name, &mut listed, limits, &kinds);
        let mut dropped = current.dropped;
        for kind in &kinds {
            *dropped.get_mut(*kind) = *cut.get(*kind);
        }
        (Arc::new(listed), dropped)
    };
    // Any re-listing is checked: a pinned upstream's prompts and resources are pinned like its tools.
    let checked = if requested.tools || requested.prompts || requested.resources || requested.recheck {
        let checked = listing::check(gateway, runtime.index, listed, dropped, Some(&current)).await;
        let trigger = if requested.tools { ListingTrigger::ListChanged } else { ListingTrigger::Recheck };
        listing::record(gateway, name, trigger, Some(&current), &checked);
        checked.listing
    } else {
        CheckedListing { listing: listed, dropped, ..(*current).clone() }
    };
    let changed = listing::differs(&current, &checked);
    // What a check held or released is a change of that kind's list, whichever list was asked for (an approval
    // found by a re-check asks for none): clients re-list only what they are told changed.
    let held_moved = |kinds: &[PinKind]| changed && held_of(&current, kinds) != held_of(&checked, kinds);
    let prompts_moved = held_moved(&[PinKind::Prompt]);
    let resources_moved = held_moved(&[PinKind::Resource, PinKind::ResourceTemplate]);
    if changed {
        runtime.replace_listing(Arc::new(checked));
        crate::lifecycle::catalog::rebuild_catalog(gateway);
    }
    let mut notify = Vec::new();
    if requested.tools || (requested.recheck && changed) {
        notify.push(ListKind::Tools);
    }
    if requested.prompts || prompts_moved {
        notify.push(ListKind::Prompts);
    }
    if requested.resources || resources_moved {
        notify.push(ListKind::Resources);
    }
    gateway.notify_list_changed(&notify);
    Ok(())
}

/// The items of `kinds` that `checked` holds back, sorted.
fn held_of(checked: &CheckedListing, kinds: &[PinKind]) -> Vec<(PinKind, String)> {
    checked.held_content().into_iter().filter(|(kind, _)| kinds.contains(kind)).collect()
}

/// Asks the run task of an upstream with quarantined tools or held content to check them against the store again
/// when the store's change feed says its pins changed (a person decided here, in another process's console or with
/// `toolgate pins approve`; on PostgreSQL through LISTEN/NOTIFY), and every upstream that waits on the bounded
/// fallback re-read (`SQLITE_RECHECK`, `POSTGRES_RECHECK`) or after missing changes. A re-check that changes nothing
/// writes nothing.
pub(crate) async fn watch_quarantine(gateway: Arc<Shared>) {
    let Some(store) = gateway.store.clone() else { return };
    let fallback = if store.is_postgres() { POSTGRES_RECHECK } else { SQLITE_RECHECK };
    // Subscribed before the first sweep, so a decision made meanwhile is not missed.
    let mut changes = store.changes();
    let mut next_sweep = tokio::time::Instant::now() + fallback;
    loop {
        let only = tokio::select! {
            () = gateway.shutdown.cancelled() => return,
            () = tokio::time::sleep_until(next_sweep) => None,
            change = changes.recv() => match change {
                Ok(StoreChange::Pins { upstream }) => Some(upstream),
                Ok(StoreChange::Approval { .. }) => continue,
                // Changes were missed (or the feed ended with its store): re-check every waiting upstream.
                Err(broadcast::error::RecvError::Lagged(_)) => None,
                Err(broadcast::error::RecvError::Closed) => {
                    changes = store.changes();
                    None
                }
            },
        };
        if only.is_none() {
            next_sweep = tokio::time::Instant::now() + fallback;
        }
        for runtime in gateway.upstreams.live() {
            if only.as_deref().is_some_and(|upstream| upstream != runtime.spec.name) {
                continue;
            }
            let waiting = |checked: &CheckedListing| {
                !checked.quarantined_names().is_empty() || !checked.held_content().is_empty()
            };
            if runtime.checked_listing().is_some_and(|checked| waiting(&checked)) {
                runtime.requests.recheck();
            }
        }
    }
}
