//! Effective hints: what a client should assume, and which source decided each value.
//!
//! Precedence per hint: a config override, then the server's declaration, then inference, then the spec default.
//! The spec's own rule is applied last: when a tool is read-only, `destructiveHint` and `idempotentHint` mean
//! nothing, so they become "not destructive" and "idempotent" with [`HintSource::Implied`]. The converse holds too:
//! a declared `destructiveHint: true` keeps inference from calling the tool read-only (it becomes "not read-only",
//! implied), so inference never weakens a declared hint.

use serde::Serialize;

use crate::hints::{DeclaredHints, Hint, HintSource};
use crate::infer::Inference;

/// Per-hint values an operator sets in config; they always win.
pub type HintOverrides = DeclaredHints;

/// One effective hint value and where it came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct EffectiveHint {
    /// The value a client should assume.
    pub value: bool,
    /// Which source decided it.
    pub source: HintSource,
}

/// The four effective hints of a tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EffectiveHints {
    /// `readOnlyHint`.
    #[serde(rename = "readOnlyHint")]
    pub read_only: EffectiveHint,
    /// `destructiveHint` (not destructive, [`HintSource::Implied`], when read-only).
    #[serde(rename = "destructiveHint")]
    pub destructive: EffectiveHint,
    /// `idempotentHint` (idempotent, [`HintSource::Implied`], when read-only).
    #[serde(rename = "idempotentHint")]
    pub idempotent: EffectiveHint,
    /// `openWorldHint`.
    #[serde(rename = "openWorldHint")]
    pub open_world: EffectiveHint,
}

impl EffectiveHints {
    /// The effective value of one hint.
    pub fn get(&self, hint: Hint) -> EffectiveHint {
        match hint {
            Hint::ReadOnly => self.read_only,
            Hint::Destructive => self.destructive,
            Hint::Idempotent => self.idempotent,
            Hint::OpenWorld => self.open_world,
        }
    }

    /// True when a call may destroy or overwrite something.
    pub fn may_destroy(&self) -> bool {
        !self.read_only.value && self.destructive.value
    }

    /// True when the tool changes its environment at all.
    pub fn writes(&self) -> bool {
        !self.read_only.value
    }

    /// True when repeating a call is harmless (read-only tools always are).
    pub fn is_idempotent(&self) -> bool {
        self.read_only.value || self.idempotent.value
    }
}

/// Merges overrides, declarations and inference into effective hints.
///
/// `inferred` is `None` when the caller does not want inference to fill gaps; the spec default applies then.
pub fn resolve_hints(
    overrides: &HintOverrides,
    declared: &DeclaredHints,
    inferred: Option<&Inference>,
) -> EffectiveHints {
    let pick = |hint: Hint| -> EffectiveHint {
        if let Some(value) = overrides.get(hint) {
            EffectiveHint { value, source: HintSource::Overridden }
        } else if let Some(value) = declared.get(hint) {
            EffectiveHint { value, source: HintSource::Declared }
        } else if let Some(inference) = inferred {
            EffectiveHint { value: inference.get(hint).value, source: HintSource::Inferred }
        } else {
            EffectiveHint { value: hint.spec_default(), source: HintSource::Default }
        }
    };
    let implied = |value: bool| EffectiveHint { value, source: HintSource::Implied };
    let mut read_only = pick(Hint::ReadOnly);
    // A declared `destructiveHint: true` says the tool writes. Only a declaration or an override may call such a
    // tool read-only; inference and defaults never weaken what the author said.
    let declared_writer = declared.destructive == Some(true) && overrides.destructive != Some(false);
    if read_only.value && declared_writer && matches!(read_only.source, HintSource::Inferred | HintSource::Default) {
        read_only = implied(false);
    }
    let (destructive, idempotent) = if read_only.value {
        (implied(false), implied(true))
    } else {
        (pick(Hint::Destructive), pick(Hint::Idempotent))
    };
    EffectiveHints { read_only, destructive, idempotent, open_world: pick(Hint::OpenWorld) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nothing_said_means_spec_defaults() {
        let effective = resolve_hints(&HintOverrides::default(), &DeclaredHints::default(), None);
        for hint in Hint::ALL {
            assert_eq!(effective.get(hint), EffectiveHint { value: hint.spec_default(), source: HintSource::Default });
        }
        assert!(effective.may_destroy());
    }

    #[test]
    fn overrides_beat_declarations() {
        let declared = DeclaredHints { read_only: Some(true), ..Default::default() };
        let overrides = HintOverrides { read_only: Some(false), destructive: Some(false), ..Default::default() };
        let effective = resolve_hints(&overrides, &declared, None);
        assert_eq!(effective.read_only, EffectiveHint { value: false, source: HintSource::Overridden });
        assert_eq!(effective.destructive, EffectiveHint { value: false, source: HintSource::Overridden });
        assert_eq!(effective.idempotent.source, HintSource::Default);
    }

    #[test]
    fn a_declared_destructive_hint_blocks_an_inferred_read_only() {
        let declared = DeclaredHints { destructive: Some(true), ..Default::default() };
        let mut inference = crate::infer::infer_annotations(
            &crate::ToolDefinition::from_value(serde_json::json!({"name": "get_thing", "description": "get"}))
                .unwrap_or_else(|error| unreachable!("{error}")),
        );
        inference.read_only.value = true;
        let effective = resolve_hints(&HintOverrides::default(), &declared, Some(&inference));
        assert_eq!(effective.read_only, EffectiveHint { value: false, source: HintSource::Implied });
        assert_eq!(effective.destructive, EffectiveHint { value: true, source: HintSource::Declared });
    }

    #[test]
    fn read_only_implies_the_other_two() {
        let declared = DeclaredHints { read_only: Some(true), destructive: Some(true), ..Default::default() };
        let effective = resolve_hints(&HintOverrides::default(), &declared, None);
        assert_eq!(effective.destructive, EffectiveHint { value: false, source: HintSource::Implied });
        assert_eq!(effective.idempotent, EffectiveHint { value: true, source: HintSource::Implied });
        assert!(!effective.may_destroy());
    }
}
