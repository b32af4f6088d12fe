//! The tool inventory the console shows: after every catalog rebuild, each connected upstream's listing is written
//! to the store ([`toolgate_store::Store::replace_inventory`]) with every tool's effective hints and sources,
//! `_meta["toolgate/annotations"]`, risk, lint findings, fingerprint, whether clients see it and, for each caller
//! identity the config allows (`GatewaySpec::identities`), what the policy in force would do with a call: the
//! decision a fresh session of that caller gets, so a tool that a mode or a scope rule hides shows as such.
//!
//! Never on a call's path: [`InventoryPublisher::publish`] keeps the latest inputs and spawns the work; writes run
//! one at a time and each takes the newest inputs, so the store always ends with the latest catalog even when
//! rebuilds come faster than writes. A failed write is logged, never retried or surfaced to a client. An upstream
//! that is down is not rewritten: the console keeps showing its last listing; one removed from the config is dropped.

use std::sync::{Arc, Mutex};

use serde_json::Value;
use toolgate_core::policy::{CallFacts, CompiledPolicy};
use toolgate_core::{HintOverrides, ToolDefinition, assess_tool};
use toolgate_spec::UpstreamSpec;
use toolgate_store::{InventoryAccess, InventoryFinding, InventoryState, InventoryTool, Store, ToolRisk};

use toolgate_core::trust::Convention;

use crate::access::decide_with;
use crate::catalog::{
    Catalog, CheckedListing, ExposedTool, META_KEY, expose_definition, is_quarantined, listing_convention,
};
use crate::naming::exposed_name;
use crate::session::Caller;

/// What one inventory is computed from: a catalog and the checked listings it was built from.
pub(crate) struct InventoryInputs {
    /// Every upstream slot's spec, by index (a withdrawn one's listing is `None`).
    pub(crate) specs: Vec<UpstreamSpec>,
    /// The upstreams in service: the inventory keeps only theirs.
    pub(crate) configured: Vec<String>,
    pub(crate) listings: Vec<Option<Arc<CheckedListing>>>,
    pub(crate) catalog: Arc<Catalog>,
    /// The policy in force.
    pub(crate) policy: Arc<CompiledPolicy>,
    /// Every identity a session can have.
    pub(crate) identities: Vec<Caller>,
}

#[derive(Default)]
struct Shared {
    /// The newest inputs not yet written.
    latest: Mutex<Option<InventoryInputs>>,
    /// Held while writing, so writes never interleave.
    writing: tokio::sync::Mutex<()>,
}

/// Writes the inventory in the background, newest inputs last.
#[derive(Default, Clone)]
pub(crate) struct InventoryPublisher {
    shared: Arc<Shared>,
}

impl InventoryPublisher {
    /// Records `inputs` as the newest and spawns a write (outside a runtime nothing is written).
    pub(crate) fn publish(&self, store: &Store, inputs: InventoryInputs) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else { return };
        if let Ok(mut latest) = self.shared.latest.lock() {
            *latest = Some(inputs);
        }
        let (shared, store) = (Arc::clone(&self.shared), store.clone());
        runtime.spawn(async move {
            let _writing = shared.writing.lock().await;
            // A write that started later took these inputs already: nothing newer to write.
            let Some(inputs) = shared.latest.lock().ok().and_then(|mut latest| latest.take()) else { return };
            for (upstream, tools) in inventory(&inputs) {
                if let Err(error) = store.replace_inventory(&upstream, &tools).await {
                    tracing::warn!(%upstream, %error, "the tool inventory could not be written; the console may be stale");
                }
            }
            let configured: Vec<&str> = inputs.configured.iter().map(String::as_str).collect();
            if let Err(error) = store.retain_inventory(&configured).await {
                tracing::warn!(%error, "upstreams removed from the config could not be dropped from the tool inventory");
            }
        });
    }
}

/// Every connected upstream's tools, in listing order, with what the console shows about each.
pub(crate) fn inventory(inputs: &InventoryInputs) -> Vec<(String, Vec<InventoryTool>)> {
    let mut upstreams = Vec::new();
    for (index, (spec, checked)) in inputs.specs.iter().zip(&inputs.listings).enumerate() {
        let Some(checked) = checked else { continue };
        let convention = listing_convention(&checked.listing.tools);
        let tools = checked
            .listing
            .tools
            .iter()
            .filter_map(|raw| ToolDefinition::from_value(raw.clone()).ok())
            .filter_map(|tool| {
                let fingerprint = checked.fingerprints.get(tool.name()).map(String::as_str).unwrap_or_default();
                let quarantined = is_quarantined(spec, checked, tool.name(), fingerprint);
                inventory_tool(index, spec, &tool, inputs, quarantined, &convention)
            })
            .collect();
        upstreams.push((spec.name.clone(), tools));
    }
    upstreams
}

