//! The verdict on one tool call or listing, with the reasons that produced it.
//!
//! A decision is data: the verdict, and every reason (which rule, which hint, from which source). The proxy turns a
//! decision into a reply; it never inspects a bare boolean. [`allow_everything`] is the policy of a gateway without
//! guardrails; [`crate::policy::decide`] is the built-in rule engine and returns the same type. Reason texts are
//! [`Text`]: a static string or a shared one, so building a decision copies no text on the hot path.

use std::fmt;
use std::ops::Deref;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::effective::EffectiveHints;

/// What happens to a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
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

impl Verdict {
    /// Every verdict, from the most to the least permissive.
    pub const ALL: [Verdict; 4] = [Verdict::Allow, Verdict::Confirm, Verdict::Deny, Verdict::Hide];

    /// The stable lowercase name (as in config and JSON).
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Allow => "allow",
            Verdict::Confirm => "confirm",
            Verdict::Deny => "deny",
            Verdict::Hide => "hide",
        }
    }

    /// How much the verdict holds a call back: allow 0, confirm 1, deny 2, hide 3.
    ///
    /// Hide ranks above deny: both refuse a call, and hide also keeps the tool's existence from the client.
    pub fn strictness(self) -> u8 {
        match self {
            Verdict::Allow => 0,
            Verdict::Confirm => 1,
            Verdict::Deny => 2,
            Verdict::Hide => 3,
        }
    }

    /// True for deny and hide: the call is refused whatever anyone approves.
    pub fn refuses(self) -> bool {
        matches!(self, Verdict::Deny | Verdict::Hide)
    }
}

impl std::str::FromStr for Verdict {
    type Err = UnknownName;

    fn from_str(text: &str) -> Result<Verdict, UnknownName> {
        Verdict::ALL.into_iter().find(|verdict| verdict.as_str() == text).ok_or_else(|| UnknownName {
            kind: "effect",
            name: text.to_owned(),
            expected: "allow, confirm, deny, hide",
        })
    }
}

/// A name that is not one of a closed set (an effect, a mode, a category, a hint rule).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown {kind} `{name}` (expected one of: {expected})")]
pub struct UnknownName {
    /// What kind of name was expected.
    pub kind: &'static str,
    /// The name as given.
    pub name: String,
    /// The accepted names, comma separated.
    pub expected: &'static str,
}

/// Text of a reason: a static string (built-in rules) or a shared one (configured rules), cheap to clone.
///
/// Equality, ordering and hashing look at the text only, never at how it is stored.
#[derive(Clone)]
pub struct Text(TextRepr);

#[derive(Clone)]
enum TextRepr {
    Static(&'static str),
    Shared(Arc<str>),
}

impl Text {
    /// A static text (no allocation).
    pub const fn from_static(text: &'static str) -> Text {
        Text(TextRepr::Static(text))
    }

    /// The text.
    pub fn as_str(&self) -> &str {
        match &self.0 {
            TextRepr::Static(text) => text,
            TextRepr::Shared(text) => text,
        }
    }
}

impl Deref for Text {
    type Target = str;

    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl AsRef<str> for Text {
    fn as_ref(&self) -> &str {
        self.as_str()
    }
}

impl From<&'static str> for Text {
    fn from(text: &'static str) -> Text {
        Text::from_static(text)
    }
}

impl From<String> for Text {
    fn from(text: String) -> Text {
        Text(TextRepr::Shared(text.into()))
    }
}

impl From<Arc<str>> for Text {
    fn from(text: Arc<str>) -> Text {
        Text(TextRepr::Shared(text))
    }
}

impl PartialEq for Text {
    fn eq(&self, other: &Text) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Eq for Text {}

impl std::hash::Hash for Text {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.as_str().hash(state);
    }
}

impl PartialOrd for Text {
    fn partial_cmp(&self, other: &Text) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Text {
    fn cmp(&self, other: &Text) -> std::cmp::Ordering {
        self.as_str().cmp(other.as_str())
    }
}

impl PartialEq<str> for Text {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for Text {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl fmt::Debug for Text {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), formatter)
    }
}

impl fmt::Display for Text {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(self.as_str())
    }
}

impl Serialize for Text {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

/// One reason behind a verdict.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Reason {
    /// The rule that applied (stable id, e.g. `default-allow`, `default-destructive-confirm`, a configured rule's
    /// id, or for a hint the trust rule that produced its value, e.g. `declared-relaxing-rejected`).
    pub rule: Text,
    /// What the rule saw, in one line.
    pub detail: Text,
}

impl Reason {
    /// A reason from two texts.
    pub fn new(rule: impl Into<Text>, detail: impl Into<Text>) -> Reason {
        Reason { rule: rule.into(), detail: detail.into() }
    }
}

/// A verdict and its reasons.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Decision {
    /// The verdict.
    pub verdict: Verdict,
    /// Why, strongest reason first; never empty.
    pub reasons: Vec<Reason>,
}

impl Decision {
    /// The id of the rule that decided (the first reason's rule).
    pub fn rule(&self) -> &str {
        self.reasons.first().map(|reason| reason.rule.as_str()).unwrap_or_default()
    }
}

/// The policy of a gateway without guardrails: every call is allowed, and the decision says so.
pub fn allow_everything(hints: &EffectiveHints) -> Decision {
    let _ = hints;
    Decision {
        verdict: Verdict::Allow,
        reasons: vec![Reason::new("no-policy", "no policy is configured: every call is relayed")],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdict_names_round_trip() {
        for verdict in Verdict::ALL {
            assert_eq!(verdict.as_str().parse::<Verdict>(), Ok(verdict));
        }
        let error = "permit".parse::<Verdict>().err().map(|error| error.to_string());
        assert_eq!(error.as_deref(), Some("unknown effect `permit` (expected one of: allow, confirm, deny, hide)"));
    }

    #[test]
    fn texts_compare_and_serialize_as_strings() {
        let shared = Text::from(String::from("rule-1"));
        assert_eq!(shared, Text::from("rule-1"));
        assert_eq!(serde_json::to_value(&shared).unwrap_or_default(), serde_json::json!("rule-1"));
        assert_eq!(format!("{shared:?}"), "\"rule-1\"");
    }
}
