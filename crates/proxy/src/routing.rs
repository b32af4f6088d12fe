//! What upstreams send on their own, routed to the right client session.
//!
//! A message belongs to the client request that caused it. The association comes from, in order: the Streamable
//! HTTP stream it arrived on (exact), the progress token toolgate put on the request (exact), or — over stdio,
//! where the wire carries no association — the only session with a request in flight to that upstream. When no
//! single session can be named, requests (elicitation, sampling) are refused upstream rather than guessed: sending
//! one client's elicitation to another client would leak it. Log lines with no owner go to every session.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use toolgate_upstream::jsonrpc::codes;
use toolgate_upstream::{ListKind, Responder};

use crate::client::{SessionShared, id_key};
use crate::gateway::{CallRoute, GatewayInner};

/// How long a client may take to answer an elicitation or sampling request.
const CLIENT_ANSWER_TIMEOUT: Duration = Duration::from_secs(600);

/// Routes one upstream notification.
pub(crate) fn on_notification(gateway: &Arc<GatewayInner>, upstream: usize, message: Value, related: Option<u64>) {
    let method = message.get("method").and_then(Value::as_str).unwrap_or_default().to_owned();
    match method.as_str() {
        "notifications/progress" => route_progress(gateway, message),
        "notifications/message" => route_log(gateway, upstream, message, related),
        "notifications/resources/updated" => {
            let uri = message.pointer("/params/uri").and_then(Value::as_str).unwrap_or_default();
            for session in gateway.sessions() {
                let subscribed = session.subscriptions.lock().map(|set| set.contains(uri)).unwrap_or(false);
                if subscribed {
                    session.send_unsolicited(message.clone());
                }
            }
        }
        "notifications/cancelled" => {
            // The upstream withdrew a request of its own (an elicitation, say): the client it was relayed to hears
            // of it, with toolgate's id for it, and its late answer is dropped.
            let Some(request_id) = message.pointer("/params/requestId") else { return };
            let key = (upstream, id_key(request_id));
            for session in gateway.sessions() {
                let relayed = session.relayed.lock().ok().and_then(|mut relayed| relayed.remove(&key));
                if let Some(cancel) = relayed {
                    cancel.cancel();
                }
            }
        }
        // The upstream's run task re-lists (coalescing bursts); see `lifecycle::run`.
        "notifications/tools/list_changed" => gateway.list_changed(upstream, ListKind::Tools),
        "notifications/prompts/list_changed" => gateway.list_changed(upstream, ListKind::Prompts),
        "notifications/resources/list_changed" => gateway.list_changed(upstream, ListKind::Resources),
        _ => tracing::debug!(upstream, %method, "ignoring an upstream notification"),
    }
}

fn route_progress(gateway: &Arc<GatewayInner>, mut message: Value) {
    let Some(token) = message.pointer("/params/progressToken").map(token_key) else { return };
    let route = gateway.progress.lock().ok().and_then(|progress| progress.get(&token).cloned());
    let Some(route) = route else {
        tracing::debug!(%token, "dropping progress for a request that is no longer in flight");
        return;
    };
    message["params"]["progressToken"] = route.client_token.clone();
    route.session.offer_related(route.client_request_id, message);
}

