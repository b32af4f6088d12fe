//! Multi Round-Trip Requests from a 2026-07-28 upstream passed on to a 2026-07-28 client: the upstream's
//! `input_required` reaches the client as toolgate's own `input_required`, with the upstream's `requestState` wrapped
//! inside a state toolgate seals, and the client's retry is checked and unwrapped before it goes upstream.
//!
//! The wrapper (`tgu1.` + the sealed payload, `guard::request_state::UpstreamRound`, under the key toolgate's own confirmations use)
//! binds the caller, the upstream, the method, the target (tool or prompt name, resource URI), the argument digest,
//! the tool's fingerprint, an expiry (`approval_ttl`), a single-use nonce (marked used in the store, so any process
//! on it refuses a replay), the input keys the upstream asked, the round number and whether the call was confirmed
//! by a person. The upstream's state inside it is echoed back byte for byte; the client can read it (sealed, not
//! encrypted) but cannot alter it. Input keys are not renamed: an upstream's keys pass unchanged (clients and suites
//! look for them), toolgate reserves the `toolgate/` prefix for its own questions (an upstream that uses it is
//! refused), and a retry's responses go upstream only under the keys that upstream asked in that round. Each round
//! is a new request upstream (a new id); rounds are capped at [`MAX_INPUT_ROUNDS`].
//!
//! This module never decides policy (the call was permitted, its confirmation asked, before it reached here) and
//! never answers a question itself.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::{Map, Value, json};
use toolgate_store::digest_arguments;
use toolgate_upstream::jsonrpc::{self, codes};

use crate::era::META_CAPABILITIES;
use crate::guard::request_state::{
    RequestStateError, UpstreamRound, is_wrapped, open_upstream_round, seal_upstream_round,
};
use crate::guard::round_trip::{sealing_key, unix_seconds};
use crate::state::session::SessionShared;
use crate::state::shared::Shared;
use crate::upstream_input::{InputRefusal, MAX_INPUT_ROUNDS};

/// The input-key prefix toolgate keeps for its own questions.
const RESERVED_KEY_PREFIX: &str = "toolgate/";

/// How long a used nonce outlives its state's expiry (clock skew between processes on one store).
const NONCE_MARGIN: Duration = Duration::from_secs(10 * 60);

/// The call a round belongs to, from the request as it goes upstream.
struct CallKey {
    caller: String,
    upstream: String,
    method: String,
    target: String,
    args_digest: String,
    tool_fingerprint: Option<String>,
}

fn call_key(gateway: &Shared, session: &SessionShared, upstream: usize, method: &str, params: &Value) -> CallKey {
    let target_field = if method == "resources/read" { "uri" } else { "name" };
    let target = params.get(target_field).and_then(Value::as_str).unwrap_or_default().to_owned();
    let arguments = params.get("arguments").cloned().unwrap_or_else(|| json!({}));
    let tool_fingerprint = (method == "tools/call")
        .then(|| gateway.catalog().tool_of(upstream, &target).map(|tool| tool.fingerprint.clone()))
        .flatten();
    CallKey {
        caller: session.caller.name.clone(),
        upstream: gateway.upstreams.name(upstream),
        method: method.to_owned(),
        target,
        args_digest: digest_arguments(&arguments),
        tool_fingerprint,
    }
}

/// Why a retry was not sent upstream.
pub(crate) enum RetryRefused {
    /// The state or the responses are not this call's to send: -32602 with this message, and the audit row's
    /// reason (the names `guard::round_trip::StateRefusal::reason` gives the same faults).
    Invalid { reason: &'static str, message: String },
    /// The store could not check the state: the client did nothing wrong, and is told no more than that (the store's
    /// error, which names paths, hosts and schema, went to the log).
    Unavailable,
}

impl RetryRefused {
    /// The audit row's reason.
    pub(crate) fn reason(&self) -> &'static str {
        match self {
            RetryRefused::Invalid { reason, .. } => reason,
            RetryRefused::Unavailable => "unavailable",
        }
    }

    /// The JSON-RPC error response the client gets for request `id`.
    pub(crate) fn response(&self, id: &Value) -> Value {
        match self {
            RetryRefused::Invalid { message, .. } => jsonrpc::error_response(id, codes::INVALID_PARAMS, message),
            RetryRefused::Unavailable => jsonrpc::error_response(
                id,
                codes::INTERNAL_ERROR,
                "toolgate cannot check the requestState right now; the request was not sent upstream; retry later",
            ),
        }
    }
}