fn inventory_tool(
    index: usize,
    spec: &UpstreamSpec,
    tool: &ToolDefinition,
    inputs: &InventoryInputs,
    quarantined: bool,
    convention: &Convention,
) -> Option<InventoryTool> {
    let name = exposed_name(&spec.prefix, tool.name());
    let listed =
        inputs.catalog.tool(&name).filter(|exposed| exposed.upstream == index && exposed.original_name == tool.name());
    let (exposed, state, reason) = match listed {
        Some(exposed) if exposed.quarantined => {
            (Arc::clone(exposed), InventoryState::Quarantined, Some("changed since it was pinned; calls need a person"))
        }
        Some(exposed) if exposed.task_required => {
            (Arc::clone(exposed), InventoryState::Hidden, Some("requires tasks, which toolgate does not relay"))
        }
        Some(exposed) if exposed.app_only => {
            (Arc::clone(exposed), InventoryState::Visible, Some("only for clients with the MCP Apps extension"))
        }
        Some(exposed) => (Arc::clone(exposed), InventoryState::Visible, None),
        None => {
            // Not in the catalog: shown as it would be exposed, untrusted when its definition waits for review.
            let exposed = Arc::new(expose_definition(tool, &name, spec, quarantined, convention).ok()?);
            if quarantined {
                (
                    exposed,
                    InventoryState::Quarantined,
                    Some("changed since it was pinned; hidden until a person pins it"),
                )
            } else {
                (exposed, InventoryState::Hidden, Some("another upstream earlier in the config exposes the same name"))
            }
        }
    };
    let overrides = spec.overrides.get(tool.name()).cloned().unwrap_or_else(HintOverrides::default);
    let findings = assess_tool(tool, &overrides)
        .findings
        .into_iter()
        .map(|finding| InventoryFinding {
            code: finding.code.to_owned(),
            severity: finding.severity.as_str().to_owned(),
            message: finding.message,
        })
        .collect();
    // Only a tool in the catalog can be called; one hidden by the catalog is hidden from everyone (`reason` says why).
    let access = match listed {
        Some(listed) if !listed.task_required => access(listed, &inputs.policy, &inputs.identities),
        _ => Vec::new(),
    };
    Some(record(tool, &name, &exposed, state, reason, findings, access))
}

/// What the policy would do with a call of `tool` for each identity, in a fresh (untainted) session.
fn access(tool: &ExposedTool, policy: &CompiledPolicy, identities: &[Caller]) -> Vec<InventoryAccess> {
    identities
        .iter()
        .map(|caller| {
            let facts =
                CallFacts::new(&tool.upstream_name, &tool.original_name, &tool.trusted).with_scopes(&caller.scopes);
            let decision = decide_with(policy, tool, &facts);
            InventoryAccess { caller: caller.name.clone(), verdict: decision.verdict, rule: decision.rule().to_owned() }
        })
        .collect()
}

