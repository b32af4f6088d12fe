//! The aggregated catalog: every upstream's tools, prompts, resources and templates under the names clients see,
//! with routes back to the owning upstream.
//!
//! Built from upstream listings by a pure function, and replaced whole when any upstream's lists change (readers
//! hold an `Arc<Catalog>` snapshot, so a call never sees half an update). Tool definitions are rewritten here and
//! only here: the four hints are made explicit from the core's effective values, and provenance, risk, action
//! phrase, fingerprint and the verification record weighed as evidence go under `_meta["toolgate/annotations"]`. Every other field of the definition survives
//! byte for byte in meaning, except what would contradict that rewrite: `_meta` keys under `toolgate/` (only toolgate
//! writes those) and other spellings of the four hints (`readOnly`, a top-level `readOnlyHint`, ...) whose value
//! disagrees with the rewritten hint. Prompts, resources and templates lose their `toolgate/` `_meta` keys too.
//!
//! One precedence for every kind: configuration order. A tool or prompt name, a listed resource URI or a template
//! belongs to the earliest upstream that offers it (a URI is the earlier upstream's whether it lists it or only a
//! template of it matches); a later upstream's same item is hidden and the collision reported.
//!
//! A quarantined definition (changed since it was pinned, or new on a pinned upstream) is exposed as untrusted
//! whatever the upstream's trust: nobody reviewed it, so its declared hints may only tighten. Trusting it would let
//! a rug pull relax its own hints past read-only mode or a deny rule. A pinned upstream's prompts, resources and
//! templates that are not their approved pin are held back (`held`): left out of every list, and refused by name.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use serde_json::{Map, Value, json};
use toolgate_core::facts::{ToolFacts, tool_facts};
use toolgate_core::fingerprint::FingerprintError;
use toolgate_core::normalize::{hint_of_key, loose_bool};
use toolgate_core::trust::{Convention, TrustLevel, TrustedHints, resolve_trusted_hints_observed};
use toolgate_core::{EffectiveHints, Hint, HintOverrides, HintSource, ToolDefinition, assess_tool};
use toolgate_spec::{Quarantine, UpstreamSpec};
use toolgate_upstream::ListKind;

use toolgate_store::{INSTRUCTIONS, PinKind};

pub use self::context::CatalogContext;
use self::context::visiting_order;
use self::held::HeldContent;
pub use self::held::HeldItem;
use crate::guard::results::remove_foreign_meta;
use crate::naming::exposed_name;
use crate::resource_index::ResourceIndex;

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
    /// For each kind, the server offered more pages than were read: enough items (or bytes) had arrived for the
    /// configured maxima.
    pub unread_pages: ByKind<bool>,
    /// The server's `instructions` from `initialize` (pinned like the lists on a pinned upstream).
    pub instructions: Option<String>,
}

/// One value for each kind of listing.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ByKind<T> {
    /// Tools.
    pub tools: T,
    /// Prompts.
    pub prompts: T,
    /// Resources.
    pub resources: T,
    /// Resource templates.
    pub templates: T,
}

impl<T> ByKind<T> {
    /// The value for `kind`.
    pub fn get(&self, kind: ListKind) -> &T {
        match kind {
            ListKind::Tools => &self.tools,
            ListKind::Prompts => &self.prompts,
            ListKind::Resources => &self.resources,
            ListKind::ResourceTemplates => &self.templates,
        }
    }

