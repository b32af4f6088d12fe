//! The verdict on one tool call or listing, with the reasons that produced it.
//!
//! A decision is data: the verdict, and every reason (which rule, which hint, from which source). The proxy turns a
//! decision into a reply; it never inspects a bare boolean. Today the only policy is [`allow_everything`]; the
//! guardrails add real rules (built-in fast path, Cedar for richer conditions) that return the same type.

use serde::Serialize;

use crate::effective::EffectiveHints;

/// What happens to a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Forward it.
    Allow,
    /// Forward it only after a person approves.
    Confirm,
    /// Refuse it with a message the model sees.
    Deny,
    /// Behave as if the tool did not exist.
    Hide,
}

/// One reason behind a verdict.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Reason {
    /// The rule that applied (stable id, e.g. `default-allow`, `destructive-confirm`).
    pub rule: String,
    /// What the rule saw, in one line.
    pub detail: String,
}

/// A verdict and its reasons.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Decision {
    /// The verdict.
    pub verdict: Verdict,
    /// Why, strongest reason first; never empty.
    pub reasons: Vec<Reason>,
}

/// The policy of a gateway without guardrails: every call is allowed, and the decision says so.
pub fn allow_everything(hints: &EffectiveHints) -> Decision {
    let _ = hints;
    Decision {
        verdict: Verdict::Allow,
        reasons: vec![Reason { rule: "no-policy".into(), detail: "no policy is configured: every call is relayed".into() }],
    }
}