fn unavailable(upstream: &str, error: &dyn std::fmt::Display) -> RetryRefused {
    tracing::error!(%upstream, %error, "a retry's wrapped requestState cannot be checked: the store is unavailable");
    RetryRefused::Unavailable
}

/// Prepares a modern client's request for a modern upstream: without a state it is a first round (any
/// `inputResponses` is dropped: an answer to a question never asked answers nothing); with toolgate's confirmation
/// state (the call was `confirmed` by it) the same; with a wrapped state it is opened for this call, its nonce used,
/// and the upstream's own state and the responses to the keys it asked put in its place. Returns the number of
/// upstream rounds before this one, or the refusal (nothing is sent).
pub(crate) async fn unwrap_retry(
    gateway: &Shared,
    session: &SessionShared,
    upstream: usize,
    method: &str,
    params: &mut Value,
    confirmed: bool,
) -> Result<usize, RetryRefused> {
    let Some(object) = params.as_object_mut() else { return Ok(0) };
    let state = object.remove("requestState");
    let responses = object.remove("inputResponses");
    let sealed = match &state {
        None => return Ok(0),
        Some(state) if !is_wrapped(state) => {
            // toolgate's own confirmation state was checked and used by the guard before the call got here.
            return if confirmed {
                Ok(0)
            } else {
                Err(invalid("malformed", "the requestState is not one toolgate issued"))
            };
        }
        Some(state) => state.as_str().unwrap_or_default(),
    };
    let store =
        gateway.store.as_ref().ok_or_else(|| invalid("no_store", "toolgate has no store to check it against"))?;
    let name = gateway.upstreams.name(upstream);
    let key = sealing_key(gateway, store).await.map_err(|error| unavailable(&name, &error))?;
    let round = match open_upstream_round(&key, sealed) {
        Ok(round) => round,
        Err(RequestStateError::BadTag) => return Err(invalid("forged", "the requestState was altered or forged")),
        Err(_) => return Err(invalid("malformed", "the requestState is not one toolgate issued")),
    };
    let call = call_key(gateway, session, upstream, method, params);
    let why = if unix_seconds(SystemTime::now()) >= round.expires_at {
        Some(("expired", "the requestState has expired; call again without it"))
    } else if round.caller != call.caller {
        Some(("other_caller", "the requestState was issued to another caller"))
    } else if round.upstream != call.upstream || round.method != call.method || round.target != call.target {
        Some(("other_tool", "the requestState was issued for another request"))
    } else if round.args_digest != call.args_digest {
        Some(("other_arguments", "the requestState was issued for other arguments"))
    } else if round.tool_fingerprint != call.tool_fingerprint {
        Some(("other_tool", "the tool changed since its server asked; call again without the requestState"))
    } else {
        None
    };
    if let Some((reason, why)) = why {
        return Err(invalid(reason, why));
    }
    let expires = UNIX_EPOCH + Duration::from_secs(round.expires_at) + NONCE_MARGIN;
    match store.request_states().use_nonce(&round.nonce, expires).await {
        Ok(true) => {}
        Ok(false) => return Err(invalid("replayed", "the requestState was used already")),
        Err(error) => return Err(unavailable(&name, &error)),
    }
    let answered = match responses {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(responses)) => {
            responses.into_iter().filter(|(key, _)| round.asked.contains(key)).collect::<Map<String, Value>>()
        }
        Some(_) => return Err(invalid("malformed_input", "`inputResponses` is not an object")),
    };
    if let Some(object) = params.as_object_mut() {
        object.insert("inputResponses".to_owned(), Value::Object(answered));
        if let Some(state) = round.state {
            object.insert("requestState".to_owned(), Value::String(state));
        }
    }
    Ok(round.round)
}

fn invalid(reason: &'static str, why: &str) -> RetryRefused {
    RetryRefused::Invalid { reason, message: format!("invalid params: {why}; the request was not sent upstream") }
}

