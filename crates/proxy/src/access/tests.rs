//! Unit tests of the access rules, on catalogs built in memory: which tool a name leads to for a session, the
//! quarantine bump of `decide_with`, and when an approval lapses (`current_tool`).

use serde_json::{Value, json};
use toolgate_core::policy::{PolicySpec, RuleSpec, compile};

use toolgate_core::trust::TrustLevel;
use toolgate_spec::Quarantine;

use super::*;
use crate::catalog::{CatalogContext, CheckedListing, UpstreamListing};

fn catalog(tools: Value) -> Catalog {
    let tools = tools.as_array().cloned().unwrap_or_default();
    let listing = Some(Arc::new(UpstreamListing { tools, ..UpstreamListing::default() }));
    Catalog::build(&[crate::unstarted_upstream("notes")], &[listing])
}

/// The tools of a pinned upstream, none of them approved: every one waits for a person.
fn quarantined_catalog(tools: Value) -> Catalog {
    let tools = tools.as_array().cloned().unwrap_or_default();
    let listing = UpstreamListing { tools, ..UpstreamListing::default() };
    let checked = CheckedListing { approved: Some(Default::default()), ..CheckedListing::pinned_as_listed(listing) };
    let mut spec = crate::unstarted_upstream("notes");
    spec.trust.level = TrustLevel::Pinned;
    let context = CatalogContext { quarantine: Quarantine::ConfirmOnly, ..CatalogContext::default() };
    Catalog::build_with(&[spec], &[Some(Arc::new(checked))], &context)
}

fn policy(spec: PolicySpec) -> CompiledPolicy {
    compile(&spec).unwrap_or_else(|error| unreachable!("{error}"))
}

fn tool(catalog: &Catalog, name: &str) -> Arc<ExposedTool> {
    catalog.tool(name).cloned().unwrap_or_else(|| unreachable!("{name} is listed"))
}

const NOBODY: Viewer<'static> = Viewer { scopes: &[], tainted: false, apps: false };

fn read_tool(name: &str) -> Value {
    json!({"name": name, "inputSchema": {"type": "object"}, "annotations": {"readOnlyHint": true}})
}

#[test]
fn a_name_leads_to_its_tool_unless_the_session_may_not_see_it() {
    let catalog = catalog(json!([
        read_tool("read"),
        {"name": "app", "inputSchema": {"type": "object"}, "_meta": {"ui": {"visibility": ["app"]}}},
        {"name": "task", "inputSchema": {"type": "object"}, "execution": {"taskSupport": "required"}},
    ]));
    assert!(resolve(&catalog, &NOBODY, "read").is_some());
    assert!(resolve(&catalog, &NOBODY, "missing").is_none());
    assert!(tool(&catalog, "app").app_only, "the fixture is app-only");
    assert!(resolve(&catalog, &NOBODY, "app").is_none(), "app-only tools are for MCP Apps clients only");
    assert!(resolve(&catalog, &Viewer { apps: true, ..NOBODY }, "app").is_some());
    assert!(tool(&catalog, "task").task_required, "the fixture needs a task");
    assert!(resolve(&catalog, &Viewer { apps: true, ..NOBODY }, "task").is_none(), "task-required: never here");
}

#[test]
fn a_quarantined_tool_needs_a_person_where_the_rules_would_allow_it_and_deny_and_hide_stand() {
    let catalog = catalog(json!([read_tool("read")]));
    let allowed = tool(&catalog, "read");
    let permissive = policy(PolicySpec::permissive());
    let facts = call_facts(&allowed, &NOBODY);
    assert_eq!(decide_with(&permissive, &allowed, &facts).verdict, Verdict::Allow);

    let mut quarantined = (*allowed).clone();
    quarantined.quarantined = true;
    let decision = decide_with(&permissive, &quarantined, &call_facts(&quarantined, &NOBODY));
    assert_eq!(decision.verdict, Verdict::Confirm);
    assert_eq!(decision.rule(), "pin-quarantine", "the quarantine is named first: {decision:?}");

    for effect in [Verdict::Deny, Verdict::Hide] {
        let rule = RuleSpec { id: None, effect, matches: Default::default(), reason: None };
        let strict = policy(PolicySpec { rules: vec![rule], ..PolicySpec::permissive() });
        let decision = decide_with(&strict, &quarantined, &call_facts(&quarantined, &NOBODY));
        assert_eq!(decision.verdict, effect, "a quarantine never loosens {effect:?}");
    }
}

