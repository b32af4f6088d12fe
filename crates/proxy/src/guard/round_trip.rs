//! A person's confirmation of a 2026-07-28 call as a round trip (MRTR): a modern request accepts no request from
//! the server, so instead of `elicitation/create` during the call, the answer is `input_required` with toolgate's
//! question (the same words and form as the pushed one, under the input key [`CONFIRM_INPUT`]) and a sealed
//! `requestState`; the client asks its user and retries the same call with the answer and the state.
//!
//! Only a request that declared form elicitation in its own `_meta` is asked (a client that did not is never
//! asked: its call waits in the approval queue, `guard::confirm`). The state binds the caller, the tool's
//! fingerprint, the argument digest, an expiry and a nonce (`guard::request_state`), sealed with the secret every
//! gateway process sharing the store reads from it, so a retry may reach any of them. On the retry the call has
//! been resolved and decided again from the current catalog and policy (phases 1 and 2 ran for it as for any
//! request), the state is opened for that call (a tool that changed lapses the approval), its nonce is used once
//! in the store, and only then is the answer read: an answer without a state, or under a key toolgate never asked,
//! approves nothing. Nothing here forwards a call or writes an audit row: every end is a [`RoundTrip`] that
//! `guard::confirm` turns into its `Confirmation`, for the call's end phase to record (the data flows one way:
//! this module imports nothing of `confirm`).

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};
use toolgate_store::{Store, digest_arguments};
use toolgate_upstream::jsonrpc::codes;

use crate::access::Lapse;
use crate::call::context::CallContext;
use crate::catalog::ExposedTool;
use crate::era::{declares, request_capabilities, url_mode};
use crate::guard::request_state::{self, ConfirmationBinding, RequestStateError};
use crate::state::shared::Shared;

/// The key of toolgate's own question in `inputRequests` and `inputResponses` (namespaced: an upstream's keys never
/// start with `toolgate/`).
pub(crate) const CONFIRM_INPUT: &str = "toolgate/confirm";

/// Why a retry's `requestState` (or its answer) was refused: a JSON-RPC invalid-params error, audited with the
/// call's row (outcome `state_refused`, [`StateRefusal::reason`] in the detail).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum StateRefusal {
    /// Not a sealed state at all.
    Malformed,
    /// Altered or forged: its seal does not verify.
    Forged,
    /// Past its expiry.
    Expired,
    /// Its nonce was used already: a replay.
    Replayed,
    /// Issued to another caller.
    OtherCaller,
    /// Issued for other arguments.
    OtherArguments,
    /// Issued for another tool.
    OtherTool,
    /// The answer to toolgate's question is not an elicitation result.
    MalformedAnswer,
    /// The sealing secret or the used nonces could not be read or written. The store's error is for the operator
    /// (the log and the audit row's detail): the client is told only that the state cannot be checked now.
    Unavailable(String),
    /// It names a held upstream call (`crate::bridge`) this process does not hold: expired, used already, or held
    /// by another toolgate process. Never replayed.
    NotHeld,
    /// An answer to a held call's input request is not a JSON object (or an error toolgate could relay).
    MalformedInput,
}

