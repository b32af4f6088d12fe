//! Annotation presets for server authors: the five shapes most tools fall into, with every hint explicit.
//!
//! A preset is plain data ([`DeclaredHints`]); [`Preset::to_annotations_json`] gives the wire object to paste into
//! a tool definition. Later, a crate for Rust server authors re-exports these.

use serde_json::{Map, Value};

use crate::hints::{DeclaredHints, Hint};

/// A named combination of the four hints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Preset {
    /// Reads local or closed-domain data: read-only, closed-world.
    ReadOnly,
    /// Adds or changes data without destroying any, in a closed domain: not idempotent.
    Write,
    /// Sets data to a given state (an upsert, a `set_x`): repeating it changes nothing more.
    IdempotentWrite,
    /// Deletes or overwrites data in a closed domain.
    Destructive,
    /// Acts on the outside world (sends, publishes, pays): open-world, not idempotent, not destructive.
    ExternalAction,
}

impl Preset {
    /// Every preset.
    pub const ALL: [Preset; 5] =
        [Preset::ReadOnly, Preset::Write, Preset::IdempotentWrite, Preset::Destructive, Preset::ExternalAction];

    /// The preset's stable kebab-case name.
    pub fn name(self) -> &'static str {
        match self {
            Preset::ReadOnly => "read-only",
            Preset::Write => "write",
            Preset::IdempotentWrite => "idempotent-write",
            Preset::Destructive => "destructive",
            Preset::ExternalAction => "external-action",
        }
    }

    /// Finds a preset by its name.
    pub fn from_name(name: &str) -> Option<Preset> {
        Preset::ALL.into_iter().find(|preset| preset.name() == name)
    }

    /// The hint values of the preset, all four explicit.
    pub fn hints(self) -> DeclaredHints {
        let (read_only, destructive, idempotent, open_world) = match self {
            Preset::ReadOnly => (true, false, true, false),
            Preset::Write => (false, false, false, false),
            Preset::IdempotentWrite => (false, false, true, false),
            Preset::Destructive => (false, true, false, false),
            Preset::ExternalAction => (false, false, false, true),
        };
        DeclaredHints {
            title: None,
            read_only: Some(read_only),
            destructive: Some(destructive),
            idempotent: Some(idempotent),
            open_world: Some(open_world),
        }
    }

    /// The `annotations` object for a tool definition, with an optional title.
    pub fn to_annotations_json(self, title: Option<&str>) -> Value {
        let hints = self.hints();
        let mut object = Map::new();
        if let Some(title) = title {
            object.insert("title".into(), Value::String(title.to_owned()));
        }
        for hint in Hint::ALL {
            if let Some(value) = hints.get(hint) {
                object.insert(hint.wire_key().into(), Value::Bool(value));
            }
        }
        Value::Object(object)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::effective::{HintOverrides, resolve_hints};

    #[test]
    fn presets_are_fully_explicit_and_consistent() {
        for preset in Preset::ALL {
            let hints = preset.hints();
            assert!(Hint::ALL.iter().all(|hint| hints.get(*hint).is_some()), "{}", preset.name());
            let effective = resolve_hints(&HintOverrides::default(), &hints, None);
            assert_eq!(effective.may_destroy(), preset == Preset::Destructive, "{}", preset.name());
            assert_eq!(Preset::from_name(preset.name()), Some(preset));
        }
    }
}