/// The `input_required` result a modern client gets for an upstream's: its input requests (elicitations labelled
/// with the upstream's name; only kinds the request declared) under the upstream's keys, and a wrapped state for
/// `params` (the request as it went upstream). `Err` says why the call cannot go on.
#[allow(clippy::too_many_arguments, reason = "the request's whole context; a struct for one call site adds nothing")]
pub(crate) async fn wrap_for_client(
    gateway: &Shared,
    session: &SessionShared,
    upstream: usize,
    method: &str,
    params: &Value,
    result: &Value,
    rounds_before: usize,
    confirmed: bool,
) -> Result<Value, InputRefusal> {
    let name = gateway.upstreams.name(upstream);
    let round = rounds_before + 1;
    if round > MAX_INPUT_ROUNDS {
        return Err(InputRefusal::too_many_rounds(Some(&name)));
    }
    let requests = match result.get("inputRequests") {
        Some(Value::Object(requests)) => requests.clone(),
        None | Some(Value::Null) => Map::new(),
        Some(_) => {
            let message = format!("upstream `{name}` sent `inputRequests` that is not an object");
            return Err(InputRefusal::new("upstream_malformed", message));
        }
    };
    let declared = params.pointer("/_meta").and_then(|meta| meta.get(META_CAPABILITIES)).cloned().unwrap_or_default();
    let mut passed = Map::new();
    for (key, request) in requests {
        if key.starts_with(RESERVED_KEY_PREFIX) {
            let message = format!("upstream `{name}` asked for input under `{key}`, a key toolgate keeps for itself");
            return Err(InputRefusal::new("upstream_malformed", message));
        }
        let kind = request.get("method").and_then(Value::as_str).unwrap_or_default().to_owned();
        if !["elicitation/create", "sampling/createMessage", "roots/list"].contains(&kind.as_str()) {
            let message = format!("upstream `{name}` asked for input of an unknown kind `{kind}`");
            return Err(InputRefusal::new("upstream_malformed", message));
        }
        let mut question = request.get("params").cloned().unwrap_or_else(|| json!({}));
        // The mode counts, not only the kind: a client that declared URL elicitation alone cannot answer a form.
        if !crate::era::declares(&declared, &kind, &question) {
            let message = format!("upstream `{name}` asked for {kind}, which the client did not declare");
            return Err(InputRefusal::new("missing_capability", message));
        }
        crate::guard::results::remove_foreign_result_meta(&mut question);
        if kind == "elicitation/create" {
            // Labelled with the upstream that asks, so it cannot pass for toolgate's own question.
            question = crate::guard::relayed_question::label_relayed_question(question, &name);
        }
        passed.insert(key, json!({"method": kind, "params": question}));
    }
    let state = match result.get("requestState") {
        None | Some(Value::Null) => None,
        Some(Value::String(state)) => Some(state.clone()),
        Some(_) => {
            let message = format!("upstream `{name}` sent a `requestState` that is not a string");
            return Err(InputRefusal::new("upstream_malformed", message));
        }
    };
    let Some(store) = &gateway.store else {
        let message =
            format!("upstream `{name}` asked for input, and toolgate has no store to seal the round's state with");
        return Err(InputRefusal::new("store_unavailable", message));
    };
    let call = call_key(gateway, session, upstream, method, params);
    let lifetime = gateway.spec.guardrails.confirmation.approval_ttl;
    let sealed = UpstreamRound {
        caller: call.caller,
        upstream: call.upstream,
        method: call.method,
        target: call.target,
        args_digest: call.args_digest,
        tool_fingerprint: call.tool_fingerprint,
        expires_at: unix_seconds(SystemTime::now() + lifetime),
        nonce: uuid::Uuid::new_v4().to_string(),
        asked: passed.keys().cloned().collect(),
        state,
        round,
        confirmed,
    };
    let key = sealing_key(gateway, store).await.map_err(|error| {
        // The store's error is the operator's (the log); the client learns only that the round cannot go on.
        tracing::error!(upstream = %name, %error, "an upstream round's state cannot be sealed: the store is unavailable");
        let message = format!(
            "upstream `{name}` asked for input, and toolgate cannot seal the round's state right now; retry later"
        );
        InputRefusal::new("store_unavailable", message)
    })?;
    let wrapped = seal_upstream_round(&key, &sealed);
    Ok(json!({"resultType": "input_required", "inputRequests": passed, "requestState": wrapped}))
}
