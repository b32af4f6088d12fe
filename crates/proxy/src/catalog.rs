//! The aggregated catalog: every upstream's tools, prompts, resources and templates under the names clients see,
//! with routes back to the owning upstream.
//!
//! Built from upstream listings by a pure function, and replaced whole when any upstream's lists change (readers
//! hold an `Arc<Catalog>` snapshot, so a call never sees half an update). Tool definitions are rewritten here and
//! only here: the four hints are made explicit from the core's effective values, and provenance, risk, action
//! phrase and fingerprint go under `_meta["toolgate/annotations"]`. Every other field of the definition survives
//! byte for byte in meaning. Name collisions are resolved by configuration order and reported.
//!
//! A quarantined definition (changed since it was pinned, or new on a pinned upstream) is exposed as untrusted
//! whatever the upstream's trust: nobody reviewed it, so its declared hints may only tighten. Trusting it would let
//! a rug pull relax its own hints past read-only mode or a deny rule.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use serde_json::{Map, Value, json};
use toolgate_core::facts::{ToolFacts, tool_facts};
use toolgate_core::trust::{TrustLevel, TrustedHints, resolve_trusted_hints};
use toolgate_core::{EffectiveHints, Hint, HintOverrides, HintSource, ToolDefinition, assess_tool};

use crate::naming::exposed_name;
use crate::spec::{Quarantine, UpstreamSpec};
use crate::uri_template::UriTemplate;

/// The `_meta` key under which toolgate puts what it knows about a tool.
pub const META_KEY: &str = "toolgate/annotations";

/// What one upstream listed, raw.
#[derive(Debug, Clone, Default)]
pub struct UpstreamListing {
    /// `tools/list` items.
    pub tools: Vec<Value>,
    /// `prompts/list` items.
    pub prompts: Vec<Value>,
    /// `resources/list` items.
    pub resources: Vec<Value>,
    /// `resources/templates/list` items.
    pub templates: Vec<Value>,
}

/// A tool as clients see it, with its route.
#[derive(Debug, Clone)]
pub struct ExposedTool {
    /// Index of the owning upstream in the spec.
    pub upstream: usize,
    /// The owning upstream's configured name.
    pub upstream_name: String,
    /// The upstream's own name for the tool.
    pub original_name: String,
    /// The name clients see.
    pub exposed_name: String,
    /// The rewritten definition sent in `tools/list`.
    pub definition: Value,
    /// The hints toolgate enforces and emits.
    pub hints: EffectiveHints,
    /// The same hints with the trust rule that produced each.
    pub trusted: TrustedHints,
    /// Category, risk, action phrase and title, from the trusted hints.
    pub facts: ToolFacts,
    /// The definition changed since it was pinned, or is new on a pinned upstream, and waits for a person (listed
    /// only with `confirm` quarantine). Its hints were resolved as untrusted.
    pub quarantined: bool,
    /// `sha256:` fingerprint of the definition the upstream sent.
    pub fingerprint: String,
    /// `_meta.ui.visibility` lacks `"model"`: only clients with the MCP Apps extension see it.
    pub app_only: bool,
    /// `execution.taskSupport` is `required`: hidden while toolgate does not relay tasks.
    pub task_required: bool,
}

/// A prompt as clients see it, with its route.
#[derive(Debug, Clone)]
pub struct ExposedPrompt {
    /// Index of the owning upstream.
    pub upstream: usize,
    /// The upstream's own name.
    pub original_name: String,
    /// The definition with the exposed name.
    pub definition: Value,
}

/// Everything every upstream offers, as clients see it.
#[derive(Debug, Clone, Default)]
pub struct Catalog {
    tools: Vec<Arc<ExposedTool>>,
    tool_index: HashMap<String, usize>,
    prompts: Vec<ExposedPrompt>,
    prompt_index: HashMap<String, usize>,
    resources: Vec<(usize, Value)>,
    resource_index: HashMap<String, usize>,
    templates: Vec<(usize, Value, UriTemplate)>,
    resource_servers: Vec<usize>,
    /// One line per name that lost a collision.
    pub collisions: Vec<String>,
}