fn record(
    tool: &ToolDefinition,
    name: &str,
    exposed: &ExposedTool,
    state: InventoryState,
    reason: Option<&str>,
    findings: Vec<InventoryFinding>,
    access: Vec<InventoryAccess>,
) -> InventoryTool {
    InventoryTool {
        upstream: exposed.upstream_name.clone(),
        tool: tool.name().to_owned(),
        exposed_name: name.to_owned(),
        title: exposed.facts.display_title.clone(),
        state,
        state_reason: reason.map(str::to_owned),
        hints: serde_json::to_value(exposed.hints).unwrap_or(Value::Null),
        annotations: exposed
            .definition
            .pointer(&format!("/_meta/{}", META_KEY.replace('/', "~1")))
            .cloned()
            .unwrap_or(Value::Null),
        risk: ToolRisk::from_facts(&exposed.facts),
        findings,
        access,
        fingerprint: exposed.fingerprint.clone(),
        updated_at: String::new(),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use serde_json::json;
    use toolgate_core::decision::Verdict;
    use toolgate_core::fingerprint::fingerprint_tool;
    use toolgate_core::policy::{PolicySpec, compile};

    use super::*;
    use crate::catalog::{CatalogContext, UpstreamListing};
    use toolgate_spec::Quarantine;

    fn spec(name: &str) -> UpstreamSpec {
        crate::unstarted_upstream(name)
    }

    #[test]
    fn every_listed_tool_is_inventoried_with_why_clients_do_not_see_it() {
        let notes = json!([
            {"name": "delete_note", "description": "Deletes a note.", "inputSchema": {"type": "object"}},
            {"name": "search", "description": "Searches notes.", "inputSchema": {"type": "object"},
             "annotations": {"readOnlyHint": true}},
            {"name": "changed", "inputSchema": {"type": "object"}}
        ]);
        let files = json!([{"name": "search", "inputSchema": {"type": "object"}}]);
        // `notes` is pinned: each tool but `changed` is listed as approved.
        let checked = |tools: Value, approved: &[&str]| {
            let tools = tools.as_array().cloned().unwrap_or_default();
            let fingerprints: HashMap<String, String> = tools
                .iter()
                .filter_map(|raw| ToolDefinition::from_value(raw.clone()).ok())
                .filter_map(|tool| Some((tool.name().to_owned(), fingerprint_tool(&tool).ok()?.whole)))
                .collect();
            let approved = fingerprints.iter().filter(|(name, _)| approved.contains(&name.as_str()));
            Some(Arc::new(CheckedListing {
                approved: Some(approved.map(|(name, fingerprint)| (name.clone(), fingerprint.clone())).collect()),
                fingerprints,
                listing: Arc::new(UpstreamListing { tools, ..Default::default() }),
                dropped: Default::default(),
                content_approved: Some(std::collections::HashSet::new()),
            }))
        };
        let unpinned = |tools: Value| {
            let tools = tools.as_array().cloned().unwrap_or_default();
            Some(Arc::new(CheckedListing::unpinned(UpstreamListing { tools, ..Default::default() })))
        };
        let mut notes_spec = spec("notes");
        notes_spec.trust.level = toolgate_core::trust::TrustLevel::Pinned;
        let specs = vec![notes_spec, spec("files"), spec("down")];
        let listings = vec![checked(notes, &["delete_note", "search"]), unpinned(files), None];
        let context = CatalogContext { quarantine: Quarantine::Hide, ..Default::default() };
        let catalog = Arc::new(Catalog::build_with(&specs, &listings, &context));
        // Destructive tools need `admin`: hidden from a caller without it, confirmed for one with it.
        let policy: PolicySpec = serde_json::from_value(json!({"rule": [
            {"id": "admins-only", "effect": "hide", "match": {"destructive": true, "missing_scopes": "admin"}}
        ]}))
        .unwrap_or_else(|error| unreachable!("{error}"));
        let policy = Arc::new(compile(&policy).unwrap_or_else(|error| unreachable!("{error}")));
        let identities = vec![Caller::named("ops", vec!["admin".into()]), Caller::named("agent", Vec::new())];
        let configured = specs.iter().map(|spec| spec.name.clone()).collect();
        let upstreams = inventory(&InventoryInputs { specs, configured, listings, catalog, policy, identities });

        let names: Vec<&str> = upstreams.iter().map(|(name, _)| name.as_str()).collect();
        assert_eq!(names, ["notes", "files"], "an upstream that is down is not rewritten");
        let states: Vec<(&str, InventoryState)> =
            upstreams.iter().flat_map(|(_, tools)| tools).map(|tool| (tool.tool.as_str(), tool.state)).collect();
        assert_eq!(
            states,
            [
                ("delete_note", InventoryState::Visible),
                ("search", InventoryState::Visible),
                ("changed", InventoryState::Quarantined),
                ("search", InventoryState::Hidden),
            ]
        );
        let delete = &upstreams[0].1[0];
        assert_eq!((delete.risk.level, delete.risk.category.as_str()), (4, "destructive"));
        assert_eq!(delete.hints["destructiveHint"]["value"], true);
        assert_eq!(delete.hints["destructiveHint"]["source"], "inferred");
        assert_eq!(delete.annotations["upstream"], "notes");
        assert_eq!(delete.annotations["fingerprint"].as_str(), Some(delete.fingerprint.as_str()));
        assert!(!delete.findings.is_empty(), "a tool without annotations has lint findings");
        let access = |tool: &InventoryTool| -> Vec<(String, Verdict, String)> {
            tool.access.iter().map(|access| (access.caller.clone(), access.verdict, access.rule.clone())).collect()
        };
        assert_eq!(
            access(delete),
            [
                ("ops".into(), Verdict::Confirm, "default-destructive-confirm".into()),
                ("agent".into(), Verdict::Hide, "admins-only".into()),
            ],
            "each caller's verdict under the policy, with the rule that gave it"
        );
        let search = &upstreams[0].1[1];
        assert!(search.access.iter().all(|access| access.verdict == Verdict::Allow), "{:?}", search.access);
        let collision = &upstreams[1].1[0];
        assert!(collision.access.is_empty(), "a tool no client can call has no per-caller verdicts");
        assert!(collision.state_reason.as_deref().is_some_and(|reason| reason.contains("same name")));
    }
}
