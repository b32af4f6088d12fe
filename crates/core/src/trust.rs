//! Effective hints under upstream trust: which declared hints count, and the rule that produced each value.
//!
//! [`crate::effective::resolve_hints`] believes what a server declares. That is right for an upstream an operator
//! vouches for ([`TrustLevel::Pinned`], [`TrustLevel::Verified`]), but an unknown server could call a deleting tool
//! read-only. For a [`TrustLevel::Untrusted`] upstream a declaration may only *tighten* what a client must assume;
//! a *relaxing* value ([`Hint::relaxed_value`]) counts only when inference independently agrees with at least a
//! configured confidence, otherwise the spec default applies. The same bar holds for inference filling a gap, since
//! inference reads texts the untrusted server wrote. Config overrides always win. Each value records its
//! [`HintRule`] so the relay can show it in `_meta`. Pure: no IO, nothing here rewrites a tool definition.

use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::decision::UnknownName;
use crate::effective::{EffectiveHint, EffectiveHints, HintOverrides, resolve_hints};
use crate::hints::{DeclaredHints, Hint, HintSource};
use crate::infer::Inference;

mod observation;

pub use observation::Observation;

/// The confidence inference must reach to confirm a relaxing hint of an untrusted upstream, unless configured.
pub const DEFAULT_MIN_CONFIDENCE: f32 = 0.8;

/// How far an operator trusts what an upstream declares.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TrustLevel {
    /// Nothing is known about the server: declarations may only tighten (the default).
    #[default]
    Untrusted,
    /// The operator pinned the server's tool definitions: declarations win, inference fills gaps.
    Pinned,
    /// The server's author is known and vouched for: declarations win, inference fills gaps.
    Verified,
}

impl TrustLevel {
    /// Every level, least trusted first.
    pub const ALL: [TrustLevel; 3] = [TrustLevel::Untrusted, TrustLevel::Pinned, TrustLevel::Verified];

    /// The stable lowercase name (as in config and JSON).
    pub fn as_str(self) -> &'static str {
        match self {
            TrustLevel::Untrusted => "untrusted",
            TrustLevel::Pinned => "pinned",
            TrustLevel::Verified => "verified",
        }
    }

    /// True when declared hints win as declared.
    pub fn believes_declarations(self) -> bool {
        self != TrustLevel::Untrusted
    }
}

impl FromStr for TrustLevel {
    type Err = UnknownName;

    fn from_str(text: &str) -> Result<TrustLevel, UnknownName> {
        TrustLevel::ALL.into_iter().find(|level| level.as_str() == text).ok_or_else(|| UnknownName {
            kind: "trust level",
            name: text.to_owned(),
            expected: "untrusted, pinned, verified",
        })
    }
}

/// The rule that produced one effective hint value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum HintRule {
    /// A config override.
    Override,
    /// Declared by a pinned or verified upstream.
    DeclaredTrusted,
    /// Declared by an untrusted upstream, asking for more caution than the relaxed value: kept.
    DeclaredTightening,
    /// Declared relaxing by an untrusted upstream, and inference agrees with enough confidence: kept.
    DeclaredRelaxingConfirmedByInference,
    /// Declared relaxing by an untrusted upstream, inference unsure, and a verification record supports it (every
    /// call succeeded without a write or a connection; [`Observation::supports`]): kept.
    DeclaredRelaxingConfirmedByObservation,
    /// Declared relaxing by an untrusted upstream; the upstream's other tools declare the same value as a house
    /// convention and inference does not see the opposite in this tool: kept ([`Convention`]).
    DeclaredRelaxingConfirmedByConvention,
    /// Declared relaxing by an untrusted upstream without confident agreement: the spec default applies.
    DeclaredRelaxingRejected,
    /// Inferred (nothing declared).
    Inferred,
    /// Inferred relaxing for an untrusted upstream with too little confidence: the spec default applies.
    InferredRelaxingRejected,
    /// Follows from another hint (read-only implies the other two; a declared destructive tool is not read-only).
    Implied,
    /// Nothing said anything.
    SpecDefault,
    /// A verification record caught the tool doing what the relaxed value denies: the tight value, whatever the
    /// upstream's trust and whatever was declared or inferred ([`Observation::contradiction`]).
    ObservedContradiction,
}