impl Catalog {
    /// Builds the catalog from each upstream's listing (`None` for an upstream that is not connected).
    pub fn build(specs: &[UpstreamSpec], listings: &[Option<Arc<UpstreamListing>>]) -> Catalog {
        Self::build_with(specs, listings, &CatalogContext::default())
    }

    /// Like [`Catalog::build`], with what the gateway knows beyond the listings.
    pub fn build_with(
        specs: &[UpstreamSpec],
        listings: &[Option<Arc<UpstreamListing>>],
        context: &CatalogContext,
    ) -> Catalog {
        let resource_servers = &context.resource_servers;
        let mut catalog = Catalog { resource_servers: resource_servers.to_vec(), ..Catalog::default() };
        let mut owners: HashMap<String, usize> = HashMap::new();
        for (upstream, (spec, listing)) in specs.iter().zip(listings).enumerate() {
            let Some(listing) = listing else { continue };
            let quarantined = context.quarantined.get(&upstream);
            for raw in &listing.tools {
                let name = raw.get("name").and_then(Value::as_str).unwrap_or_default();
                let is_quarantined = quarantined.is_some_and(|names| names.contains(name));
                if is_quarantined && context.quarantine == Quarantine::Hide {
                    continue;
                }
                catalog.add_tool(upstream, spec, raw, &mut owners, specs, is_quarantined);
            }
            for raw in &listing.prompts {
                catalog.add_prompt(upstream, spec, raw, specs);
            }
            for raw in &listing.resources {
                if let Some(uri) = raw.get("uri").and_then(Value::as_str) {
                    catalog.resource_index.entry(uri.to_owned()).or_insert(upstream);
                    catalog.resources.push((upstream, raw.clone()));
                }
            }
            for raw in &listing.templates {
                if let Some(template) = raw.get("uriTemplate").and_then(Value::as_str) {
                    catalog.templates.push((upstream, raw.clone(), UriTemplate::parse(template)));
                }
            }
        }
        catalog
    }

    fn add_tool(
        &mut self,
        upstream: usize,
        spec: &UpstreamSpec,
        raw: &Value,
        owners: &mut HashMap<String, usize>,
        specs: &[UpstreamSpec],
        quarantined: bool,
    ) {
        let tool = match ToolDefinition::from_value(raw.clone()) {
            Ok(tool) => tool,
            Err(error) => {
                tracing::warn!(upstream = %spec.name, %error, "skipping an invalid tool definition");
                return;
            }
        };
        let original_name = tool.name().to_owned();
        let name = exposed_name(&spec.prefix, &original_name);
        if let Some(owner) = owners.get(&name) {
            let owner_name = specs.get(*owner).map(|owner| owner.name.as_str()).unwrap_or_default();
            self.collisions.push(format!(
                "tool `{name}` of upstream `{}` is hidden: upstream `{owner_name}` (earlier in the config) exposes \
                 the same name",
                spec.name
            ));
            return;
        }
        owners.insert(name.clone(), upstream);
        let exposed = expose_definition(&tool, &name, spec, quarantined);
        self.tool_index.insert(name, self.tools.len());
        self.tools.push(Arc::new(ExposedTool { upstream, original_name, ..exposed }));
    }

    fn add_prompt(&mut self, upstream: usize, spec: &UpstreamSpec, raw: &Value, specs: &[UpstreamSpec]) {
        let Some(original_name) = raw.get("name").and_then(Value::as_str) else { return };
        let name = exposed_name(&spec.prefix, original_name);
        if let Some(owner) = self.prompt_index.get(&name).and_then(|index| self.prompts.get(*index)) {
            let owner_name = specs.get(owner.upstream).map(|owner| owner.name.as_str()).unwrap_or_default();
            self.collisions.push(format!(
                "prompt `{name}` of upstream `{}` is hidden: upstream `{owner_name}` exposes the same name",
                spec.name
            ));
            return;
        }
        let mut definition = raw.clone();
        definition["name"] = Value::String(name.clone());
        self.prompt_index.insert(name, self.prompts.len());
        self.prompts.push(ExposedPrompt { upstream, original_name: original_name.to_owned(), definition });
    }

