//! Requests sent upstream on a client request's behalf, and their answers relayed back.
//!
//! [`send_upstream`] registers the request's routes ([`crate::state::routes::RouteGuard`]: the call, and a progress
//! token of toolgate's standing for the client's), waits for the answer within the request's time and removes the
//! routes however it ends; [`forward`] relays a non-tool request's answer with the client's id; [`relay_response`]
//! puts the client's id on an upstream response and takes out the `toolgate/` `_meta` keys an upstream set. It
//! decides no policy: what may be sent was decided before (`crate::call`, `crate::methods`); a retry whose
//! `requestState` it cannot resume is refused here, and for a request other than a tool call that refusal's
//! `request` audit row is written here too (a tool call's is its call row), as is the row of a bridged request
//! that `crate::bridge` refused itself ([`crate::bridge::BridgeRefusal`]) or of one refused while a modern upstream
//! asked for input ([`upstream_input::InputRefusal`]), and the row a held call's expiry writes (for a tool call too).

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use toolgate_upstream::UpstreamError;
use toolgate_upstream::jsonrpc::{self, codes};

use crate::bridge::{BridgeRefusal, Driven};
use crate::guard::audit::{RefusedRequest, record_request_refusal};
use crate::state::held::OnExpiry;
use crate::state::routes::{CallRoute, ProgressRoute};
use crate::state::session::SessionShared;
use crate::state::shared::Shared;
use crate::{upstream_input, upstream_rounds};

/// The forwarded requests whose answers carry an upstream's content to the client.
const CONTENT_METHODS: [&str; 3] = ["prompts/get", "resources/read", "completion/complete"];

/// Forwards a request to one upstream and relays its response with the client's id.
///
/// Transport failures become JSON-RPC errors here (for `tools/call` the pipeline makes them `isError` results).
pub(crate) async fn forward(
    gateway: &Arc<Shared>,
    session: &Arc<SessionShared>,
    id: &Value,
    upstream: usize,
    method: &str,
    params: Value,
    cancel: &CancellationToken,
) -> Option<Value> {
    let open_world = gateway.catalog().content_open_world(upstream);
    match send_upstream(gateway, session, id, upstream, method, params, cancel, None, false).await? {
        Ok(response) => {
            // A prompt, a resource's contents or completions from an open-world source reach the client (and
            // through it the model) as a tool's answer would: the session is tainted, result or error alike.
            if open_world && CONTENT_METHODS.contains(&method) {
                session.taint();
            }
            Some(relay_response(id, response))
        }
        Err(error) => {
            let name = gateway.upstreams.name(upstream);
            Some(jsonrpc::error_response(id, codes::INTERNAL_ERROR, &format!("upstream `{name}` failed: {error}")))
        }
    }
}

