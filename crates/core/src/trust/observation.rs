//! A verification record's observation of a tool (`toolgate verify`), as the trust rule takes it: which tight
//! value each contradiction forces and which relaxed values quiet calls support. Pure data; the rule that weighs it
//! is [`super::resolve_trusted_hints_observed`], and nothing here reads a record or decides a hint.

use crate::hints::{DeclaredHints, Hint};

/// What a verification record (`toolgate verify`) saw a tool do, as evidence for the trust rule: a separate input,
/// never mixed into inference. The caller binds it to the tool (the record's fingerprint is the definition's and
/// its command the upstream's); a changed definition has no record.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Observation {
    /// The record's name (`verification/12`), shown in `_meta` and the console.
    pub record: String,
    /// Some call wrote, or tried to.
    pub wrote: bool,
    /// Some call connected out, or tried to.
    pub connected: bool,
    /// A repeated identical call changed the state again.
    pub repeat_changed: bool,
    /// Some call removed or overwrote existing data.
    pub destroyed: bool,
    /// Every call succeeded without a write or a connection.
    pub supported: bool,
}

impl Observation {
    /// The tight value the observation forces on `hint`, when the tool was seen doing what the relaxed value
    /// denies: it wrote (not read-only), destroyed (destructive), changed state on a repeat (not idempotent),
    /// connected (open-world).
    pub fn contradiction(&self, hint: Hint) -> Option<bool> {
        let seen = match hint {
            Hint::ReadOnly => self.wrote,
            Hint::Destructive => self.destroyed,
            Hint::Idempotent => self.repeat_changed,
            Hint::OpenWorld => self.connected,
        };
        seen.then(|| !hint.relaxed_value())
    }

    /// True when the record supports the relaxed value of `hint`: quiet successful calls say a tool did not write
    /// and did not connect, so they speak for `readOnlyHint` and `openWorldHint` only.
    pub fn supports(&self, hint: Hint) -> bool {
        self.supported && matches!(hint, Hint::ReadOnly | Hint::OpenWorld) && self.contradiction(hint).is_none()
    }
}

/// Sets one hint of a set of declared values (or overrides).
pub(super) fn set_hint(hints: &mut DeclaredHints, hint: Hint, value: bool) {
    let slot = match hint {
        Hint::ReadOnly => &mut hints.read_only,
        Hint::Destructive => &mut hints.destructive,
        Hint::Idempotent => &mut hints.idempotent,
        Hint::OpenWorld => &mut hints.open_world,
    };
    *slot = Some(value);
}