impl StateRefusal {
    /// The audit row's reason.
    pub(crate) fn reason(&self) -> &'static str {
        match self {
            StateRefusal::Malformed => "malformed",
            StateRefusal::Forged => "forged",
            StateRefusal::Expired => "expired",
            StateRefusal::Replayed => "replayed",
            StateRefusal::OtherCaller => "other_caller",
            StateRefusal::OtherArguments => "other_arguments",
            StateRefusal::OtherTool => "other_tool",
            StateRefusal::MalformedAnswer => "malformed_answer",
            StateRefusal::Unavailable(_) => "unavailable",
            StateRefusal::NotHeld => "not_held",
            StateRefusal::MalformedInput => "malformed_input",
        }
    }

    /// The JSON-RPC error code the client gets: invalid params for a state or answer the client got wrong, an
    /// internal error when toolgate's store could not check it (the client did nothing wrong; a retry is safe).
    pub(crate) fn code(&self) -> i64 {
        match self {
            StateRefusal::Unavailable(_) => codes::INTERNAL_ERROR,
            _ => codes::INVALID_PARAMS,
        }
    }

    /// The error message the client gets: nothing was sent upstream for this request (for a held call, its first
    /// round did run upstream, so the message says only that this retry went nowhere).
    pub(crate) fn message(&self) -> String {
        let why = match self {
            StateRefusal::Malformed => "the requestState is not one toolgate issued".to_owned(),
            StateRefusal::Forged => "the requestState was altered or forged".to_owned(),
            StateRefusal::Expired => "the requestState has expired; call again without it".to_owned(),
            StateRefusal::Replayed => "the requestState was used already".to_owned(),
            StateRefusal::OtherCaller => "the requestState was issued to another caller".to_owned(),
            StateRefusal::OtherArguments => "the requestState was issued for other arguments".to_owned(),
            StateRefusal::OtherTool => "the requestState was issued for another tool".to_owned(),
            StateRefusal::MalformedAnswer => {
                format!("inputResponses[\"{CONFIRM_INPUT}\"] is not an elicitation result")
            }
            // The store's error names paths, hosts and schema: never the client's to read.
            StateRefusal::Unavailable(_) => {
                return "toolgate cannot check the requestState right now; the call was not made; retry later"
                    .to_owned();
            }
            StateRefusal::NotHeld => "the requestState names an upstream call this toolgate process does not hold \
                                      (it expired, was answered already, or is held by another toolgate process); \
                                      call again without it"
                .to_owned(),
            StateRefusal::MalformedInput => "an answer in inputResponses is not an object".to_owned(),
        };
        let outcome = match self {
            StateRefusal::NotHeld => "nothing was sent upstream for this retry",
            _ => "the call was not made",
        };
        format!("invalid params: {why}; {outcome}")
    }
}

/// How long a used nonce outlives its state's expiry: more than any clock skew between processes sharing a store.
pub(crate) const NONCE_MARGIN: Duration = Duration::from_secs(10 * 60);

/// How one round of a confirmation round trip ended.
pub(crate) enum RoundTrip {
    /// Ask: answer the request with this `input_required` result.
    Ask(Value),
    /// The person said yes.
    Approved,
    /// The person said no (`cancelled`: dismissed the question).
    Declined { cancelled: bool },
    /// The tool changed since the question was asked: the approval lapses.
    Lapsed(Lapse),
    /// The state or the answer was refused.
    Refused(StateRefusal),
    /// No store: nothing to seal with, nobody can be asked.
    NoStore,
}

/// True when a modern request declared form elicitation in its own `_meta` (an empty `elicitation` object, which
/// means form, or one with `form`); what the client's session declared at some `initialize` does not count.
pub(crate) fn declares_form_elicitation(params: &Value) -> bool {
    declares(request_capabilities(params), "elicitation/create", &json!({}))
}

/// Confirms a modern call of `tool` (`params`: the request's) by a round trip: the first request (or one without
/// a state) is answered `input_required` asking `question` (`elicitation/create` params); a retry is checked and
/// its answer read. See the module's comment.
pub(crate) async fn confirm(
    context: &CallContext<'_>,
    tool: &ExposedTool,
    params: &Value,
    question: &Value,
) -> RoundTrip {
    let CallContext { gateway, .. } = *context;
    let (store, key, call, state) = match open_round(context, tool, params).await {
        Opening::NoStore => return RoundTrip::NoStore,
        Opening::Refused(refusal) => return RoundTrip::Refused(refusal),
        Opening::ConfirmedEarlier => return RoundTrip::Approved,
        Opening::First { key, call, .. } => return ask(gateway, &key, call, question),
        Opening::Retry { store, key, call, state } => (store, key, call, state),
    };
    let opened = match request_state::open(&key, state, &call, unix_seconds(SystemTime::now())) {
        Ok(opened) => opened,
        Err(RequestStateError::ToolChanged { asked }) => {
            // The person would answer about a definition the call no longer reaches.
            let lapse = Lapse {
                why: "its definition changed",
                current_fingerprint: Some(tool.fingerprint.clone()),
                approved_fingerprint: Some(asked),
            };
            return RoundTrip::Lapsed(lapse);
        }
        Err(error) => return RoundTrip::Refused(refusal_of(&error)),
    };
    // Used before the answer is read: whatever the answer, this state opens no second time, here or elsewhere. The
    // used nonce is kept past the state's expiry by a margin, so another process whose clock is behind this one's
    // cannot open the state again after its row was pruned.
    let expires = UNIX_EPOCH + Duration::from_secs(opened.expires_at) + NONCE_MARGIN;
    match store.request_states().use_nonce(&opened.nonce, expires).await {
        Ok(true) => {}
        Ok(false) => return RoundTrip::Refused(StateRefusal::Replayed),
        Err(error) => return RoundTrip::Refused(StateRefusal::Unavailable(error.to_string())),
    }
    let Some(answer) = params.get("inputResponses").and_then(|responses| responses.get(CONFIRM_INPUT)) else {
        // Retried without the answer: ask again, under a fresh state.
        return ask(gateway, &key, call, question);
    };
    read_answer(answer)
}

