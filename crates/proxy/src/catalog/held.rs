//! What a pinned upstream publishes besides tools and nobody approved yet: its prompts, listed resources and
//! resource templates whose definition is not their pin (changed since approval, or new). The catalog leaves them
//! out of every list but remembers them here, so that `prompts/get`, `resources/read` and the like can refuse with
//! an error naming the pin to review instead of "unknown", and so that a held prompt name still belongs to its
//! upstream (a later upstream's prompt of the same name is not served in its place).
//!
//! Pure data built by [`crate::catalog::Catalog`]; it decides nothing about tools (their quarantine is decided per
//! fingerprint in the catalog) and never reads the store.

use std::collections::HashMap;

use toolgate_core::display::bounded;
use toolgate_store::PinKind;

use crate::uri_template::UriTemplate;

/// Longest upstream-controlled text quoted in a refusal.
const QUOTED_CHARS: usize = 200;

/// One definition held back, with where it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeldItem {
    /// Index of the upstream in the spec.
    pub upstream: usize,
    /// The upstream's configured name.
    pub upstream_name: String,
    /// What kind of definition it is.
    pub kind: PinKind,
    /// Its name at the upstream (a prompt's name, a resource's URI, a template's `uriTemplate`).
    pub name: String,
}

impl HeldItem {
    /// The error text a client gets for a held definition: what is held, and the command that reviews it.
    pub fn refusal(&self) -> String {
        format!(
            "toolgate: {} \"{}\" of upstream \"{}\" changed since it was pinned (or is new) and is held until a person \
             approves it (`toolgate pins diff {} --kind {} ...`)",
            self.kind.as_str().replace('_', " "),
            bounded(&self.name, QUOTED_CHARS),
            bounded(&self.upstream_name, QUOTED_CHARS),
            bounded(&self.upstream_name, QUOTED_CHARS),
            self.kind.as_str(),
        )
    }
}

/// The held prompts (by the name clients would use), resources (by URI) and templates of every pinned upstream.
#[derive(Debug, Clone, Default)]
pub(crate) struct HeldContent {
    prompts: HashMap<String, HeldItem>,
    resources: HashMap<String, HeldItem>,
    templates: Vec<(UriTemplate, HeldItem)>,
}

impl HeldContent {
    /// Holds a prompt under the name clients would call it by; the earliest upstream keeps a name.
    pub(crate) fn hold_prompt(&mut self, exposed_name: &str, item: HeldItem) {
        self.prompts.entry(exposed_name.to_owned()).or_insert(item);
    }

    /// Holds a listed resource.
    pub(crate) fn hold_resource(&mut self, item: HeldItem) {
        self.resources.entry(item.name.clone()).or_insert(item);
    }

    /// Holds a resource template.
    pub(crate) fn hold_template(&mut self, item: HeldItem) {
        self.templates.push((UriTemplate::parse(&item.name), item));
    }

    /// The held prompt clients call `name`.
    pub(crate) fn prompt(&self, name: &str) -> Option<&HeldItem> {
        self.prompts.get(name)
    }

    /// The held template declared with exactly this `uriTemplate` (a completion names a template by it).
    pub(crate) fn template(&self, uri_template: &str) -> Option<&HeldItem> {
        self.templates.iter().find(|(_, item)| item.name == uri_template).map(|(_, item)| item)
    }

    /// The held resource or template that would serve `uri`: the listed resource first, then the earliest template
    /// that matches.
    pub(crate) fn resource(&self, uri: &str) -> Option<&HeldItem> {
        let templated = || self.templates.iter().find(|(template, _)| template.matches(uri)).map(|(_, item)| item);
        self.resources.get(uri).or_else(templated)
    }
}
