//! Evaluating a [`CompiledPolicy`] against one call: [`decide`] and [`visible`].
//!
//! The hot path: bit tests first, globs and scopes last, rules skipped once they cannot change the outcome, and
//! one allocation (the reason vector); every reason text is static or shared with the compiled rule.

use std::borrow::Cow;

use crate::confusable::skeleton;
use crate::decision::{Decision, Reason, Text, Verdict};
use crate::effective::EffectiveHints;
use crate::facts::{category, risk_level};
use crate::hints::Hint;
use crate::policy::compile::{CompiledPolicy, CompiledRule, category_bit};
use crate::policy::glob::Glob;
use crate::policy::spec::DefaultProfile;
use crate::policy::{CallFacts, Mode};
use crate::trust::HintRule;

/// Room for the deciding reason, a second one (restriction or taint) and the four hints, plus `visible`'s own.
const REASONS: usize = 8;

/// Decides one call.
///
/// In order:
/// 1. **Fail closed**: facts that contradict themselves (hint sources against trust rules, a read-only tool marked
///    destructive, a category or risk level that does not follow from the hints, an empty name) are denied
///    (`fail-closed`).
/// 2. **Refusals**: the mode's guard (`read-only` hides every tool that is not read-only, `sandbox` denies every
///    open-world tool) and every configured `deny`/`hide` rule that matches, wherever it stands in the list (deny
///    overrides). The strictest wins (hide over deny; at equal strictness the mode guard, then the earlier rule).
/// 3. **Permits**: otherwise the first configured `allow`/`confirm` rule that matches decides.
/// 4. **Default profile**: otherwise `standard` allows reads and closed-world additive writes and confirms
///    destructive and open-world writes; with `none` the call is denied (`no-rule-matched`).
/// 5. **Taint floor**: an `allow` of an open-world write in a tainted session becomes `confirm` (`session-taint`),
///    unless taint is off or the permitting rule itself has a `session_tainted` condition.
///
/// The reasons hold the deciding rule first, then a restriction or permit it overrode, then one reason per hint
/// naming the trust rule behind its value.
pub fn decide(policy: &CompiledPolicy, call: &CallFacts<'_>) -> Decision {
    let mut reasons = Vec::with_capacity(REASONS);
    let hints = &call.hints.hints;
    let verdict = if let Some(problem) = contradiction(call) {
        reasons.push(Reason { rule: Text::from_static("fail-closed"), detail: Text::from_static(problem) });
        Verdict::Deny
    } else {
        combine(policy, call, &mut reasons)
    };
    for hint in Hint::ALL {
        let rule = call.hints.rules.get(hint);
        let value = hints.get(hint).value;
        reasons.push(Reason {
            rule: Text::from_static(rule.as_str()),
            detail: Text::from_static(hint_detail(rule, hint, value)),
        });
    }
    Decision { verdict, reasons }
}

/// Whether a listing shows the tool: `hide` when a call would be hidden, otherwise `allow` with a first reason
/// (`visible`) saying what a call would get, followed by that call decision's reasons.
///
/// A denied tool stays listed (the model learns why when it calls it); only `hide` removes it.
pub fn visible(policy: &CompiledPolicy, call: &CallFacts<'_>) -> Decision {
    let mut decision = decide(policy, call);
    let detail = match decision.verdict {
        Verdict::Hide => return decision,
        Verdict::Allow => "listed; a call would be allowed",
        Verdict::Confirm => "listed; a call would need a person's approval",
        Verdict::Deny => "listed; a call would be denied",
    };
    decision.reasons.insert(0, Reason { rule: Text::from_static("visible"), detail: Text::from_static(detail) });
    decision.verdict = Verdict::Allow;
    decision
}