    /// Every exposed tool, in configuration order then each upstream's order.
    pub fn tools(&self) -> &[Arc<ExposedTool>] {
        &self.tools
    }

    /// The tool clients call `name`.
    pub fn tool(&self, name: &str) -> Option<&Arc<ExposedTool>> {
        self.tool_index.get(name).and_then(|index| self.tools.get(*index))
    }

    /// Every exposed prompt.
    pub fn prompts(&self) -> &[ExposedPrompt] {
        &self.prompts
    }

    /// The prompt clients call `name`.
    pub fn prompt(&self, name: &str) -> Option<&ExposedPrompt> {
        self.prompt_index.get(name).and_then(|index| self.prompts.get(*index))
    }

    /// Every listed resource, raw.
    pub fn resources(&self) -> impl Iterator<Item = &Value> {
        self.resources.iter().map(|(_, raw)| raw)
    }

    /// Every resource template, raw.
    pub fn templates(&self) -> impl Iterator<Item = &Value> {
        self.templates.iter().map(|(_, raw, _)| raw)
    }

    /// The upstream that owns a resource URI: a listed resource first, then the first matching template, then
    /// the only upstream that serves resources at all (servers accept URIs they do not list).
    pub fn resource_owner(&self, uri: &str) -> Option<usize> {
        self.resource_index
            .get(uri)
            .copied()
            .or_else(|| self.templates.iter().find(|(_, _, template)| template.matches(uri)).map(|(owner, ..)| *owner))
            .or(match self.resource_servers.as_slice() {
                [only] => Some(*only),
                _ => None,
            })
    }
}

/// The trust level a tool of this upstream gets: a quarantined definition (nobody reviewed it) is untrusted; a
/// verified upstream's tool counts as verified only when its fingerprint is in the checked manifest.
fn trust_level(spec: &UpstreamSpec, fingerprint: &str, quarantined: bool) -> TrustLevel {
    if quarantined {
        return TrustLevel::Untrusted;
    }
    match spec.trust.level {
        TrustLevel::Verified => match &spec.trust.verified_fingerprints {
            Some(verified) if verified.contains(fingerprint) => TrustLevel::Verified,
            _ => TrustLevel::Untrusted,
        },
        level => level,
    }
}

