//! A legacy upstream's mid-call requests (`elicitation/create`, `sampling/createMessage`, `roots/list`) for a
//! 2026-07-28 request, which accepts no request from the server: the call is bridged into Multi Round-Trip Requests.
//!
//! A modern request's call to a legacy upstream runs in a task of its own ([`start`]); what the upstream asks for
//! that call comes here (`upstream_events::on_request` hands it over, [`hand_over`]) instead of to the client. A
//! kind the request did not declare in its own `clientCapabilities` is never asked: the upstream's request gets an
//! error, the upstream call is cancelled, and the client gets -32021 with `data.requiredCapabilities`. A declared
//! kind makes the answer `input_required`: the upstream's requests sent at once as the input requests (under the key
//! the upstream named, or one of toolgate's, see [`input_key`]) and a sealed `requestState` naming a **held call**:
//! the upstream call stays open in this process, its pending requests unanswered. The retry carries the answers: the
//! held call is taken (once), the upstream's requests are answered, and the call goes on: its result, or another
//! round when the upstream asks again (at most [`MAX_BRIDGED_ROUNDS`]). A held call expires after
//! `limits.held_call_timeout`: its pending requests get an error and the call is cancelled upstream. A state naming a
//! call this process does not hold (expired, used, another process's) is refused, never replayed: re-sending the
//! call could run a tool twice. While a call is held it is marked so (`Running::mark_held`): over stdio, where a
//! legacy upstream's request is named by elimination, a held call is passed over for another running call of the
//! same session (`state::routes`), which would otherwise wait behind it until its retry or its expiry.
//!
//! The state is sealed (`guard::request_state`) with a key of this process alone (a held call cannot be resumed
//! anywhere else, so no other process needs to open it), binding the caller, the call's target and tool
//! fingerprint, the argument digest, an expiry and the held call's id. This module decides no policy (the call was
//! permitted, and confirmed by a person when policy said so, before it went upstream) and writes no audit row: a
//! call it refuses itself comes back as [`Driven::Refused`] with why ([`BridgeRefusal`]), for `crate::relay` to
//! audit, and a held call that expires writes the row `relay` gave it ([`HeldCall::on_expiry`]) from its timer.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::{Map, Value, json};
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;
use toolgate_store::digest_arguments;
use toolgate_upstream::UpstreamError;
use toolgate_upstream::jsonrpc::codes;

use crate::era::declares;
use crate::guard::request_state::{self, ConfirmationBinding, RequestStateError};
use crate::guard::round_trip::StateRefusal;
pub(crate) use crate::state::held::UpstreamAsk;
use crate::state::held::{HeldCall, HeldCalls, OnExpiry, Running};
use crate::state::session::SessionShared;
use crate::state::shared::Shared;

/// Most `input_required` rounds one bridged call may take: an upstream that keeps asking is refused after this.
pub(crate) const MAX_BRIDGED_ROUNDS: usize = 10;

/// Most calls one process holds at once: past it, a call that asks is refused rather than held.
const MAX_HELD_CALLS: usize = 1024;

/// What a held call's `requestState` starts with: it never opens as a confirmation state, nor one as this.
const HELD_PREFIX: &str = "held.";

/// The methods whose calls may be bridged (the only ones a 2026-07-28 result may be `input_required` for).
pub(crate) const BRIDGED_METHODS: [&str; 3] = ["tools/call", "prompts/get", "resources/read"];

/// -32021, MissingRequiredClientCapability (2026-07-28).
pub(crate) const MISSING_CAPABILITY: i64 = -32021;

/// The `_meta` key in which a legacy upstream may name the input key of a request it sends during a call (an
/// extension of toolgate's: a legacy request has no key of its own). Removed before the request reaches the client,
/// as every `toolgate/` key an upstream sets is.
pub(crate) const INPUT_KEY_META: &str = "toolgate/inputKey";

/// The longest input key an upstream may name; a longer one is ignored and toolgate names the request.
const MAX_KEY_HINT_CHARS: usize = 64;

/// How long the bridge waits, after an upstream's request, for more requests sent with it: a legacy server that
/// asks several things at once sends them one after another, and nothing on the wire says they belong together.
const GATHER_QUIET: Duration = Duration::from_millis(100);

/// The longest the bridge gathers one round's requests, however many keep coming.
const GATHER_AT_MOST: Duration = Duration::from_secs(1);

