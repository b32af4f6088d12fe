//! Multi Round-Trip Requests as a client: what toolgate does when a 2026-07-28 upstream answers a call with
//! `input_required`, and the client capabilities a modern upstream is told of.
//!
//! For a legacy client (a session that accepts requests from the server), each of the upstream's input requests
//! (elicitation, sampling, roots) becomes a real request to that client on the call's own stream, exactly as a
//! legacy upstream's pushed request would be (`crate::upstream_events`: labelled with the upstream's name, the
//! session's declared capabilities checked, the same quota of relayed requests); the answers go back upstream in
//! a retry under a new id with the upstream's `requestState` echoed byte for byte, at most [`MAX_INPUT_ROUNDS`]
//! rounds. A modern client answers in retries of its own: its rounds go through `crate::upstream_rounds` (the
//! relay never calls [`ask_client`] for it; if it did, the call would get a clean error). This module never
//! decides policy (the call was permitted, its confirmation asked, before it reached the upstream) and never
//! invents an answer a client did not give.

use std::sync::Arc;

use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;

use crate::state::session::SessionShared;
use crate::state::shared::Shared;
use crate::upstream_events::{CLIENT_ANSWER_TIMEOUT, limit_sampling_context, supports};
use crate::upstreams::relayed_client_capabilities;

/// Most `input_required` rounds one call may take upstream: a server that keeps asking is refused after this.
pub(crate) const MAX_INPUT_ROUNDS: usize = 10;

/// The methods whose results may be `input_required` (2026-07-28).
pub(crate) const INPUT_METHODS: [&str; 3] = ["tools/call", "prompts/get", "resources/read"];

/// The kinds of request an `input_required` result may carry.
const INPUT_KINDS: [&str; 3] = ["elicitation/create", "sampling/createMessage", "roots/list"];

/// The client capabilities a modern upstream is told of for one request: what the client declared (in the
/// request's own `_meta` for a modern client, at initialize for a legacy session) intersected with what toolgate
/// relays, so an upstream never asks for what toolgate cannot bring to the client.
pub(crate) fn upstream_client_capabilities(session: &SessionShared, params: &Value) -> Value {
    let declared = match params.pointer("/_meta/io.modelcontextprotocol~1clientCapabilities") {
        Some(Value::Object(declared)) => Value::Object(declared.clone()),
        _ => session.declared_capabilities(),
    };
    intersect(&declared, &relayed_client_capabilities())
}

/// The keys both objects have, recursively while both sides are objects; a leaf (or an empty object) on either
/// side keeps the client's value, so `elicitation: {}` (form, before modes) stays as the client declared it.
fn intersect(declared: &Value, relayed: &Value) -> Value {
    match (declared, relayed) {
        (Value::Object(declared), Value::Object(relayed)) if !declared.is_empty() && !relayed.is_empty() => {
            let kept: Map<String, Value> = declared
                .iter()
                .filter_map(|(key, value)| relayed.get(key).map(|relayed| (key.clone(), intersect(value, relayed))))
                .collect();
            Value::Object(kept)
        }
        _ => declared.clone(),
    }
}

/// The result of an upstream response when it asks for input (`resultType: "input_required"`).
pub(crate) fn input_required(message: &Value) -> Option<&Value> {
    let result = message.get("result")?;
    (result.get("resultType").and_then(Value::as_str) == Some("input_required")).then_some(result)
}

/// Why a call whose upstream asked for input cannot go on: the reason a `request` row names (see
/// [`InputRefusal::OUTCOME`]) and the text of the error the client gets.
#[derive(Debug)]
pub(crate) struct InputRefusal {
    /// `too_many_rounds`, `missing_capability`, `upstream_malformed` (what the upstream asked is not a request
    /// toolgate can pass on), `too_many_waiting` (the relay quota), `client_refused` (the client answered with an
    /// error or nothing), `no_answer`, `store_unavailable` (a round's state cannot be sealed), `not_passed_on`
    /// (input toolgate does not pass on for this request).
    pub(crate) reason: &'static str,
    pub(crate) message: String,
}

impl InputRefusal {
    /// The `request` audit row's outcome for a request other than a tool call refused this way (a tool call's is its
    /// call row); the reasons are named as a bridged call's (`bridge::BridgeRefusal`) where they mean the same.
    pub(crate) const OUTCOME: &'static str = "input_refused";

    pub(crate) fn new(reason: &'static str, message: String) -> InputRefusal {
        InputRefusal { reason, message }
    }

    /// An upstream that asked for input more than [`MAX_INPUT_ROUNDS`] times in one call (`name` when known).
    pub(crate) fn too_many_rounds(name: Option<&str>) -> InputRefusal {
        let upstream = name.map(|name| format!("upstream `{name}`")).unwrap_or_else(|| "upstream".to_owned());
        let message = format!("{upstream} asked for input more than {MAX_INPUT_ROUNDS} times in one call");
        InputRefusal::new("too_many_rounds", message)
    }
}