#[test]
fn the_facts_carry_the_sessions_scopes_and_taint() {
    let catalog = catalog(json!([read_tool("read")]));
    let read = tool(&catalog, "read");
    let scopes = vec!["notes:read".to_owned()];
    let facts = call_facts(&read, &Viewer { scopes: &scopes, tainted: true, apps: false });
    let expected = CallFacts::new("notes", "read", &read.trusted).with_scopes(&scopes).with_session_tainted(true);
    assert_eq!(format!("{facts:?}"), format!("{expected:?}"));
}

#[test]
fn an_approval_lapses_when_its_tool_changed_moved_was_quarantined_or_is_refused_now() {
    let before = catalog(json!([read_tool("read")]));
    let approved = tool(&before, "read");
    let allow = policy(PolicySpec::permissive());
    let current = current_tool(&before, &allow, &NOBODY, &approved);
    assert!(current.is_ok_and(|current| current.fingerprint == approved.fingerprint), "unchanged: still covered");

    let gone = current_tool(&catalog(json!([])), &allow, &NOBODY, &approved);
    assert_eq!(
        gone.map(|_| ()),
        Err(Lapse { why: "it is no longer available", current_fingerprint: None, approved_fingerprint: None })
    );

    let edited = catalog(json!([{"name": "read", "description": "now it deletes", "inputSchema": {"type": "object"}}]));
    let lapse = current_tool(&edited, &allow, &NOBODY, &approved).map(|_| ());
    let fingerprint = tool(&edited, "read").fingerprint.clone();
    assert_eq!(
        lapse,
        Err(Lapse {
            why: "its definition changed",
            current_fingerprint: Some(fingerprint),
            approved_fingerprint: None
        })
    );

    let mut elsewhere = (*approved).clone();
    elsewhere.upstream = 1;
    let lapse = current_tool(&before, &allow, &NOBODY, &elsewhere).map_err(|lapse| lapse.why);
    assert_eq!(lapse.map(|_| ()), Err("its name now leads to another tool"));

    let now_quarantined = quarantined_catalog(json!([read_tool("read")]));
    let mut reviewed = (*tool(&now_quarantined, "read")).clone();
    assert!(reviewed.quarantined, "the fixture waits for a person");
    reviewed.quarantined = false;
    let lapse = current_tool(&now_quarantined, &allow, &NOBODY, &reviewed).map_err(|lapse| lapse.why);
    assert_eq!(lapse.map(|_| ()), Err("its definition was quarantined"));

    let deny = RuleSpec { id: None, effect: Verdict::Deny, matches: Default::default(), reason: None };
    let denying = policy(PolicySpec { rules: vec![deny], ..PolicySpec::permissive() });
    let lapse = current_tool(&before, &denying, &NOBODY, &approved).map_err(|lapse| lapse.why);
    assert_eq!(lapse.map(|_| ()), Err("the policy now refuses it"));

    let hide = RuleSpec { id: None, effect: Verdict::Hide, matches: Default::default(), reason: None };
    let hiding = policy(PolicySpec { rules: vec![hide], ..PolicySpec::permissive() });
    let lapse = current_tool(&before, &hiding, &NOBODY, &approved).map_err(|lapse| lapse.why);
    assert_eq!(lapse.map(|_| ()), Err("it is no longer available"), "hidden reads as gone");
}
