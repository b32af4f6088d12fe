//! `subscriptions/listen` (2026-07-28): a modern client's long-lived request for the notifications it opts in to,
//! in place of a legacy session's GET stream and `resources/subscribe`.
//!
//! The request's filter is read strictly (`era::ListenFilter`); the acknowledgement is the first message of the
//! listen, stating what toolgate honours (every list kind: toolgate's lists change with every upstream, pins and
//! reloads; resource updates only for URIs an upstream serves now), and from then on each `list_changed` the
//! gateway announces (`state::shared::notify_list_changed`) and each `resources/updated` of a subscribed URI
//! (`upstream_events`, through `SessionShared::offer_to_listens`) reaches the listen as a message of this request, tagged with its id. Nothing else does: no
//! progress, no log lines, no other types. The listen ends when the client cancels it (closing the HTTP stream, or
//! `notifications/cancelled` on stdio), when its session closes, or, with a result, when the gateway stops. This
//! module never sends a request to the client and never subscribes a URI upstream that no listen or session wants.

use std::sync::Arc;

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use toolgate_upstream::jsonrpc;

use crate::era::{self, ListenFilter};
use crate::state::session::{Listen, SessionShared};
use crate::state::shared::Shared;

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
    let mut honoured = requested.clone();
    let catalog = gateway.catalog();
    honoured.resource_uris.retain(|uri| catalog.resource_owner(uri).is_some() && catalog.held_resource(uri).is_none());
    drop(catalog);
    let newly_wanted: Vec<String> = honoured
        .resource_uris
        .iter()
        .filter(|uri| !gateway.sessions().iter().any(|other| other.wants_resource(uri)))
        .cloned()
        .collect();
    // Registered before the acknowledgement is queued, so no change announced after it can be missed.
    session.add_listen(Listen { id: id.clone(), filter: honoured.clone() });
    session.offer_related(id.clone(), era::listen_acknowledgement(id, &honoured));
    for uri in newly_wanted {
        subscribe_upstream(gateway, &uri, "resources/subscribe");
    }
    let stopping = tokio::select! {
        () = cancel.cancelled() => false,
        () = session.closed.cancelled() => false,
        () = gateway.shutdown.cancelled() => true,
    };
    end_listen(gateway, session, id);
    if stopping && !cancel.is_cancelled() {
        // A graceful end: the listen's result, tagged with its id (sent here: the session closes right after).
        let response = jsonrpc::response(id, era::listen_ended(id));
        session.respond(id.clone(), era::envelope(response, "subscriptions/listen", None)).await;
    }
    None
}

/// Closes listen `id` of `session`, unsubscribing upstream the URIs nobody wants any more.
pub(crate) fn end_listen(gateway: &Arc<Shared>, session: &SessionShared, id: &Value) {
    let Some(filter) = session.remove_listen(id) else { return };
    for uri in filter.resource_uris {
        if !gateway.sessions().iter().any(|other| other.wants_resource(&uri)) && !session.wants_resource(&uri) {
            subscribe_upstream(gateway, &uri, "resources/unsubscribe");
        }
    }
}

/// Sends `resources/subscribe` or `resources/unsubscribe` for `uri` to the upstream that serves it, without
/// waiting: a listen is acknowledged at once, and an upstream that cannot subscribe only means no updates come.
fn subscribe_upstream(gateway: &Shared, uri: &str, method: &'static str) {
    let owner = gateway.catalog().resource_owner(uri);
    let Some(connection) =
        owner.and_then(|owner| gateway.upstreams.get(owner)).and_then(|runtime| runtime.connection())
    else {
        return;
    };
    if connection.initialize_outcome().capabilities.pointer("/resources/subscribe") != Some(&Value::Bool(true)) {
        return;
    }
    let params = json!({"uri": uri});
    tokio::spawn(async move {
        if let Err(error) = connection.request(method, Some(params)).await {
            tracing::debug!(%error, method, "an upstream resource subscription for a listen failed");
        }
    });
}
