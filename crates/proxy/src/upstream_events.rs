//! What upstreams send on their own, routed to the right client session.
//!
//! A message belongs to the client request that caused it. The association comes from, in order: the Streamable
//! HTTP stream it arrived on (exact), the progress token toolgate put on the request (exact: a progress
//! notification's, or a log line's `_meta.progressToken`), or — over stdio, where the wire carries no
//! association — the only session with requests in flight to that upstream, provided none of them was ever in flight
//! beside another session's (`state::routes`): a line sent late for an ended call cannot reach the caller whose call
//! overlapped it. When no
//! single session can be named, requests (elicitation, sampling) are refused upstream rather than guessed: sending
//! one client's elicitation to another client would leak it. Log lines with no owner go to the operator's log
//! (escaped), never to a session: with two callers in flight, a broadcast would hand one caller the other's data.
//!
//! A route belongs to the upstream its request went to: progress is looked up by (upstream, token) and toolgate's
//! tokens are random, so one upstream can neither guess nor reuse another's token to write into its calls. Content
//! that reaches a session under the route of an open-world source (a log line, progress text, a relayed request)
//! taints the session as the answer itself would, however the request ends afterwards. Every relayed message
//! loses the `toolgate/` `_meta` keys its upstream set (`guard::results::remove_foreign_result_meta`).

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use toolgate_core::display::json_text;
use toolgate_upstream::jsonrpc::codes;
use toolgate_upstream::{ListKind, Responder};

use crate::guard::results::remove_foreign_result_meta;
use crate::state::routes::CallRoute;
use crate::state::session::{SessionShared, id_key};
use crate::state::shared::Shared;

/// How long a client may take to answer an elicitation or sampling request.
pub(crate) const CLIENT_ANSWER_TIMEOUT: Duration = Duration::from_secs(600);