/// Rewrites one tool for clients: exposed name, explicit hints, toolgate's `_meta` record. `upstream` and
/// `original_name` are left for the caller to fill in. A quarantined definition's hints are resolved as untrusted
/// and its `_meta` record says `"quarantined": true`.
pub(crate) fn expose_definition(
    tool: &ToolDefinition,
    name: &str,
    spec: &UpstreamSpec,
    quarantined: bool,
) -> ExposedTool {
    let overrides = spec.overrides.get(tool.name()).cloned().unwrap_or_else(HintOverrides::default);
    let assessment = assess_tool(tool, &overrides);
    let fingerprint = match &assessment.fingerprint {
        Ok(fingerprint) => fingerprint.whole.clone(),
        Err(error) => format!("unavailable: {error}"),
    };
    let trust = trust_level(spec, &fingerprint, quarantined);
    let trusted = resolve_trusted_hints(
        &overrides,
        &assessment.normalized.declared,
        Some(&assessment.inference),
        trust,
        spec.trust.min_confidence,
    );
    let facts = tool_facts(tool, &trusted.hints);
    let mut definition = tool.raw().clone();
    definition.insert("name".into(), Value::String(name.to_owned()));

    let mut annotations = tool.annotations().cloned().unwrap_or_default();
    for hint in Hint::ALL {
        annotations.insert(hint.wire_key().into(), Value::Bool(trusted.hints.get(hint).value));
    }
    if let Some(title) = &overrides.title {
        annotations.insert("title".into(), Value::String(title.clone()));
    }
    definition.insert("annotations".into(), Value::Object(annotations));

    let mut sources = Map::new();
    let mut rules = Map::new();
    let mut confidence = Map::new();
    for hint in Hint::ALL {
        let effective = trusted.hints.get(hint);
        sources.insert(hint.wire_key().into(), Value::String(effective.source.as_str().into()));
        rules.insert(hint.wire_key().into(), json!(trusted.rules.get(hint)));
        if effective.source == HintSource::Inferred {
            confidence.insert(hint.wire_key().into(), json!(assessment.inference.get(hint).confidence));
        }
    }
    let mut record = json!({
        "upstream": spec.name,
        "trust": trust.as_str(),
        "sources": sources,
        "rules": rules,
        "category": facts.category.as_str(),
        "risk": facts.risk_level,
        "action": facts.action,
        "fingerprint": fingerprint,
    });
    if !confidence.is_empty() {
        record["inferredConfidence"] = Value::Object(confidence);
    }
    if quarantined {
        record["quarantined"] = Value::Bool(true);
    }
    if name != tool.name() {
        record["upstreamName"] = Value::String(tool.name().to_owned());
    }
    let mut meta = tool.meta().cloned().unwrap_or_default();
    meta.insert(META_KEY.into(), record);
    definition.insert("_meta".into(), Value::Object(meta));

    let task_required =
        tool.raw().get("execution").and_then(|execution| execution.get("taskSupport")).and_then(Value::as_str)
            == Some("required");
    ExposedTool {
        upstream: 0,
        upstream_name: spec.name.clone(),
        original_name: String::new(),
        exposed_name: name.to_owned(),
        definition: Value::Object(definition),
        hints: trusted.hints,
        trusted,
        facts,
        quarantined,
        fingerprint,
        app_only: tool.is_app_only(),
        task_required,
    }
}

/// What the gateway knows beyond the listings when it builds a catalog.
#[derive(Debug, Clone, Default)]
pub struct CatalogContext {
    /// Upstreams that declared the resources capability (unlisted URIs go to the only one).
    pub resource_servers: Vec<usize>,
    /// Per upstream index, the original names of tools whose definition waits for a person's approval.
    pub quarantined: HashMap<usize, HashSet<String>>,
    /// What a quarantined tool looks like.
    pub quarantine: Quarantine,
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use serde_json::json;
    use toolgate_core::DeclaredHints;
    use toolgate_core::trust::HintRule;

    use super::*;
    use crate::spec::Prefix;

    fn spec(name: &str, prefix: Prefix, overrides: BTreeMap<String, HintOverrides>) -> UpstreamSpec {
        UpstreamSpec { prefix, overrides, ..UpstreamSpec::unstarted(name) }
    }

    fn listing(tools: Value) -> Option<Arc<UpstreamListing>> {
        let tools = tools.as_array().cloned().unwrap_or_default();
        Some(Arc::new(UpstreamListing { tools, ..UpstreamListing::default() }))
    }

    #[test]
    fn rewrites_hints_and_keeps_every_other_field() {
        let tool = json!({
            "name": "purge", "description": "Deletes every note.", "icons": [{"src": "data:,"}], "x-extra": 1,
            "execution": {"taskSupport": "optional"},
            "inputSchema": {"type": "object", "$defs": {"a": {"type": "string"}}, "properties": {"p": {"$ref": "#/$defs/a"}}},
            "annotations": {"readOnlyHint": true, "x-vendorRisk": "high", "title": "Purge"},
            "_meta": {"ui": {"resourceUri": "ui://x", "visibility": ["model", "app"]}}
        });
        let catalog =
            Catalog::build(&[spec("notes", Prefix::None, BTreeMap::new())], &[listing(json!([tool.clone()]))]);
        let exposed = catalog.tool("purge").map(|tool| tool.definition.clone()).unwrap_or_default();
        for key in ["description", "icons", "x-extra", "execution", "inputSchema"] {
            assert_eq!(exposed[key], tool[key], "{key} survives");
        }
        assert_eq!(exposed["annotations"]["x-vendorRisk"], "high");
        assert_eq!(exposed["annotations"]["title"], "Purge");
        for hint in Hint::ALL {
            assert!(exposed["annotations"][hint.wire_key()].is_boolean(), "{} is explicit", hint.wire_key());
        }
        assert_eq!(exposed["_meta"]["ui"], tool["_meta"]["ui"]);
        let record = &exposed["_meta"][META_KEY];
        assert_eq!(record["upstream"], "notes");
        // An untrusted upstream's relaxing declaration ("read-only" on a tool that deletes) does not count.
        assert_eq!(exposed["annotations"]["readOnlyHint"], false);
        assert_eq!(record["trust"], "untrusted");
        assert_eq!(record["rules"]["readOnlyHint"], "declared-relaxing-rejected");
        assert!(record["fingerprint"].as_str().is_some_and(|digest| digest.starts_with("sha256:")));
    }

