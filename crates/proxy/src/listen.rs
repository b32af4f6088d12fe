//! `subscriptions/listen` (2026-07-28): a modern client's long-lived request for the notifications it opts in to,
//! in place of a legacy session's GET stream and `resources/subscribe`.
//!
//! The request's filter is read strictly (`era::ListenFilter`) and may name at most [`MAX_URIS_PER_LISTEN`]
//! resource URIs (each one may cost a `resources/subscribe` upstream). A listen takes a place in the gateway's
//! [`crate::state::listens::ListenRegistry`] (at most `MAX_LISTENS_PER_CALLER` per authenticated caller and `MAX_LISTENS` in
//! all; the next is refused with an error). The acknowledgement is the first message of the listen, stating what
//! toolgate honours: every list kind (toolgate's lists change with every upstream, pins and reloads), and resource
//! updates only for URIs that are really subscribed: listed or matched by a template of an upstream that declared
//! `resources.subscribe` and is connected now (the single-resource-server fallback of `Catalog::resource_owner`
//! never counts here: a URI that upstream does not list is not claimed). The URIs asked for and not honoured are
//! named in the acknowledgement's `_meta["toolgate/notSubscribed"]`. From then on each `list_changed` the gateway
//! announces (`state::shared::notify_list_changed`) and each `resources/updated` of a subscribed URI
//! (`upstream_events`, through `SessionShared::offer_to_listens`) reaches the listen as a message of this request,
//! tagged with its id. Nothing else does: no progress, no log lines, no other types.
//!
//! What waits for a slow listener is bounded by its session's client budget (`crate::outbox`); a notification of
//! the listen that finds no room ends the listen with an error ([`LISTEN_LAGGED`]) rather than dropping it
//! silently: a listener that lost an update cannot know what changed, so it is told to listen again and re-read
//! (a gap it can see beats a stream it wrongly trusts). The listen also ends when the client cancels it (closing
//! the HTTP stream, or `notifications/cancelled` on stdio), when its session closes, or, with a result, when the
//! gateway stops. This module never sends a request to the client and never subscribes a URI upstream that no
//! listen or session wants; whether a URI is subscribed upstream is decided by the registry alone, except after an
//! upstream (re)connects: its subscriptions died with its last process (or connection), so [`resubscribe`] sends
//! again every URI it serves that a listen or a legacy session still wants.

use std::collections::BTreeSet;
use std::sync::Arc;

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use toolgate_upstream::jsonrpc::{self, codes};

use crate::era::{self, ListenFilter};
use crate::state::listens::ListenRefused;
use crate::state::session::{Listen, SessionShared};
use crate::state::shared::Shared;

/// Resource URIs one listen may name; more is invalid params. Each may cost an upstream `resources/subscribe`,
/// and no client watches more through one request in practice.
pub(crate) const MAX_URIS_PER_LISTEN: usize = 256;
/// The error that refuses a listen over the caps of [`crate::state::listens::ListenRegistry`] or ends one whose listener fell
/// behind (JSON-RPC's implementation-defined server error; the 2026-07-28 codes -32020.. are not toolgate's).
pub(crate) const LISTEN_REFUSED: i64 = -32000;
/// The message of the error that ends a listen whose listener fell behind.
pub(crate) const LISTEN_LAGGED: &str = "the listener fell behind and a notification of this listen was dropped; \
     listen again and re-read what it watches";

/// Serves one `subscriptions/listen` until it ends; `None` when it was cancelled or its session closed (no answer
/// is sent then).
pub(crate) async fn listen(
    gateway: &Arc<Shared>,
    session: &Arc<SessionShared>,
    id: &Value,
    params: &Value,
    cancel: &CancellationToken,
) -> Option<Value> {
    let requested = match ListenFilter::parse(Some(params)) {
        Ok(filter) => filter,
        Err(error) => return Some(error.response(id)),
    };
    if requested.resource_uris.len() > MAX_URIS_PER_LISTEN {
        let message = format!(
            "invalid params: a listen may name at most {MAX_URIS_PER_LISTEN} resource URIs (this one names {})",
            requested.resource_uris.len()
        );
        return Some(jsonrpc::error_response(id, codes::INVALID_PARAMS, &message));
    }
    let mut honoured = requested.clone();
    honoured.resource_uris.retain(|uri| subscribable(gateway, uri));
    let not_subscribed: Vec<&String> = requested.resource_uris.difference(&honoured.resource_uris).collect();
    let place = match Place::take(gateway, &session.caller.name, &honoured.resource_uris) {
        Ok(place) => place,
        Err(refused) => return Some(jsonrpc::error_response(id, LISTEN_REFUSED, &refused.to_string())),
    };
    let lagged = CancellationToken::new();
    // Registered before the acknowledgement is queued, so no change announced after it can be missed.
    session.add_listen(Listen { id: id.clone(), filter: honoured.clone(), lagged: lagged.clone() });
    let mut ack = era::listen_acknowledgement(id, &honoured);
    if !not_subscribed.is_empty() {
        ack["params"]["_meta"]["toolgate/notSubscribed"] = json!(not_subscribed);
    }
    if !session.offer_related(id.clone(), ack) {
        lagged.cancel();
    }
    let ended = tokio::select! {
        () = cancel.cancelled() => Ended::Cancelled,
        () = session.closed.cancelled() => Ended::Cancelled,
        () = lagged.cancelled() => Ended::Lagged,
        () = gateway.shutdown.cancelled() => Ended::Stopping,
    };
    session.remove_listen(id);
    drop(place);
    match ended {
        Ended::Lagged => Some(jsonrpc::error_response(id, LISTEN_REFUSED, LISTEN_LAGGED)),
        Ended::Stopping if !cancel.is_cancelled() => {
            // A graceful end: the listen's result, tagged with its id (sent here: the session closes right after).
            let response = jsonrpc::response(id, era::listen_ended(id));
            session.respond(id.clone(), era::envelope(response, "subscriptions/listen", None)).await;
            None
        }
        Ended::Stopping | Ended::Cancelled => None,
    }
}

