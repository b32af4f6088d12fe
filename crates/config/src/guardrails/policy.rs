//! `[policy]` and `[[policy.rule]]`: deserialized through the core's own serde types, validated by compiling.
//!
//! The settings (`mode`, `defaults`, `session_taint`) and each rule are deserialized separately into
//! `toolgate_core::policy::{PolicySpec, RuleSpec}`, so unknown keys and names are errors at their position and one
//! bad rule does not hide another's mistakes. Before that, the position of every rule and of each of its keys
//! (`id`, `match.tool`, ...) is recorded, so a `compile` error, which names its field (`PolicyError::field`), is
//! reported at that key (else at the rule's table). Rules are compiled one by one first (every rule's problem is
//! reported), then together (duplicate ids).

use std::collections::BTreeMap;

use toml::Spanned;
use toml::de::{DeTable, DeValue};
use toolgate_core::policy::glob::Glob;
use toolgate_core::policy::{PolicyError, PolicySpec, RuleSpec, compile};

use crate::context::Context;
use crate::error::{Locator, Problem};
use crate::tables::{array_of_tables, deserialize_section};

/// `[policy]` as the file has it.
#[derive(Debug)]
pub(crate) struct RawPolicy {
    /// The settings, without rules; `None` when they did not deserialize (already reported).
    pub(crate) settings: Option<PolicySpec>,
    /// Each `[[policy.rule]]` in order; `None` for one that did not deserialize (already reported).
    pub(crate) rules: Vec<Option<RawRule>>,
}

/// One rule with the positions of its table and keys.
#[derive(Debug)]
pub(crate) struct RawRule {
    pub(crate) spec: RuleSpec,
    /// Where the rule's table starts.
    pub(crate) offset: usize,
    /// Where each key starts: `id`, `effect`, `match`, `match.tool`, ...
    pub(crate) keys: BTreeMap<String, usize>,
}

impl RawRule {
    /// Where `field` (as `PolicyError::field` names it) is written, else its `match` table, else the rule.
    fn offset_of(&self, field: &str) -> usize {
        self.keys
            .get(field)
            .or_else(|| field.starts_with("match.").then(|| self.keys.get("match")).flatten())
            .copied()
            .unwrap_or(self.offset)
    }
}

/// Parses the `policy` key; `None` when it is not a table (reported).
pub(crate) fn parse_policy(
    value: Spanned<DeValue<'_>>,
    locator: &Locator<'_>,
    problems: &mut Vec<Problem>,
) -> Option<RawPolicy> {
    let span = value.span();
    let DeValue::Table(mut table) = value.into_inner() else {
        problems.push(locator.problem(span.start, "`policy` must be a table (`[policy]`, `[[policy.rule]]`)"));
        return None;
    };
    let rule_items = table.remove("rule");
    let settings = Spanned::new(span, DeValue::Table(table));
    let settings = deserialize_section::<PolicySpec>(settings, "[policy]", locator, problems).map(Spanned::into_inner);
    let mut rules = Vec::new();
    let items = rule_items.and_then(|items| array_of_tables(items, "policy.rule", locator, problems));
    for (index, item) in items.into_iter().flatten().enumerate() {
        let position = index + 1;
        let offset = item.span().start;
        let DeValue::Table(table) = item.get_ref() else {
            let message = format!("policy rule {position} must be a table, not {}", item.get_ref().type_str());
            problems.push(locator.problem(offset, message));
            rules.push(None);
            continue;
        };
        let keys = key_offsets(table);
        let context = match table.get("id").map(|id| id.get_ref()) {
            Some(DeValue::String(id)) => format!("policy rule {position} (`{id}`)"),
            _ => format!("policy rule {position}"),
        };
        let spec = deserialize_section::<RuleSpec>(item, &context, locator, problems);
        rules.push(spec.map(|spec| RawRule { spec: spec.into_inner(), offset, keys }));
    }
    Some(RawPolicy { settings, rules })
}

/// The offset of every key of a rule table, and of every key of its `match` table as `match.KEY`.
fn key_offsets(table: &DeTable<'_>) -> BTreeMap<String, usize> {
    let mut keys = BTreeMap::new();
    for (key, value) in table.iter() {
        let key_name: &str = key.get_ref().as_ref();
        keys.insert(key_name.to_owned(), key.span().start);
        if let (true, DeValue::Table(conditions)) = (key_name == "match", value.get_ref()) {
            for (condition, _) in conditions.iter() {
                let condition: &Spanned<_> = condition;
                let name: &str = condition.get_ref().as_ref();
                keys.insert(format!("match.{name}"), condition.span().start);
            }
        }
    }
    keys
}

/// Compiles the policy (reporting every rule's problem at its key) and returns the spec the runtime compiles again.
pub(crate) fn lower_policy(raw: Option<RawPolicy>, upstream_names: &[String], cx: &mut Context<'_>) -> PolicySpec {
    let Some(raw) = raw else { return PolicySpec::default() };
    let settings = raw.settings.unwrap_or_default();
    let all_parsed = raw.rules.iter().all(Option::is_some);
    let rules: Vec<RawRule> = raw.rules.into_iter().flatten().collect();
    let before = cx.problem_count();
    // One by one, so every rule's problem is reported with the rule's real position.
    for (index, rule) in rules.iter().enumerate() {
        let alone = PolicySpec { rules: vec![rule.spec.clone()], ..settings.clone() };
        if let Err(error) = compile(&alone) {
            let error = PolicyError { position: index + 1, ..error };
            cx.error(rule.offset_of(error.field()), error.to_string());
        }
    }
    let spec = PolicySpec { rules: rules.iter().map(|rule| rule.spec.clone()).collect(), ..settings };
    // Together, for what spans rules (duplicate ids); positions are right only when every rule parsed.
    if all_parsed
        && cx.problem_count() == before
        && let Err(error) = compile(&spec)
    {
        let offset = rules.get(error.position.saturating_sub(1)).map_or(0, |rule| rule.offset_of(error.field()));
        cx.error(offset, error.to_string());
    }
    warn_unmatched_upstreams(&rules, upstream_names, cx);
    spec
}

/// A rule naming upstreams that are not configured never fires, which for a `deny` is a silent hole.
fn warn_unmatched_upstreams(rules: &[RawRule], upstream_names: &[String], cx: &mut Context<'_>) {
    for (index, rule) in rules.iter().enumerate() {
        let Some(patterns) = &rule.spec.matches.upstream else { continue };
        for pattern in patterns {
            let Ok(glob) = Glob::new(pattern) else { continue };
            if !upstream_names.iter().any(|name| glob.matches(name)) {
                // The id is what a person searches the file (and the audit log) for; the position is for rules
                // without one.
                let rule_name = match &rule.spec.id {
                    Some(id) => format!("policy rule {} (id `{id}`)", index + 1),
                    None => format!("policy rule {}", index + 1),
                };
                let message =
                    format!("{rule_name}: `match.upstream` pattern `{pattern}` matches no configured upstream");
                cx.warn(rule.offset_of("match.upstream"), message);
            }
        }
    }
}
