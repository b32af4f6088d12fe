//! The built-in policy engine: ordered rules over effective hints, risk, names, scopes and mode decide each call.
//!
//! A [`PolicySpec`] (plain data, lowered from `[policy]` by the config crate) compiles once with [`compile`] into a
//! [`CompiledPolicy`]; [`decide`] then turns the [`CallFacts`] of one call into a [`Decision`]: `allow`, `confirm`,
//! `deny` or `hide`, with the deciding rule, any restriction, and all four hints with the trust rule behind each.
//! [`visible`] says whether a listing shows a tool. Both are pure, deterministic, allocate only the reason vector,
//! and fail closed: facts that contradict themselves are denied with a reason. The combining order (mode guards, then
//! deny-overrides across configured rules, then the first permitting rule, then the default profile, then the taint
//! floor) is described in `docs/policy.md` and in [`decide`]. No IO, no clocks: whatever changes over time (the
//! session's taint, the mode) comes in as data. [`approval`] computes what a person's approval binds to.

pub mod approval;
mod compile;
mod evaluate;
pub mod glob;
pub mod spec;

use std::str::FromStr;

use serde::Deserialize;

use crate::decision::UnknownName;
use crate::effective::EffectiveHints;
use crate::facts::{Category, category, risk_level};
use crate::trust::TrustedHints;

pub use crate::decision::{Decision, Reason, Verdict};
pub use compile::{CompiledPolicy, MAX_RISK, PolicyError, PolicyProblem, compile};
pub use evaluate::{decide, visible};
pub use spec::{DefaultProfile, MatchSpec, PolicySpec, RuleSpec};

/// The gateway's mode: a switch over every rule.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// Rules and the default profile decide.
    #[default]
    Normal,
    /// Open-world tools (reads included) are denied: nothing leaves or enters from outside.
    Sandbox,
    /// Every tool that is not read-only is hidden.
    ReadOnly,
}

impl Mode {
    /// Every mode.
    pub const ALL: [Mode; 3] = [Mode::Normal, Mode::Sandbox, Mode::ReadOnly];

    /// The stable name (as in config).
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Normal => "normal",
            Mode::Sandbox => "sandbox",
            Mode::ReadOnly => "read-only",
        }
    }

    pub(crate) fn bit(self) -> u8 {
        match self {
            Mode::Normal => 1,
            Mode::Sandbox => 2,
            Mode::ReadOnly => 4,
        }
    }
}

impl FromStr for Mode {
    type Err = UnknownName;

    fn from_str(text: &str) -> Result<Mode, UnknownName> {
        Mode::ALL.into_iter().find(|mode| mode.as_str() == text).ok_or_else(|| UnknownName {
            kind: "mode",
            name: text.to_owned(),
            expected: "normal, sandbox, read-only",
        })
    }
}

/// What the policy knows about one call (or one listed tool).
#[derive(Debug, Clone, Copy)]
pub struct CallFacts<'a> {
    /// The upstream's configured name.
    pub upstream: &'a str,
    /// The upstream's own name for the tool (not the prefixed exposed name).
    pub tool: &'a str,
    /// Effective hints with the trust rule behind each.
    pub hints: &'a TrustedHints,
    /// The tool's category; must equal [`category`] of the hints, or the call is denied.
    pub category: Category,
    /// The tool's risk level; must equal [`risk_level`] of the hints, or the call is denied.
    pub risk_level: u8,
    /// The caller's scopes (empty for a local stdio client).
    pub scopes: &'a [String],
    /// The session has already received an open-world tool's output (see [`taints_session`]).
    pub session_tainted: bool,
}

impl<'a> CallFacts<'a> {
    /// Facts with category and risk derived from the hints, no scopes, and an untainted session.
    pub fn new(upstream: &'a str, tool: &'a str, hints: &'a TrustedHints) -> CallFacts<'a> {
        CallFacts {
            upstream,
            tool,
            hints,
            category: category(&hints.hints),
            risk_level: risk_level(&hints.hints),
            scopes: &[],
            session_tainted: false,
        }
    }

    /// The same facts for a caller with these scopes.
    pub fn with_scopes(self, scopes: &'a [String]) -> CallFacts<'a> {
        CallFacts { scopes, ..self }
    }

    /// The same facts in a session that is (or is not) tainted.
    pub fn with_session_tainted(self, session_tainted: bool) -> CallFacts<'a> {
        CallFacts { session_tainted, ..self }
    }
}

/// Whether a completed call taints its session: an open-world tool's output reached the session.
///
/// `output_reached_session` is false when nothing from the upstream was relayed (refused, failed to send, timed
/// out); an `isError` result from the upstream still counts, since its text came from outside. Once tainted, a
/// session stays tainted (the caller keeps the flag; this function holds no state).
pub fn taints_session(hints: &EffectiveHints, output_reached_session: bool) -> bool {
    output_reached_session && hints.open_world.value
}
