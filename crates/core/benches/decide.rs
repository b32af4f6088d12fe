//! `decide` on the hot path: the default profile alone, and 20 configured rules in front of it.
//!
//! Run with `cargo bench -p toolgate-core --bench decide`. The budget is 1 µs per decision; the figure lands in
//! `docs/policy.md`. Inputs are built once outside the timed loop, as the relay builds them once per catalog.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use divan::{Bencher, black_box};
use serde_json::json;
use toolgate_core::policy::{CallFacts, CompiledPolicy, PolicySpec, compile, decide, visible};
use toolgate_core::trust::{TrustLevel, TrustedHints, resolve_trusted_hints};
use toolgate_core::{DeclaredHints, HintOverrides};

fn main() {
    divan::main();
}

/// Twenty rules of the kinds an operator writes: globs on names, hints, scopes, trust rules, risk, taint.
fn twenty_rules_spec() -> PolicySpec {
    let mut rules = Vec::new();
    for upstream in ["github", "gitlab", "jira", "slack", "fs"] {
        let deletes = json!({"upstream": upstream, "tool": ["delete_*", "*_delete"], "destructive": true});
        rules.push(json!({"effect": "confirm", "match": deletes}));
        rules.push(
            json!({"effect": "deny", "match": {"upstream": upstream, "tool": "*admin*", "missing_scopes": "admin"}}),
        );
    }
    rules.push(json!({"effect": "allow", "match": {"upstream": "github", "tool": ["get_*", "list_*", "search_*"]}}));
    rules.push(json!({"effect": "hide", "match": {"tool": "debug_?"}}));
    rules.push(json!({"effect": "confirm", "match": {"any_hint_rule": "declared-relaxing-rejected"}}));
    rules.push(
        json!({"effect": "deny", "match": {"category": "external", "session_tainted": true, "upstream": "web*"}}),
    );
    rules.push(json!({"effect": "allow", "match": {"upstream": "fs", "read_only": true}}));
    rules.push(json!({"effect": "confirm", "match": {"min_risk": 3, "scopes": ["ops"]}}));
    rules.push(json!({"effect": "deny", "match": {"mode": "sandbox", "upstream": "slack"}}));
    rules.push(json!({"effect": "allow", "match": {"upstream": "jira", "tool": "*comment*", "open_world": false}}));
    rules.push(
        json!({"effect": "confirm", "match": {"tool": "*_force", "read_only_rule": ["inferred", "spec-default"]}}),
    );
    rules.push(json!({"effect": "allow", "match": {"upstream": "gitlab", "idempotent": true, "max_risk": 2}}));
    let spec: PolicySpec = serde_json::from_value(json!({"rule": rules})).unwrap();
    assert_eq!(spec.rules.len(), 20);
    spec
}

fn twenty_rules() -> CompiledPolicy {
    compile(&twenty_rules_spec()).unwrap()
}

fn hints(read_only: bool, destructive: bool, open_world: bool) -> TrustedHints {
    let declared = DeclaredHints {
        read_only: Some(read_only),
        destructive: Some(destructive),
        open_world: Some(open_world),
        ..Default::default()
    };
    resolve_trusted_hints(&HintOverrides::default(), &declared, None, TrustLevel::Pinned, 0.8)
}

/// (upstream, tool, read-only, destructive, open-world, tainted): a read, a destructive call matched by a rule, an
/// open-world write in a tainted session that falls through every rule, and a read-only call on an upstream with
/// no rule of its own.
const CALLS: [(&str, &str, bool, bool, bool, bool); 4] = [
    ("github", "get_issue", true, false, true, false),
    ("github", "delete_repo", false, true, true, false),
    ("mail", "send_email", false, false, true, true),
    ("notes", "read_note", true, false, false, false),
];

#[divan::bench(args = CALLS)]
fn default_profile(bencher: Bencher, call: (&str, &str, bool, bool, bool, bool)) {
    bench_decide(bencher, &CompiledPolicy::default(), call);
}

#[divan::bench(args = CALLS)]
fn twenty_configured_rules(bencher: Bencher, call: (&str, &str, bool, bool, bool, bool)) {
    bench_decide(bencher, &twenty_rules(), call);
}

#[divan::bench]
fn visible_with_twenty_rules(bencher: Bencher) {
    let policy = twenty_rules();
    let hints = hints(false, true, true);
    let scopes = vec!["ops".to_owned()];
    let facts = CallFacts::new("gitlab", "remove_project", &hints).with_scopes(&scopes);
    bencher.bench_local(|| visible(black_box(&policy), black_box(&facts)));
}

#[divan::bench]
fn compile_twenty_rules(bencher: Bencher) {
    let spec = twenty_rules_spec();
    bencher.bench_local(|| compile(black_box(&spec)));
}

fn bench_decide(bencher: Bencher, policy: &CompiledPolicy, call: (&str, &str, bool, bool, bool, bool)) {
    let (upstream, tool, read_only, destructive, open_world, tainted) = call;
    let hints = hints(read_only, destructive, open_world);
    let scopes = vec!["ops".to_owned(), "read".to_owned()];
    let facts = CallFacts::new(upstream, tool, &hints).with_scopes(&scopes).with_session_tainted(tainted);
    bencher.bench_local(|| decide(black_box(policy), black_box(&facts)));
}
