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

use std::collections::HashMap;
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
#[derive(Debug, Clone, Default, PartialEq)]
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

/// One upstream's listing with the outcome of its pin check: stored, read and built into a catalog as one value,
/// so a catalog is never built from a listing other than the one that was checked.
#[derive(Debug, Clone, Default)]
pub struct CheckedListing {
    /// What the upstream listed (its tools cut to the configured maximum).
    pub listing: Arc<UpstreamListing>,
    /// Each listed tool's fingerprint by its original name, computed once when the listing was checked.
    pub fingerprints: HashMap<String, String>,
    /// For a pinned upstream, the fingerprint of each tool's approved pin that the listed definition matched when it
    /// was checked (by original name); `None` for an upstream that is not pinned.
    pub approved: Option<HashMap<String, String>>,
    /// Tools the upstream listed beyond the configured maximum, dropped.
    pub dropped_tools: usize,
}

impl CheckedListing {
    /// A listing of an upstream that is not pinned (nothing to check).
    pub fn unpinned(listing: UpstreamListing) -> CheckedListing {
        CheckedListing { listing: Arc::new(listing), ..CheckedListing::default() }
    }

    /// A pinned upstream's listing whose every tool is its approved pin, for the unit tests of what is built from
    /// a catalog.
    #[cfg(test)]
    pub(crate) fn pinned_as_listed(listing: UpstreamListing) -> CheckedListing {
        let fingerprints: HashMap<String, String> = listing
            .tools
            .iter()
            .filter_map(|raw| ToolDefinition::from_value(raw.clone()).ok())
            .filter_map(|tool| {
                let fingerprint = toolgate_core::fingerprint::fingerprint_tool(&tool).ok()?;
                Some((tool.name().to_owned(), fingerprint.whole))
            })
            .collect();
        CheckedListing {
            listing: Arc::new(listing),
            approved: Some(fingerprints.clone()),
            fingerprints,
            dropped_tools: 0,
        }
    }

    /// Whether the definition of `name` with this fingerprint waits for a person: on a pinned upstream, every
    /// definition that is not the approved pin of its name (a new tool, a changed one, one listed after the check).
    pub fn quarantines(&self, name: &str, fingerprint: &str) -> bool {
        self.approved.as_ref().is_some_and(|approved| approved.get(name).is_none_or(|pinned| pinned != fingerprint))
    }