    #[test]
    fn a_pinned_upstream_s_declarations_win() {
        let mut pinned = spec("notes", Prefix::None, BTreeMap::new());
        pinned.trust.level = TrustLevel::Pinned;
        let tools = json!([{"name": "purge", "description": "Deletes every note.", "inputSchema": {"type": "object"},
                            "annotations": {"readOnlyHint": true}}]);
        let catalog = Catalog::build(&[pinned], &[listing(tools)]);
        let exposed = catalog.tool("purge").map(|tool| tool.definition.clone()).unwrap_or_default();
        assert_eq!(exposed["annotations"]["readOnlyHint"], true);
        assert_eq!(exposed["_meta"][META_KEY]["rules"]["readOnlyHint"], "declared-trusted");
    }

    #[test]
    fn a_verified_upstream_trusts_only_tools_in_its_manifest() {
        let mut verified = spec("notes", Prefix::None, BTreeMap::new());
        verified.trust.level = TrustLevel::Verified;
        verified.trust.verified_fingerprints = Some(std::collections::BTreeSet::new());
        let tools = json!([{"name": "purge", "description": "Deletes every note.", "inputSchema": {"type": "object"},
                            "annotations": {"readOnlyHint": true}}]);
        let catalog = Catalog::build(&[verified], &[listing(tools)]);
        let exposed = catalog.tool("purge").map(|tool| tool.definition.clone()).unwrap_or_default();
        assert_eq!(exposed["_meta"][META_KEY]["trust"], "untrusted", "not in the manifest");
        assert_eq!(exposed["annotations"]["readOnlyHint"], false);
    }

    #[test]
    fn quarantined_tools_are_hidden_or_marked() {
        let tools = json!([{"name": "changed", "inputSchema": {"type": "object"}}, {"name": "same", "inputSchema": {"type": "object"}}]);
        let specs = [spec("notes", Prefix::None, BTreeMap::new())];
        let mut context = CatalogContext::default();
        context.quarantined.insert(0, HashSet::from(["changed".to_owned()]));
        let hidden = Catalog::build_with(&specs, &[listing(tools.clone())], &context);
        assert!(hidden.tool("changed").is_none() && hidden.tool("same").is_some());
        context.quarantine = Quarantine::ConfirmOnly;
        let marked = Catalog::build_with(&specs, &[listing(tools)], &context);
        assert!(marked.tool("changed").is_some_and(|tool| tool.quarantined));
        assert!(marked.tool("same").is_some_and(|tool| !tool.quarantined));
    }

