//! Who may see and call which tool: the pure rules over a catalog snapshot, a compiled policy and what is known of
//! a session ([`Viewer`]).
//!
//! - [`resolve`] and [`visible_to`]: the tool a name leads to for a session (task-required tools never, app-only
//!   tools only for MCP Apps clients).
//! - [`call_facts`] and [`decide_with`]: the facts the policy sees and its decision, bumped to confirm for a
//!   quarantined tool.
//! - [`visible_tools`]: what `tools/list` shows a session.
//! - [`current_tool`]: whether an approval still covers the call it was given for, against the catalog as it is now.
//!
//! No IO, no locks, no clock: every input is handed in, so each rule is tested on its own (`access/tests.rs`). The
//! callers take the snapshot (`crate::state`) and do the bookkeeping.

use std::sync::Arc;

use toolgate_core::decision::{Decision, Reason, Verdict};
use toolgate_core::policy::{CallFacts, CompiledPolicy, decide as policy_decide, visible};
use toolgate_spec::SelectionSpec;

use crate::catalog::{Catalog, ExposedTool};
use crate::guard::selection::select;

/// What the rules know of a session at one moment.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Viewer<'a> {
    /// The caller's scopes.
    pub(crate) scopes: &'a [String],
    /// An open-world source's text has reached the session.
    pub(crate) tainted: bool,
    /// The client declared the MCP Apps extension (it may see app-only tools).
    pub(crate) apps: bool,
}

/// The session's filters on a tool: task-required tools are never called here, app-only ones only by MCP Apps
/// clients.
pub(crate) fn visible_to(tool: &ExposedTool, viewer: &Viewer<'_>) -> bool {
    !tool.task_required && (!tool.app_only || viewer.apps)
}

/// The tool `name` leads to in `catalog`, as this session may see it.
pub(crate) fn resolve(catalog: &Catalog, viewer: &Viewer<'_>, name: &str) -> Option<Arc<ExposedTool>> {
    catalog.tool(name).filter(|tool| visible_to(tool, viewer)).cloned()
}

/// The facts the policy sees about a call of `tool` in a session.
pub(crate) fn call_facts<'a>(tool: &'a ExposedTool, viewer: &Viewer<'a>) -> CallFacts<'a> {
    CallFacts::new(&tool.upstream_name, &tool.original_name, &tool.trusted)
        .with_scopes(viewer.scopes)
        .with_session_tainted(viewer.tainted)
}

/// The decision for a call of `tool` with these facts: the policy's, bumped from allow to confirm for a quarantined
/// tool (deny and hide stand). A quarantined tool's confirmation names the quarantine first, so the person asked
/// knows the definition is unreviewed. Also what the console's inventory shows per caller.
pub(crate) fn decide_with(policy: &CompiledPolicy, tool: &ExposedTool, facts: &CallFacts<'_>) -> Decision {
    let mut decision = policy_decide(policy, facts);
    if tool.quarantined && matches!(decision.verdict, Verdict::Allow | Verdict::Confirm) {
        decision.verdict = Verdict::Confirm;
        decision.reasons.insert(
            0,
            Reason::new(
                "pin-quarantine",
                "the tool's definition is not the pinned one (new or changed) and waits for review; its hints count as \
                 untrusted",
            ),
        );
    }
    decision
}

/// The tools a session sees: not task-required, app-only ones only for MCP Apps clients, not hidden by the
/// policy, then the selection profile.
pub(crate) fn visible_tools(
    catalog: &Catalog,
    policy: &CompiledPolicy,
    viewer: &Viewer<'_>,
    selection: &SelectionSpec,
) -> Vec<Arc<ExposedTool>> {
    let shown: Vec<_> = catalog
        .tools()
        .iter()
        .filter(|tool| visible_to(tool, viewer))
        .filter(|tool| visible(policy, &call_facts(tool, viewer)).verdict != Verdict::Hide)
        .cloned()
        .collect();
    select(shown, selection)
}

/// Why an approval no longer covers its call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Lapse {
    /// For the model and the audit row.
    pub(crate) why: &'static str,
    /// The fingerprint the call would reach now, when the name still leads to a tool.
    pub(crate) current_fingerprint: Option<String>,
    /// The fingerprint the person was asked about, when the call's tool is not that definition (a 2026-07-28
    /// retry: its call was resolved afresh, its request state names what was asked).
    pub(crate) approved_fingerprint: Option<String>,
}

/// The tool a call approved for `approved` would reach now, resolved from `catalog` for this session; a lapse when
/// that is not the definition the person approved, or `policy` would no longer let the call through.
pub(crate) fn current_tool(
    catalog: &Catalog,
    policy: &CompiledPolicy,
    viewer: &Viewer<'_>,
    approved: &ExposedTool,
) -> Result<Arc<ExposedTool>, Lapse> {
    // Gone and hidden read the same, as everywhere else: a hidden tool cannot be told from a missing one.
    let gone = || Lapse { why: "it is no longer available", current_fingerprint: None, approved_fingerprint: None };
    let current = resolve(catalog, viewer, &approved.exposed_name).ok_or_else(gone)?;
    let lapse = |why| Lapse { why, current_fingerprint: Some(current.fingerprint.clone()), approved_fingerprint: None };
    if current.upstream != approved.upstream || current.original_name != approved.original_name {
        return Err(lapse("its name now leads to another tool"));
    }
    if current.fingerprint != approved.fingerprint {
        return Err(lapse("its definition changed"));
    }
    if current.quarantined && !approved.quarantined {
        return Err(lapse("its definition was quarantined"));
    }
    match decide_with(policy, &current, &call_facts(&current, viewer)).verdict {
        Verdict::Allow | Verdict::Confirm => Ok(current),
        Verdict::Hide => Err(gone()),
        Verdict::Deny => Err(lapse("the policy now refuses it")),
    }
}

#[cfg(test)]
mod tests;
