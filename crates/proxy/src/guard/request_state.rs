//! Sealed request state for confirmations in the 2026-07-28 protocol (MRTR): instead of sending
//! `elicitation/create` during a call, the gateway answers `input_required` with the question and an opaque
//! `requestState`; the client retries the same call with the person's answer and that state. The state must be
//! integrity-protected (the client, and the model behind it, must not be able to forge or alter it) and must not
//! be replayable beyond its binding.
//!
//! A sealed state binds the caller (the authenticated identity: a 2026-07-28 client has no session), the tool's
//! fingerprint, the digest of the exact arguments, an expiry and a single-use nonce, authenticated with
//! HMAC-SHA-256 under the key every gateway process sharing the store reads from it. Opening checks the tag in
//! constant time, the expiry and the call, field by field (so a retry after the tool changed is told apart from a
//! state for other arguments or another caller), and hands back the nonce: the caller marks it used once in the
//! store, so a replayed state is refused. Pure functions; the key, the nonce and the clock come in as arguments.

use hmac::{Hmac, KeyInit, Mac};
use serde::{Deserialize, Serialize};
use sha2::Sha256;

/// What a confirmation's request state binds to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConfirmationBinding {
    /// The caller the question was asked of (the authenticated identity).
    pub caller: String,
    /// The tool's exposed name (its upstream's namespace included): two upstreams can list the same definition, and
    /// a person who approved it on one did not approve it on the other.
    pub tool: String,
    /// `sha256:` fingerprint of the tool definition.
    pub tool_fingerprint: String,
    /// `sha256:` of the canonical arguments.
    pub args_digest: String,
    /// Unix seconds after which the state is refused.
    pub expires_at: u64,
    /// Names this question once (the approval's id): what single use is enforced on.
    pub nonce: String,
}

/// Why a request state was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RequestStateError {
    /// Not of the form `<payload>.<tag>` in lowercase hex.
    #[error("the request state is malformed")]
    Malformed,
    /// The tag does not match: altered or forged.
    #[error("the request state was altered or forged")]
    BadTag,
    /// Past its expiry.
    #[error("the request state has expired")]
    Expired,
    /// Valid, but issued to another caller.
    #[error("the request state was issued to another caller")]
    OtherCaller,
    /// Valid, but for other arguments.
    #[error("the request state was issued for other arguments")]
    OtherArguments,
    /// Valid, but for another tool (another upstream's with the same definition, say).
    #[error("the request state was issued for another tool")]
    OtherTool,
    /// Valid, but the tool's definition is no longer the one asked about (the approval lapses).
    #[error("the tool changed since the question was asked")]
    ToolChanged {
        /// The fingerprint the question was asked about.
        asked: String,
    },
}

/// Seals a binding: `hex(json).hex(hmac)`.
pub fn seal(key: &[u8], binding: &ConfirmationBinding) -> String {
    seal_payload(key, binding)
}

/// Seals any serializable payload the same way (`hex(json).hex(hmac)`): integrity, not secrecy (the client can read
/// the hex). Payload types must not deserialize as one another (each has a field the others lack), since they share
/// the key.
fn seal_payload<T: Serialize>(key: &[u8], payload: &T) -> String {
    let payload = serde_json::to_vec(payload).unwrap_or_default();
    let tag = tag(key, &payload);
    format!("{}.{}", hex(&payload), hex(&tag))
}

/// Checks a sealed payload's tag in constant time and reads it; [`RequestStateError::Malformed`] or
/// [`RequestStateError::BadTag`] otherwise. The caller checks what the payload binds.
fn open_payload<T: serde::de::DeserializeOwned>(key: &[u8], sealed: &str) -> Result<T, RequestStateError> {
    let (payload_hex, tag_hex) = sealed.split_once('.').ok_or(RequestStateError::Malformed)?;
    let payload = unhex(payload_hex).ok_or(RequestStateError::Malformed)?;
    let given = unhex(tag_hex).ok_or(RequestStateError::Malformed)?;
    let mut mac = mac(key);
    mac.update(&payload);
    mac.verify_slice(&given).map_err(|_| RequestStateError::BadTag)?;
    serde_json::from_slice(&payload).map_err(|_| RequestStateError::Malformed)
}

/// Opens a sealed state for the call `expected` describes (its caller, tool fingerprint and argument digest; its
/// expiry and nonce are not compared) at time `now` (Unix seconds), and returns the sealed binding, whose `nonce`
/// the caller must consume exactly once.
pub fn open(
    key: &[u8],
    sealed: &str,
    expected: &ConfirmationBinding,
    now: u64,
) -> Result<ConfirmationBinding, RequestStateError> {
    let binding: ConfirmationBinding = open_payload(key, sealed)?;
    check_binding(binding, expected, now)
}