/// How a confirmation request opens, asked by a form round trip or in the console alike: what both need to go on,
/// or the end that comes before any question.
pub(crate) enum Opening<'a> {
    /// No store: nothing to seal with, nobody can be asked.
    NoStore,
    /// The sealing secret cannot be read.
    Refused(StateRefusal),
    /// A wrapped upstream round of this very call (`crate::upstream_rounds`) shows a person confirmed it already:
    /// the approval holds for the call's later rounds (the relay checks the state fully and uses its nonce).
    ConfirmedEarlier,
    /// A first round: no state, whatever `inputResponses` it carries (an answer to a question toolgate did not ask,
    /// or cannot tell it asked, approves nothing), or a wrapped state that does not show a confirmation (the call
    /// starts over with toolgate's question).
    First { store: &'a Store, key: Arc<Vec<u8>>, call: ConfirmationBinding },
    /// A retry naming this state, to be opened for `call`.
    Retry { store: &'a Store, key: Arc<Vec<u8>>, call: ConfirmationBinding, state: &'a str },
}

/// The opening every confirmation request shares (see [`Opening`]); a state that is not a string is refused as
/// malformed.
pub(crate) async fn open_round<'a>(context: &CallContext<'a>, tool: &ExposedTool, params: &'a Value) -> Opening<'a> {
    let CallContext { gateway, session, .. } = *context;
    let Some(store) = &gateway.store else {
        return Opening::NoStore;
    };
    let key = match sealing_key(gateway, store).await {
        Ok(key) => key,
        Err(error) => return Opening::Refused(StateRefusal::Unavailable(error)),
    };
    let call = binding(&session.caller.name, tool, params);
    match params.get("requestState") {
        Some(state) if request_state::is_wrapped(state) => {
            if confirmed_upstream_round(&key, state, &call, tool) {
                Opening::ConfirmedEarlier
            } else {
                Opening::First { store, key, call }
            }
        }
        None => Opening::First { store, key, call },
        Some(Value::String(state)) => Opening::Retry { store, key, call, state },
        Some(_) => Opening::Refused(StateRefusal::Malformed),
    }
}

/// Whether `state`, a wrapped upstream round's (`crate::upstream_rounds`), shows that a person confirmed this very
/// call (`call`: its caller and argument digest; `tool`: as resolved now) and has not expired. Only a hint that
/// toolgate's question need not be asked again: the relay checks the state fully and uses its nonce.
pub(crate) fn confirmed_upstream_round(
    key: &[u8],
    state: &Value,
    call: &ConfirmationBinding,
    tool: &ExposedTool,
) -> bool {
    state.as_str().and_then(|state| request_state::open_upstream_round(key, state).ok()).is_some_and(|round| {
        round.confirmed
            && round.caller == call.caller
            && round.method == "tools/call"
            && round.target == tool.original_name
            && round.tool_fingerprint.as_deref() == Some(tool.fingerprint.as_str())
            && round.args_digest == call.args_digest
            && unix_seconds(SystemTime::now()) < round.expires_at
    })
}

/// True when a modern request declared URL-mode elicitation in its own `_meta` (`elicitation.url`).
pub(crate) fn declares_url_elicitation(params: &Value) -> bool {
    declares(request_capabilities(params), "elicitation/create", &url_mode())
}

