//! Compiling a [`PolicySpec`] once into the form [`super::decide`] evaluates without allocating.
//!
//! Every check that can fail happens here, with an error naming the rule (1-based position and id) and the field:
//! bad globs, unknown category names, risk levels outside 0..=4, empty lists, empty or duplicate ids and scopes.
//! Conditions become bit masks (hints, categories, trust rules, modes) and pre-compiled globs; each rule's reason text
//! is built once and shared by every decision.

use std::collections::HashSet;
use std::fmt::Write as _;
use std::sync::Arc;

use crate::decision::{Text, UnknownName, Verdict};
use crate::facts::Category;
use crate::hints::Hint;
use crate::policy::Mode;
use crate::policy::glob::{Glob, GlobError};
use crate::policy::spec::{DefaultProfile, MatchSpec, PolicySpec, RuleSpec};
use crate::trust::HintRule;

/// The highest risk level [`crate::facts::risk_level`] returns.
pub const MAX_RISK: u8 = 4;

/// A policy ready for [`super::decide`]: immutable except for the mode, cheap to share behind an `Arc`.
#[derive(Debug, Clone, PartialEq)]
pub struct CompiledPolicy {
    pub(crate) mode: Mode,
    pub(crate) defaults: DefaultProfile,
    pub(crate) session_taint: bool,
    pub(crate) rules: Box<[CompiledRule]>,
}

impl CompiledPolicy {
    /// The mode calls are decided in.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// Switches the mode (e.g. an operator turns on read-only at run time); rules stay as compiled.
    pub fn set_mode(&mut self, mode: Mode) {
        self.mode = mode;
    }

    /// The default profile.
    pub fn defaults(&self) -> DefaultProfile {
        self.defaults
    }

    /// True when open-world writes need confirmation in a tainted session.
    pub fn session_taint(&self) -> bool {
        self.session_taint
    }

    /// The ids of the configured rules, in order.
    pub fn rule_ids(&self) -> impl Iterator<Item = &str> {
        self.rules.iter().map(|rule| rule.id.as_str())
    }
}

impl Default for CompiledPolicy {
    /// The policy of an empty `[policy]`: normal mode, standard default profile, session taint on, no rules.
    fn default() -> CompiledPolicy {
        CompiledPolicy {
            mode: Mode::Normal,
            defaults: DefaultProfile::Standard,
            session_taint: true,
            rules: Box::new([]),
        }
    }
}

/// One rule in evaluation form. A condition that is absent is "any": a full mask, `None`, or the full risk range.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct CompiledRule {
    pub(crate) id: Text,
    pub(crate) effect: Verdict,
    pub(crate) detail: Text,
    /// Bit `i` set: hint `Hint::ALL[i]` is constrained, to the value of bit `i` in `hint_values`.
    pub(crate) hint_mask: u8,
    pub(crate) hint_values: u8,
    pub(crate) categories: u8,
    pub(crate) min_risk: u8,
    pub(crate) max_risk: u8,
    /// Allowed trust rules per hint (`HintRule::bit`), all bits when unconstrained.
    pub(crate) hint_rules: [u16; 4],
    /// Some hint must come from one of these rules; 0 when unconstrained.
    pub(crate) any_hint_rule: u16,
    pub(crate) modes: u8,
    pub(crate) session_tainted: Option<bool>,
    pub(crate) upstream: Option<Box<[Glob]>>,
    pub(crate) tool: Option<Box<[Glob]>>,
    pub(crate) scopes: Box<[Box<str>]>,
    pub(crate) missing_scopes: Option<Box<[Box<str>]>>,
}

pub(crate) const ALL_RULES: u16 = (1 << HintRule::ALL.len()) - 1;
pub(crate) const ALL_CATEGORIES: u8 = 0b1111;
pub(crate) const ALL_MODES: u8 = 0b111;

pub(crate) fn category_bit(category: Category) -> u8 {
    match category {
        Category::Read => 1,
        Category::Write => 2,
        Category::External => 4,
        Category::Destructive => 8,
    }
}

fn parse_category(name: &str) -> Result<Category, UnknownName> {
    [Category::Read, Category::Write, Category::External, Category::Destructive]
        .into_iter()
        .find(|category| category.as_str() == name)
        .ok_or_else(|| UnknownName {
            kind: "category",
            name: name.to_owned(),
            expected: "read, write, external, destructive",
        })
}

