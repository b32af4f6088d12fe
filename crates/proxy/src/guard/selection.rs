//! The tool-selection profile: which visible tools a client is shown at most (a maximum, destructive tools
//! excluded, always-include globs first). Pure: it only orders and filters.

use std::sync::Arc;

use toolgate_core::policy::glob::Glob;
use toolgate_spec::SelectionSpec;

use crate::catalog::ExposedTool;

/// Applies the profile to the tools visible to a session, keeping catalog order within each group.
pub(crate) fn select(tools: Vec<Arc<ExposedTool>>, spec: &SelectionSpec) -> Vec<Arc<ExposedTool>> {
    let always: Vec<Glob> = spec.always_include.iter().filter_map(|pattern| Glob::new(pattern).ok()).collect();
    let is_always = |tool: &ExposedTool| always.iter().any(|glob| glob.matches(&tool.exposed_name));
    let (mut chosen, rest): (Vec<_>, Vec<_>) = tools.into_iter().partition(|tool| is_always(tool));
    let others = rest.into_iter().filter(|tool| !(spec.exclude_destructive && tool.hints.may_destroy()));
    match spec.max_tools {
        Some(max) => chosen.extend(others.take(max.saturating_sub(chosen.len()))),
        None => chosen.extend(others),
    }
    chosen
}

#[cfg(test)]
mod tests {

    use serde_json::json;

    use super::*;
    use crate::catalog::{Catalog, CatalogContext, CheckedListing, UpstreamListing};

    fn catalog() -> Catalog {
        let mut spec = crate::unstarted_upstream("notes");
        spec.trust.level = toolgate_core::trust::TrustLevel::Pinned;
        let tool = |name: &str, destructive: bool| {
            json!({"name": name, "inputSchema": {"type": "object"},
                   "annotations": {"readOnlyHint": false, "destructiveHint": destructive, "openWorldHint": false}})
        };
        let tools =
            vec![tool("add_note", false), tool("delete_note", true), tool("tag_note", false), tool("purge", true)];
        let listing = CheckedListing::pinned_as_listed(UpstreamListing { tools, ..UpstreamListing::default() });
        Catalog::build_with(&[spec], &[Some(Arc::new(listing))], &CatalogContext::default())
    }

    fn names(tools: &[Arc<ExposedTool>]) -> Vec<&str> {
        tools.iter().map(|tool| tool.exposed_name.as_str()).collect()
    }

    #[test]
    fn no_profile_keeps_everything_in_order() {
        let catalog = catalog();
        let chosen = select(catalog.tools().to_vec(), &SelectionSpec::default());
        assert_eq!(names(&chosen), ["add_note", "delete_note", "tag_note", "purge"]);
    }

    #[test]
    fn always_include_comes_first_then_the_maximum_applies_without_destructive_tools() {
        let catalog = catalog();
        let spec =
            SelectionSpec { max_tools: Some(2), exclude_destructive: true, always_include: vec!["purge".into()] };
        let chosen = select(catalog.tools().to_vec(), &spec);
        assert_eq!(
            names(&chosen),
            ["purge", "add_note"],
            "always-included even when destructive; then the first others"
        );
    }
}
