//! The policy as plain data: what the config crate lowers `[policy]` and `[[policy.rule]]` into.
//!
//! Serde `Deserialize` is derived because this is a config-shaped type (unknown keys are errors); nothing here is
//! checked yet. [`super::compile`] validates a spec (globs, names, risk ranges, duplicate ids) and builds the
//! evaluation form. A condition left out matches everything; a list condition matches when any element matches.

use std::fmt;
use std::marker::PhantomData;

use serde::de::{self, IntoDeserializer, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer};

use crate::decision::Verdict;
use crate::policy::Mode;
use crate::trust::HintRule;

/// A whole policy: mode, default profile, session taint and ordered rules.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PolicySpec {
    /// The gateway's mode (`normal`, `sandbox`, `read-only`); the runtime may switch it later.
    pub mode: Mode,
    /// What decides a call no configured rule permits (`standard` or `none`).
    pub defaults: DefaultProfile,
    /// Whether open-world writes need confirmation once a session is tainted (on by default).
    pub session_taint: bool,
    /// The configured rules, in order (`[[policy.rule]]`).
    #[serde(rename = "rule")]
    pub rules: Vec<RuleSpec>,
}

impl Default for PolicySpec {
    fn default() -> PolicySpec {
        PolicySpec { mode: Mode::Normal, defaults: DefaultProfile::Standard, session_taint: true, rules: Vec::new() }
    }
}

impl PolicySpec {
    /// A policy that allows every call (no confirmation, no taint) while the fail-closed checks still apply: for
    /// relays whose upstreams the operator trusts completely, and for testing the relay itself.
    pub fn permissive() -> PolicySpec {
        PolicySpec {
            mode: Mode::Normal,
            defaults: DefaultProfile::Standard,
            session_taint: false,
            rules: vec![RuleSpec {
                id: Some("permissive".into()),
                effect: Verdict::Allow,
                matches: MatchSpec::default(),
                reason: Some("the permissive policy allows every call".into()),
            }],
        }
    }
}

/// What applies when no configured rule permits or refuses a call.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DefaultProfile {
    /// Reads and closed-world additive writes allowed; destructive and open-world writes confirmed.
    #[default]
    Standard,
    /// Nothing: a call no rule permits is denied.
    None,
}

/// One configured rule.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuleSpec {
    /// A stable id for decisions and the audit log; `rule-<n>` (1-based position) when absent.
    #[serde(default)]
    pub id: Option<String>,
    /// `allow`, `confirm`, `deny` or `hide`.
    pub effect: Verdict,
    /// The conditions; all must hold. Empty matches every call.
    #[serde(default, rename = "match")]
    pub matches: MatchSpec,
    /// A sentence for the person or model who sees the decision; generated from the conditions when absent.
    #[serde(default)]
    pub reason: Option<String>,
}