fn contradiction(call: &CallFacts<'_>) -> Option<&'static str> {
    let hints = &call.hints.hints;
    if call.upstream.is_empty() {
        Some("the call names no upstream")
    } else if call.tool.is_empty() {
        Some("the call names no tool")
    } else if !call.hints.is_consistent() {
        Some("the hints' sources disagree with their trust rules")
    } else if hints.read_only.value && (hints.destructive.value || !hints.idempotent.value) {
        Some("a read-only tool is marked destructive or not idempotent")
    } else if call.category != category(hints) {
        Some("the category does not follow from the hints")
    } else if call.risk_level != risk_level(hints) {
        Some("the risk level does not follow from the hints")
    } else {
        None
    }
}

/// Steps 2 to 5 of [`decide`], for facts that hold together.
fn combine(policy: &CompiledPolicy, call: &CallFacts<'_>, reasons: &mut Vec<Reason>) -> Verdict {
    let hints = &call.hints.hints;
    let guard = match policy.mode {
        Mode::ReadOnly if !hints.read_only.value => {
            Some((Verdict::Hide, reason("mode-read-only", "read-only mode hides every tool that is not read-only")))
        }
        Mode::Sandbox if hints.open_world.value => {
            Some((Verdict::Deny, reason("mode-sandbox", "sandbox mode denies every open-world tool")))
        }
        _ => None,
    };
    let subject = Subject::new(call);
    let mut refusing: Option<&CompiledRule> = None;
    let mut permitting: Option<&CompiledRule> = None;
    for rule in policy.rules.iter() {
        let useful = if rule.effect.refuses() {
            refusing.is_none_or(|found| rule.effect.strictness() > found.effect.strictness())
        } else {
            permitting.is_none() && refusing.is_none() && guard.is_none()
        };
        if !useful || !subject.matches(rule, policy.mode) {
            continue;
        }
        if rule.effect.refuses() {
            refusing = Some(rule);
        } else {
            permitting = Some(rule);
        }
    }
    let refusal = refusing.map(|rule| (rule.effect, rule_reason(rule)));
    match (guard, refusal) {
        (Some((guard_verdict, guard_reason)), Some((rule_verdict, rule_reason))) => {
            let (first, second, verdict) = if rule_verdict.strictness() > guard_verdict.strictness() {
                (rule_reason, guard_reason, rule_verdict)
            } else {
                (guard_reason, rule_reason, guard_verdict)
            };
            reasons.push(first);
            reasons.push(second);
            return verdict;
        }
        (Some((verdict, first)), None) | (None, Some((verdict, first))) => {
            reasons.push(first);
            return verdict;
        }
        (None, None) => {}
    }
    let (verdict, base, taint_is_explicit) = match permitting {
        Some(rule) => (rule.effect, rule_reason(rule), rule.session_tainted.is_some()),
        None => {
            let (verdict, base) = default_profile(policy.defaults, hints);
            (verdict, base, false)
        }
    };
    let open_world_write = hints.writes() && hints.open_world.value;
    if verdict == Verdict::Allow
        && call.session_tainted
        && policy.session_taint
        && !taint_is_explicit
        && open_world_write
    {
        reasons.push(reason(
            "session-taint",
            "an open-world tool's output entered this session: open-world writes need a person's approval",
        ));
        reasons.push(base);
        return Verdict::Confirm;
    }
    reasons.push(base);
    verdict
}

fn reason(rule: &'static str, detail: &'static str) -> Reason {
    Reason { rule: Text::from_static(rule), detail: Text::from_static(detail) }
}

fn rule_reason(rule: &CompiledRule) -> Reason {
    Reason { rule: rule.id.clone(), detail: rule.detail.clone() }
}

fn default_profile(defaults: DefaultProfile, hints: &EffectiveHints) -> (Verdict, Reason) {
    match defaults {
        DefaultProfile::None => (
            Verdict::Deny,
            reason("no-rule-matched", "no configured rule permits this call and the default profile is off"),
        ),
        DefaultProfile::Standard if hints.read_only.value => {
            (Verdict::Allow, reason("default-read-allow", "read-only tool: allowed by the default profile"))
        }
        DefaultProfile::Standard if hints.may_destroy() => (
            Verdict::Confirm,
            reason("default-destructive-confirm", "the tool may destroy or overwrite data: a person must approve"),
        ),
        DefaultProfile::Standard if hints.open_world.value => (
            Verdict::Confirm,
            reason("default-open-world-write-confirm", "the tool acts on the outside world: a person must approve"),
        ),
        DefaultProfile::Standard => (
            Verdict::Allow,
            reason("default-write-allow", "additive closed-world write: allowed by the default profile"),
        ),
    }
}

/// The call's facts as bits, computed once per decision.
struct Subject<'a> {
    call: &'a CallFacts<'a>,
    /// The tool's name as a person reads it (`core::confusable::skeleton`), when that differs from the name: a
    /// look-alike (`dеlete_file` with a Cyrillic `е`) is matched by the rules written for what it looks like.
    tool_skeleton: Option<String>,
    hint_bits: u8,
    category_bit: u8,
    rule_bits: [u16; 4],
    any_rule_bits: u16,
}