impl HintRule {
    /// Every rule, in the order of the variants.
    pub const ALL: [HintRule; 12] = [
        HintRule::Override,
        HintRule::DeclaredTrusted,
        HintRule::DeclaredTightening,
        HintRule::DeclaredRelaxingConfirmedByInference,
        HintRule::DeclaredRelaxingConfirmedByObservation,
        HintRule::DeclaredRelaxingConfirmedByConvention,
        HintRule::DeclaredRelaxingRejected,
        HintRule::Inferred,
        HintRule::InferredRelaxingRejected,
        HintRule::Implied,
        HintRule::SpecDefault,
        HintRule::ObservedContradiction,
    ];

    /// The stable kebab-case name used in `_meta`, decisions and policy rules.
    pub fn as_str(self) -> &'static str {
        match self {
            HintRule::Override => "override",
            HintRule::DeclaredTrusted => "declared-trusted",
            HintRule::DeclaredTightening => "declared-tightening",
            HintRule::DeclaredRelaxingConfirmedByInference => "declared-relaxing-confirmed-by-inference",
            HintRule::DeclaredRelaxingConfirmedByObservation => "declared-relaxing-confirmed-by-observation",
            HintRule::DeclaredRelaxingConfirmedByConvention => "declared-relaxing-confirmed-by-convention",
            HintRule::DeclaredRelaxingRejected => "declared-relaxing-rejected",
            HintRule::Inferred => "inferred",
            HintRule::InferredRelaxingRejected => "inferred-relaxing-rejected",
            HintRule::Implied => "implied",
            HintRule::SpecDefault => "spec-default",
            HintRule::ObservedContradiction => "observed-contradiction",
        }
    }

    /// The [`HintSource`] a value produced by this rule carries in [`EffectiveHints`].
    pub fn source(self) -> HintSource {
        match self {
            HintRule::Override => HintSource::Overridden,
            HintRule::DeclaredTrusted
            | HintRule::DeclaredTightening
            | HintRule::DeclaredRelaxingConfirmedByInference
            | HintRule::DeclaredRelaxingConfirmedByObservation
            | HintRule::DeclaredRelaxingConfirmedByConvention => HintSource::Declared,
            HintRule::ObservedContradiction => HintSource::Observed,
            HintRule::Inferred => HintSource::Inferred,
            HintRule::Implied => HintSource::Implied,
            HintRule::DeclaredRelaxingRejected | HintRule::InferredRelaxingRejected | HintRule::SpecDefault => {
                HintSource::Default
            }
        }
    }

    /// A bit for sets of rules (`1 << index in ALL`).
    pub(crate) fn bit(self) -> u16 {
        1 << (self as u16)
    }
}

impl FromStr for HintRule {
    type Err = UnknownName;

    fn from_str(text: &str) -> Result<HintRule, UnknownName> {
        HintRule::ALL.into_iter().find(|rule| rule.as_str() == text).ok_or_else(|| UnknownName {
            kind: "hint rule",
            name: text.to_owned(),
            expected: "override, declared-trusted, declared-tightening, declared-relaxing-confirmed-by-inference, \
                       declared-relaxing-confirmed-by-observation, declared-relaxing-confirmed-by-convention, \
                       declared-relaxing-rejected, inferred, inferred-relaxing-rejected, implied, spec-default, \
                       observed-contradiction",
        })
    }
}

/// The rule behind each of the four effective hints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct HintRules {
    /// `readOnlyHint`.
    #[serde(rename = "readOnlyHint")]
    pub read_only: HintRule,
    /// `destructiveHint`.
    #[serde(rename = "destructiveHint")]
    pub destructive: HintRule,
    /// `idempotentHint`.
    #[serde(rename = "idempotentHint")]
    pub idempotent: HintRule,
    /// `openWorldHint`.
    #[serde(rename = "openWorldHint")]
    pub open_world: HintRule,
}

impl HintRules {
    /// The rule behind one hint.
    pub fn get(&self, hint: Hint) -> HintRule {
        match hint {
            Hint::ReadOnly => self.read_only,
            Hint::Destructive => self.destructive,
            Hint::Idempotent => self.idempotent,
            Hint::OpenWorld => self.open_world,
        }
    }
}

/// Effective hints with the rule behind each value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct TrustedHints {
    /// The values a client should assume (serialized exactly as [`resolve_hints`]' output).
    pub hints: EffectiveHints,
    /// Which rule produced each value.
    pub rules: HintRules,
}

impl TrustedHints {
    /// True when the four rules agree with the four sources (a value built by [`resolve_trusted_hints`] always does).
    pub fn is_consistent(&self) -> bool {
        Hint::ALL.into_iter().all(|hint| self.rules.get(hint).source() == self.hints.get(hint).source)
    }
}