/// Sends a request upstream on behalf of a client request and waits for the whole response message.
///
/// Registers the route (so progress, logs and server requests find their way back, and a client cancel reaches
/// the upstream) and removes it afterwards. `None` when the client cancelled; `Err` with a message saying which
/// upstream failed and how. The request is queued and its answer waited for `within` (what is left of a call's
/// time), else the upstream's request timeout: a server that stops reading holds a caller no longer than that, and
/// a saturated one (`max_in_flight` requests waiting) refuses at once.
///
/// A modern (2026-07-28) upstream is told the client's capabilities as far as toolgate relays them, and its
/// `input_required` answers are taken care of here (`crate::upstream_input`): the client is asked, and the request
/// is sent again with the answers, under a new id, until the upstream answers in full or the rounds run out. What
/// comes back has the upstream hop's envelope removed (toolgate answers with its own).
#[allow(clippy::too_many_arguments, reason = "the request's whole context; a struct for one call site adds nothing")]
pub(crate) async fn send_upstream(
    gateway: &Arc<Shared>,
    session: &Arc<SessionShared>,
    id: &Value,
    upstream: usize,
    method: &str,
    params: Value,
    cancel: &CancellationToken,
    within: Option<Duration>,
    confirmed: bool,
) -> Option<Result<Value, UpstreamError>> {
    let modern = gateway
        .upstreams
        .get(upstream)
        .and_then(|runtime| runtime.connection())
        .is_some_and(|connection| connection.initialize_outcome().modern);
    if !modern {
        // A 2026-07-28 request accepts no request from the server: what a legacy upstream asks during its call is
        // bridged into input_required rounds (`crate::bridge`).
        if let Some(envelope) = session.envelope_of(id)
            && crate::bridge::BRIDGED_METHODS.contains(&method)
        {
            return bridged(gateway, session, id, upstream, method, params, &envelope.capabilities, cancel, within)
                .await;
        }
        return send_upstream_once(gateway, session, id, upstream, method, params, cancel, within).await;
    }
    let deadline = within.map(|within| Instant::now() + within);
    // Before toolgate's own envelope key goes in: whether the client asked in the 2026-07-28 era.
    let client_is_modern = crate::era::is_modern(Some(&params));
    let capabilities = upstream_input::upstream_client_capabilities(session, &params);
    // What a modern client declared on this request itself (toolgate's intersection replaces it below).
    let client_declared =
        client_is_modern.then(|| params.pointer("/_meta/io.modelcontextprotocol~1clientCapabilities").cloned());
    let mut params = params;
    if let Some(meta) = params.as_object_mut().map(|params| params.entry("_meta").or_insert_with(|| json!({})))
        && let Some(meta) = meta.as_object_mut()
    {
        meta.insert("io.modelcontextprotocol/clientCapabilities".to_owned(), capabilities);
    }
    // A modern client's retry of an upstream round: toolgate's wrapped state checked and swapped for the upstream's.
    let passes_rounds_on = client_is_modern && upstream_input::INPUT_METHODS.contains(&method);
    let mut rounds_before = 0;
    if passes_rounds_on {
        let sent = params.clone();
        match upstream_rounds::unwrap_retry(gateway, session, upstream, method, &mut params, confirmed).await {
            Ok(rounds) => rounds_before = rounds,
            Err(refused) => {
                record_refused_state(gateway, session, upstream, method, &sent, refused.reason());
                return Some(Ok(refused.response(id)));
            }
        }
    }
    let original = params.clone();
    let open_world = source_is_open_world(gateway, upstream, method, &params);
    for round in 0..=upstream_input::MAX_INPUT_ROUNDS {
        let left = deadline.map(|deadline| deadline.saturating_duration_since(Instant::now()));
        let message = match send_upstream_once(gateway, session, id, upstream, method, params, cancel, left).await? {
            Ok(message) => message,
            Err(error) => return Some(Err(error)),
        };
        let Some(result) = upstream_input::input_required(&message) else {
            return Some(Ok(upstream_hop_answer(message, client_declared.flatten().as_ref())));
        };
        let upstream_id = message.get("id").cloned().unwrap_or(Value::Null);
        if passes_rounds_on {
            // A modern client answers in a retry of its own: the round goes to it, wrapped.
            let wrapped = upstream_rounds::wrap_for_client(
                gateway,
                session,
                upstream,
                method,
                &original,
                result,
                rounds_before,
                confirmed,
            )
            .await;
            return Some(Ok(match wrapped {
                Ok(result) => json!({"jsonrpc": "2.0", "id": upstream_id, "result": result}),
                Err(refusal) => refused_input(gateway, session, upstream, method, &original, &upstream_id, &refusal),
            }));
        }
        let refusal = if round == upstream_input::MAX_INPUT_ROUNDS {
            Err(upstream_input::InputRefusal::too_many_rounds(None))
        } else {
            let call =
                upstream_input::AskedCall { client_request_id: id, upstream, method, client_is_modern, open_world };
            upstream_input::ask_client(gateway, session, &call, result, cancel).await
        };
        if cancel.is_cancelled() {
            return None;
        }
        match refusal {
            Ok(responses) => params = upstream_input::retry_params(&original, responses, result),
            Err(refusal) => {
                let response = refused_input(gateway, session, upstream, method, &original, &upstream_id, &refusal);
                return Some(Ok(response));
            }
        }
    }
    None
}

