//! The four behavioural hints of MCP `ToolAnnotations`, their spec defaults, and where a value came from.
//!
//! This module is vocabulary only: it knows the wire names and the defaults of the 2025-03-26..2025-11-25 schema
//! (unchanged since annotations were introduced), not how values are read or merged.

use serde::{Deserialize, Serialize};

/// One of the four boolean hints of `ToolAnnotations`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Hint {
    /// `readOnlyHint`: the tool does not modify its environment.
    ReadOnly,
    /// `destructiveHint`: the tool may destroy or overwrite; meaningful only when not read-only.
    Destructive,
    /// `idempotentHint`: repeating a call with the same arguments has no further effect.
    Idempotent,
    /// `openWorldHint`: the tool interacts with external entities.
    OpenWorld,
}

impl Hint {
    /// Every hint, in the order the spec lists them.
    pub const ALL: [Hint; 4] = [Hint::ReadOnly, Hint::Destructive, Hint::Idempotent, Hint::OpenWorld];

    /// The key used on the wire inside `annotations`.
    pub fn wire_key(self) -> &'static str {
        match self {
            Hint::ReadOnly => "readOnlyHint",
            Hint::Destructive => "destructiveHint",
            Hint::Idempotent => "idempotentHint",
            Hint::OpenWorld => "openWorldHint",
        }
    }

    /// The value a client must assume when the hint is absent.
    pub fn spec_default(self) -> bool {
        match self {
            Hint::ReadOnly => false,
            Hint::Destructive => true,
            Hint::Idempotent => false,
            Hint::OpenWorld => true,
        }
    }

    /// The value that asks less caution of a client (read-only, not destructive, idempotent, closed-world).
    ///
    /// A declaration of this value *relaxes* what a client must assume; the opposite value tightens it.
    pub fn relaxed_value(self) -> bool {
        !self.spec_default() || self == Hint::Idempotent
    }

    /// Parses a wire key (exact spelling only; vendor spellings live in [`crate::normalize`]).
    pub fn from_wire_key(key: &str) -> Option<Hint> {
        Hint::ALL.into_iter().find(|hint| hint.wire_key() == key)
    }
}

/// Where an effective hint value came from, in precedence order (highest first).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HintSource {
    /// Set by the operator's configuration; always wins.
    Overridden,
    /// Declared by the server in `annotations` (after normalization).
    Declared,
    /// Follows from another hint: a read-only tool neither destroys nor has further effects, and a tool declared
    /// destructive is not read-only.
    Implied,
    /// Inferred by toolgate from name, title, description and schema.
    Inferred,
    /// Seen: a verification record (`toolgate verify`) caught the tool doing what the relaxed value denies.
    Observed,
    /// Nothing said anything: the spec default applies.
    Default,
}

impl HintSource {
    /// The stable lowercase name used in JSON output and `_meta`.
    pub fn as_str(self) -> &'static str {
        match self {
            HintSource::Overridden => "overridden",
            HintSource::Declared => "declared",
            HintSource::Implied => "implied",
            HintSource::Inferred => "inferred",
            HintSource::Observed => "observed",
            HintSource::Default => "default",
        }
    }
}

/// Hint values a server declared (or an operator set): `None` means "not said".
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeclaredHints {
    /// `annotations.title`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// `readOnlyHint`.
    #[serde(rename = "readOnlyHint", skip_serializing_if = "Option::is_none")]
    pub read_only: Option<bool>,
    /// `destructiveHint`.
    #[serde(rename = "destructiveHint", skip_serializing_if = "Option::is_none")]
    pub destructive: Option<bool>,
    /// `idempotentHint`.
    #[serde(rename = "idempotentHint", skip_serializing_if = "Option::is_none")]
    pub idempotent: Option<bool>,
    /// `openWorldHint`.
    #[serde(rename = "openWorldHint", skip_serializing_if = "Option::is_none")]
    pub open_world: Option<bool>,
}

impl DeclaredHints {
    /// The declared value of one hint.
    pub fn get(&self, hint: Hint) -> Option<bool> {
        match hint {
            Hint::ReadOnly => self.read_only,
            Hint::Destructive => self.destructive,
            Hint::Idempotent => self.idempotent,
            Hint::OpenWorld => self.open_world,
        }
    }

    /// Sets the declared value of one hint.
    pub fn set(&mut self, hint: Hint, value: Option<bool>) {
        match hint {
            Hint::ReadOnly => self.read_only = value,
            Hint::Destructive => self.destructive = value,
            Hint::Idempotent => self.idempotent = value,
            Hint::OpenWorld => self.open_world = value,
        }
    }

    /// True when none of the four hints is declared (the title does not count).
    pub fn has_no_hints(&self) -> bool {
        Hint::ALL.iter().all(|hint| self.get(*hint).is_none())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relaxed_values_follow_the_spec() {
        assert!(Hint::ReadOnly.relaxed_value());
        assert!(!Hint::Destructive.relaxed_value());
        assert!(Hint::Idempotent.relaxed_value());
        assert!(!Hint::OpenWorld.relaxed_value());
    }

    #[test]
    fn wire_keys_round_trip() {
        for hint in Hint::ALL {
            assert_eq!(Hint::from_wire_key(hint.wire_key()), Some(hint));
        }
        assert_eq!(Hint::from_wire_key("readOnly"), None);
    }
}
