//! The tools each upstream listed when it was last ready, so that a call to one of them while its upstream is down
//! and reconnecting is answered "upstream NAME is reconnecting (attempt N)", audited and counted, instead of the
//! "Unknown tool" a missing name gets.
//!
//! Only the `tools/call` pipeline's resolve phase consults it, and only for a name the catalog does not know. It
//! never routes a call (a down upstream has no connection) and never lists a tool; the pipeline applies the
//! session's filters and the policy's hide to a remembered tool exactly as to a listed one, so it tells a client no
//! more than the catalog did while the upstream was up.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use crate::catalog::{Catalog, CheckedListing, ExposedTool};
use crate::upstream_set::UpstreamSet;
use crate::upstreams::UpstreamStatus;

/// Per upstream index, its last listed tools by exposed name.
#[derive(Default)]
pub(crate) struct KnownTools {
    by_upstream: RwLock<Vec<HashMap<String, Arc<ExposedTool>>>>,
}

impl KnownTools {
    /// After a catalog rebuild: the tools in `catalog` of every upstream with a listing in `listings` (the ones
    /// the catalog was built from) replace what was known of it (so a tool it stopped listing is forgotten); an
    /// upstream without one (down when the rebuild read them) keeps its last known tools. The build's own listings,
    /// not the live ones: an older rebuild installed after an upstream reconnected has none of its tools, and must
    /// not erase them.
    pub(crate) fn remember(&self, catalog: &Catalog, listings: &[Option<Arc<CheckedListing>>]) {
        let ready: Vec<bool> = listings.iter().map(Option::is_some).collect();
        let mut listed: Vec<HashMap<String, Arc<ExposedTool>>> = vec![HashMap::new(); listings.len()];
        for tool in catalog.tools() {
            if let Some(tools) = listed.get_mut(tool.upstream) {
                tools.insert(tool.exposed_name.clone(), Arc::clone(tool));
            }
        }
        let Ok(mut known) = self.by_upstream.write() else { return };
        known.resize_with(listings.len(), HashMap::new);
        for ((slot, tools), ready) in known.iter_mut().zip(listed).zip(ready) {
            if ready {
                *slot = tools;
            }
        }
    }

    /// The last listed tool exposed as `name` whose upstream is down now, with the reconnect attempt its upstream
    /// is on (the status's failed attempts in a row: 1 right after a disconnect).
    pub(crate) fn reconnecting(&self, name: &str, upstreams: &UpstreamSet) -> Option<(Arc<ExposedTool>, u32)> {
        let known = self.by_upstream.read().ok()?;
        known.iter().enumerate().find_map(|(index, tools)| {
            let tool = tools.get(name)?;
            let runtime = upstreams.get(index)?;
            // A config reload removed or replaced it: its tools are unknown, not coming back.
            if runtime.is_withdrawn() {
                return None;
            }
            match runtime.status() {
                UpstreamStatus::Down { attempts, .. } => Some((Arc::clone(tool), attempts)),
                UpstreamStatus::Starting | UpstreamStatus::Ready { .. } => None,
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use toolgate_core::policy::compile;
    use toolgate_spec::GatewaySpec;

    use super::*;
    use crate::catalog::UpstreamListing;
    use crate::state::shared::Shared;

    fn listed(name: &str) -> Arc<CheckedListing> {
        let tools = vec![json!({"name": name, "inputSchema": {"type": "object"}})];
        Arc::new(CheckedListing::unpinned(UpstreamListing { tools, ..UpstreamListing::default() }))
    }

    #[test]
    fn an_older_rebuild_installed_after_a_reconnect_keeps_the_reconnected_upstreams_known_tools() -> Result<(), String>
    {
        let spec = GatewaySpec::new(vec![crate::unstarted_upstream("a"), crate::unstarted_upstream("b")]);
        let policy = compile(&spec.guardrails.policy).map_err(|error| error.to_string())?;
        let shared = Shared::new(spec, policy, None);
        let (a, b) = (listed("read"), listed("write"));
        let build = |listings: &[Option<Arc<CheckedListing>>]| {
            Arc::new(Catalog::build_with(&shared.spec.upstreams, listings, &Default::default()))
        };
        // Both listed: `b`'s tool is known.
        let upstreams = shared.upstreams.all();
        upstreams[0].replace_listing(Arc::clone(&a));
        upstreams[1].replace_listing(Arc::clone(&b));
        let both = build(&[Some(Arc::clone(&a)), Some(Arc::clone(&b))]);
        let write = both.tools().iter().find(|tool| tool.upstream == 1).map(|tool| tool.exposed_name.clone());
        let number = shared.next_rebuild();
        assert!(shared.install_catalog(number, &both, &[Some(Arc::clone(&a)), Some(Arc::clone(&b))]));
        // A rebuild of `a` reads the listings while `b` is down; `b` reconnects (its listing is published) before
        // that older rebuild installs its catalog, which has none of `b`'s tools.
        let older = shared.next_rebuild();
        let without_b = build(&[Some(Arc::clone(&a)), None]);
        assert!(shared.install_catalog(older, &without_b, &[Some(Arc::clone(&a)), None]));
        // `b` goes down again before its own rebuild installs: a call of its tool is "reconnecting", not unknown.
        upstreams[1].mark_down("gone".into(), 1);
        let name = write.ok_or("`b`'s tool is listed")?;
        let known =
            shared.known_tools.reconnecting(&name, &shared.upstreams).map(|(tool, _)| tool.exposed_name.clone());
        assert_eq!(known, Some(name.clone()), "`b`'s last listed tool is still known");
        // A reload withdraws `b`: its tool is unknown from then on, never "reconnecting".
        assert!(upstreams[1].withdraw("removed by a config reload".into()));
        assert!(shared.known_tools.reconnecting(&name, &shared.upstreams).is_none());
        Ok(())
    }
}
