//! Which upstream serves each resource URI, with one precedence: configuration order (the catalog's name
//! precedence, which need not be index order once a reload restarted an upstream in a new slot).
//!
//! A URI belongs to the earliest upstream that lists it or has a template matching it, whichever kind that upstream
//! offers; a later upstream's listed resource for a URI already served, or its template identical to an earlier
//! one, is left out and reported as a collision (as a tool name collision is). Items are kept without their
//! `toolgate/` `_meta` keys. Pure data built by [`crate::catalog::Catalog`]; no IO, no routing decisions beyond
//! the owner of a URI.

use std::collections::HashMap;

use serde_json::Value;
use toolgate_spec::UpstreamSpec;

use crate::guard::results::remove_foreign_meta;
use crate::uri_template::UriTemplate;

/// The resources and templates clients see, each with its upstream, in configuration order.
#[derive(Debug, Clone, Default)]
pub(crate) struct ResourceIndex {
    resources: Vec<(usize, Value)>,
    listed: HashMap<String, usize>,
    templates: Vec<(usize, Value, UriTemplate)>,
    /// Per upstream index, its place in precedence (lower wins); an index without one ranks by itself.
    rank: Vec<usize>,
}

impl ResourceIndex {
    /// An empty index whose precedence is `order` (upstream indices, the first wins); upstreams must then be added
    /// in that order.
    pub(crate) fn ranked(order: &[usize]) -> ResourceIndex {
        let mut rank: Vec<usize> = (0..order.len()).collect();
        for (place, upstream) in order.iter().enumerate() {
            if let Some(slot) = rank.get_mut(*upstream) {
                *slot = place;
            }
        }
        ResourceIndex { rank, ..ResourceIndex::default() }
    }

    /// Where `upstream` stands in precedence (lower wins).
    fn rank(&self, upstream: usize) -> usize {
        self.rank.get(upstream).copied().unwrap_or(upstream)
    }

    /// Adds a listed resource of `upstream` (upstreams are added in configuration order) unless an earlier
    /// upstream already serves its URI; then a collision line is returned instead.
    pub(crate) fn add_resource(&mut self, upstream: usize, raw: &Value, specs: &[UpstreamSpec]) -> Option<String> {
        let uri = raw.get("uri").and_then(Value::as_str)?;
        if let Some(owner) = self.owner(uri).filter(|owner| self.rank(*owner) < self.rank(upstream)) {
            return Some(format!(
                "resource `{uri}` of upstream `{}` is hidden: upstream `{}` (earlier in the config) serves the same URI",
                name_of(specs, upstream),
                name_of(specs, owner),
            ));
        }
        self.listed.entry(uri.to_owned()).or_insert(upstream);
        let mut raw = raw.clone();
        remove_foreign_meta(&mut raw);
        self.resources.push((upstream, raw));
        None
    }

    /// Adds a template of `upstream` unless an earlier upstream declared the same `uriTemplate`; then a collision
    /// line is returned instead.
    pub(crate) fn add_template(&mut self, upstream: usize, raw: &Value, specs: &[UpstreamSpec]) -> Option<String> {
        let template = raw.get("uriTemplate").and_then(Value::as_str)?;
        if let Some(owner) = self.template_owner(template).filter(|owner| *owner != upstream) {
            return Some(format!(
                "resource template `{template}` of upstream `{}` is hidden: upstream `{}` (earlier in the config) \
                 declares the same template",
                name_of(specs, upstream),
                name_of(specs, owner),
            ));
        }
        let mut raw = raw.clone();
        remove_foreign_meta(&mut raw);
        self.templates.push((upstream, raw, UriTemplate::parse(template)));
        None
    }

    /// The earliest upstream in configuration order that lists `uri` or has a template matching it.
    pub(crate) fn owner(&self, uri: &str) -> Option<usize> {
        let listed = self.listed.get(uri).copied();
        // Templates are kept in configuration order, so the first match is the earliest upstream's.
        let templated = self.templates.iter().find(|(_, _, template)| template.matches(uri)).map(|(owner, ..)| *owner);
        match (listed, templated) {
            (Some(listed), Some(templated)) => {
                Some(if self.rank(templated) < self.rank(listed) { templated } else { listed })
            }
            (listed, templated) => listed.or(templated),
        }
    }

    /// The upstream that declared a template with exactly this `uriTemplate` (the earliest one).
    pub(crate) fn template_owner(&self, uri_template: &str) -> Option<usize> {
        self.templates
            .iter()
            .find(|(_, raw, _)| raw.get("uriTemplate").and_then(Value::as_str) == Some(uri_template))
            .map(|(owner, ..)| *owner)
    }

    /// Every listed resource clients see, raw.
    pub(crate) fn resources(&self) -> impl Iterator<Item = &Value> {
        self.resources.iter().map(|(_, raw)| raw)
    }

    /// Every template clients see, raw.
    pub(crate) fn templates(&self) -> impl Iterator<Item = &Value> {
        self.templates.iter().map(|(_, raw, _)| raw)
    }
}

fn name_of(specs: &[UpstreamSpec], index: usize) -> &str {
    specs.get(index).map(|spec| spec.name.as_str()).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn specs() -> Vec<UpstreamSpec> {
        vec![crate::unstarted_upstream("first"), crate::unstarted_upstream("second")]
    }

    #[test]
    fn an_earlier_template_beats_a_later_listed_resource_and_the_loser_is_reported() {
        let mut index = ResourceIndex::default();
        assert_eq!(index.add_template(0, &json!({"uriTemplate": "notes://{id}"}), &specs()), None);
        let collision = index.add_resource(1, &json!({"uri": "notes://1"}), &specs());
        assert!(collision.is_some_and(|line| line.contains("`second`") && line.contains("`first`")));
        assert_eq!(index.owner("notes://1"), Some(0));
        assert_eq!(index.resources().count(), 0, "the shadowed resource is not listed");
    }

    #[test]
    fn precedence_not_the_index_decides_who_serves_a_uri() {
        // Upstream 1 comes first in the file (upstream 0 may be one a reload restarted): its template wins over
        // upstream 0's listed resource, although 0 is the lower index.
        let mut index = ResourceIndex::ranked(&[1, 0]);
        assert_eq!(index.add_template(1, &json!({"uriTemplate": "notes://{id}"}), &specs()), None);
        let collision = index.add_resource(0, &json!({"uri": "notes://1"}), &specs());
        assert!(collision.is_some_and(|line| line.contains("`first`") && line.contains("`second`")));
        assert_eq!(index.owner("notes://1"), Some(1));
        assert_eq!(index.resources().count(), 0, "the shadowed resource is not listed");
    }

    #[test]
    fn an_earlier_listed_resource_beats_a_later_template_and_other_uris_go_to_the_template() {
        let mut index = ResourceIndex::default();
        assert_eq!(
            index.add_resource(0, &json!({"uri": "notes://1", "_meta": {"toolgate/trust": "x"}}), &specs()),
            None
        );
        assert_eq!(index.add_template(1, &json!({"uriTemplate": "notes://{id}"}), &specs()), None);
        assert_eq!((index.owner("notes://1"), index.owner("notes://2")), (Some(0), Some(1)));
        assert_eq!(index.resources().next(), Some(&json!({"uri": "notes://1", "_meta": {}})));
        let duplicate = index.add_template(0, &json!({"uriTemplate": "notes://{id}"}), &specs());
        assert!(duplicate.is_some(), "the same template twice is a collision");
    }
}