/// A modern request's call to a legacy upstream (`crate::bridge`): started in a task of its own, or, for a retry
/// whose `requestState` names a held call, that call resumed with the retry's answers. A state this process
/// cannot resume is an invalid-params error; nothing is sent again. A call the bridge refuses itself (an
/// undeclared capability, too many rounds or held calls, a malformed answer) is answered with the bridge's error
/// and, for a request other than a tool call, its `request` row written here (a tool call's row is its call's).
#[allow(clippy::too_many_arguments, reason = "the request's whole context; a struct for one call site adds nothing")]
async fn bridged(
    gateway: &Arc<Shared>,
    session: &Arc<SessionShared>,
    id: &Value,
    upstream: usize,
    method: &str,
    params: Value,
    capabilities: &Value,
    cancel: &CancellationToken,
    within: Option<Duration>,
) -> Option<Result<Value, UpstreamError>> {
    let caller = session.caller.name.clone();
    let kept = kept_for_row(method, &params);
    let driven = if crate::bridge::names_held_call(&params) {
        match crate::bridge::take(gateway, &caller, upstream, method, &params) {
            Ok(held) => crate::bridge::resume(gateway, held, &params, capabilities, cancel).await?,
            Err(refusal) => {
                record_refused_state(gateway, session, upstream, method, &params, refusal.reason());
                return Some(Ok(jsonrpc::error_response(&Value::Null, refusal.code(), &refusal.message())));
            }
        }
    } else {
        let binding = crate::bridge::binding_of(gateway, &caller, upstream, method, &params);
        let on_expiry = expiry_row(gateway, session, upstream, method, kept.clone());
        let (task_gateway, task_session, task_id, task_method) =
            (Arc::clone(gateway), Arc::clone(session), id.clone(), method.to_owned());
        let running = crate::bridge::start(session, id, move |upstream_cancel| async move {
            let (gateway, session, id) = (&task_gateway, &task_session, &task_id);
            send_upstream_once(gateway, session, id, upstream, &task_method, params, &upstream_cancel, within).await
        });
        crate::bridge::drive(gateway, running, binding, capabilities, 0, cancel, on_expiry).await?
    };
    Some(driven.map(|driven| match driven {
        Driven::Answered(response) => response,
        // A tool call's refusal is its call row's.
        Driven::Refused(response, refusal) => {
            if method != "tools/call" {
                let (reason, upstream) = (Some(refusal.reason()), Some(gateway.upstreams.name(upstream)));
                let params = &kept;
                let refused = RefusedRequest { method, params, upstream, outcome: BridgeRefusal::OUTCOME, reason };
                record_request_refusal(gateway, session, &refused);
            }
            response
        }
    }))
}

/// What a bridged request's `request` row keeps of its params (`guard::audit::record_request_refusal` reads the
/// target and a prompt's arguments): the target, and the arguments except a tool call's (they are its call row's).
/// Not the whole params, which a retry fills with the client's answers.
fn kept_for_row(method: &str, params: &Value) -> Value {
    let keys: &[&str] = if method == "tools/call" { &["name"] } else { &["name", "uri", "ref", "arguments"] };
    keys.iter().filter_map(|key| Some(((*key).to_owned(), params.get(*key)?.clone()))).collect()
}

/// The row a bridged call writes if it is held and its client never retries (the hold's timer cancels it upstream,
/// [`BridgeRefusal::Expired`]): a `request` row, for a tool call too, whose call row ended `input_required` when the
/// client was asked and says nothing of the cancel; `kept` is [`kept_for_row`]'s, a tool call's name as its upstream
/// knows it.
fn expiry_row(
    gateway: &Arc<Shared>,
    session: &Arc<SessionShared>,
    upstream: usize,
    method: &str,
    kept: Value,
) -> OnExpiry {
    // Held in the gateway's own map: a weak reference, so the two never keep each other.
    let (gateway, session, method) = (Arc::downgrade(gateway), Arc::clone(session), method.to_owned());
    Box::new(move || {
        let Some(gateway) = gateway.upgrade() else { return };
        let refused = RefusedRequest {
            method: &method,
            params: &kept,
            upstream: Some(gateway.upstreams.name(upstream)),
            outcome: BridgeRefusal::OUTCOME,
            reason: Some(BridgeRefusal::Expired.reason()),
        };
        record_request_refusal(&gateway, &session, &refused);
    })
}

/// The error response of a call toolgate refused itself while its modern upstream asked for input, and, for a
/// request other than a tool call (whose call row says it), its `request` row: outcome
/// [`upstream_input::InputRefusal::OUTCOME`] with the reason.
fn refused_input(
    gateway: &Shared,
    session: &SessionShared,
    upstream: usize,
    method: &str,
    params: &Value,
    id: &Value,
    refusal: &upstream_input::InputRefusal,
) -> Value {
    if method != "tools/call" {
        let upstream = Some(gateway.upstreams.name(upstream));
        let outcome = upstream_input::InputRefusal::OUTCOME;
        let refused = RefusedRequest { method, params, upstream, outcome, reason: Some(refusal.reason) };
        record_request_refusal(gateway, session, &refused);
    }
    jsonrpc::error_response(id, codes::INTERNAL_ERROR, &refusal.message)
}