    #[test]
    fn a_quarantined_definition_of_a_pinned_upstream_is_not_believed() {
        let mut pinned = spec("notes", Prefix::None, BTreeMap::new());
        pinned.trust.level = TrustLevel::Pinned;
        let definition = |name: &str| {
            json!({"name": name, "description": "Deletes every note.", "inputSchema": {"type": "object"},
                   "annotations": {"readOnlyHint": true, "openWorldHint": true}})
        };
        let tools = json!([definition("reviewed"), definition("changed")]);
        let context = CatalogContext {
            quarantined: HashMap::from([(0, HashSet::from(["changed".to_owned()]))]),
            quarantine: Quarantine::ConfirmOnly,
            ..CatalogContext::default()
        };
        let catalog = Catalog::build_with(&[pinned], &[listing(tools)], &context);
        let exposed = |name: &str| catalog.tool(name).cloned().unwrap_or_else(|| unreachable!("{name} is listed"));

        let reviewed = exposed("reviewed");
        assert!(reviewed.hints.read_only.value && !reviewed.quarantined);
        assert_eq!(reviewed.definition["_meta"][META_KEY]["trust"], "pinned");
        assert!(reviewed.definition["_meta"][META_KEY].get("quarantined").is_none());

        let changed = exposed("changed");
        assert!(changed.quarantined);
        // The relaxing claim is rejected, so the tool is not read-only and may destroy; the tightening one counts.
        assert!(!changed.hints.read_only.value && changed.hints.may_destroy());
        assert_eq!(changed.trusted.rules.read_only, HintRule::DeclaredRelaxingRejected);
        assert_eq!(changed.trusted.rules.open_world, HintRule::DeclaredTightening);
        let record = &changed.definition["_meta"][META_KEY];
        assert_eq!((&record["trust"], &record["quarantined"]), (&json!("untrusted"), &json!(true)));
        assert_eq!(changed.definition["annotations"]["readOnlyHint"], false);
        assert_eq!(record["rules"]["readOnlyHint"], "declared-relaxing-rejected");
    }

    #[test]
    fn overrides_win_and_prefixes_route_back() {
        let overrides = BTreeMap::from([(
            "delete_note".to_owned(),
            DeclaredHints { read_only: Some(false), destructive: Some(true), ..DeclaredHints::default() },
        )]);
        let specs = [spec("notes", Prefix::With("notes".into()), overrides)];
        let tools =
            json!([{"name": "delete_note", "inputSchema": {"type": "object"}, "annotations": {"readOnlyHint": true}}]);
        let catalog = Catalog::build(&specs, &[listing(tools)]);
        let tool = catalog.tool("notes_delete_note").cloned();
        let tool = tool.as_deref().map(|tool| (tool.original_name.clone(), tool.hints, tool.definition.clone()));
        let (original, hints, definition) = tool.unwrap_or_else(|| unreachable!("the prefixed tool is listed"));
        assert_eq!(original, "delete_note");
        assert!(hints.may_destroy());
        assert_eq!(definition["annotations"]["readOnlyHint"], false);
        assert_eq!(definition["_meta"][META_KEY]["sources"]["readOnlyHint"], "overridden");
        assert_eq!(definition["_meta"][META_KEY]["upstreamName"], "delete_note");
    }

    #[test]
    fn collisions_go_to_the_earlier_upstream_and_are_reported() {
        let specs = [spec("first", Prefix::None, BTreeMap::new()), spec("second", Prefix::None, BTreeMap::new())];
        let tool = json!([{"name": "search", "inputSchema": {"type": "object"}}]);
        let catalog = Catalog::build(&specs, &[listing(tool.clone()), listing(tool)]);
        assert_eq!(catalog.tools().len(), 1);
        assert_eq!(catalog.tool("search").map(|tool| tool.upstream), Some(0));
        assert_eq!(catalog.collisions.len(), 1);
        assert!(catalog.collisions[0].contains("`second`"), "{:?}", catalog.collisions);
    }

    #[test]
    fn app_only_and_task_required_tools_are_marked() {
        let tools = json!([
            {"name": "widget", "inputSchema": {"type": "object"}, "_meta": {"ui": {"visibility": ["app"]}}},
            {"name": "research", "inputSchema": {"type": "object"}, "execution": {"taskSupport": "required"}}
        ]);
        let catalog = Catalog::build(&[spec("apps", Prefix::None, BTreeMap::new())], &[listing(tools)]);
        assert!(catalog.tool("widget").is_some_and(|tool| tool.app_only && !tool.task_required));
        assert!(catalog.tool("research").is_some_and(|tool| tool.task_required && !tool.app_only));
    }
}