/// Merges overrides, declarations and inference into effective hints, believing declarations as far as `trust` says.
///
/// `inference` is `None` when the caller does not want inference; then no relaxing declaration of an untrusted
/// upstream can be confirmed. `min_confidence` is the bar for confirming a relaxing value of an untrusted upstream
/// ([`DEFAULT_MIN_CONFIDENCE`] unless configured); a NaN bar confirms nothing.
pub fn resolve_trusted_hints(
    overrides: &HintOverrides,
    declared: &DeclaredHints,
    inference: Option<&Inference>,
    trust: TrustLevel,
    min_confidence: f32,
) -> TrustedHints {
    resolve_trusted_hints_with(overrides, declared, inference, trust, min_confidence, &Convention::default())
}

/// [`resolve_trusted_hints`] with what the upstream's *other* tools declare ([`Convention::of`] over its listing,
/// then [`Convention::without`] this tool): for an untrusted upstream a relaxing declaration that follows the
/// house convention is kept unless inference sees the opposite in this tool ([`CONVENTION_VETO`]).
pub fn resolve_trusted_hints_with(
    overrides: &HintOverrides,
    declared: &DeclaredHints,
    inference: Option<&Inference>,
    trust: TrustLevel,
    min_confidence: f32,
    convention: &Convention,
) -> TrustedHints {
    resolve_trusted_hints_observed(overrides, declared, inference, trust, min_confidence, convention, None)
}

/// [`resolve_trusted_hints_with`] with a verification record's [`Observation`] of the tool. A contradiction sets
/// the hint's tight value whatever the trust ([`HintRule::ObservedContradiction`]; only a config override beats
/// it); support lets an untrusted upstream's relaxing `readOnlyHint` or `openWorldHint` count where inference alone
/// is unsure, unless inference confidently sees the opposite ([`CONVENTION_VETO`]) or, for `readOnlyHint`, the
/// tool's own texts state a write ([`crate::infer::InferredHint::vetoed`];
/// [`HintRule::DeclaredRelaxingConfirmedByObservation`]).
pub fn resolve_trusted_hints_observed(
    overrides: &HintOverrides,
    declared: &DeclaredHints,
    inference: Option<&Inference>,
    trust: TrustLevel,
    min_confidence: f32,
    convention: &Convention,
    observation: Option<&Observation>,
) -> TrustedHints {
    // A contradiction is applied as an override would be, so the read-only implication follows it (a tool seen
    // writing gets its destructive and idempotent hints picked, not implied), then relabelled as observed.
    let mut effective_overrides = overrides.clone();
    let mut observed = Vec::new();
    for hint in Hint::ALL {
        if overrides.get(hint).is_none()
            && let Some(value) = observation.and_then(|observation| observation.contradiction(hint))
        {
            observation::set_hint(&mut effective_overrides, hint, value);
            observed.push(hint);
        }
    }
    let mut trusted = if trust.believes_declarations() {
        let hints = resolve_hints(&effective_overrides, declared, inference);
        let rule = |hint: Hint| match hints.get(hint).source {
            HintSource::Overridden => HintRule::Override,
            HintSource::Declared => HintRule::DeclaredTrusted,
            HintSource::Implied => HintRule::Implied,
            HintSource::Inferred => HintRule::Inferred,
            HintSource::Observed => HintRule::ObservedContradiction,
            HintSource::Default => HintRule::SpecDefault,
        };
        let rules = HintRules {
            read_only: rule(Hint::ReadOnly),
            destructive: rule(Hint::Destructive),
            idempotent: rule(Hint::Idempotent),
            open_world: rule(Hint::OpenWorld),
        };
        TrustedHints { hints, rules }
    } else {
        resolve_untrusted(&effective_overrides, declared, inference, min_confidence, convention, observation)
    };
    for hint in observed {
        let value = trusted.hints.get(hint).value;
        // The implication may have replaced the observed value (a destructive hint under an overridden read-only).
        if trusted.rules.get(hint) == HintRule::Override {
            set_effective(&mut trusted, hint, EffectiveHint { value, source: HintSource::Observed });
        }
    }
    trusted
}

fn set_effective(trusted: &mut TrustedHints, hint: Hint, effective: EffectiveHint) {
    let (slot, rule) = match hint {
        Hint::ReadOnly => (&mut trusted.hints.read_only, &mut trusted.rules.read_only),
        Hint::Destructive => (&mut trusted.hints.destructive, &mut trusted.rules.destructive),
        Hint::Idempotent => (&mut trusted.hints.idempotent, &mut trusted.rules.idempotent),
        Hint::OpenWorld => (&mut trusted.hints.open_world, &mut trusted.rules.open_world),
    };
    *slot = effective;
    *rule = HintRule::ObservedContradiction;
}