/// The checks of [`open`] on a binding whose seal verified (`expected`: the call as the retry made it; its expiry and
/// nonce are not compared).
pub(crate) fn check_binding(
    binding: ConfirmationBinding,
    expected: &ConfirmationBinding,
    now: u64,
) -> Result<ConfirmationBinding, RequestStateError> {
    if now >= binding.expires_at {
        return Err(RequestStateError::Expired);
    }
    if binding.caller != expected.caller {
        return Err(RequestStateError::OtherCaller);
    }
    if binding.tool != expected.tool {
        return Err(RequestStateError::OtherTool);
    }
    if binding.args_digest != expected.args_digest {
        return Err(RequestStateError::OtherArguments);
    }
    if binding.tool_fingerprint != expected.tool_fingerprint {
        return Err(RequestStateError::ToolChanged { asked: binding.tool_fingerprint });
    }
    Ok(binding)
}

/// How a wrapped upstream round's state starts (`crate::upstream_rounds`): toolgate's own confirmation states never
/// do, so the two are told apart before either is opened.
pub(crate) const WRAP_PREFIX: &str = "tgu1.";

/// One round of a modern upstream's `input_required` passed on to a modern client, as toolgate seals it around the
/// upstream's own state (`crate::upstream_rounds` says what each field is for).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct UpstreamRound {
    pub(crate) caller: String,
    pub(crate) upstream: String,
    pub(crate) method: String,
    pub(crate) target: String,
    pub(crate) args_digest: String,
    pub(crate) tool_fingerprint: Option<String>,
    pub(crate) expires_at: u64,
    pub(crate) nonce: String,
    pub(crate) asked: Vec<String>,
    pub(crate) state: Option<String>,
    pub(crate) round: usize,
    pub(crate) confirmed: bool,
}

/// The sealed payload of a wrapped round. Its one top-level field keeps it from reading as a
/// [`ConfirmationBinding`] (and back), since both are sealed under the same key.
#[derive(Serialize, Deserialize)]
struct WrappedRound {
    upstream_round: UpstreamRound,
}

/// Whether a state has the wrapped-round form (its prefix only: nothing is checked).
pub(crate) fn is_wrapped(state: &serde_json::Value) -> bool {
    state.as_str().is_some_and(|state| state.starts_with(WRAP_PREFIX))
}

/// Seals a round: [`WRAP_PREFIX`] and the sealed payload.
pub(crate) fn seal_upstream_round(key: &[u8], round: &UpstreamRound) -> String {
    format!("{WRAP_PREFIX}{}", seal_payload(key, &WrappedRound { upstream_round: round.clone() }))
}

/// Opens a wrapped round's seal (what it binds is the caller's to check).
pub(crate) fn open_upstream_round(key: &[u8], state: &str) -> Result<UpstreamRound, RequestStateError> {
    let sealed = state.strip_prefix(WRAP_PREFIX).ok_or(RequestStateError::Malformed)?;
    open_payload::<WrappedRound>(key, sealed).map(|wrapped| wrapped.upstream_round)
}

/// How a URL-mode confirmation's state starts (`guard::console_round`): it names an approval in the store, and is
/// told apart from a form confirmation's state and a wrapped upstream round before either is opened.
pub(crate) const APPROVAL_PREFIX: &str = "tga1.";

/// The sealed payload of a URL-mode round: the call's binding and the approval it waits on. Its one top-level field
/// keeps it from reading as a [`ConfirmationBinding`] or a wrapped round (all three share the key).
#[derive(Serialize, Deserialize)]
struct ApprovalRound {
    approval_round: ApprovalRoundBinding,
}

#[derive(Serialize, Deserialize)]
struct ApprovalRoundBinding {
    call: ConfirmationBinding,
    approval: String,
}

/// Seals a URL-mode round: [`APPROVAL_PREFIX`] and the sealed call binding with the approval id.
pub(crate) fn seal_approval_round(key: &[u8], call: &ConfirmationBinding, approval: &str) -> String {
    let round =
        ApprovalRound { approval_round: ApprovalRoundBinding { call: call.clone(), approval: approval.to_owned() } };
    format!("{APPROVAL_PREFIX}{}", seal_payload(key, &round))
}

/// Opens a URL-mode round's seal and returns the sealed call binding (to check with [`check_binding`] before its
/// nonce is consumed) and the approval id it names.
pub(crate) fn open_approval_round(key: &[u8], state: &str) -> Result<(ConfirmationBinding, String), RequestStateError> {
    let sealed = state.strip_prefix(APPROVAL_PREFIX).ok_or(RequestStateError::Malformed)?;
    let round = open_payload::<ApprovalRound>(key, sealed)?.approval_round;
    Ok((round.call, round.approval))
}