/// Why a policy spec does not compile: which rule, and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("policy rule {position}{}: {problem}", id.as_ref().map(|id| format!(" (`{id}`)")).unwrap_or_default())]
pub struct PolicyError {
    /// 1-based position of the rule in `[[policy.rule]]`.
    pub position: usize,
    /// The rule's id, when it has one.
    pub id: Option<String>,
    /// What is wrong.
    pub problem: PolicyProblem,
}

impl PolicyError {
    /// The key of the offending field inside the rule (`match.tool`, `id`, ...), for positioned config errors.
    pub fn field(&self) -> &'static str {
        match &self.problem {
            PolicyProblem::BadGlob { field, .. }
            | PolicyProblem::UnknownValue { field, .. }
            | PolicyProblem::EmptyList { field }
            | PolicyProblem::RiskOutOfRange { field, .. }
            | PolicyProblem::EmptyValue { field } => field,
            PolicyProblem::EmptyRiskRange { .. } => "match.min_risk",
            PolicyProblem::DuplicateId => "id",
        }
    }
}

/// What is wrong with one rule.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PolicyProblem {
    /// A glob toolgate does not accept.
    #[error("`{field}` has a bad pattern `{pattern}`: {error}")]
    BadGlob {
        /// The key, e.g. `match.tool`.
        field: &'static str,
        /// The pattern as written.
        pattern: String,
        /// Why it is bad.
        error: GlobError,
    },
    /// A name outside a closed set.
    #[error("`{field}`: {error}")]
    UnknownValue {
        /// The key.
        field: &'static str,
        /// The name and what was expected.
        error: UnknownName,
    },
    /// `[]` would match nothing; leave the key out to match anything.
    #[error("`{field}` is an empty list, which matches nothing (leave the key out to match anything)")]
    EmptyList {
        /// The key.
        field: &'static str,
    },
    /// A risk level above the highest one.
    #[error("`{field}` is {value}, but risk levels go from 0 to 4")]
    RiskOutOfRange {
        /// The key.
        field: &'static str,
        /// The value given.
        value: u8,
    },
    /// `min_risk` above `max_risk`.
    #[error("`match.min_risk` ({min}) is above `match.max_risk` ({max}), so the rule matches nothing")]
    EmptyRiskRange {
        /// The lower bound.
        min: u8,
        /// The upper bound.
        max: u8,
    },
    /// An empty string where a name is needed.
    #[error("`{field}` contains an empty string")]
    EmptyValue {
        /// The key.
        field: &'static str,
    },
    /// Another rule has the same id.
    #[error("the id is used by an earlier rule")]
    DuplicateId,
}

/// Checks a spec and builds its evaluation form.
pub fn compile(spec: &PolicySpec) -> Result<CompiledPolicy, PolicyError> {
    let mut ids = HashSet::new();
    let mut rules = Vec::with_capacity(spec.rules.len());
    for (index, rule) in spec.rules.iter().enumerate() {
        let position = index + 1;
        let error = |problem| PolicyError { position, id: rule.id.clone(), problem };
        let compiled = compile_rule(position, rule).map_err(error)?;
        if !ids.insert(compiled.id.clone()) {
            return Err(error(PolicyProblem::DuplicateId));
        }
        rules.push(compiled);
    }
    Ok(CompiledPolicy {
        mode: spec.mode,
        defaults: spec.defaults,
        session_taint: spec.session_taint,
        rules: rules.into_boxed_slice(),
    })
}