/// Fewest other tools of the upstream that must declare a hint for a convention.
pub const CONVENTION_MIN_VOTES: u32 = 3;
/// Least share of those declarations that must agree.
pub const CONVENTION_MIN_AGREEMENT: f32 = 0.8;
/// Least share for a read-only convention: stricter than the other hints', because a wrongly relaxed
/// `readOnlyHint` lets a write through without a person.
pub const READ_ONLY_CONVENTION_AGREEMENT: f32 = 0.9;
/// A convention does not cover a tool whose inference holds the opposite value with at least this confidence: a
/// web fetcher on a server of local tools stays open-world whatever its siblings declare.
pub const CONVENTION_VETO: f32 = 0.7;
/// The hints a convention may speak for: how a server files its writers (destructive or not, retry-safe or not) and
/// whether its tools stay inside its own backend are house style, and the other tools show it. `readOnlyHint` too,
/// under a stricter bar ([`READ_ONLY_CONVENTION_AGREEMENT`]) and never for a tool whose own texts state a write (the
/// stated-effect veto, [`crate::infer::InferredHint::vetoed`]): a server whose other tools are reads (a reporting
/// or analytics server) is believed about one more read unless inference sees a write in it. A server honest about
/// nine tools can still lie about the tenth; the synthetic lies of the eval are exactly that, and leave-one-server-out
/// they were caught as often with the read-only convention as without it (`cargo xtask eval`; see
/// docs/inference.md).
pub const CONVENTION_HINTS: [Hint; 4] = [Hint::ReadOnly, Hint::Destructive, Hint::Idempotent, Hint::OpenWorld];

/// The hints whose relaxed value lets a call through without a person under the standard profile: a convention backs
/// one of them only where inference leans to the declared value itself (below the confirmation bar), never against
/// it. An untrusted server votes with its own declarations, so a listing padded with honest reads must not carry a
/// tool that inference reads as a write.
pub const CONVENTION_FOLLOWS_INFERENCE: [Hint; 2] = [Hint::ReadOnly, Hint::Destructive];

/// What an upstream's tools declare, hint by hint: how many declare `true` and how many `false`. Built from the
/// declarations of one upstream's listing; a tool's own declaration must be taken out ([`Convention::without`])
/// before it speaks for that tool, so a tool never vouches for itself.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Convention {
    /// Per hint in [`Hint::ALL`] order: (declared `true`, declared `false`).
    votes: [(u32, u32); 4],
}

impl Convention {
    /// The votes of a listing's declarations. `destructiveHint` and `idempotentHint` count only on tools that
    /// declare `readOnlyHint: false` (they mean nothing on a read).
    pub fn of<'a>(declarations: impl IntoIterator<Item = &'a DeclaredHints>) -> Convention {
        let mut convention = Convention::default();
        for declared in declarations {
            convention.count(declared, 1);
        }
        convention
    }

    /// The votes of a listing's definitions, their annotations normalized as [`crate::assess_tool`] reads them
    /// (what the catalog and the views call, so they agree).
    pub fn of_definitions<'a>(tools: impl IntoIterator<Item = &'a crate::ToolDefinition>) -> Convention {
        let declared: Vec<DeclaredHints> =
            tools.into_iter().map(|tool| crate::normalize::normalize_annotations(tool).declared).collect();
        Convention::of(&declared)
    }

    /// The votes without one tool's declarations (which must have been counted in).
    pub fn without(&self, declared: &DeclaredHints) -> Convention {
        let mut convention = *self;
        convention.count(declared, -1);
        convention
    }

    fn count(&mut self, declared: &DeclaredHints, step: i32) {
        for (index, hint) in Hint::ALL.into_iter().enumerate() {
            let counts = !matches!(hint, Hint::Destructive | Hint::Idempotent) || declared.read_only == Some(false);
            if let Some(value) = declared.get(hint).filter(|_| counts) {
                let slot = if value { &mut self.votes[index].0 } else { &mut self.votes[index].1 };
                *slot = slot.saturating_add_signed(step);
            }
        }
    }

    /// The value the declarations agree on, when enough declare the hint and enough of them agree.
    pub fn says(&self, hint: Hint) -> Option<bool> {
        let index = Hint::ALL.iter().position(|each| *each == hint)?;
        let (yes, no) = self.votes[index];
        let total = yes + no;
        let value = yes >= no;
        let agreeing = if value { yes } else { no };
        let agreement = if hint == Hint::ReadOnly { READ_ONLY_CONVENTION_AGREEMENT } else { CONVENTION_MIN_AGREEMENT };
        (total >= CONVENTION_MIN_VOTES && agreeing as f32 >= agreement * total as f32).then_some(value)
    }
}

