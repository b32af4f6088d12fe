//! Where an approval stands ([`ApprovalState`]) and why one could not be used ([`ConsumeRefusal`]): plain values
//! that both the approvals queue and the store's errors name (`StoreError::ApprovalRefused` carries a refusal), so
//! they sit below both and neither imports the other for them.
//!
//! Values only: no queries, no store errors (the queue turns an unknown stored state into `StoreError::Corrupt`).

use serde::Serialize;

/// Where an approval stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalState {
    /// Waiting for a decision.
    Pending,
    /// Approved, not used yet.
    Approved,
    /// Denied.
    Denied,
    /// Approved and used.
    Consumed,
    /// Its call stopped waiting before the approval was used (timed out, cancelled, client gone): nothing can
    /// decide or use it, and [`ApprovalRecord::lapsed_why`](crate::ApprovalRecord::lapsed_why) says why. Derived
    /// from the row's `lapsed_why` (the stored state stays what it was), so older readers of the table see an
    /// expired approval.
    Lapsed,
}

impl ApprovalState {
    /// The state's stored text.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            ApprovalState::Pending => "pending",
            ApprovalState::Approved => "approved",
            ApprovalState::Denied => "denied",
            ApprovalState::Consumed => "consumed",
            ApprovalState::Lapsed => "lapsed",
        }
    }

    /// The state stored as `text` (`lapsed` is never stored: it is derived from the row's `lapsed_why`).
    pub(crate) fn parse(text: &str) -> Option<ApprovalState> {
        [ApprovalState::Pending, ApprovalState::Approved, ApprovalState::Denied, ApprovalState::Consumed]
            .into_iter()
            .find(|state| state.as_str() == text)
    }
}

/// Why [`ApprovalStore::consume`](crate::ApprovalStore::consume) refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConsumeRefusal {
    /// No such approval.
    #[error("no such approval")]
    NotFound,
    /// It was not approved (pending or denied).
    #[error("the approval is {0:?}, not approved")]
    NotApproved(ApprovalState),
    /// It was already used.
    #[error("the approval was already used")]
    AlreadyUsed,
    /// It expired.
    #[error("the approval has expired")]
    Expired,
    /// The tool's definition is not the one approved.
    #[error("the tool's definition changed since it was approved")]
    FingerprintMismatch,
    /// The arguments are not the ones approved.
    #[error("the arguments differ from the approved ones")]
    ArgsMismatch,
}
