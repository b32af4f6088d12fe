//! The tool-selection profile: which visible tools a client is shown at most (a maximum, destructive tools
//! excluded, always-include globs first). Pure: it only orders and filters.

use std::sync::Arc;

use toolgate_core::policy::glob::Glob;

use crate::catalog::ExposedTool;
use crate::spec::SelectionSpec;

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