    /// The original names of the listed tools that wait for a person, sorted.
    pub fn quarantined_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .fingerprints
            .iter()
            .filter(|(name, fingerprint)| self.quarantines(name, fingerprint))
            .map(|(name, _)| name.clone())
            .collect();
        names.sort();
        names
    }
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
    /// Builds the catalog from each upstream's listing (`None` for an upstream that is not connected), none of them
    /// checked against pins (a pinned upstream's tools are then all quarantined: nothing says they were reviewed).
    pub fn build(specs: &[UpstreamSpec], listings: &[Option<Arc<UpstreamListing>>]) -> Catalog {
        let checked: Vec<Option<Arc<CheckedListing>>> = listings
            .iter()
            .map(|listing| {
                listing.as_ref().map(|listing| {
                    Arc::new(CheckedListing { listing: Arc::clone(listing), ..CheckedListing::default() })
                })
            })
            .collect();
        Self::build_with(specs, &checked, &CatalogContext::default())
    }

    /// Builds the catalog from each upstream's checked listing, with what the gateway knows beyond the listings.
    ///
    /// Quarantine is decided here, per tool, from the fingerprint of the definition being exposed against the pin
    /// its listing was checked with: a definition nobody checked cannot be exposed as reviewed, whatever raced.
    pub fn build_with(
        specs: &[UpstreamSpec],
        listings: &[Option<Arc<CheckedListing>>],
        context: &CatalogContext,
    ) -> Catalog {
        let resource_servers = &context.resource_servers;
        let mut catalog = Catalog { resource_servers: resource_servers.to_vec(), ..Catalog::default() };
        let mut owners: HashMap<String, usize> = HashMap::new();
        for (upstream, (spec, checked)) in specs.iter().zip(listings).enumerate() {
            let Some(checked) = checked else { continue };
            let listing = &checked.listing;
            for raw in &listing.tools {
                catalog.add_tool(upstream, spec, raw, &mut owners, specs, checked, context.quarantine);
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

    #[allow(clippy::too_many_arguments, reason = "the build's loop state, passed down once")]
    fn add_tool(
        &mut self,
        upstream: usize,
        spec: &UpstreamSpec,
        raw: &Value,
        owners: &mut HashMap<String, usize>,
        specs: &[UpstreamSpec],
        checked: &CheckedListing,
        quarantine: Quarantine,
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
        // Exposed as reviewed first (the common case costs one assessment); a definition whose fingerprint is not
        // its approved pin's is exposed again as quarantined, or left out. A pinned upstream whose listing carries
        // no pin check at all has nothing approved.
        let mut exposed = expose_definition(&tool, &name, spec, false);
        if is_quarantined(spec, checked, &original_name, &exposed.fingerprint) {
            if quarantine == Quarantine::Hide {
                return;
            }
            exposed = expose_definition(&tool, &name, spec, true);
        }
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

/// Whether the definition of `name` with this fingerprint, listed in `checked` by the upstream `spec`, waits for a
/// person: on a pinned upstream, every definition that is not its name's approved pin, and every tool of a listing
/// that was never checked against the pins.
pub(crate) fn is_quarantined(spec: &UpstreamSpec, checked: &CheckedListing, name: &str, fingerprint: &str) -> bool {
    let unchecked = spec.trust.level == TrustLevel::Pinned && checked.approved.is_none();
    unchecked || checked.quarantines(name, fingerprint)
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

    fn fingerprint(tool: &Value) -> String {
        let tool = ToolDefinition::from_value(tool.clone()).unwrap_or_else(|error| unreachable!("{error}"));
        toolgate_core::fingerprint::fingerprint_tool(&tool).map(|fingerprint| fingerprint.whole).unwrap_or_default()
    }

    /// A pinned upstream's listing of `tools`, checked with `approved` as the approved definitions.
    fn checked(tools: &Value, approved: &[Value]) -> Option<Arc<CheckedListing>> {
        let tools = tools.as_array().cloned().unwrap_or_default();
        let name = |tool: &Value| tool["name"].as_str().unwrap_or_default().to_owned();
        Some(Arc::new(CheckedListing {
            fingerprints: tools.iter().map(|tool| (name(tool), fingerprint(tool))).collect(),
            approved: Some(approved.iter().map(|tool| (name(tool), fingerprint(tool))).collect()),
            listing: Arc::new(UpstreamListing { tools, ..UpstreamListing::default() }),
            dropped_tools: 0,
        }))
    }

    fn pinned(name: &str) -> UpstreamSpec {
        let mut spec = spec(name, Prefix::None, BTreeMap::new());
        spec.trust.level = TrustLevel::Pinned;
        spec
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
        let tools = json!([{"name": "purge", "description": "Deletes every note.", "inputSchema": {"type": "object"},
                            "annotations": {"readOnlyHint": true}}]);
        let approved = tools.as_array().cloned().unwrap_or_default();
        let catalog =
            Catalog::build_with(&[pinned("notes")], &[checked(&tools, &approved)], &CatalogContext::default());
        let exposed = catalog.tool("purge").map(|tool| tool.definition.clone()).unwrap_or_default();
        assert_eq!(exposed["annotations"]["readOnlyHint"], true);
        assert_eq!(exposed["_meta"][META_KEY]["rules"]["readOnlyHint"], "declared-trusted");
        // The same listing never checked against the pins: nothing in it was reviewed.
        assert!(Catalog::build(&[pinned("notes")], &[listing(tools)]).tool("purge").is_none());
    }

    #[test]
    fn a_definition_other_than_the_one_approved_for_its_name_is_quarantined_when_the_catalog_is_built() {
        // The pin check approved `update` as it was; the listing being built holds a relaxed definition under the
        // same name (listed after the check). It is quarantined, not exposed as reviewed.
        let reviewed = json!({"name": "update", "description": "Update one note.", "inputSchema": {"type": "object"},
                              "annotations": {"readOnlyHint": false}});
        let mut relaxed = reviewed.clone();
        relaxed["annotations"]["readOnlyHint"] = json!(true);
        let context = CatalogContext { quarantine: Quarantine::ConfirmOnly, ..CatalogContext::default() };
        let raced = checked(&json!([relaxed.clone()]), std::slice::from_ref(&reviewed));
        let catalog = Catalog::build_with(&[pinned("notes")], &[raced], &context);
        let update = catalog.tool("update").cloned().unwrap_or_else(|| unreachable!("listed under confirm"));
        assert!(update.quarantined && !update.hints.read_only.value, "{:?}", update.definition);
        assert_eq!(update.definition["_meta"][META_KEY]["trust"], "untrusted");
        let hidden = Catalog::build_with(
            &[pinned("notes")],
            &[checked(&json!([relaxed]), &[reviewed])],
            &CatalogContext::default(),
        );
        assert!(hidden.tool("update").is_none(), "hidden by default");
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
        let specs = [pinned("notes")];
        let approved = [tools[1].clone()];
        let mut context = CatalogContext::default();
        let hidden = Catalog::build_with(&specs, &[checked(&tools, &approved)], &context);
        assert!(hidden.tool("changed").is_none() && hidden.tool("same").is_some());
        context.quarantine = Quarantine::ConfirmOnly;
        let marked = Catalog::build_with(&specs, &[checked(&tools, &approved)], &context);
        assert!(marked.tool("changed").is_some_and(|tool| tool.quarantined));
        assert!(marked.tool("same").is_some_and(|tool| !tool.quarantined));
    }

    #[test]
    fn a_quarantined_definition_of_a_pinned_upstream_is_not_believed() {
        let definition = |name: &str| {
            json!({"name": name, "description": "Deletes every note.", "inputSchema": {"type": "object"},
                   "annotations": {"readOnlyHint": true, "openWorldHint": true}})
        };
        let tools = json!([definition("reviewed"), definition("changed")]);
        let context = CatalogContext { quarantine: Quarantine::ConfirmOnly, ..CatalogContext::default() };
        let catalog = Catalog::build_with(&[pinned("notes")], &[checked(&tools, &[definition("reviewed")])], &context);
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
