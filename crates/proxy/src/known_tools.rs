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

use crate::catalog::{Catalog, ExposedTool};
use crate::upstreams::{UpstreamRuntime, UpstreamStatus};

/// Per upstream index, its last listed tools by exposed name.
#[derive(Default)]
pub(crate) struct KnownTools {
    by_upstream: RwLock<Vec<HashMap<String, Arc<ExposedTool>>>>,
}

impl KnownTools {
    /// After a catalog rebuild: the tools in `catalog` of every upstream with a listing (connected) replace what
    /// was known of it (so a tool it stopped listing is forgotten); an upstream without one (down) keeps its last
    /// known tools. The listing, not the status, says so: the run task says ready only after this rebuild.
    pub(crate) fn remember(&self, catalog: &Catalog, upstreams: &[Arc<UpstreamRuntime>]) {
        let ready: Vec<bool> = upstreams.iter().map(|runtime| runtime.checked_listing().is_some()).collect();
        let mut listed: Vec<HashMap<String, Arc<ExposedTool>>> = vec![HashMap::new(); upstreams.len()];
        for tool in catalog.tools() {
            if let Some(tools) = listed.get_mut(tool.upstream) {
                tools.insert(tool.exposed_name.clone(), Arc::clone(tool));
            }
        }
        let Ok(mut known) = self.by_upstream.write() else { return };
        known.resize_with(upstreams.len(), HashMap::new);
        for ((slot, tools), ready) in known.iter_mut().zip(listed).zip(ready) {
            if ready {
                *slot = tools;
            }
        }
    }

    /// The last listed tool exposed as `name` whose upstream is down now, with the reconnect attempt its upstream
    /// is on (the status's failed attempts in a row: 1 right after a disconnect).
    pub(crate) fn reconnecting(
        &self,
        name: &str,
        upstreams: &[Arc<UpstreamRuntime>],
    ) -> Option<(Arc<ExposedTool>, u32)> {
        let known = self.by_upstream.read().ok()?;
        known.iter().enumerate().find_map(|(index, tools)| {
            let tool = tools.get(name)?;
            match upstreams.get(index)?.status() {
                UpstreamStatus::Down { attempts, .. } => Some((Arc::clone(tool), attempts)),
                UpstreamStatus::Starting | UpstreamStatus::Ready { .. } => None,
            }
        })
    }
}