fn resolve_untrusted(
    overrides: &HintOverrides,
    declared: &DeclaredHints,
    inference: Option<&Inference>,
    min_confidence: f32,
    convention: &Convention,
    observation: Option<&Observation>,
) -> TrustedHints {
    let confirmed = |hint: Hint, value: bool| {
        inference.is_some_and(|inference| {
            let inferred = inference.get(hint);
            inferred.value == value && inferred.confidence >= min_confidence
        })
    };
    // The house convention backs a relaxing declaration unless inference confidently sees the opposite here, or
    // (for a read) the tool's own texts state a write, however unsure inference is otherwise. For the hints that let
    // a call pass without a person (read-only, not destructive) it backs only a value inference itself leans to:
    // every vote comes from the same untrusted server, which could otherwise pad its listing with honest reads to
    // carry one risky tool ([`CONVENTION_FOLLOWS_INFERENCE`]).
    let by_convention = |hint: Hint, value: bool| {
        CONVENTION_HINTS.contains(&hint)
            && convention.says(hint) == Some(value)
            && !inference.is_some_and(|inference| {
                let inferred = inference.get(hint);
                let veto = if CONVENTION_FOLLOWS_INFERENCE.contains(&hint) { 0.0 } else { CONVENTION_VETO };
                (inferred.value != value && inferred.confidence >= veto)
                    || (hint == Hint::ReadOnly && inferred.vetoed())
            })
    };
    // A record of quiet successful calls backs a relaxing declaration unless inference confidently sees the
    // opposite, or (for a read) the tool's own texts state a write: the calls used generated arguments, a server
    // can tell it is traced, and the texts may describe what the calls did not reach.
    let by_observation = |hint: Hint, value: bool| {
        observation.is_some_and(|observation| observation.supports(hint))
            && !inference.is_some_and(|inference| {
                let inferred = inference.get(hint);
                (inferred.value != value && inferred.confidence >= CONVENTION_VETO)
                    || (hint == Hint::ReadOnly && inferred.vetoed())
            })
    };
    let pick = |hint: Hint| -> (bool, HintRule) {
        let relaxed = hint.relaxed_value();
        if let Some(value) = overrides.get(hint) {
            (value, HintRule::Override)
        } else if let Some(value) = declared.get(hint) {
            if value != relaxed {
                (value, HintRule::DeclaredTightening)
            } else if confirmed(hint, value) {
                (value, HintRule::DeclaredRelaxingConfirmedByInference)
            } else if by_observation(hint, value) {
                (value, HintRule::DeclaredRelaxingConfirmedByObservation)
            } else if by_convention(hint, value) {
                (value, HintRule::DeclaredRelaxingConfirmedByConvention)
            } else {
                (hint.spec_default(), HintRule::DeclaredRelaxingRejected)
            }
        } else if let Some(inference) = inference {
            let value = inference.get(hint).value;
            if value != relaxed || confirmed(hint, value) {
                (value, HintRule::Inferred)
            } else {
                (hint.spec_default(), HintRule::InferredRelaxingRejected)
            }
        } else {
            (hint.spec_default(), HintRule::SpecDefault)
        }
    };
    let mut read_only = pick(Hint::ReadOnly);
    // A declared `destructiveHint: true` says the tool writes. From an untrusted server that is the tighter of two
    // contradicting claims, so only an override may still call the tool read-only.
    let declared_writer = declared.destructive == Some(true) && overrides.destructive != Some(false);
    if read_only.0 && declared_writer && read_only.1 != HintRule::Override {
        read_only = (false, HintRule::Implied);
    }
    let (destructive, idempotent) = if read_only.0 {
        ((false, HintRule::Implied), (true, HintRule::Implied))
    } else {
        (pick(Hint::Destructive), pick(Hint::Idempotent))
    };
    let open_world = pick(Hint::OpenWorld);
    let hint = |(value, rule): (bool, HintRule)| EffectiveHint { value, source: rule.source() };
    TrustedHints {
        hints: EffectiveHints {
            read_only: hint(read_only),
            destructive: hint(destructive),
            idempotent: hint(idempotent),
            open_world: hint(open_world),
        },
        rules: HintRules {
            read_only: read_only.1,
            destructive: destructive.1,
            idempotent: idempotent.1,
            open_world: open_world.1,
        },
    }
}

#[cfg(test)]
mod tests;
