//! One piece of evidence and where it was found (`property "url"` in the schema, a phrase in the description).
//!
//! Its own module because every stage of inference produces cues (the domain reading, the stated effects, the
//! rules that weigh them): it depends on nothing of theirs, so none of them has to depend on another for it.

use crate::infer::CueSource;
use crate::infer::signals::Property;

/// One cue and where it was found.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Cue {
    /// Where it was found.
    pub(crate) source: CueSource,
    /// What was found, for a human (`property "url"`).
    pub(crate) text: String,
}

impl Cue {
    pub(crate) fn new(source: CueSource, text: String) -> Cue {
        Cue { source, text }
    }

    /// A schema property, described as `what "name"`.
    pub(crate) fn property(property: &Property, what: &str) -> Cue {
        Cue::new(CueSource::Schema, format!("{what} \"{}\"", property.name))
    }
}