/// The person's answer to toolgate's question (an elicitation result); keys other than `approve` are ignored.
fn read_answer(answer: &Value) -> RoundTrip {
    match answer.get("action").and_then(Value::as_str) {
        Some("accept") if answer.pointer("/content/approve") == Some(&Value::Bool(true)) => RoundTrip::Approved,
        Some("accept" | "decline") => RoundTrip::Declined { cancelled: false },
        Some("cancel") => RoundTrip::Declined { cancelled: true },
        _ => RoundTrip::Refused(StateRefusal::MalformedAnswer),
    }
}

/// The `input_required` result that asks: toolgate's question under [`CONFIRM_INPUT`] and a fresh sealed state for
/// `call`, valid for the confirmation settings' approval lifetime.
fn ask(gateway: &Shared, key: &[u8], mut call: ConfirmationBinding, question: &Value) -> RoundTrip {
    let lifetime = gateway.spec.guardrails.confirmation.approval_ttl;
    call.expires_at = unix_seconds(SystemTime::now() + lifetime);
    call.nonce = uuid::Uuid::new_v4().to_string();
    let sealed = request_state::seal(key, &call);
    let question = json!({"method": "elicitation/create", "params": question});
    RoundTrip::Ask(json!({
        "resultType": "input_required",
        "inputRequests": {CONFIRM_INPUT: question},
        "requestState": sealed,
    }))
}

pub(crate) fn refusal_of(error: &RequestStateError) -> StateRefusal {
    match error {
        RequestStateError::Malformed => StateRefusal::Malformed,
        RequestStateError::BadTag => StateRefusal::Forged,
        RequestStateError::Expired => StateRefusal::Expired,
        RequestStateError::OtherCaller => StateRefusal::OtherCaller,
        RequestStateError::OtherTool => StateRefusal::OtherTool,
        RequestStateError::OtherArguments | RequestStateError::ToolChanged { .. } => StateRefusal::OtherArguments,
    }
}

/// The sealing secret, read from the store once per process (every process on the store reads the same one).
pub(crate) async fn sealing_key(gateway: &Shared, store: &Store) -> Result<Arc<Vec<u8>>, String> {
    let key = gateway
        .sealing_key
        .get_or_try_init(|| async { store.request_states().sealing_key().await.map(Arc::new) })
        .await
        .map_err(|error| error.to_string())?;
    Ok(Arc::clone(key))
}

pub(crate) fn unix_seconds(time: SystemTime) -> u64 {
    time.duration_since(UNIX_EPOCH).map_or(0, |since| since.as_secs())
}

/// What a confirmation of this request is bound to: its caller, the tool as listed now and its arguments' digest.
/// The expiry and the nonce are set when a state is sealed.
pub(crate) fn binding(caller: &str, tool: &ExposedTool, params: &Value) -> ConfirmationBinding {
    let arguments = params.get("arguments").cloned().unwrap_or_else(|| json!({}));
    ConfirmationBinding {
        caller: caller.to_owned(),
        tool: tool.exposed_name.clone(),
        tool_fingerprint: tool.fingerprint.clone(),
        args_digest: digest_arguments(&arguments),
        expires_at: 0,
        nonce: String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::era::META_CAPABILITIES;

    #[test]
    fn only_a_request_that_declared_form_elicitation_itself_is_asked() {
        let with = |capabilities: Value| json!({"_meta": {META_CAPABILITIES: capabilities}});
        assert!(declares_form_elicitation(&with(json!({"elicitation": {}}))));
        assert!(declares_form_elicitation(&with(json!({"elicitation": {"form": {}}}))));
        assert!(!declares_form_elicitation(&with(json!({"elicitation": {"url": {}}}))));
        assert!(!declares_form_elicitation(&with(json!({"sampling": {}}))));
        assert!(!declares_form_elicitation(&json!({})));
        assert!(declares_url_elicitation(&with(json!({"elicitation": {"url": {}}}))));
        assert!(declares_url_elicitation(&with(json!({"elicitation": {"form": {}, "url": {}}}))));
        assert!(!declares_url_elicitation(&with(json!({"elicitation": {}}))), "empty means form only");
        assert!(!declares_url_elicitation(&json!({})));
    }
}