/// What driving a bridged call came to.
#[derive(Debug)]
pub(crate) enum Driven {
    /// The upstream's response, or toolgate's `input_required` asking the client the upstream's requests.
    Answered(Value),
    /// toolgate refused the call itself (its upstream's pending requests refused, the call cancelled): the
    /// client's error response, and why.
    Refused(Value, BridgeRefusal),
}

/// Why toolgate refused a bridged call itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BridgeRefusal {
    /// The upstream asked for a kind the request did not declare (-32021).
    MissingCapability,
    /// The upstream asked for input more than [`MAX_BRIDGED_ROUNDS`] times.
    TooManyRounds,
    /// The process holds [`MAX_HELD_CALLS`] calls already.
    TooManyHeld,
    /// An answer in the retry's `inputResponses` is not an object.
    MalformedInput,
    /// The call was held and its client did not retry within `limits.held_call_timeout`: its pending requests
    /// refused, the call cancelled upstream, by the hold's timer (nobody is answered; the row is
    /// [`HeldCall::on_expiry`]'s).
    Expired,
}

impl BridgeRefusal {
    /// The `request` audit row's outcome for a bridged request toolgate refused itself.
    pub(crate) const OUTCOME: &'static str = "bridge_refused";

    /// The reason, as the `request` row's detail says it.
    pub(crate) fn reason(self) -> &'static str {
        match self {
            BridgeRefusal::MissingCapability => "missing_capability",
            BridgeRefusal::TooManyRounds => "too_many_rounds",
            BridgeRefusal::TooManyHeld => "too_many_held_calls",
            BridgeRefusal::MalformedInput => "malformed_input",
            BridgeRefusal::Expired => "held_call_expired",
        }
    }
}

/// Gives the upstream's request to the bridged call it belongs to; a call that ended meanwhile refuses it.
pub(crate) async fn hand_over(bridge: mpsc::UnboundedSender<UpstreamAsk>, ask: UpstreamAsk) {
    if let Err(mpsc::error::SendError(ask)) = bridge.send(ask) {
        ask.responder.respond_error(codes::INTERNAL_ERROR, "the call this request belongs to has ended").await;
    }
}

/// The client capability `method` needs, as `requiredCapabilities` names it.
fn required_capability(method: &str, params: &Value) -> Value {
    match method {
        "elicitation/create" if params.get("mode").and_then(Value::as_str) == Some("url") => {
            json!({"elicitation": {"url": {}}})
        }
        "elicitation/create" => json!({"elicitation": {"form": {}}}),
        "sampling/createMessage" => json!({"sampling": {}}),
        "roots/list" => json!({"roots": {}}),
        _ => json!({}),
    }
}

/// The input key an upstream named in an upstream request's `_meta` ([`INPUT_KEY_META`]), when it is one toolgate
/// honours: at most [`MAX_KEY_HINT_CHARS`] ASCII letters, digits, `_`, `-`, `.` or `/`, and not under `toolgate/`
/// (toolgate's own questions' keys, which no upstream's may pass for).
pub(crate) fn key_hint(message: &Value) -> Option<String> {
    let hint = message.pointer("/params/_meta")?.get(INPUT_KEY_META)?.as_str()?;
    let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | '/');
    let honoured = !hint.is_empty()
        && hint.len() <= MAX_KEY_HINT_CHARS
        && hint.chars().all(allowed)
        && !hint.starts_with("toolgate/");
    honoured.then(|| hint.to_owned())
}

/// The input key of an upstream's request in `inputRequests`: the key the upstream named for it ([`key_hint`]),
/// as a modern upstream's keys reach the client unchanged (a call has one upstream, so two servers' keys never meet
/// in a round); else `<upstream>/<kind>`, namespaced by the upstream's name as toolgate's own key is
/// `toolgate/confirm`. A key taken already in the round gets `#2`, `#3`, ...
fn input_key(upstream: &str, method: &str, hint: Option<&str>, taken: &Map<String, Value>) -> String {
    let kind = match method {
        "elicitation/create" => "elicitation",
        "sampling/createMessage" => "sampling",
        "roots/list" => "roots",
        other => other,
    };
    let base = hint.map_or_else(|| format!("{upstream}/{kind}"), str::to_owned);
    let mut key = base.clone();
    let mut n = 1;
    while taken.contains_key(&key) {
        n += 1;
        key = format!("{base}#{n}");
    }
    key
}