/// Writes the `request` row of a retry whose `requestState` toolgate refused (`reason`), for a request other than
/// a tool call: a `tools/call` retry has its call's one row, written by the call's end phase (`crate::call`).
fn record_refused_state(
    gateway: &Shared,
    session: &SessionShared,
    upstream: usize,
    method: &str,
    params: &Value,
    reason: &'static str,
) {
    if method == "tools/call" {
        return;
    }
    let upstream = Some(gateway.upstreams.name(upstream));
    let refused = RefusedRequest { method, params, upstream, outcome: "state_refused", reason: Some(reason) };
    record_request_refusal(gateway, session, &refused);
}

/// A modern upstream's answer as toolgate relays it: its hop's envelope removed from a result, and its
/// 2026-07-28 header and version errors (-32020, -32021, -32022), which describe the hop between toolgate and the
/// upstream and not the client's request, turned into an internal error that says so. The one exception: a -32021
/// whose `requiredCapabilities` are all missing from what a modern client declared on this request itself is true
/// of the client's request too (toolgate relayed all it had), so the client gets it as it is.
fn upstream_hop_answer(mut message: Value, client_declared: Option<&Value>) -> Value {
    if let Some(result) = message.get_mut("result") {
        *result = toolgate_upstream::without_modern_result_envelope(result.take());
    }
    let hop_code = message.pointer("/error/code").and_then(Value::as_i64);
    if hop_code == Some(MISSING_CAPABILITY) && missing_from_client(&message, client_declared) {
        return message;
    }
    if let Some(code @ (-32022..=-32020)) = hop_code {
        let text = message.pointer("/error/message").and_then(Value::as_str).unwrap_or_default().to_owned();
        let upstream_id = message.get("id").cloned().unwrap_or(Value::Null);
        return jsonrpc::error_response(
            &upstream_id,
            codes::INTERNAL_ERROR,
            &format!("the upstream refused toolgate's request ({code}: {text})"),
        );
    }
    message
}

/// The 2026-07-28 error for a client capability a request needed and did not declare.
const MISSING_CAPABILITY: i64 = -32021;

/// Whether every capability a -32021 names as required is one the modern client did not declare on its request
/// (none named, or no modern client: false).
fn missing_from_client(message: &Value, client_declared: Option<&Value>) -> bool {
    let Some(declared) = client_declared else { return false };
    let Some(Value::Object(required)) = message.pointer("/error/data/requiredCapabilities") else { return false };
    !required.is_empty() && required.keys().all(|capability| declared.get(capability).is_none())
}