/// The conditions of a rule. Every field is optional; all given fields must hold.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MatchSpec {
    /// Upstream name globs (the name in the config).
    #[serde(deserialize_with = "one_or_many")]
    pub upstream: Option<Vec<String>>,
    /// Tool name globs, against the upstream's own name for the tool (not the prefixed exposed name).
    #[serde(deserialize_with = "one_or_many")]
    pub tool: Option<Vec<String>>,
    /// Effective `readOnlyHint`.
    pub read_only: Option<bool>,
    /// Effective `destructiveHint`.
    pub destructive: Option<bool>,
    /// Effective `idempotentHint`.
    pub idempotent: Option<bool>,
    /// Effective `openWorldHint`.
    pub open_world: Option<bool>,
    /// Categories: `read`, `write`, `external`, `destructive`.
    #[serde(deserialize_with = "one_or_many")]
    pub category: Option<Vec<String>>,
    /// Lowest risk level (0..=4) that matches.
    pub min_risk: Option<u8>,
    /// Highest risk level (0..=4) that matches.
    pub max_risk: Option<u8>,
    /// Trust rules that produced `readOnlyHint`.
    #[serde(deserialize_with = "one_or_many")]
    pub read_only_rule: Option<Vec<HintRule>>,
    /// Trust rules that produced `destructiveHint`.
    #[serde(deserialize_with = "one_or_many")]
    pub destructive_rule: Option<Vec<HintRule>>,
    /// Trust rules that produced `idempotentHint`.
    #[serde(deserialize_with = "one_or_many")]
    pub idempotent_rule: Option<Vec<HintRule>>,
    /// Trust rules that produced `openWorldHint`.
    #[serde(deserialize_with = "one_or_many")]
    pub open_world_rule: Option<Vec<HintRule>>,
    /// Matches when any of the four hints was produced by one of these rules.
    #[serde(deserialize_with = "one_or_many")]
    pub any_hint_rule: Option<Vec<HintRule>>,
    /// The caller holds every one of these scopes.
    #[serde(deserialize_with = "one_or_many")]
    pub scopes: Option<Vec<String>>,
    /// The caller lacks at least one of these scopes.
    #[serde(deserialize_with = "one_or_many")]
    pub missing_scopes: Option<Vec<String>>,
    /// The gateway is in one of these modes.
    #[serde(deserialize_with = "one_or_many")]
    pub mode: Option<Vec<Mode>>,
    /// The session has (or has not) seen an open-world tool's output.
    pub session_tainted: Option<bool>,
}

/// Accepts `"x"` or `["x", "y"]` for a list condition.
fn one_or_many<'de, D, T>(deserializer: D) -> Result<Option<Vec<T>>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    struct OneOrMany<T>(PhantomData<T>);

    impl<'de, T: Deserialize<'de>> Visitor<'de> for OneOrMany<T> {
        type Value = Vec<T>;

        fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
            formatter.write_str("a string or a list of strings")
        }

        fn visit_str<E: de::Error>(self, value: &str) -> Result<Vec<T>, E> {
            T::deserialize(value.into_deserializer()).map(|item| vec![item])
        }

        fn visit_seq<A: SeqAccess<'de>>(self, mut sequence: A) -> Result<Vec<T>, A::Error> {
            let mut items = Vec::with_capacity(sequence.size_hint().unwrap_or(0));
            while let Some(item) = sequence.next_element()? {
                items.push(item);
            }
            Ok(items)
        }
    }

    deserializer.deserialize_any(OneOrMany(PhantomData)).map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn one_or_many_and_defaults() {
        let spec: PolicySpec = serde_json::from_value(json!({
            "mode": "read-only",
            "rule": [
                {"effect": "confirm", "match": {"tool": "delete_*", "upstream": ["github", "gitlab"], "destructive": true}},
                {"id": "web", "effect": "deny", "match": {"open_world_rule": "declared-relaxing-rejected"}}
            ]
        }))
        .unwrap_or_else(|error| unreachable!("{error}"));
        assert_eq!(spec.mode, Mode::ReadOnly);
        assert!(spec.session_taint);
        assert_eq!(spec.defaults, DefaultProfile::Standard);
        assert_eq!(spec.rules[0].matches.tool, Some(vec!["delete_*".to_owned()]));
        assert_eq!(spec.rules[0].matches.upstream, Some(vec!["github".to_owned(), "gitlab".to_owned()]));
        assert_eq!(spec.rules[1].matches.open_world_rule, Some(vec![HintRule::DeclaredRelaxingRejected]));
    }

    #[test]
    fn unknown_keys_and_values_are_errors() {
        let error = |value| serde_json::from_value::<PolicySpec>(value).err().map(|error| error.to_string());
        let typo = error(json!({"rule": [{"effect": "allow", "match": {"destructve": true}}]}));
        assert!(typo.is_some_and(|text| text.contains("unknown field `destructve`")));
        let effect = error(json!({"rule": [{"effect": "permit"}]}));
        assert!(effect.is_some_and(|text| text.contains("unknown variant `permit`")));
        let rule = error(json!({"rule": [{"effect": "deny", "match": {"any_hint_rule": "declared"}}]}));
        assert!(rule.is_some_and(|text| text.contains("unknown variant `declared`")));
    }
}