/// Takes the held call a retry's `state` names, for the call `expected` describes; once only.
fn take_held(held: &HeldCalls, state: &str, expected: &ConfirmationBinding) -> Result<HeldCall, StateRefusal> {
    let sealed = state.strip_prefix(HELD_PREFIX).ok_or(StateRefusal::Malformed)?;
    let opened = request_state::open(&held.key, sealed, expected, unix_seconds(SystemTime::now()))
        .map_err(|error| refusal_of(&error))?;
    held.remove(&opened.nonce).ok_or(StateRefusal::NotHeld)
}

fn refusal_of(error: &RequestStateError) -> StateRefusal {
    match error {
        // Sealed with another process's key: that process holds the call, if anyone does.
        RequestStateError::BadTag => StateRefusal::NotHeld,
        RequestStateError::Malformed => StateRefusal::Malformed,
        RequestStateError::Expired => StateRefusal::Expired,
        RequestStateError::OtherCaller => StateRefusal::OtherCaller,
        RequestStateError::OtherTool => StateRefusal::OtherTool,
        RequestStateError::OtherArguments => StateRefusal::OtherArguments,
        RequestStateError::ToolChanged { .. } => StateRefusal::OtherTool,
    }
}

/// True when `params` carry a held call's `requestState`.
pub(crate) fn names_held_call(params: &Value) -> bool {
    params.get("requestState").and_then(Value::as_str).is_some_and(|state| state.starts_with(HELD_PREFIX))
}

/// What a held call's state binds: the caller, the call's target on its upstream (`method` and the original tool
/// or prompt name, or the URI) with the tool's fingerprint, and the arguments' digest.
pub(crate) fn binding_of(
    gateway: &Shared,
    caller: &str,
    upstream: usize,
    method: &str,
    params: &Value,
) -> ConfirmationBinding {
    let target = params.get("name").or_else(|| params.get("uri")).and_then(Value::as_str).unwrap_or_default();
    let fingerprint = if method == "tools/call" {
        gateway.catalog().tool_of(upstream, target).map(|tool| tool.fingerprint.clone()).unwrap_or_default()
    } else {
        String::new()
    };
    let arguments = params.get("arguments").cloned().unwrap_or_else(|| json!({}));
    ConfirmationBinding {
        caller: caller.to_owned(),
        tool: format!("held:{}:{method}:{target}", gateway.upstreams.name(upstream)),
        tool_fingerprint: fingerprint,
        args_digest: digest_arguments(&arguments),
        expires_at: 0,
        nonce: String::new(),
    }
}

/// Checks, without taking it, that a retry names a call this process holds for it (`params`: the retry's, with the
/// upstream's own name or URI), so a call phase can refuse (and audit) a bad state before anything else.
pub(crate) fn check(
    gateway: &Shared,
    caller: &str,
    upstream: usize,
    method: &str,
    params: &Value,
) -> Result<(), StateRefusal> {
    let state = params.get("requestState").and_then(Value::as_str).ok_or(StateRefusal::Malformed)?;
    let sealed = state.strip_prefix(HELD_PREFIX).ok_or(StateRefusal::Malformed)?;
    let expected = binding_of(gateway, caller, upstream, method, params);
    let held = &gateway.held_calls;
    let opened = request_state::open(&held.key, sealed, &expected, unix_seconds(SystemTime::now()))
        .map_err(|error| refusal_of(&error))?;
    let present = held.contains(&opened.nonce);
    if present { Ok(()) } else { Err(StateRefusal::NotHeld) }
}

/// Takes the held call a retry names (`params`: the retry's, with the upstream's own name or URI).
pub(crate) fn take(
    gateway: &Shared,
    caller: &str,
    upstream: usize,
    method: &str,
    params: &Value,
) -> Result<HeldCall, StateRefusal> {
    let state = params.get("requestState").and_then(Value::as_str).ok_or(StateRefusal::Malformed)?;
    take_held(&gateway.held_calls, state, &binding_of(gateway, caller, upstream, method, params))
}