/// Routes one upstream notification.
pub(crate) fn on_notification(gateway: &Arc<Shared>, upstream: usize, mut message: Value, related: Option<u64>) {
    // `toolgate/` keys are toolgate's alone, in a relayed notification as in a result.
    strip_foreign_meta(&mut message);
    let method = message.get("method").and_then(Value::as_str).unwrap_or_default().to_owned();
    match method.as_str() {
        "notifications/progress" => route_progress(gateway, upstream, message),
        "notifications/message" => route_log(gateway, upstream, message, related),
        "notifications/resources/updated" => {
            let uri = message.pointer("/params/uri").and_then(Value::as_str).unwrap_or_default();
            // Only the upstream that serves the URI may say it changed (another would make clients re-read it).
            if gateway.catalog().resource_owner(uri) != Some(upstream) {
                tracing::debug!(upstream, "dropping resources/updated for a URI this upstream does not serve");
                return;
            }
            for session in gateway.sessions() {
                // A listen that subscribed the URI hears it on its own stream; a legacy subscription unsolicited.
                session.offer_to_listens(&message);
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

fn route_progress(gateway: &Arc<Shared>, upstream: usize, mut message: Value) {
    let Some(token) = message.pointer("/params/progressToken").map(token_key) else { return };
    let Some(route) = gateway.routes.progress(upstream, &token) else {
        tracing::debug!(upstream, "dropping progress for no request of this upstream in flight");
        return;
    };
    message["params"]["progressToken"] = route.client_token.clone();
    deliver_related(&route.session, route.client_request_id, route.open_world, message);
}

fn token_key(token: &Value) -> String {
    match token {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

/// Hands a notification to the session whose request it belongs to; text from an open-world source taints the
/// session as soon as it is handed over (the client may show it to the model whatever happens to the request).
fn deliver_related(session: &SessionShared, client_request_id: Value, open_world: bool, message: Value) {
    if open_world {
        session.taint();
    }
    session.offer_related(client_request_id, message);
}

fn route_log(gateway: &Arc<Shared>, upstream: usize, mut message: Value, related: Option<u64>) {
    match log_owner(gateway, upstream, related, &mut message) {
        Some(route) => {
            // A 2026-07-28 request hears log lines only at or above the level its own `_meta` asked for (none
            // without one); a legacy session's level is set upstream with `logging/setLevel`.
            if let Some(envelope) = route.session.envelope_of(&route.client_request_id) {
                let level = message.pointer("/params/level").and_then(Value::as_str);
                if !envelope.admits_log(level) {
                    tracing::debug!(upstream, "dropping a log line below the level the modern request asked for");
                    return;
                }
            }
            deliver_related(&route.session, route.client_request_id, route.open_world, message);
        }
        None => {
            // No request can be named for sure: it is the operator's, never a client's. Escaped (controls, bidi and
            // invisible characters) and bounded, so the line can neither forge other log lines nor fill the log.
            let name = gateway.upstreams.name(upstream);
            let params = message.get("params").map(|params| json_text(params, OPERATOR_LOG_CHARS)).unwrap_or_default();
            tracing::info!(
                target: "toolgate::upstream::log",
                upstream = %name,
                "an upstream log message no single session's request owns (not relayed): {params}"
            );
        }
    }
}

/// The most characters of an unattributed upstream log message written to the operator's log.
const OPERATOR_LOG_CHARS: usize = 4_000;

/// The owner of a log line: as `RouteTable::owner`, except that a line carrying one of toolgate's progress tokens in
/// `params._meta.progressToken` belongs to the request that token was given for (exact; the token becomes the
/// client's). Only for notifications: in a request, `_meta.progressToken` is the upstream's own token for progress
/// about that request (SDKs set one on every request they send), not a reference to a call.
fn log_owner(gateway: &Shared, upstream: usize, related: Option<u64>, message: &mut Value) -> Option<CallRoute> {
    if related.is_none()
        && let Some(token) = message.pointer("/params/_meta/progressToken").map(token_key)
        && let Some(route) = gateway.routes.progress(upstream, &token)
    {
        message["params"]["_meta"]["progressToken"] = route.client_token.clone();
        return Some(CallRoute {
            session: route.session,
            client_request_id: route.client_request_id,
            open_world: route.open_world,
        });
    }
    gateway.routes.owner(upstream, related)
}

/// Routes one upstream request (elicitation, sampling, roots, ping) to the client it belongs to, and relays the
/// answer back.
///
/// The route is chosen and a relayed request registered for cancellation when this is called, as the request
/// arrives (the returned future does the rest): an upstream that withdraws its request right after sending it
/// finds it registered, whenever the spawned future first runs.
pub(crate) fn on_request(
    gateway: Arc<Shared>,
    upstream: usize,
    message: Value,
    related: Option<u64>,
    responder: Responder,
) -> impl Future<Output = ()> + Send + 'static {
    let method = message.get("method").and_then(Value::as_str).unwrap_or_default().to_owned();
    let mut message = message;
    // The upstream's name for this request's input key, if it gave one: read before its `toolgate/` keys go.
    let key_hint = crate::bridge::key_hint(&message);
    // Before the label below adds toolgate's own key to an elicitation.
    strip_foreign_meta(&mut message);
    let mut params = message.get("params").cloned().map(|params| limit_sampling_context(&method, params));
    if method == "elicitation/create"
        && let Some(asker) = gateway.upstreams.get(upstream)
    {
        // Labelled with the upstream that asks, so it cannot pass for toolgate's own question.
        params =
            params.map(|question| crate::guard::relayed_question::label_relayed_question(question, &asker.spec.name));
    }
    let relay = match method.as_str() {
        "ping" => Err(Reply::Result(json!({}))),
        _ => match gateway
            .routes
            .owner(upstream, related)
            .map(|route| (route.session, Some(route.client_request_id), route.open_world))
        {
            // Outside any call (after initialize, or after the client's roots/list_changed): the roots of the only
            // client, when there is exactly one (a stdio client, say); with several there is no one answer.
            None if method == "roots/list" => match sole_session(&gateway) {
                Some(session) if session.declares("roots") => Ok((session, None, false)),
                _ => Err(Reply::Result(json!({"roots": []}))),
            },
            None => {
                let text = format!("toolgate cannot tell which client this {method} is for; it was not relayed");
                Err(Reply::Error(codes::INTERNAL_ERROR, text))
            }
            // A 2026-07-28 request's bridged call: the bridge asks the client by input_required, or refuses what
            // the request did not declare (`crate::bridge`).
            Some((session, Some(request_id), open_world)) if session.bridge_of(&request_id).is_some() => {
                if open_world && method != "roots/list" {
                    // The request's text reaches the client from outside, as a relayed one would.
                    session.taint();
                }
                match session.bridge_of(&request_id) {
                    Some(bridge) => Err(Reply::Bridge(bridge)),
                    None => Err(Reply::Error(codes::INTERNAL_ERROR, "the call this request belongs to ended".into())),
                }
            }
            // A 2026-07-28 request accepts no request from the server, whatever the session around it declared
            // (on stdio, a legacy handshake's capabilities are the session's, not this request's).
            Some((session, Some(request_id), _)) if session.envelope_of(&request_id).is_some() => {
                let text = format!("{method} cannot reach a 2026-07-28 request: it accepts no request from the server");
                Err(Reply::Error(codes::METHOD_NOT_FOUND, text))
            }
            Some((session, ..)) if !supports(&session, &method, params.as_ref()) => {
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
    // A place per relayed request, per session and per upstream: past either bound the upstream is refused.
    let relay = relay.and_then(|(session, client_request_id, open_world)| {
        let slot = gateway.relay_quota.take(&session.id, upstream).map_err(|(refusal, limit)| {
            let name = gateway.upstreams.name(upstream);
            gateway.metrics.count_relay_refused(&name, refusal.label());
            let text = format!(
                "toolgate refused this {method}: {limit} requests are already waiting for clients' answers, the \
                 limit of limits.{}",
                refusal.setting()
            );
            Reply::Error(codes::INTERNAL_ERROR, text)
        })?;
        Ok((session, client_request_id, open_world, slot))
    });
    let relay = relay.map(|(session, client_request_id, open_world, slot)| {
        let cancel = CancellationToken::new();
        let key = (upstream, id_key(responder.request_id()));
        if let Ok(mut relayed) = session.relayed.lock() {
            relayed.insert(key.clone(), cancel.clone());
        }
        (session, client_request_id, open_world, cancel, key, slot)
    });
    async move {
        // `_slot` gives the place back however this ends.
        let (session, client_request_id, open_world, cancel, key, _slot) = match relay {
            Ok(relay) => relay,
            Err(Reply::Result(result)) => return responder.respond(result).await,
            Err(Reply::Error(code, text)) => return responder.respond_error(code, &text).await,
            Err(Reply::Bridge(bridge)) => {
                let ask =
                    crate::bridge::UpstreamAsk { method, params: params.unwrap_or_default(), key_hint, responder };
                return crate::bridge::hand_over(bridge, ask).await;
            }
        };
        if cancel.is_cancelled() {
            // Withdrawn before it could be relayed: the client never sees it.
            if let Ok(mut relayed) = session.relayed.lock() {
                relayed.remove(&key);
            }
            return;
        }
        if open_world && method != "roots/list" {
            // The request's text (a sampling prompt, an elicitation message) reaches the client from outside.
            session.taint();
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

/// Removes every `toolgate/` `_meta` key an upstream set in a message it sends on its own (a notification or a
/// request): in `params` and in the messages and content items it carries (a sampling request's `messages`), as
/// `guard::results` does for answers, so nothing relayed can pass for toolgate's own marker.
fn strip_foreign_meta(message: &mut Value) {
    if let Some(params) = message.get_mut("params") {
        remove_foreign_result_meta(params);
    }
}

/// A sampling request's `includeContext` as toolgate relays it: `none`.
///
/// Behind toolgate every upstream looks like one server to the client, so `allServers` would hand this upstream
/// the context of every other upstream (and `thisServer` the same, since to the client "this server" is toolgate,
/// all upstreams at once): the sampled answer would carry one server's data to another. Other requests are left
/// as they are.
pub(crate) fn limit_sampling_context(method: &str, mut params: Value) -> Value {
    if method == "sampling/createMessage"
        && let Some(context) = params.get_mut("includeContext")
        && context.as_str().is_some_and(|context| context != "none")
    {
        *context = Value::String("none".to_owned());
    }
    params
}

/// The only initialized session, when there is exactly one.
fn sole_session(gateway: &Shared) -> Option<Arc<SessionShared>> {
    let mut sessions = gateway.sessions().into_iter().filter(|session| session.is_initialized());
    let first = sessions.next()?;
    sessions.next().is_none().then_some(first)
}

/// toolgate's own answer to an upstream request it does not relay.
enum Reply {
    Result(Value),
    Error(i64, String),
    /// Handed to the bridged call it belongs to.
    Bridge(tokio::sync::mpsc::UnboundedSender<crate::bridge::UpstreamAsk>),
}

/// Whether the session declared what `method` needs (form or URL elicitation, sampling, roots).
pub(crate) fn supports(session: &SessionShared, method: &str, params: Option<&Value>) -> bool {
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