impl<'a> Subject<'a> {
    fn new(call: &'a CallFacts<'a>) -> Subject<'a> {
        let mut hint_bits = 0;
        let mut rule_bits = [0; 4];
        for (index, hint) in Hint::ALL.into_iter().enumerate() {
            hint_bits |= u8::from(call.hints.hints.get(hint).value) << index;
            rule_bits[index] = call.hints.rules.get(hint).bit();
        }
        let any_rule_bits = rule_bits.iter().fold(0, |bits, bit| bits | bit);
        let tool_skeleton = match skeleton(call.tool) {
            Cow::Borrowed(_) => None,
            Cow::Owned(skeleton) => Some(skeleton),
        };
        Subject { call, tool_skeleton, hint_bits, category_bit: category_bit(call.category), rule_bits, any_rule_bits }
    }

    fn matches(&self, rule: &CompiledRule, mode: Mode) -> bool {
        let call = self.call;
        (self.hint_bits ^ rule.hint_values) & rule.hint_mask == 0
            && rule.categories & self.category_bit != 0
            && (rule.min_risk..=rule.max_risk).contains(&call.risk_level)
            && rule.modes & mode.bit() != 0
            && rule.session_tainted.is_none_or(|tainted| tainted == call.session_tainted)
            && rule.hint_rules.iter().zip(self.rule_bits).all(|(allowed, bit)| allowed & bit != 0)
            && (rule.any_hint_rule == 0 || rule.any_hint_rule & self.any_rule_bits != 0)
            && rule.upstream.as_deref().is_none_or(|globs| globs.iter().any(|glob| glob.matches(call.upstream)))
            && rule.tool.as_deref().is_none_or(|globs| globs.iter().any(|glob| self.tool_matches(glob, rule.effect)))
            && rule.scopes.iter().all(|scope| has_scope(call.scopes, scope))
            && rule
                .missing_scopes
                .as_deref()
                .is_none_or(|scopes| scopes.iter().any(|scope| !has_scope(call.scopes, scope)))
    }
}

impl Subject<'_> {
    /// A rule's tool glob against the name, and for every rule but `allow` also against its skeleton: a look-alike
    /// never escapes a refusal or a confirmation written for the name it imitates, and never gains an `allow`
    /// written for another name.
    fn tool_matches(&self, glob: &Glob, effect: Verdict) -> bool {
        glob.matches(self.call.tool)
            || (effect != Verdict::Allow
                && self.tool_skeleton.as_deref().is_some_and(|skeleton| glob.matches(skeleton)))
    }
}

fn has_scope(held: &[String], wanted: &str) -> bool {
    held.iter().any(|scope| scope == wanted)
}

/// `readOnlyHint=true (declared-trusted)` and the like, as static text for every rule, hint and value.
macro_rules! hint_details {
    ($($rule:ident = $name:literal),* $(,)?) => {
        fn hint_detail(rule: HintRule, hint: Hint, value: bool) -> &'static str {
            match (rule, hint, value) {
                $(
                    (HintRule::$rule, Hint::ReadOnly, true) => concat!("readOnlyHint=true (", $name, ")"),
                    (HintRule::$rule, Hint::ReadOnly, false) => concat!("readOnlyHint=false (", $name, ")"),
                    (HintRule::$rule, Hint::Destructive, true) => concat!("destructiveHint=true (", $name, ")"),
                    (HintRule::$rule, Hint::Destructive, false) => concat!("destructiveHint=false (", $name, ")"),
                    (HintRule::$rule, Hint::Idempotent, true) => concat!("idempotentHint=true (", $name, ")"),
                    (HintRule::$rule, Hint::Idempotent, false) => concat!("idempotentHint=false (", $name, ")"),
                    (HintRule::$rule, Hint::OpenWorld, true) => concat!("openWorldHint=true (", $name, ")"),
                    (HintRule::$rule, Hint::OpenWorld, false) => concat!("openWorldHint=false (", $name, ")"),
                )*
            }
        }
    };
}

hint_details!(
    Override = "override",
    DeclaredTrusted = "declared-trusted",
    DeclaredTightening = "declared-tightening",
    DeclaredRelaxingConfirmedByInference = "declared-relaxing-confirmed-by-inference",
    DeclaredRelaxingConfirmedByObservation = "declared-relaxing-confirmed-by-observation",
    DeclaredRelaxingConfirmedByConvention = "declared-relaxing-confirmed-by-convention",
    DeclaredRelaxingRejected = "declared-relaxing-rejected",
    Inferred = "inferred",
    InferredRelaxingRejected = "inferred-relaxing-rejected",
    Implied = "implied",
    SpecDefault = "spec-default",
    ObservedContradiction = "observed-contradiction",
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hint_details_name_the_hint_the_value_and_the_rule() {
        for rule in HintRule::ALL {
            for hint in Hint::ALL {
                for value in [false, true] {
                    let expected = format!("{}={value} ({})", hint.wire_key(), rule.as_str());
                    assert_eq!(hint_detail(rule, hint, value), expected);
                }
            }
        }
    }
}