fn compile_rule(position: usize, rule: &RuleSpec) -> Result<CompiledRule, PolicyProblem> {
    let conditions = &rule.matches;
    let id = match &rule.id {
        Some(id) if id.is_empty() => return Err(PolicyProblem::EmptyValue { field: "id" }),
        Some(id) => id.clone(),
        None => format!("rule-{position}"),
    };
    let mut hint_mask = 0;
    let mut hint_values = 0;
    let wanted = [conditions.read_only, conditions.destructive, conditions.idempotent, conditions.open_world];
    for (bit, value) in wanted.into_iter().enumerate() {
        if let Some(value) = value {
            hint_mask |= 1 << bit;
            hint_values |= u8::from(value) << bit;
        }
    }
    let mut categories = ALL_CATEGORIES;
    if let Some(names) = non_empty(&conditions.category, "match.category")? {
        categories = 0;
        for name in names {
            let category =
                parse_category(name).map_err(|error| PolicyProblem::UnknownValue { field: "match.category", error })?;
            categories |= category_bit(category);
        }
    }
    let min_risk = risk(conditions.min_risk, "match.min_risk")?.unwrap_or(0);
    let max_risk = risk(conditions.max_risk, "match.max_risk")?.unwrap_or(MAX_RISK);
    if min_risk > max_risk {
        return Err(PolicyProblem::EmptyRiskRange { min: min_risk, max: max_risk });
    }
    let per_hint = [
        (&conditions.read_only_rule, "match.read_only_rule"),
        (&conditions.destructive_rule, "match.destructive_rule"),
        (&conditions.idempotent_rule, "match.idempotent_rule"),
        (&conditions.open_world_rule, "match.open_world_rule"),
    ];
    let mut hint_rules = [ALL_RULES; 4];
    for (slot, (list, field)) in hint_rules.iter_mut().zip(per_hint) {
        if let Some(list) = non_empty(list, field)? {
            *slot = rule_bits(list);
        }
    }
    let any_hint_rule = non_empty(&conditions.any_hint_rule, "match.any_hint_rule")?.map_or(0, rule_bits);
    let modes = non_empty(&conditions.mode, "match.mode")?
        .map_or(ALL_MODES, |list| list.iter().fold(0, |bits, mode| bits | mode.bit()));
    let scopes = scope_list(&conditions.scopes, "match.scopes")?.unwrap_or_default();
    let missing_scopes = scope_list(&conditions.missing_scopes, "match.missing_scopes")?;
    Ok(CompiledRule {
        detail: Text::from(Arc::<str>::from(rule.reason.clone().unwrap_or_else(|| describe(&id, rule)))),
        id: Text::from(Arc::<str>::from(id)),
        effect: rule.effect,
        hint_mask,
        hint_values,
        categories,
        min_risk,
        max_risk,
        hint_rules,
        any_hint_rule,
        modes,
        session_tainted: conditions.session_tainted,
        upstream: globs(&conditions.upstream, "match.upstream")?,
        tool: globs(&conditions.tool, "match.tool")?,
        scopes,
        missing_scopes,
    })
}

fn non_empty<'a, T>(list: &'a Option<Vec<T>>, field: &'static str) -> Result<Option<&'a [T]>, PolicyProblem> {
    match list {
        Some(items) if items.is_empty() => Err(PolicyProblem::EmptyList { field }),
        Some(items) => Ok(Some(items)),
        None => Ok(None),
    }
}

fn risk(value: Option<u8>, field: &'static str) -> Result<Option<u8>, PolicyProblem> {
    match value {
        Some(value) if value > MAX_RISK => Err(PolicyProblem::RiskOutOfRange { field, value }),
        other => Ok(other),
    }
}

fn rule_bits(list: &[HintRule]) -> u16 {
    list.iter().fold(0, |bits, rule| bits | rule.bit())
}

fn globs(list: &Option<Vec<String>>, field: &'static str) -> Result<Option<Box<[Glob]>>, PolicyProblem> {
    let Some(patterns) = non_empty(list, field)? else {
        return Ok(None);
    };
    let compiled = patterns
        .iter()
        .map(|pattern| {
            Glob::new(pattern).map_err(|error| PolicyProblem::BadGlob { field, pattern: pattern.clone(), error })
        })
        .collect::<Result<_, _>>()?;
    Ok(Some(compiled))
}

fn scope_list(list: &Option<Vec<String>>, field: &'static str) -> Result<Option<Box<[Box<str>]>>, PolicyProblem> {
    let Some(names) = non_empty(list, field)? else {
        return Ok(None);
    };
    if names.iter().any(String::is_empty) {
        return Err(PolicyProblem::EmptyValue { field });
    }
    Ok(Some(names.iter().map(|name| Box::from(name.as_str())).collect()))
}

