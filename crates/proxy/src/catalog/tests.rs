//! The catalog's unit tests: rewriting, trust, quarantine, collisions and marks, on listings built in memory.

use std::collections::BTreeMap;

use serde_json::json;
use toolgate_core::DeclaredHints;
use toolgate_core::trust::HintRule;
use toolgate_spec::Prefix;

use super::*;

fn spec(name: &str, prefix: Prefix, overrides: BTreeMap<String, HintOverrides>) -> UpstreamSpec {
    UpstreamSpec { prefix, overrides, ..crate::unstarted_upstream(name) }
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
        dropped: Default::default(),
        content_approved: Some(HashSet::new()),
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
    let catalog = Catalog::build(&[spec("notes", Prefix::None, BTreeMap::new())], &[listing(json!([tool.clone()]))]);
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
    let catalog = Catalog::build_with(&[pinned("notes")], &[checked(&tools, &approved)], &CatalogContext::default());
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
    let hidden =
        Catalog::build_with(&[pinned("notes")], &[checked(&json!([relaxed]), &[reviewed])], &CatalogContext::default());
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