/// How a listen ended.
enum Ended {
    Cancelled,
    Lagged,
    Stopping,
}

/// A listen's place in the registry; given back (and its URIs' upstream subscriptions brought up to date) when
/// dropped, however the listen's future ends.
struct Place {
    gateway: Arc<Shared>,
    caller: String,
    uris: BTreeSet<String>,
}

impl Place {
    fn take(gateway: &Arc<Shared>, caller: &str, uris: &BTreeSet<String>) -> Result<Place, ListenRefused> {
        let start = gateway.listens.open(caller, uris)?;
        converge(gateway, start);
        Ok(Place { gateway: Arc::clone(gateway), caller: caller.to_owned(), uris: uris.clone() })
    }
}

impl Drop for Place {
    fn drop(&mut self) {
        let start = self.gateway.listens.close(&self.caller, &self.uris);
        converge(&self.gateway, start);
    }
}

/// True when a listen may claim `uri`: an upstream lists it or has a template matching it (never the
/// single-server fallback), it is not held, and that upstream is connected and declared `resources.subscribe`.
fn subscribable(gateway: &Shared, uri: &str) -> bool {
    let catalog = gateway.catalog();
    if catalog.held_resource(uri).is_some() {
        return false;
    }
    let Some(owner) = catalog.subscription_owner(uri) else { return false };
    let connection = gateway.upstreams.get(owner).and_then(|runtime| runtime.connection());
    connection.is_some_and(|connection| declares_subscribe(&connection.initialize_outcome().capabilities))
}

fn declares_subscribe(capabilities: &Value) -> bool {
    capabilities.pointer("/resources/subscribe") == Some(&Value::Bool(true))
}

/// Starts the converger of each URI in `uris` (the registry said none runs for it): it asks the owning upstream
/// to subscribe or unsubscribe until what it last asked agrees with the registry's count. Without a runtime (a
/// place dropped while the process ends) there is nothing left to tell.
fn converge(gateway: &Arc<Shared>, uris: Vec<String>) {
    let Ok(runtime) = tokio::runtime::Handle::try_current() else { return };
    for uri in uris {
        let gateway = Arc::clone(gateway);
        runtime.spawn(async move {
            while let Some(subscribe) = gateway.listens.next_step(&uri) {
                tell_upstream(&gateway, &uri, subscribe).await;
                gateway.listens.step_done(&uri, subscribe);
            }
        });
    }
}

/// Subscribes `upstream`, just connected (at start, after a crash or a reload), to every resource URI it serves
/// that an open listen or a legacy session's `resources/subscribe` still wants. A new process holds no
/// subscription, and nobody else asks again: a client subscribed once, and a listen's converger believes its
/// subscribe still holds. A subscribe that races a client's own is harmless (subscribing twice is subscribing).
pub(crate) async fn resubscribe(gateway: &Shared, upstream: usize) {
    let Some(connection) = gateway.upstreams.get(upstream).and_then(|runtime| runtime.connection()) else {
        return;
    };
    if !declares_subscribe(&connection.initialize_outcome().capabilities) {
        return;
    }
    let catalog = gateway.catalog();
    let mut uris = BTreeSet::new();
    for session in gateway.sessions() {
        let subscribed: Vec<String> =
            session.subscriptions.lock().map(|uris| uris.iter().cloned().collect()).unwrap_or_default();
        uris.extend(subscribed.into_iter().filter(|uri| catalog.resource_owner(uri) == Some(upstream)));
    }
    let listened = gateway.listens.wanted_uris();
    uris.extend(listened.into_iter().filter(|uri| catalog.subscription_owner(uri) == Some(upstream)));
    uris.retain(|uri| catalog.held_resource(uri).is_none());
    let upstream_name = gateway.upstreams.name(upstream);
    for uri in uris {
        if let Err(error) = connection.request("resources/subscribe", Some(json!({"uri": uri}))).await {
            tracing::warn!(upstream = %upstream_name, %uri, %error, "a resource subscription could not be sent again");
        }
    }
}

/// Sends `resources/subscribe` or `resources/unsubscribe` for `uri` to the upstream that serves it and waits for
/// its answer (so the converger's next request follows it). An unsubscribe is skipped while a legacy session
/// still holds its own subscription; an upstream that is gone or cannot subscribe is not asked.
async fn tell_upstream(gateway: &Shared, uri: &str, subscribe: bool) {
    if !subscribe && gateway.sessions().iter().any(|session| session.has_legacy_subscription(uri)) {
        return;
    }
    let owner = gateway.catalog().subscription_owner(uri);
    let Some(connection) =
        owner.and_then(|owner| gateway.upstreams.get(owner)).and_then(|runtime| runtime.connection())
    else {
        return;
    };
    if !declares_subscribe(&connection.initialize_outcome().capabilities) {
        return;
    }
    let method = if subscribe { "resources/subscribe" } else { "resources/unsubscribe" };
    if let Err(error) = connection.request(method, Some(json!({"uri": uri}))).await {
        tracing::debug!(%error, method, "an upstream resource subscription for a listen failed");
    }
}