/// [`send_upstream`] for one request, with no `input_required` rounds.
#[allow(clippy::too_many_arguments, reason = "the request's whole context; a struct for one call site adds nothing")]
async fn send_upstream_once(
    gateway: &Arc<Shared>,
    session: &Arc<SessionShared>,
    id: &Value,
    upstream: usize,
    method: &str,
    params: Value,
    cancel: &CancellationToken,
    within: Option<Duration>,
) -> Option<Result<Value, UpstreamError>> {
    let Some(runtime) = gateway.upstreams.get(upstream) else {
        return Some(Err(UpstreamError::InvalidEndpoint("internal error: unknown upstream".into())));
    };
    let Some(connection) = runtime.connection() else {
        if let Some(why) = runtime.withdrawn() {
            return Some(Err(UpstreamError::Withdrawn(why)));
        }
        let reason = match runtime.status() {
            crate::upstreams::UpstreamStatus::Down { reason, .. } => reason,
            _ => "still starting".to_owned(),
        };
        return Some(Err(UpstreamError::Closed { detail: format!("not connected: {reason}") }));
    };
    let within = within.unwrap_or(runtime.spec.request_timeout);
    let deadline = Instant::now() + within;
    let open_world = source_is_open_world(gateway, upstream, method, &params);
    // Removes the routes however this function ends (refusal, response, timeout, cancellation, or the task dropped).
    let mut routes = gateway.routes.guard(upstream);
    let params = map_progress_token(&mut routes, session, id, open_world, params);
    // Queueing counts against the call's time and yields to the client's cancel: a server that stopped reading
    // fills its queue, and a caller must not wait behind it past its own deadline.
    // The call route is registered before the request leaves: a fast server's first progress or log line can
    // arrive before the send returns, and a message nobody owns is not relayed.
    let register = |upstream_id: u64| {
        routes.register_call(
            upstream_id,
            CallRoute { session: Arc::clone(session), client_request_id: id.clone(), open_world },
        );
    };
    // On the session's caller's behalf: a token exchange upstream gets that caller's own token on this request.
    let on_behalf = session.on_behalf();
    let begun = tokio::select! {
        () = cancel.cancelled() => None,
        begun = connection.begin_request_on_behalf(method, Some(params), within, register, Some(&on_behalf)) => {
            Some(begun)
        }
    };
    let pending = match begun? {
        Ok(pending) => pending,
        Err(error) => {
            if let UpstreamError::Saturated { .. } = error {
                gateway.metrics.count_saturated(upstream);
            }
            return Some(Err(error));
        }
    };
    let upstream_id = pending.id();
    session.set_request_upstream(id, upstream, upstream_id);
    let outcome = tokio::select! {
        () = cancel.cancelled() => {
            // The client cancelled or its session closed: the upstream hears of it, and a late answer is dropped.
            connection.cancel_soon(upstream_id, "the client cancelled the request or closed its session");
            None
        }
        // A reload took the upstream out of service: the caller is answered now, not when its connection is gone.
        () = runtime.withdrawal.cancelled() => {
            connection.cancel_soon(upstream_id, "toolgate: the upstream was taken out of service by a config reload");
            Some(Err(UpstreamError::Withdrawn(runtime.withdrawn().unwrap_or_default())))
        }
        response = connection.wait(pending, deadline.saturating_duration_since(Instant::now())) => Some(response),
    };
    match outcome? {
        Ok(response) => Some(Ok(response)),
        // Cancelled on the client's behalf: no answer goes back.
        Err(UpstreamError::Cancelled) => None,
        // The connection ended because a reload took the upstream out of service: say that, and not as a transport
        // failure, which a retry would send to whatever replaced it.
        Err(error) => match runtime.withdrawn() {
            Some(why) => Some(Err(UpstreamError::Withdrawn(why))),
            None => Some(Err(error)),
        },
    }
}

/// Whether what `upstream` sends for this request comes from an open-world source, so that its content taints the
/// session: for `tools/call` the called tool's effective `openWorldHint` (a tool the catalog does not know counts as
/// open-world), for every other request the upstream's content ([`crate::catalog::Catalog::content_open_world`]).
fn source_is_open_world(gateway: &Shared, upstream: usize, method: &str, params: &Value) -> bool {
    let catalog = gateway.catalog();
    if method == "tools/call" {
        let name = params.get("name").and_then(Value::as_str).unwrap_or_default();
        return catalog.tool_of(upstream, name).is_none_or(|tool| tool.hints.open_world.value);
    }
    catalog.content_open_world(upstream)
}

/// Replaces the client's progress token with a fresh random one of toolgate's, registered for this upstream only,
/// so tokens from different clients never collide upstream and no upstream can write into another's requests;
/// the guard forgets it when the request is over.
fn map_progress_token(
    routes: &mut crate::state::routes::RouteGuard<'_>,
    session: &Arc<SessionShared>,
    id: &Value,
    open_world: bool,
    mut params: Value,
) -> Value {
    let Some(client_token) = params.pointer("/_meta/progressToken").cloned() else { return params };
    let route = ProgressRoute { session: Arc::clone(session), client_token, client_request_id: id.clone(), open_world };
    params["_meta"]["progressToken"] = Value::String(routes.map_progress(route));
    params
}

/// The upstream's response with the client's id (result or error unchanged).
pub(crate) fn relay_response(id: &Value, response: Value) -> Value {
    match response {
        Value::Object(mut object) => {
            object.insert("id".into(), id.clone());
            // `toolgate/` keys are toolgate's to set: an upstream's are taken out before anything is added.
            if let Some(result) = object.get_mut("result") {
                crate::guard::results::remove_foreign_result_meta(result);
            }
            Value::Object(object)
        }
        _ => jsonrpc::error_response(id, codes::INTERNAL_ERROR, "the upstream sent a malformed response"),
    }
}

/// Cancels a client-cancelled request upstream at once (the pending entry is taken synchronously).
pub(crate) fn cancel_upstream(gateway: &Shared, upstream: usize, upstream_id: u64, reason: &str) {
    if let Some(connection) = gateway.upstreams.get(upstream).and_then(|runtime| runtime.connection()) {
        connection.cancel_soon(upstream_id, reason);
    }
}