/// The call whose upstream asked for input, as [`ask_client`] needs it.
#[derive(Clone, Copy)]
pub(crate) struct AskedCall<'a> {
    /// The client's id for the call (the client's requests go on its stream).
    pub(crate) client_request_id: &'a Value,
    /// The upstream that asked.
    pub(crate) upstream: usize,
    /// The method called (`tools/call`, ...).
    pub(crate) method: &'a str,
    /// The client asked in the 2026-07-28 era (it accepts no request from the server).
    pub(crate) client_is_modern: bool,
    /// The upstream's content is open-world (its questions taint the session).
    pub(crate) open_world: bool,
}

/// Asks the client every input request of `result` and returns the `inputResponses` for the retry.
pub(crate) async fn ask_client(
    gateway: &Arc<Shared>,
    session: &Arc<SessionShared>,
    call: &AskedCall<'_>,
    result: &Value,
    cancel: &CancellationToken,
) -> Result<Value, InputRefusal> {
    let AskedCall { client_request_id, upstream, method, client_is_modern, open_world } = *call;
    let name = gateway.upstreams.name(upstream);
    if !INPUT_METHODS.contains(&method) {
        let message = format!("upstream `{name}` answered {method} with input_required, which only a call may");
        return Err(InputRefusal::new("not_passed_on", message));
    }
    if client_is_modern {
        let message = format!(
            "upstream `{name}` asked for input (input_required); toolgate does not yet pass that on to a \
             2026-07-28 client"
        );
        return Err(InputRefusal::new("not_passed_on", message));
    }
    let requests = match result.get("inputRequests") {
        Some(Value::Object(requests)) => requests.clone(),
        None | Some(Value::Null) => Map::new(),
        Some(_) => {
            let message = format!("upstream `{name}` sent `inputRequests` that is not an object");
            return Err(InputRefusal::new("upstream_malformed", message));
        }
    };
    let mut responses = Map::new();
    for (key, request) in requests {
        let kind = request.get("method").and_then(Value::as_str).unwrap_or_default();
        if !INPUT_KINDS.contains(&kind) {
            let message = format!("upstream `{name}` asked for input of an unknown kind `{kind}`");
            return Err(InputRefusal::new("upstream_malformed", message));
        }
        let mut question = request.get("params").cloned().unwrap_or_else(|| json!({}));
        crate::guard::results::remove_foreign_result_meta(&mut question);
        let question = match kind {
            // Labelled with the upstream that asks, so it cannot pass for toolgate's own question.
            "elicitation/create" => crate::guard::relayed_question::label_relayed_question(question, &name),
            _ => limit_sampling_context(kind, question),
        };
        if !supports(session, kind, Some(&question)) {
            let message = format!("upstream `{name}` asked for {kind}, which the client did not declare");
            return Err(InputRefusal::new("missing_capability", message));
        }
        let _slot = gateway.relay_quota.take(&session.id, upstream).map_err(|(refusal, limit)| {
            gateway.metrics.count_relay_refused(&name, refusal.label());
            let message = format!("toolgate refused this {kind}: {limit} requests already wait for clients' answers");
            InputRefusal::new("too_many_waiting", message)
        })?;
        if open_world && kind != "roots/list" {
            // The question's text reaches the client from outside, as a pushed one's would.
            session.taint();
        }
        let answer = session
            .ask_client_until(Some(client_request_id.clone()), kind, Some(question), CLIENT_ANSWER_TIMEOUT, cancel)
            .await;
        match answer {
            Some(answer) => match (answer.get("result"), answer.get("error")) {
                (Some(result), _) => {
                    responses.insert(key, result.clone());
                }
                (None, Some(error)) => {
                    let message = format!("the client refused the upstream's {kind}: {error}");
                    return Err(InputRefusal::new("client_refused", message));
                }
                (None, None) => {
                    return Err(InputRefusal::new("client_refused", "the client sent an empty answer".to_owned()));
                }
            },
            None => {
                let message = format!("the client did not answer the upstream's {kind}");
                return Err(InputRefusal::new("no_answer", message));
            }
        }
    }
    Ok(Value::Object(responses))
}

/// The params of the retry: the call's own, with the answers and the upstream's state echoed exactly (or none).
pub(crate) fn retry_params(original: &Value, responses: Value, result: &Value) -> Value {
    let mut params = original.clone();
    if let Some(object) = params.as_object_mut() {
        object.insert("inputResponses".to_owned(), responses);
        match result.get("requestState") {
            Some(state) => object.insert("requestState".to_owned(), state.clone()),
            None => object.remove("requestState"),
        };
    }
    params
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_upstream_hears_only_what_both_the_client_and_toolgate_can_do() {
        let declared = json!({"elicitation": {"form": {}}, "sampling": {}, "experimental": {"x": {}}});
        assert_eq!(
            intersect(&declared, &relayed_client_capabilities()),
            json!({"elicitation": {"form": {}},
            "sampling": {}})
        );
        let bare = json!({"elicitation": {}});
        assert_eq!(intersect(&bare, &relayed_client_capabilities()), json!({"elicitation": {}}));
    }

    #[test]
    fn the_retry_echoes_the_state_exactly() {
        let original = json!({"name": "t", "arguments": {}});
        let result = json!({"resultType": "input_required", "requestState": "v1.abc"});
        let retry = retry_params(&original, json!({"k": {"action": "accept"}}), &result);
        assert_eq!(
            retry,
            json!({"name": "t", "arguments": {}, "inputResponses": {"k": {"action": "accept"}},
            "requestState": "v1.abc"})
        );
    }
}