/// Starts a modern request's call to a legacy upstream (`call`, given the token that cancels it upstream) in a task
/// of its own, so that it can outlive the request while held, and bridges what the upstream asks for it.
pub(crate) fn start<F>(session: &Arc<SessionShared>, id: &Value, call: impl FnOnce(CancellationToken) -> F) -> Running
where
    F: Future<Output = Option<Result<Value, UpstreamError>>> + Send + 'static,
{
    let (asks_sender, asks) = mpsc::unbounded_channel();
    let held = session.open_bridge(id, asks_sender);
    let cancel = CancellationToken::new();
    let (done, outcome) = oneshot::channel();
    let call = call(cancel.clone());
    let (session, id) = (Arc::clone(session), id.clone());
    tokio::spawn(async move {
        let outcome = call.await;
        session.close_bridge(&id);
        let _ = done.send(outcome);
    });
    Running { asks, outcome, cancel, held }
}

/// Drives a bridged call until it answers (`Ok` with the response message: the upstream's or an `input_required`
/// result of toolgate's, or toolgate's refusal), fails, or the client cancels (`None`).
pub(crate) async fn drive(
    gateway: &Arc<Shared>,
    mut running: Running,
    binding: ConfirmationBinding,
    capabilities: &Value,
    rounds: usize,
    cancel: &CancellationToken,
    on_expiry: OnExpiry,
) -> Option<Result<Driven, UpstreamError>> {
    let upstream_name = binding.tool.split(':').nth(1).unwrap_or_default().to_owned();
    let mut asks = Vec::new();
    while asks.is_empty() {
        let first = tokio::select! {
            () = cancel.cancelled() => {
                running.cancel.cancel();
                return None;
            }
            outcome = &mut running.outcome => {
                // A request the upstream sent just before it answered is refused, never left without an answer.
                running.asks.close();
                while let Ok(ask) = running.asks.try_recv() {
                    ask.responder.respond_error(codes::INTERNAL_ERROR, "the call this request belongs to has ended").await;
                }
                let outcome = outcome.unwrap_or_else(|_| Some(Err(UpstreamError::Closed { detail: "the call's task ended".into() })));
                return answered(outcome);
            }
            ask = running.asks.recv() => match ask {
                Some(ask) => ask,
                // The call ended; its outcome is on its way.
                None => return answered((&mut running.outcome).await.unwrap_or(None)),
            },
        };
        // Requests the upstream sent at once are asked in one round.
        asks.push(first);
        gather(&mut running.asks, &mut asks).await;
        // Undeclared roots are no roots, as for a legacy session: over stdio a server's own roots/list (after its
        // handshake, say) is attributed to the only call in flight by elimination, and must not fail that call.
        let mut kept = Vec::new();
        for ask in asks {
            if ask.method == "roots/list" && !declares(capabilities, &ask.method, &ask.params) {
                ask.responder.respond(json!({"roots": []})).await;
            } else {
                kept.push(ask);
            }
        }
        asks = kept;
    }
    if let Some(missing) = asks.iter().find(|ask| !declares(capabilities, &ask.method, &ask.params)) {
        let required = required_capability(&missing.method, &missing.params);
        let text = format!("the client did not declare the capability {} needs on this request", missing.method);
        let data = Some(json!({"requiredCapabilities": required}));
        let response = refuse_all(running, asks, MISSING_CAPABILITY, &text, data).await;
        return Some(Ok(Driven::Refused(response, BridgeRefusal::MissingCapability)));
    }
    if rounds >= MAX_BRIDGED_ROUNDS {
        return Some(Ok(too_many_rounds(running, asks).await));
    }
    if gateway.held_calls.len() >= MAX_HELD_CALLS {
        let text = format!("toolgate holds {MAX_HELD_CALLS} calls waiting for input already; retry later");
        let response = refuse_all(running, asks, codes::INTERNAL_ERROR, &text, None).await;
        return Some(Ok(Driven::Refused(response, BridgeRefusal::TooManyHeld)));
    }
    let mut keyed = Vec::new();
    let mut requests = Map::new();
    for ask in asks {
        let key = input_key(&upstream_name, &ask.method, ask.key_hint.as_deref(), &requests);
        requests.insert(key.clone(), json!({"method": ask.method, "params": ask.params}));
        keyed.push((key, ask));
    }
    let held = HeldCall { binding, rounds: rounds + 1, asks: keyed, running, upstream: upstream_name, on_expiry };
    Some(Ok(Driven::Answered(hold(gateway, held))))
}

/// The call's own outcome, as [`drive`] returns it.
fn answered(outcome: Option<Result<Value, UpstreamError>>) -> Option<Result<Driven, UpstreamError>> {
    outcome.map(|outcome| outcome.map(Driven::Answered))
}