    /// The value for `kind`, to change.
    pub fn get_mut(&mut self, kind: ListKind) -> &mut T {
        match kind {
            ListKind::Tools => &mut self.tools,
            ListKind::Prompts => &mut self.prompts,
            ListKind::Resources => &mut self.resources,
            ListKind::ResourceTemplates => &mut self.templates,
        }
    }
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
    /// Items of each kind the upstream listed beyond the configured maxima (count or bytes), dropped.
    pub dropped: ByKind<usize>,
    /// For a pinned upstream, its prompts, resources, templates and instructions (kind and name) whose listed
    /// definition matched their approved pin when checked; every other one is held back. `None` when not pinned.
    pub content_approved: Option<HashSet<(PinKind, String)>>,
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
        let content = content_items(&listing).into_iter().map(|(kind, name, _)| (kind, name)).collect();
        CheckedListing {
            listing: Arc::new(listing),
            approved: Some(fingerprints.clone()),
            fingerprints,
            dropped: ByKind::default(),
            content_approved: Some(content),
        }
    }

    /// Whether this listing's `kind` definition `name` (not a tool) is held back: on the pinned upstream `spec`,
    /// every one that is not its approved pin, and every one of a listing never checked against the pins.
    pub fn holds(&self, spec: &UpstreamSpec, kind: PinKind, name: &str) -> bool {
        match &self.content_approved {
            Some(approved) => !approved.contains(&(kind, name.to_owned())),
            None => spec.trust.level == TrustLevel::Pinned,
        }
    }

    /// The prompts, resources, templates and instructions of this listing that a pinned upstream's check held back
    /// (kind and name), sorted.
    pub fn held_content(&self) -> Vec<(PinKind, String)> {
        let Some(approved) = &self.content_approved else { return Vec::new() };
        let mut held: Vec<(PinKind, String)> = content_items(&self.listing)
            .into_iter()
            .map(|(kind, name, _)| (kind, name))
            .filter(|item| !approved.contains(item))
            .collect();
        held.sort();
        held
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
    /// (upstream, the upstream's own name) → index in `tools`.
    tool_origins: HashMap<(usize, String), usize>,
    /// Per upstream index: whether its non-tool content (prompts, resources, completions) is open-world.
    content_open_world: Vec<bool>,
    prompts: Vec<ExposedPrompt>,
    prompt_index: HashMap<String, usize>,
    /// Listed resources and templates with their owners (configuration order wins).
    resources: ResourceIndex,
    /// A pinned upstream's prompts, resources and templates held back until approved.
    held: HeldContent,
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
        let order = visiting_order(&context.precedence, specs.len());
        let mut catalog = Catalog {
            resource_servers: resource_servers.to_vec(),
            content_open_world: vec![true; specs.len()],
            resources: ResourceIndex::ranked(&order),
            ..Catalog::default()
        };
        let mut owners: HashMap<String, usize> = HashMap::new();
        // In precedence order, not slot order: the first upstream to list a name wins it, and a restarted upstream
        // (a new slot) must win what it won before.
        for upstream in order {
            let (Some(spec), Some(checked)) = (specs.get(upstream), listings.get(upstream)) else { continue };
            let Some(checked) = checked else {
                catalog.set_content_open_world(upstream, spec.trust.open_world_content.unwrap_or(true));
                continue;
            };
            let listing = &checked.listing;
            // Every tool exposed and closed-world: only then is the upstream's other content taken as closed-world
            // (no tools, a hidden or an invalid one: nothing vouches for it).
            let mut every_tool_closed = !listing.tools.is_empty();
            let convention = listing_convention(&listing.tools);
            for raw in &listing.tools {
                let open_world =
                    catalog.add_tool(upstream, spec, raw, &mut owners, specs, checked, context, &convention);
                every_tool_closed &= open_world == Some(false);
            }
            catalog.set_content_open_world(upstream, spec.trust.open_world_content.unwrap_or(!every_tool_closed));
            let held = |kind: PinKind, raw: &Value, key: &str| {
                let name = raw.get(key).and_then(Value::as_str)?;
                checked.holds(spec, kind, name).then(|| HeldItem {
                    upstream,
                    upstream_name: spec.name.clone(),
                    kind,
                    name: name.to_owned(),
                })
            };
            for raw in &listing.prompts {
                match held(PinKind::Prompt, raw, "name") {
                    Some(item) => catalog.held.hold_prompt(&exposed_name(&spec.prefix, &item.name), item),
                    None => catalog.add_prompt(upstream, spec, raw, specs),
                }
            }
            for raw in &listing.resources {
                match held(PinKind::Resource, raw, "uri") {
                    Some(item) => catalog.held.hold_resource(item),
                    None => catalog.add_resource(upstream, raw, specs),
                }
            }
            for raw in &listing.templates {
                match held(PinKind::ResourceTemplate, raw, "uriTemplate") {
                    Some(item) => catalog.held.hold_template(item),
                    None => catalog.add_template(upstream, raw, specs),
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
        context: &CatalogContext,
        convention: &Convention,
    ) -> Option<bool> {
        let quarantine = context.quarantine;
        let tool = match ToolDefinition::from_value(raw.clone()) {
            Ok(tool) => tool,
            Err(error) => {
                tracing::warn!(upstream = %spec.name, %error, "skipping an invalid tool definition");
                return None;
            }
        };
        let original_name = tool.name().to_owned();
        let name = exposed_name(&spec.prefix, &original_name);
        // Exposed as reviewed first (the common case costs one assessment); a definition whose fingerprint is not
        // its approved pin's is exposed again as quarantined, or left out. A pinned upstream whose listing carries
        // no pin check at all has nothing approved.
        // A definition without a fingerprint could be neither pinned nor bound to an approval: it is left out.
        let Ok(mut exposed) = expose_definition(&tool, &name, spec, false, convention) else {
            self.collisions.push(format!(
                "tool `{name}` of upstream `{}` is hidden: its definition cannot be fingerprinted",
                spec.name
            ));
            return None;
        };
        if is_quarantined(spec, checked, &original_name, &exposed.fingerprint) {
            if quarantine == Quarantine::Hide {
                return None;
            }
            exposed = expose_definition(&tool, &name, spec, true, convention).ok()?;
        }
        if let Some(owner) = owners.get(&name) {
            let owner_name = specs.get(*owner).map(|owner| owner.name.as_str()).unwrap_or_default();
            // The same upstream can list two tools with one exposed name (`git_status` and `status` under the
            // prefix `git`, `naming`): the first listed keeps it.
            let why = if *owner == upstream {
                "another of its tools, listed earlier, exposes the same name".to_owned()
            } else {
                format!("upstream `{owner_name}` (earlier in the config) exposes the same name")
            };
            self.collisions.push(format!("tool `{name}` of upstream `{}` is hidden: {why}", spec.name));
            return None;
        }
        owners.insert(name.clone(), upstream);
        let open_world = exposed.hints.open_world.value;
        self.tool_index.insert(name, self.tools.len());
        self.tool_origins.insert((upstream, original_name.clone()), self.tools.len());
        self.tools.push(Arc::new(ExposedTool { upstream, original_name, ..exposed }));
        Some(open_world)
    }

    fn add_prompt(&mut self, upstream: usize, spec: &UpstreamSpec, raw: &Value, specs: &[UpstreamSpec]) {
        let Some(original_name) = raw.get("name").and_then(Value::as_str) else { return };
        let name = exposed_name(&spec.prefix, original_name);
        // A held prompt keeps its name: a later upstream's prompt is not served in its place.
        let owner = self
            .prompt_index
            .get(&name)
            .and_then(|index| self.prompts.get(*index))
            .map(|owner| owner.upstream)
            .or_else(|| self.held.prompt(&name).map(|held| held.upstream));
        if let Some(owner) = owner {
            let owner_name = specs.get(owner).map(|owner| owner.name.as_str()).unwrap_or_default();
            self.collisions.push(format!(
                "prompt `{name}` of upstream `{}` is hidden: upstream `{owner_name}` exposes the same name",
                spec.name
            ));
            return;
        }
        let mut definition = raw.clone();
        definition["name"] = Value::String(name.clone());
        remove_foreign_meta(&mut definition);
        self.prompt_index.insert(name, self.prompts.len());
        self.prompts.push(ExposedPrompt { upstream, original_name: original_name.to_owned(), definition });
    }

    fn add_resource(&mut self, upstream: usize, raw: &Value, specs: &[UpstreamSpec]) {
        if let Some(collision) = self.resources.add_resource(upstream, raw, specs) {
            self.collisions.push(collision);
        }
    }

    fn add_template(&mut self, upstream: usize, raw: &Value, specs: &[UpstreamSpec]) {
        if let Some(collision) = self.resources.add_template(upstream, raw, specs) {
            self.collisions.push(collision);
        }
    }

    /// The held prompt clients call `name`, when no upstream serves a prompt of that name.
    pub fn held_prompt(&self, name: &str) -> Option<&HeldItem> {
        self.held.prompt(name)
    }

    /// The held resource or template that would serve `uri`, unless an earlier upstream (or the same one, with an
    /// approved definition) serves it.
    pub fn held_resource(&self, uri: &str) -> Option<&HeldItem> {
        self.held.resource(uri).filter(|held| self.resources.owner(uri).is_none_or(|owner| owner > held.upstream))
    }

    /// The held definition a `ref/resource` completion of `uri` would reach (a URI or a `uriTemplate`), unless an
    /// earlier upstream (or the same one, with an approved definition) serves it: the held resource or template
    /// that would serve it as a URI, else the held template declared with exactly that `uriTemplate`.
    pub fn held_completion(&self, uri: &str) -> Option<&HeldItem> {
        let template = || {
            self.held
                .template(uri)
                .filter(|held| self.resources.template_owner(uri).is_none_or(|owner| owner > held.upstream))
        };
        self.held_resource(uri).or_else(template)
    }

    /// The upstream that declared a resource template with exactly this `uriTemplate` (the earliest one).
    pub fn template_owner(&self, uri_template: &str) -> Option<usize> {
        self.resources.template_owner(uri_template)
    }

    /// The tool `upstream` calls `original_name`, if the catalog exposes it.
    pub fn tool_of(&self, upstream: usize, original_name: &str) -> Option<&Arc<ExposedTool>> {
        self.tool_origins.get(&(upstream, original_name.to_owned())).and_then(|index| self.tools.get(*index))
    }

    /// Whether an upstream's prompts, resources and completions count as open-world content (they taint a session
    /// that receives them): the upstream's `open_world_content` setting, else true unless it lists tools and every
    /// one of them is exposed as closed-world. An unknown upstream counts as open-world.
    pub fn content_open_world(&self, upstream: usize) -> bool {
        self.content_open_world.get(upstream).copied().unwrap_or(true)
    }

    fn set_content_open_world(&mut self, upstream: usize, open_world: bool) {
        if let Some(slot) = self.content_open_world.get_mut(upstream) {
            *slot = open_world;
        }
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
        self.resources.resources()
    }

    /// Every resource template, raw.
    pub fn templates(&self) -> impl Iterator<Item = &Value> {
        self.resources.templates()
    }

    /// The upstream that lists `uri` or has a template matching it (the earliest): the only owner toolgate claims.
    pub fn subscription_owner(&self, uri: &str) -> Option<usize> {
        self.resources.owner(uri)
    }

    /// [`Catalog::subscription_owner`], else the only resource server: it answers an unlisted URI's read itself.
    pub fn resource_owner(&self, uri: &str) -> Option<usize> {
        let only = self.resource_servers.first().copied().filter(|_| self.resource_servers.len() == 1);
        self.resources.owner(uri).or(only)
    }
}

/// Every definition of `listing` other than its tools, as pinned: `(kind, name, definition)` for each prompt, listed
/// resource and template with its name, and the server's instructions as `{"instructions": text}`.
pub(crate) fn content_items(listing: &UpstreamListing) -> Vec<(PinKind, String, Map<String, Value>)> {
    let named = |kind: PinKind, key: &'static str, items: &[Value]| -> Vec<(PinKind, String, Map<String, Value>)> {
        items
            .iter()
            .filter_map(|raw| {
                let name = raw.get(key).and_then(Value::as_str)?.to_owned();
                Some((kind, name, raw.as_object()?.clone()))
            })
            .collect()
    };
    let mut items = named(PinKind::Prompt, "name", &listing.prompts);
    items.extend(named(PinKind::Resource, "uri", &listing.resources));
    items.extend(named(PinKind::ResourceTemplate, "uriTemplate", &listing.templates));
    if let Some(text) = &listing.instructions {
        let mut definition = Map::new();
        definition.insert(INSTRUCTIONS.to_owned(), Value::String(text.clone()));
        items.push((PinKind::Instructions, INSTRUCTIONS.to_owned(), definition));
    }
    items
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

/// What the relay enforces for `tool`, listed by the upstream `spec` and matching its pin (not quarantined): the very
/// function the catalog exposes tools with, for the commands that show a server's tools without a running gateway
/// (`inspect`, `lint`, `prompt`), so they and the relay never disagree. The tool keeps its own name. `listing` is
/// [`listing_convention`] of the upstream's whole listing, as the catalog counts it. An error when the definition
/// cannot be fingerprinted (the relay hides such a tool).
pub fn enforced_tool(
    tool: &ToolDefinition,
    spec: &UpstreamSpec,
    listing: &Convention,
) -> Result<ExposedTool, FingerprintError> {
    let mut exposed = expose_definition(tool, tool.name(), spec, false, listing)?;
    exposed.original_name = tool.name().to_owned();
    exposed.upstream_name = spec.name.clone();
    Ok(exposed)
}

/// What the tools of one upstream's listing declare ([`Convention`]); invalid definitions do not vote.
pub fn listing_convention(tools: &[Value]) -> Convention {
    let definitions: Vec<ToolDefinition> =
        tools.iter().filter_map(|raw| ToolDefinition::from_value(raw.clone()).ok()).collect();
    Convention::of_definitions(&definitions)
}

/// Rewrites one tool for clients: exposed name, explicit hints, toolgate's `_meta` record. `upstream` and
/// `original_name` are left for the caller to fill in. A quarantined definition's hints are resolved as untrusted
/// and its `_meta` record says `"quarantined": true`. `convention` is the votes of the tool's whole listing
/// ([`listing_convention`]); the tool's own declaration is taken out here. An error when the definition has no
/// fingerprint: there is no stand-in, since a shared one would let two definitions pass for each other.
pub(crate) fn expose_definition(
    tool: &ToolDefinition,
    name: &str,
    spec: &UpstreamSpec,
    quarantined: bool,
    convention: &Convention,
) -> Result<ExposedTool, FingerprintError> {
    let overrides = spec.overrides.get(tool.name()).cloned().unwrap_or_else(HintOverrides::default);
    let assessment = assess_tool(tool, &overrides);
    let fingerprint = match &assessment.fingerprint {
        Ok(fingerprint) => fingerprint.whole.clone(),
        Err(error) => return Err(error.clone()),
    };
    let trust = trust_level(spec, &fingerprint, quarantined);
    // A verification record binds to this exact definition: a changed one (quarantined or not) has none.
    let observation = spec.trust.observations.get(&fingerprint);
    let trusted = resolve_trusted_hints_observed(
        &overrides,
        &assessment.normalized.declared,
        Some(&assessment.inference),
        trust,
        spec.trust.min_confidence,
        &convention.without(&assessment.normalized.declared),
        observation,
    );
    let facts = tool_facts(tool, &trusted.hints);
    let mut definition = tool.raw().clone();
    definition.insert("name".into(), Value::String(name.to_owned()));
    remove_contradicting_spellings(&mut definition, &trusted.hints);

    let mut annotations = tool.annotations().cloned().unwrap_or_default();
    remove_contradicting_spellings(&mut annotations, &trusted.hints);
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
    if let Some(observation) = observation {
        record["verification"] = Value::String(observation.record.clone());
    }
    if quarantined {
        record["quarantined"] = Value::Bool(true);
    }
    if name != tool.name() {
        record["upstreamName"] = Value::String(tool.name().to_owned());
    }
    let mut meta = tool.meta().cloned().unwrap_or_default();
    meta.retain(|key, _| !key.starts_with(crate::guard::results::RESERVED_META_PREFIX));
    meta.insert(META_KEY.into(), record);
    definition.insert("_meta".into(), Value::Object(meta));

    let task_required =
        tool.raw().get("execution").and_then(|execution| execution.get("taskSupport")).and_then(Value::as_str)
            == Some("required");
    Ok(ExposedTool {
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
    })
}

/// Removes from `object` (a tool definition or its `annotations`) every spelling of a hint that toolgate reads
/// (`readOnly`, `destructive_hint`, a top-level `readOnlyHint`, ...) whose value is not the rewritten hint's: a
/// client reading that spelling would otherwise see the upstream's claim instead of toolgate's. Agreeing spellings
/// stay; the spec keys inside `annotations` are rewritten afterwards anyway.
fn remove_contradicting_spellings(object: &mut Map<String, Value>, hints: &EffectiveHints) {
    object.retain(|key, value| match hint_of_key(key) {
        Some(hint) => loose_bool(value) == Some(hints.get(hint).value),
        None => true,
    });
}

mod context;
mod held;
#[cfg(test)]
mod tests;