/// "configured rule `id` (confirm) matched upstream = github, tool = delete_*, destructive = true".
fn describe(id: &str, rule: &RuleSpec) -> String {
    let conditions: &MatchSpec = &rule.matches;
    let mut text = format!("configured rule `{id}` ({}) matched", rule.effect.as_str());
    let mut parts: Vec<String> = Vec::new();
    let mut list = |key: &str, values: Option<Vec<String>>| {
        if let Some(values) = values {
            parts.push(format!("{key} = {}", values.join("|")));
        }
    };
    let names = |list: &Option<Vec<HintRule>>| {
        list.as_ref().map(|rules| rules.iter().map(|rule| rule.as_str().to_owned()).collect())
    };
    list("upstream", conditions.upstream.clone());
    list("tool", conditions.tool.clone());
    list("category", conditions.category.clone());
    list("read_only_rule", names(&conditions.read_only_rule));
    list("destructive_rule", names(&conditions.destructive_rule));
    list("idempotent_rule", names(&conditions.idempotent_rule));
    list("open_world_rule", names(&conditions.open_world_rule));
    list("any_hint_rule", names(&conditions.any_hint_rule));
    list("scopes", conditions.scopes.clone());
    list("missing_scopes", conditions.missing_scopes.clone());
    list("mode", conditions.mode.as_ref().map(|modes| modes.iter().map(|mode| mode.as_str().to_owned()).collect()));
    let hints = [conditions.read_only, conditions.destructive, conditions.idempotent, conditions.open_world];
    for (hint, value) in Hint::ALL.into_iter().zip(hints) {
        if let Some(value) = value {
            parts.push(format!("{} = {value}", hint.wire_key()));
        }
    }
    if let Some(min) = conditions.min_risk {
        parts.push(format!("min_risk = {min}"));
    }
    if let Some(max) = conditions.max_risk {
        parts.push(format!("max_risk = {max}"));
    }
    if let Some(tainted) = conditions.session_tainted {
        parts.push(format!("session_tainted = {tainted}"));
    }
    if parts.is_empty() {
        text.push_str(" every call");
    } else {
        let _ = write!(text, " {}", parts.join(", "));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    #[test]
    fn compile_errors_name_the_rule_and_the_field() {
        let error = |spec: Value| {
            let spec: PolicySpec = serde_json::from_value(spec).unwrap_or_else(|error| unreachable!("{error}"));
            let error = compile(&spec).err().unwrap_or_else(|| unreachable!("compiled"));
            (error.to_string(), error.field())
        };
        let rule = |conditions: Value| json!({"rule": [{"effect": "allow"}, {"id": "r", "effect": "deny", "match": conditions}]});
        let cases = [
            (
                rule(json!({"tool": "delete_[a-z]"})),
                "policy rule 2 (`r`): `match.tool` has a bad pattern `delete_[a-z]`: `[` is reserved in patterns (only `*`, `?` and literal characters are supported)",
                "match.tool",
            ),
            (
                rule(json!({"upstream": ""})),
                "policy rule 2 (`r`): `match.upstream` has a bad pattern ``: an empty pattern matches nothing",
                "match.upstream",
            ),
            (
                rule(json!({"category": "dangerous"})),
                "policy rule 2 (`r`): `match.category`: unknown category `dangerous` (expected one of: read, write, external, destructive)",
                "match.category",
            ),
            (
                rule(json!({"tool": []})),
                "policy rule 2 (`r`): `match.tool` is an empty list, which matches nothing (leave the key out to match anything)",
                "match.tool",
            ),
            (
                rule(json!({"min_risk": 5})),
                "policy rule 2 (`r`): `match.min_risk` is 5, but risk levels go from 0 to 4",
                "match.min_risk",
            ),
            (
                rule(json!({"min_risk": 3, "max_risk": 1})),
                "policy rule 2 (`r`): `match.min_risk` (3) is above `match.max_risk` (1), so the rule matches nothing",
                "match.min_risk",
            ),
            (
                rule(json!({"scopes": ["admin", ""]})),
                "policy rule 2 (`r`): `match.scopes` contains an empty string",
                "match.scopes",
            ),
            (
                json!({"rule": [{"id": "x", "effect": "allow"}, {"id": "x", "effect": "deny"}]}),
                "policy rule 2 (`x`): the id is used by an earlier rule",
                "id",
            ),
            (
                json!({"rule": [{"effect": "allow"}, {"id": "rule-1", "effect": "deny"}]}),
                "policy rule 2 (`rule-1`): the id is used by an earlier rule",
                "id",
            ),
            (
                json!({"rule": [{"id": "", "effect": "allow"}]}),
                "policy rule 1 (``): `id` contains an empty string",
                "id",
            ),
        ];
        for (spec, message, field) in cases {
            assert_eq!(error(spec), (message.to_owned(), field));
        }
    }
}