/// Refuses a call whose upstream asks for input once more after [`MAX_BRIDGED_ROUNDS`] rounds.
async fn too_many_rounds(running: Running, asks: Vec<UpstreamAsk>) -> Driven {
    let text = format!("the upstream asked for input more than {MAX_BRIDGED_ROUNDS} times in one call");
    Driven::Refused(refuse_all(running, asks, codes::INTERNAL_ERROR, &text, None).await, BridgeRefusal::TooManyRounds)
}

/// Adds to `asks` the upstream's requests that follow the first within [`GATHER_QUIET`] of each other (at most
/// [`GATHER_AT_MOST`] in all), so that what a server sends at once is asked in one round.
async fn gather(incoming: &mut mpsc::UnboundedReceiver<UpstreamAsk>, asks: &mut Vec<UpstreamAsk>) {
    let until = tokio::time::Instant::now() + GATHER_AT_MOST;
    loop {
        let quiet = (tokio::time::Instant::now() + GATHER_QUIET).min(until);
        match tokio::time::timeout_at(quiet, incoming.recv()).await {
            Ok(Some(ask)) => asks.push(ask),
            // Quiet for long enough, the round's time is up, or the call ended (its outcome is on its way).
            Ok(None) | Err(_) => return,
        }
    }
}

/// Puts a call on hold: sealed under a fresh id, expiring after `limits.held_call_timeout` (its requests refused, the
/// call cancelled upstream, and its [`HeldCall::on_expiry`] row written, unless a retry took it first); returns the
/// `input_required` response that asks the client its pending requests.
fn hold(gateway: &Arc<Shared>, mut held: HeldCall) -> Value {
    // From now until its retry takes it, what its upstream sends by elimination is another call's (`state::routes`).
    held.running.mark_held(true);
    let id = uuid::Uuid::new_v4().to_string();
    held.binding.nonce = id.clone();
    let lifetime = gateway.spec.limits.held_call_timeout;
    held.binding.expires_at = unix_seconds(SystemTime::now() + lifetime);
    let state = format!("{HELD_PREFIX}{}", request_state::seal(&gateway.held_calls.key, &held.binding));
    let requests: Map<String, Value> =
        held.asks.iter().map(|(key, ask)| (key.clone(), json!({"method": ask.method, "params": ask.params}))).collect();
    gateway.held_calls.insert(id.clone(), held);
    let expiring = Arc::clone(gateway);
    tokio::spawn(async move {
        tokio::time::sleep(lifetime).await;
        let expired = expiring.held_calls.remove(&id);
        if let Some(held) = expired {
            tracing::info!(upstream = %held.upstream, "a held call was not resumed in time; cancelled upstream");
            // Taken from the map once, here or by a retry: one row for the expiry, never one for a resumed call.
            (held.on_expiry)();
            refuse_all(
                held.running,
                held.asks.into_iter().map(|(_, ask)| ask).collect(),
                codes::INTERNAL_ERROR,
                "the client did not answer in time",
                None,
            )
            .await;
        }
    });
    json!({
        "jsonrpc": "2.0",
        "id": Value::Null,
        "result": {"resultType": "input_required", "inputRequests": requests, "requestState": state},
    })
}

/// Refuses the upstream's pending requests, cancels its call, and returns the client's error response.
async fn refuse_all(running: Running, asks: Vec<UpstreamAsk>, code: i64, text: &str, data: Option<Value>) -> Value {
    for ask in asks {
        ask.responder.respond_error(codes::INTERNAL_ERROR, text).await;
    }
    running.cancel.cancel();
    // Once the call's task has ended its routes are gone: a call the client makes next is never taken for this one.
    let _ = running.outcome.await;
    let mut error = json!({"code": code, "message": text});
    if let Some(data) = data {
        error["data"] = data;
    }
    json!({"jsonrpc": "2.0", "id": Value::Null, "error": error})
}