fn mac(key: &[u8]) -> Hmac<Sha256> {
    // HMAC accepts keys of any length; this cannot fail.
    <Hmac<Sha256> as KeyInit>::new_from_slice(key)
        .unwrap_or_else(|_| <Hmac<Sha256> as KeyInit>::new(&Default::default()))
}

fn tag(key: &[u8], payload: &[u8]) -> Vec<u8> {
    let mut mac = mac(key);
    mac.update(payload);
    mac.finalize().into_bytes().to_vec()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

fn unhex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len()).step_by(2).map(|index| u8::from_str_radix(text.get(index..index + 2)?, 16).ok()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn binding() -> ConfirmationBinding {
        ConfirmationBinding {
            caller: "alice".into(),
            tool: "test__delete".into(),
            tool_fingerprint: "sha256:aa".into(),
            args_digest: "sha256:bb".into(),
            expires_at: 1_000,
            nonce: "approval-1".into(),
        }
    }

    #[test]
    fn a_sealed_state_opens_only_for_its_call_before_expiry_and_names_its_nonce() {
        let sealed = seal(b"key", &binding());
        assert_eq!(open(b"key", &sealed, &binding(), 999).map(|opened| opened.nonce), Ok("approval-1".to_owned()));
        // The caller knows the call, not the nonce: only the call is compared.
        let asked = ConfirmationBinding { nonce: String::new(), expires_at: 0, ..binding() };
        assert_eq!(open(b"key", &sealed, &asked, 999), Ok(binding()));
        // Two questions about the same call are told apart by their nonces.
        let second = seal(b"key", &ConfirmationBinding { nonce: "approval-2".into(), ..binding() });
        assert_ne!(second, sealed);
        assert_eq!(open(b"key", &second, &asked, 999).map(|opened| opened.nonce), Ok("approval-2".to_owned()));
        assert_eq!(open(b"key", &sealed, &binding(), 1_000), Err(RequestStateError::Expired), "expired at its second");
        let other_args = ConfirmationBinding { args_digest: "sha256:cc".into(), ..binding() };
        assert_eq!(open(b"key", &sealed, &other_args, 999), Err(RequestStateError::OtherArguments));
        let other_caller = ConfirmationBinding { caller: "mallory".into(), ..binding() };
        assert_eq!(open(b"key", &sealed, &other_caller, 999), Err(RequestStateError::OtherCaller));
        // The same definition on another upstream is another tool.
        let other_tool = ConfirmationBinding { tool: "prod__delete".into(), ..binding() };
        assert_eq!(open(b"key", &sealed, &other_tool, 999), Err(RequestStateError::OtherTool));
        let changed = ConfirmationBinding { tool_fingerprint: "sha256:dd".into(), ..binding() };
        let asked = Err(RequestStateError::ToolChanged { asked: "sha256:aa".into() });
        assert_eq!(open(b"key", &sealed, &changed, 999), asked);
    }

    #[test]
    fn an_approval_round_names_its_approval_and_reads_as_no_other_state() {
        let sealed = seal_approval_round(b"key", &binding(), "a1");
        assert!(sealed.starts_with(APPROVAL_PREFIX));
        assert_eq!(open_approval_round(b"key", &sealed), Ok((binding(), "a1".to_owned())));
        assert_eq!(open_approval_round(b"other key", &sealed), Err(RequestStateError::BadTag));
        let other = ConfirmationBinding { caller: "mallory".into(), ..binding() };
        assert_eq!(check_binding(binding(), &other, 999), Err(RequestStateError::OtherCaller));
        // Without its prefix it is no form confirmation's state, and a form state is no approval round.
        let bare = sealed.trim_start_matches(APPROVAL_PREFIX);
        assert_eq!(open(b"key", bare, &binding(), 999), Err(RequestStateError::Malformed));
        let form = format!("{APPROVAL_PREFIX}{}", seal(b"key", &binding()));
        assert_eq!(open_approval_round(b"key", &form), Err(RequestStateError::Malformed));
    }

    #[test]
    fn forged_or_altered_states_are_refused() {
        let sealed = seal(b"key", &binding());
        assert_eq!(open(b"other key", &sealed, &binding(), 999), Err(RequestStateError::BadTag));
        let (payload, tag) = sealed.split_once('.').unwrap_or_default();
        let later = ConfirmationBinding { expires_at: 9_999, ..binding() };
        let altered = format!("{}.{tag}", hex(&serde_json::to_vec(&later).unwrap_or_default()));
        assert_eq!(open(b"key", &altered, &binding(), 999), Err(RequestStateError::BadTag));
        assert_eq!(open(b"key", payload, &binding(), 999), Err(RequestStateError::Malformed));
    }
}