fn token_key(token: &Value) -> String {
    match token {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

fn route_log(gateway: &Arc<GatewayInner>, upstream: usize, message: Value, related: Option<u64>) {
    match owner(gateway, upstream, related) {
        Some(route) => route.session.offer_related(route.client_request_id, message),
        None => {
            for session in gateway.sessions() {
                if session.is_initialized() {
                    session.send_unsolicited(message.clone());
                }
            }
        }
    }
}

/// The client request an upstream message belongs to, when one can be named for sure.
fn owner(gateway: &GatewayInner, upstream: usize, related: Option<u64>) -> Option<CallRoute> {
    let calls = gateway.calls.lock().ok()?;
    if let Some(related) = related {
        return calls.get(&(upstream, related)).cloned();
    }
    let mut sessions = HashSet::new();
    let mut latest: Option<(u64, &CallRoute)> = None;
    for ((owner_upstream, upstream_id), route) in calls.iter() {
        if *owner_upstream != upstream {
            continue;
        }
        sessions.insert(route.session.id.as_str());
        if latest.is_none_or(|(id, _)| *upstream_id > id) {
            latest = Some((*upstream_id, route));
        }
    }
    if sessions.len() == 1 { latest.map(|(_, route)| route.clone()) } else { None }
}

/// Routes one upstream request (elicitation, sampling, roots, ping) to the client it belongs to, and relays the
/// answer back.
///
/// The route is chosen and a relayed request registered for cancellation when this is called, as the request
/// arrives (the returned future does the rest): an upstream that withdraws its request right after sending it
/// finds it registered, whenever the spawned future first runs.
pub(crate) fn on_request(
    gateway: Arc<GatewayInner>,
    upstream: usize,
    message: Value,
    related: Option<u64>,
    responder: Responder,
) -> impl Future<Output = ()> + Send + 'static {
    let method = message.get("method").and_then(Value::as_str).unwrap_or_default().to_owned();
    let params = message.get("params").cloned();
    let relay = match method.as_str() {
        "ping" => Err(Reply::Result(json!({}))),
        _ => match owner(&gateway, upstream, related).map(|route| (route.session, Some(route.client_request_id))) {
            // Outside any call (after initialize, or after the client's roots/list_changed): the roots of the only
            // client, when there is exactly one (a stdio client, say); with several there is no one answer.
            None if method == "roots/list" => match sole_session(&gateway) {
                Some(session) if session.declares("roots") => Ok((session, None)),
                _ => Err(Reply::Result(json!({"roots": []}))),
            },
            None => {
                let text = format!("toolgate cannot tell which client this {method} is for; it was not relayed");
                Err(Reply::Error(codes::INTERNAL_ERROR, text))
            }
            Some((session, _)) if !supports(&session, &method, params.as_ref()) => {
                if method == "roots/list" {
                    Err(Reply::Result(json!({"roots": []})))
                } else {
                    let text = format!("the client did not declare support for {method}");
                    Err(Reply::Error(codes::METHOD_NOT_FOUND, text))
                }
            }
            Some(target) => Ok(target),
        },
    };
    let relay = relay.map(|(session, client_request_id)| {
        let cancel = CancellationToken::new();
        let key = (upstream, id_key(responder.request_id()));
        if let Ok(mut relayed) = session.relayed.lock() {
            relayed.insert(key.clone(), cancel.clone());
        }
        (session, client_request_id, cancel, key)
    });
    async move {
        let (session, client_request_id, cancel, key) = match relay {
            Ok(relay) => relay,
            Err(Reply::Result(result)) => return responder.respond(result).await,
            Err(Reply::Error(code, text)) => return responder.respond_error(code, &text).await,
        };
        if cancel.is_cancelled() {
            // Withdrawn before it could be relayed: the client never sees it.
            if let Ok(mut relayed) = session.relayed.lock() {
                relayed.remove(&key);
            }
            return;
        }
        let answer = session.ask_client_until(client_request_id, &method, params, CLIENT_ANSWER_TIMEOUT, &cancel).await;
        if let Ok(mut relayed) = session.relayed.lock() {
            relayed.remove(&key);
        }
        if cancel.is_cancelled() {
            // A cancelled request gets no answer (the upstream asked not to be sent one).
            tracing::debug!(upstream, %method, "the upstream cancelled a request it had sent to a client");
            return;
        }
        match answer {
            Some(answer) => match (answer.get("result"), answer.get("error")) {
                (Some(result), _) => responder.respond(result.clone()).await,
                (None, Some(error)) => responder.respond_error_object(error.clone()).await,
                (None, None) => responder.respond_error(codes::INTERNAL_ERROR, "the client sent an empty answer").await,
            },
            None => {
                responder
                    .respond_error(codes::INTERNAL_ERROR, "the client did not answer (session closed or timed out)")
                    .await;
            }
        }
    }
}

/// The only initialized session, when there is exactly one.
fn sole_session(gateway: &GatewayInner) -> Option<Arc<SessionShared>> {
    let mut sessions = gateway.sessions().into_iter().filter(|session| session.is_initialized());
    let first = sessions.next()?;
    sessions.next().is_none().then_some(first)
}

/// toolgate's own answer to an upstream request it does not relay.
enum Reply {
    Result(Value),
    Error(i64, String),
}

/// Whether the session declared what `method` needs (form or URL elicitation, sampling, roots).
fn supports(session: &SessionShared, method: &str, params: Option<&Value>) -> bool {
    match method {
        "elicitation/create" => {
            let url_mode = params.and_then(|params| params.get("mode")).and_then(Value::as_str) == Some("url");
            if url_mode { session.declares_url_elicitation() } else { session.declares_form_elicitation() }
        }
        "sampling/createMessage" => session.declares("sampling"),
        "roots/list" => session.declares("roots"),
        _ => false,
    }
}