/// Resumes a held call with a retry's `inputResponses`: each answered request is answered upstream, the ones left
/// unanswered are asked again (a new round, a new state), and then the call is driven on.
pub(crate) async fn resume(
    gateway: &Arc<Shared>,
    held: HeldCall,
    params: &Value,
    capabilities: &Value,
    cancel: &CancellationToken,
) -> Option<Result<Driven, UpstreamError>> {
    let responses = params.get("inputResponses").and_then(Value::as_object);
    let HeldCall { binding, rounds, asks, running, upstream, on_expiry } = held;
    // Running again before its upstream hears the answers: its next request must find it.
    running.mark_held(false);
    if asks
        .iter()
        .any(|(key, _)| responses.and_then(|answers| answers.get(key)).is_some_and(|answer| !answer.is_object()))
    {
        let text = StateRefusal::MalformedInput.message();
        let asks = asks.into_iter().map(|(_, ask)| ask).collect();
        let response = refuse_all(running, asks, codes::INVALID_PARAMS, &text, None).await;
        return Some(Ok(Driven::Refused(response, BridgeRefusal::MalformedInput)));
    }
    let mut unanswered = Vec::new();
    for (key, ask) in asks {
        match responses.and_then(|answers| answers.get(&key)) {
            Some(answer) => answer_upstream(ask, answer).await,
            None => unanswered.push((key, ask)),
        }
    }
    if !unanswered.is_empty() {
        // Asked again for what is missing; unexpected keys were ignored.
        if rounds >= MAX_BRIDGED_ROUNDS {
            let asks = unanswered.into_iter().map(|(_, ask)| ask).collect();
            return Some(Ok(too_many_rounds(running, asks).await));
        }
        let held = HeldCall { binding, rounds: rounds + 1, asks: unanswered, running, upstream, on_expiry };
        return Some(Ok(Driven::Answered(hold(gateway, held))));
    }
    drive(gateway, running, binding, capabilities, rounds, cancel, on_expiry).await
}

/// Answers one upstream request with the client's answer: an `error` object is relayed as an error, anything
/// else as the result.
async fn answer_upstream(ask: UpstreamAsk, answer: &Value) {
    match answer.get("error") {
        Some(error) if answer.as_object().is_some_and(|answer| answer.len() == 1) => {
            ask.responder.respond_error_object(error.clone()).await;
        }
        _ => ask.responder.respond(answer.clone()).await,
    }
}

fn unix_seconds(time: SystemTime) -> u64 {
    time.duration_since(UNIX_EPOCH).map_or(0, |since| since.as_secs())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_what_the_request_declared_itself_counts() {
        let form = json!({"message": "?"});
        let url = json!({"mode": "url", "url": "https://example.invalid"});
        assert!(declares(&json!({"elicitation": {}}), "elicitation/create", &form));
        assert!(declares(&json!({"elicitation": {"form": {}}}), "elicitation/create", &form));
        assert!(!declares(&json!({"elicitation": {"url": {}}}), "elicitation/create", &form));
        assert!(declares(&json!({"elicitation": {"url": {}}}), "elicitation/create", &url));
        assert!(!declares(&json!({}), "sampling/createMessage", &json!({})));
        assert!(declares(&json!({"sampling": {}}), "sampling/createMessage", &json!({})));
        assert!(!declares(&json!({"sampling": {}}), "roots/list", &json!({})));
        assert_eq!(required_capability("sampling/createMessage", &json!({})), json!({"sampling": {}}));
    }

    #[test]
    fn input_keys_name_the_upstream_and_never_collide() {
        let mut taken = Map::new();
        let first = input_key("files", "elicitation/create", None, &taken);
        assert_eq!(first, "files/elicitation");
        taken.insert(first, json!({}));
        assert_eq!(input_key("files", "elicitation/create", None, &taken), "files/elicitation#2");
        assert_eq!(input_key("files", "elicitation/create", Some("user_name"), &taken), "user_name");
        taken.insert("user_name".into(), json!({}));
        assert_eq!(input_key("files", "roots/list", Some("user_name"), &taken), "user_name#2");
    }

    #[test]
    fn an_upstreams_key_is_honoured_only_when_plain_short_and_not_toolgates() {
        let hinted = |hint: Value| key_hint(&json!({"params": {"_meta": {INPUT_KEY_META: hint}}}));
        assert_eq!(hinted(json!("user_name")), Some("user_name".to_owned()));
        assert_eq!(hinted(json!("files/step.2-b")), Some("files/step.2-b".to_owned()));
        for refused in [json!("toolgate/confirm"), json!(""), json!("a b"), json!("x".repeat(65)), json!(7)] {
            assert_eq!(hinted(refused.clone()), None, "{refused}");
        }
        assert_eq!(key_hint(&json!({"params": {}})), None);
    }
}
