//! The policy engine and trust rules at their public boundary: data-driven verdict tables, compile errors, and
//! properties (decide is deterministic, never panics and fails closed; the default profile never lets a destructive
//! tool through unconfirmed unless a configured allow rule says so; untrusted upstreams never relax a hint without
//! agreeing inference; overrides win; a declared `destructiveHint: true` is never weakened).
//!
//! Tests only: nothing here is product code.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use proptest::prelude::*;
use serde_json::{Value, json};
use toolgate_core::facts::{Category, category, risk_level};
use toolgate_core::infer::{Inference, InferredHint};
use toolgate_core::policy::{CallFacts, CompiledPolicy, Mode, PolicySpec, Verdict, compile, decide, visible};
use toolgate_core::trust::{HintRule, TrustLevel, TrustedHints, resolve_trusted_hints};
use toolgate_core::{DeclaredHints, Hint, HintOverrides};

/// A policy from the JSON form of `[policy]` (the shape the config crate lowers TOML into).
fn policy(spec: Value) -> CompiledPolicy {
    let spec: PolicySpec = serde_json::from_value(spec).unwrap();
    compile(&spec).unwrap()
}

/// Hints a verified upstream declared: read-only, destructive, idempotent, open-world.
fn declared(read_only: bool, destructive: bool, idempotent: bool, open_world: bool) -> TrustedHints {
    let declared = DeclaredHints {
        read_only: Some(read_only),
        destructive: Some(destructive),
        idempotent: Some(idempotent),
        open_world: Some(open_world),
        ..Default::default()
    };
    resolve_trusted_hints(&HintOverrides::default(), &declared, None, TrustLevel::Verified, 0.8)
}

fn read() -> TrustedHints {
    declared(true, false, true, false)
}
fn web_read() -> TrustedHints {
    declared(true, false, true, true)
}
fn write() -> TrustedHints {
    declared(false, false, false, false)
}
fn external_write() -> TrustedHints {
    declared(false, false, false, true)
}
fn destructive() -> TrustedHints {
    declared(false, true, false, false)
}
/// Nothing declared, untrusted: every hint is the spec default (destructive, open-world).
fn unknown() -> TrustedHints {
    resolve_trusted_hints(&HintOverrides::default(), &DeclaredHints::default(), None, TrustLevel::Untrusted, 0.8)
}

/// Checks a verdict and the rule that decided it.
fn check(policy: &CompiledPolicy, call: CallFacts<'_>, expected: Verdict, rule: &str) {
    let decision = decide(policy, &call);
    assert_eq!(
        (decision.verdict, decision.rule()),
        (expected, rule),
        "{} on {}: {decision:#?}",
        call.tool,
        call.upstream
    );
    assert_eq!(decision, decide(policy, &call), "deterministic");
}

fn call<'a>(tool: &'a str, hints: &'a TrustedHints) -> CallFacts<'a> {
    CallFacts::new("github", tool, hints)
}

fn tainted<'a>(tool: &'a str, hints: &'a TrustedHints) -> CallFacts<'a> {
    call(tool, hints).with_session_tainted(true)
}

#[test]
fn the_default_profile() {
    let policy = CompiledPolicy::default();
    check(&policy, call("get_issue", &read()), Verdict::Allow, "default-read-allow");
    check(&policy, call("search_web", &web_read()), Verdict::Allow, "default-read-allow");
    check(&policy, call("add_label", &write()), Verdict::Allow, "default-write-allow");
    check(&policy, call("send_email", &external_write()), Verdict::Confirm, "default-open-world-write-confirm");
    check(&policy, call("delete_repo", &destructive()), Verdict::Confirm, "default-destructive-confirm");
    check(&policy, call("mystery", &unknown()), Verdict::Confirm, "default-destructive-confirm");
    let none = policy_with(json!({"defaults": "none", "rule": [{"effect": "allow", "match": {"read_only": true}}]}));
    check(&none, call("get_issue", &read()), Verdict::Allow, "rule-1");
    check(&none, call("add_label", &write()), Verdict::Deny, "no-rule-matched");
}

fn policy_with(spec: Value) -> CompiledPolicy {
    policy(spec)
}

#[test]
fn modes() {
    let read_only = policy(json!({"mode": "read-only"}));
    check(&read_only, call("get_issue", &read()), Verdict::Allow, "default-read-allow");
    check(&read_only, call("add_label", &write()), Verdict::Hide, "mode-read-only");
    check(&read_only, call("mystery", &unknown()), Verdict::Hide, "mode-read-only");
    let sandbox = policy(json!({"mode": "sandbox", "rule": [{"effect": "allow", "match": {"tool": "*"}}]}));
    check(&sandbox, call("search_web", &web_read()), Verdict::Deny, "mode-sandbox");
    check(&sandbox, call("send_email", &external_write()), Verdict::Deny, "mode-sandbox");
    check(&sandbox, call("add_label", &write()), Verdict::Allow, "rule-1");
    let mut switched = CompiledPolicy::default();
    switched.set_mode(Mode::ReadOnly);
    check(&switched, call("add_label", &write()), Verdict::Hide, "mode-read-only");
    // A rule conditioned on the mode, and a hide rule beating the sandbox's deny.
    let conditioned = policy(json!({"mode": "sandbox", "rule": [
        {"id": "no-fs-in-sandbox", "effect": "deny", "match": {"upstream": "fs", "mode": "sandbox"}},
        {"id": "hide-web", "effect": "hide", "match": {"tool": "search_*"}}
    ]}));
    check(&conditioned, CallFacts::new("fs", "add_label", &write()), Verdict::Deny, "no-fs-in-sandbox");
    check(&conditioned, call("search_web", &web_read()), Verdict::Hide, "hide-web");
    let decision = decide(&conditioned, &call("search_web", &web_read()));
    assert_eq!(decision.reasons[1].rule, "mode-sandbox", "the overridden guard is still named");
}

#[test]
fn look_alike_names_are_matched_by_the_rules_for_what_they_imitate() {
    let policy = policy(json!({"rule": [
        {"id": "no-deletes", "effect": "deny", "match": {"tool": "delete_*"}},
        {"id": "ask-purge", "effect": "confirm", "match": {"tool": "purge_old"}},
        {"id": "reads-ok", "effect": "allow", "match": {"tool": "read_file"}}
    ]}));
    // A Cyrillic `е`, a zero-width space, a Greek `ο` and a Cyrillic `р`: each reads as the Latin name.
    check(&policy, call("d\u{0435}lete_file", &write()), Verdict::Deny, "no-deletes");
    check(&policy, call("delete\u{200b}_file", &write()), Verdict::Deny, "no-deletes");
    check(&policy, call("\u{0440}urge_\u{03bf}ld", &write()), Verdict::Confirm, "ask-purge");
    // A look-alike never gains an allow written for the name it imitates.
    check(&policy, call("r\u{0435}ad_file", &destructive()), Verdict::Confirm, "default-destructive-confirm");
    check(&policy, call("read_file", &destructive()), Verdict::Allow, "reads-ok");
}

#[test]
fn combining_deny_overrides_then_first_permit() {
    let rules = policy(json!({"rule": [
        {"id": "github-all", "effect": "allow", "match": {"upstream": "github"}},
        {"id": "no-deletes", "effect": "deny", "match": {"tool": "delete_*"}},
        {"id": "hide-admin", "effect": "hide", "match": {"tool": "*admin*"}},
        {"id": "admin-deny", "effect": "deny", "match": {"tool": "*admin*"}},
        {"id": "confirm-writes", "effect": "confirm", "match": {"read_only": false}}
    ]}));
    check(&rules, call("delete_repo", &destructive()), Verdict::Deny, "no-deletes");
    check(&rules, call("delete_admin", &destructive()), Verdict::Hide, "hide-admin");
    check(&rules, call("add_label", &write()), Verdict::Allow, "github-all");
    check(&rules, CallFacts::new("gitlab", "add_label", &write()), Verdict::Confirm, "confirm-writes");
    check(&rules, CallFacts::new("gitlab", "get_issue", &read()), Verdict::Allow, "default-read-allow");
    let exception_first = policy(json!({"rule": [
        {"id": "branches", "effect": "allow", "match": {"upstream": "github", "tool": "delete_branch"}},
        {"id": "destructive", "effect": "confirm", "match": {"destructive": true}}
    ]}));
    check(&exception_first, call("delete_branch", &destructive()), Verdict::Allow, "branches");
    check(&exception_first, call("delete_repo", &destructive()), Verdict::Confirm, "destructive");
}

#[test]
fn session_taint() {
    let allow_all = json!({"effect": "allow", "match": {"upstream": "*"}});
    let on = policy(json!({"rule": [allow_all.clone()]}));
    check(&on, tainted("send_email", &external_write()), Verdict::Confirm, "session-taint");
    check(&on, tainted("search_web", &web_read()), Verdict::Allow, "rule-1");
    check(&on, tainted("add_label", &write()), Verdict::Allow, "rule-1");
    check(&on, call("send_email", &external_write()), Verdict::Allow, "rule-1");
    let off = policy(json!({"session_taint": false, "rule": [allow_all]}));
    check(&off, tainted("send_email", &external_write()), Verdict::Allow, "rule-1");
    let explicit = policy(json!({"rule": [
        {"id": "slack-even-tainted", "effect": "allow", "match": {"tool": "post_slack", "session_tainted": true}},
        {"id": "deny-tainted-mail", "effect": "deny", "match": {"tool": "send_email", "session_tainted": true}}
    ]}));
    check(&explicit, tainted("post_slack", &external_write()), Verdict::Allow, "slack-even-tainted");
    check(&explicit, tainted("send_email", &external_write()), Verdict::Deny, "deny-tainted-mail");
    check(&explicit, call("send_email", &external_write()), Verdict::Confirm, "default-open-world-write-confirm");
    let decision = decide(&on, &tainted("send_email", &external_write()));
    assert_eq!(decision.reasons[1].rule, "rule-1", "the permit the taint floor raised is named");
}

#[test]
fn conditions_on_scopes_risk_categories_and_trust_rules() {
    let rules = policy(json!({"rule": [
        {"id": "admins-delete", "effect": "allow", "match": {"destructive": true, "scopes": ["admin", "tools"]}},
        {"id": "need-tools", "effect": "deny", "match": {"missing_scopes": "tools", "min_risk": 2}},
        {"id": "doubtful", "effect": "confirm", "match": {"any_hint_rule": "declared-relaxing-rejected"}},
        {"id": "external", "effect": "confirm", "match": {"category": ["external"], "max_risk": 3}},
        {"id": "inferred-reads", "effect": "confirm", "match": {"read_only": true, "read_only_rule": "inferred"}}
    ]}));
    let admin = ["admin".to_owned(), "tools".to_owned()];
    let tools = ["tools".to_owned()];
    check(&rules, call("delete_repo", &destructive()).with_scopes(&admin), Verdict::Allow, "admins-delete");
    check(
        &rules,
        call("delete_repo", &destructive()).with_scopes(&tools),
        Verdict::Confirm,
        "default-destructive-confirm",
    );
    check(&rules, call("delete_repo", &destructive()), Verdict::Deny, "need-tools");
    check(&rules, call("get_issue", &read()), Verdict::Allow, "default-read-allow");
    check(&rules, call("send_email", &external_write()).with_scopes(&tools), Verdict::Confirm, "external");
    // An untrusted server calling a deleting tool read-only: the claim is rejected and the rule sees it.
    let lying = DeclaredHints { read_only: Some(true), ..Default::default() };
    let rejected = resolve_trusted_hints(&HintOverrides::default(), &lying, None, TrustLevel::Untrusted, 0.8);
    assert_eq!(rejected.rules.read_only, HintRule::DeclaredRelaxingRejected);
    check(&rules, call("get_thing", &rejected).with_scopes(&tools), Verdict::Confirm, "doubtful");
    let inference = inference(true, 0.95);
    let guessed = resolve_trusted_hints(
        &HintOverrides::default(),
        &DeclaredHints::default(),
        Some(&inference),
        TrustLevel::Verified,
        0.8,
    );
    check(&rules, call("get_thing", &guessed), Verdict::Confirm, "inferred-reads");
}

fn inference(read_only: bool, confidence: f32) -> Inference {
    let hint = |value| InferredHint { value, confidence, evidence: Vec::new() };
    Inference {
        read_only: hint(read_only),
        destructive: hint(!read_only),
        idempotent: hint(read_only),
        open_world: hint(false),
    }
}

#[test]
fn decisions_fail_closed_on_contradicting_facts() {
    let policy = CompiledPolicy::default();
    let hints = read();
    let wrong_category = CallFacts { category: Category::Destructive, ..call("get_issue", &hints) };
    check(&policy, wrong_category, Verdict::Deny, "fail-closed");
    let wrong_risk = CallFacts { risk_level: 9, ..call("get_issue", &hints) };
    check(&policy, wrong_risk, Verdict::Deny, "fail-closed");
    check(&policy, CallFacts::new("", "get_issue", &hints), Verdict::Deny, "fail-closed");
    let mut forged = read();
    forged.rules.read_only = HintRule::Override;
    check(&policy, call("get_issue", &forged), Verdict::Deny, "fail-closed");
    let mut contradictory = read();
    contradictory.hints.destructive.value = true;
    check(&policy, call("get_issue", &contradictory), Verdict::Deny, "fail-closed");
}

#[test]
fn reasons_name_the_rule_and_every_hint_with_its_trust_rule() {
    let decision = decide(&CompiledPolicy::default(), &call("mystery", &unknown()));
    let reasons: Vec<(&str, &str)> =
        decision.reasons.iter().map(|reason| (reason.rule.as_str(), reason.detail.as_str())).collect();
    assert_eq!(
        reasons,
        [
            ("default-destructive-confirm", "the tool may destroy or overwrite data: a person must approve"),
            ("spec-default", "readOnlyHint=false (spec-default)"),
            ("spec-default", "destructiveHint=true (spec-default)"),
            ("spec-default", "idempotentHint=false (spec-default)"),
            ("spec-default", "openWorldHint=true (spec-default)"),
        ]
    );
    let configured = policy(json!({"rule": [
        {"id": "gh", "effect": "deny",
         "match": {"upstream": ["github", "gitlab"], "tool": "delete_*", "destructive": true}},
        {"effect": "deny", "reason": "billing is off limits", "match": {"tool": "*billing*"}}
    ]}));
    let decision = decide(&configured, &call("delete_repo", &destructive()));
    assert_eq!(
        decision.reasons[0].detail,
        "configured rule `gh` (deny) matched upstream = github|gitlab, tool = delete_*, destructiveHint = true"
    );
    let decision = decide(&configured, &call("get_billing", &read()));
    assert_eq!((decision.rule(), decision.reasons[0].detail.as_str()), ("rule-2", "billing is off limits"));
    assert_eq!(
        serde_json::to_value(&decision).unwrap()["reasons"][0],
        json!({"rule": "rule-2", "detail": "billing is off limits"})
    );
}

#[test]
fn visibility() {
    let policy = policy(
        json!({"mode": "read-only", "rule": [{"id": "no-admin", "effect": "deny", "match": {"tool": "admin_*"}}]}),
    );
    let hidden = visible(&policy, &call("add_label", &write()));
    assert_eq!((hidden.verdict, hidden.rule()), (Verdict::Hide, "mode-read-only"));
    let denied = visible(&policy, &call("admin_stats", &read()));
    assert_eq!((denied.verdict, denied.rule()), (Verdict::Allow, "visible"));
    assert_eq!(denied.reasons[0].detail, "listed; a call would be denied");
    assert_eq!(denied.reasons[1].rule, "no-admin");
}

// ---- properties ----

const UPSTREAMS: &[&str] = &["github", "gitlab", "fs", "web", ""];
const TOOLS: &[&str] = &["delete_repo", "get_issue", "send_email", "search_web", "admin_stats", "x", ""];
const GLOBS: &[&str] = &["*", "git*", "github", "delete_*", "get_?????", "*e*", "s?nd_*", "*_web"];
const SCOPES: &[&str] = &["admin", "tools", "read"];
const RULE_NAMES: &[&str] = &["override", "declared-trusted", "declared-relaxing-rejected", "inferred", "spec-default"];

fn pick(pool: &'static [&'static str]) -> impl Strategy<Value = Value> {
    prop::sample::subsequence(pool, 1..=2).prop_map(|items| json!(items))
}

fn conditions() -> impl Strategy<Value = Value> {
    let hint = || prop::option::of(any::<bool>());
    (
        (prop::option::of(pick(GLOBS)), prop::option::of(pick(GLOBS)), hint(), hint(), hint(), hint()),
        (
            prop::option::of(pick(&["read", "write", "external", "destructive"])),
            prop::option::of(0u8..=2),
            prop::option::of(2u8..=4),
        ),
        (
            prop::option::of(pick(RULE_NAMES)),
            prop::option::of(pick(SCOPES)),
            prop::option::of(pick(SCOPES)),
            prop::option::of(pick(&["normal", "sandbox", "read-only"])),
            hint(),
        ),
    )
        .prop_map(
            |((upstream, tool, ro, de, id, ow), (category, min, max), (rules, scopes, missing, mode, tainted))| {
                let entries = [
                    ("upstream", upstream),
                    ("tool", tool),
                    ("read_only", ro.map(Value::from)),
                    ("destructive", de.map(Value::from)),
                    ("idempotent", id.map(Value::from)),
                    ("open_world", ow.map(Value::from)),
                    ("category", category),
                    ("min_risk", min.map(Value::from)),
                    ("max_risk", max.map(Value::from)),
                    ("any_hint_rule", rules),
                    ("scopes", scopes),
                    ("missing_scopes", missing),
                    ("mode", mode),
                    ("session_tainted", tainted.map(Value::from)),
                ];
                Value::Object(entries.into_iter().filter_map(|(key, value)| Some((key.to_owned(), value?))).collect())
            },
        )
}

fn policy_spec() -> impl Strategy<Value = Value> {
    let effect = prop::sample::select(vec!["allow", "confirm", "deny", "hide"]);
    let rule = (effect, conditions()).prop_map(|(effect, conditions)| json!({"effect": effect, "match": conditions}));
    let mode = prop::sample::select(vec!["normal", "sandbox", "read-only"]);
    let defaults = prop::sample::select(vec!["standard", "none"]);
    (mode, defaults, any::<bool>(), prop::collection::vec(rule, 0..20)).prop_map(|(mode, defaults, taint, rules)| {
        json!({"mode": mode, "defaults": defaults, "session_taint": taint, "rule": rules})
    })
}

fn declared_hints() -> impl Strategy<Value = DeclaredHints> {
    let hint = || prop::option::of(any::<bool>());
    (hint(), hint(), hint(), hint()).prop_map(|(read_only, destructive, idempotent, open_world)| DeclaredHints {
        read_only,
        destructive,
        idempotent,
        open_world,
        ..Default::default()
    })
}

fn any_inference() -> impl Strategy<Value = Option<Inference>> {
    let hint = || {
        (any::<bool>(), 0.5f32..=1.0).prop_map(|(value, confidence)| InferredHint {
            value,
            confidence,
            evidence: Vec::new(),
        })
    };
    prop::option::of((hint(), hint(), hint(), hint()).prop_map(|(read_only, destructive, idempotent, open_world)| {
        Inference { read_only, destructive, idempotent, open_world }
    }))
}

fn trust_inputs() -> impl Strategy<Value = (DeclaredHints, DeclaredHints, Option<Inference>, TrustLevel, f32)> {
    (declared_hints(), declared_hints(), any_inference(), prop::sample::select(TrustLevel::ALL.to_vec()), 0.5f32..=1.0)
}

/// Facts for one call: consistent hints from the trust rules, or (one time in four) forged ones.
/// Hints, upstream, tool, scopes, tainted, and a forged (category index, risk level).
type Facts = (TrustedHints, &'static str, &'static str, Vec<String>, bool, Option<(u8, u8)>);

fn facts() -> impl Strategy<Value = Facts> {
    let forged = (trust_inputs(), any::<[bool; 4]>(), 0u8..4).prop_map(
        |((overrides, declared, inference, trust, bar), values, rule)| {
            let mut hints = resolve_trusted_hints(&overrides, &declared, inference.as_ref(), trust, bar);
            for (hint, value) in Hint::ALL.into_iter().zip(values) {
                match hint {
                    Hint::ReadOnly => hints.hints.read_only.value = value,
                    Hint::Destructive => hints.hints.destructive.value = value,
                    Hint::Idempotent => hints.hints.idempotent.value = value,
                    Hint::OpenWorld => hints.hints.open_world.value = value,
                }
            }
            hints.rules.open_world = HintRule::ALL[usize::from(rule)];
            hints
        },
    );
    let honest = trust_inputs().prop_map(|(overrides, declared, inference, trust, bar)| {
        resolve_trusted_hints(&overrides, &declared, inference.as_ref(), trust, bar)
    });
    let hints = prop_oneof![3 => honest, 1 => forged];
    let scopes =
        prop::sample::subsequence(SCOPES, 0..=3).prop_map(|scopes| scopes.into_iter().map(str::to_owned).collect());
    (
        hints,
        prop::sample::select(UPSTREAMS),
        prop::sample::select(TOOLS),
        scopes,
        any::<bool>(),
        prop::option::of((0u8..4, 0u8..6)),
    )
}

fn untrusted(declared: &DeclaredHints, inference: Option<&Inference>, bar: f32) -> TrustedHints {
    resolve_trusted_hints(&HintOverrides::default(), declared, inference, TrustLevel::Untrusted, bar)
}

fn category_from(index: u8) -> Category {
    [Category::Read, Category::Write, Category::External, Category::Destructive][usize::from(index)]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn decide_is_total_deterministic_and_fails_closed(
        spec in policy_spec(),
        (hints, upstream, tool, scopes, tainted, forged) in facts(),
    ) {
        let policy = policy(spec);
        let mut call = CallFacts::new(upstream, tool, &hints).with_scopes(&scopes).with_session_tainted(tainted);
        if let Some((category, risk)) = forged {
            call.category = category_from(category);
            call.risk_level = risk;
        }
        let decision = decide(&policy, &call);
        prop_assert_eq!(&decision, &decide(&policy, &call));
        prop_assert_eq!(decision.reasons.len() >= 5, true);
        let derived = (category(&hints.hints), risk_level(&hints.hints));
        let honest = hints.is_consistent()
            && (call.category, call.risk_level) == derived
            && !upstream.is_empty()
            && !tool.is_empty()
            && !(hints.hints.read_only.value && (hints.hints.destructive.value || !hints.hints.idempotent.value));
        prop_assert_eq!(decision.rule() == "fail-closed", !honest);
        if !honest {
            prop_assert_eq!(decision.verdict, Verdict::Deny);
        }
        let listed = visible(&policy, &call);
        prop_assert_eq!(listed.verdict == Verdict::Hide, decision.verdict == Verdict::Hide);
    }

    #[test]
    fn destructive_tools_are_never_allowed_unless_an_allow_rule_says_so(
        spec in policy_spec(),
        (hints, upstream, tool, scopes, tainted, _) in facts(),
    ) {
        let policy = policy(spec.clone());
        let call = CallFacts::new(upstream, tool, &hints).with_scopes(&scopes).with_session_tainted(tainted);
        let decision = decide(&policy, &call);
        if hints.hints.may_destroy() && decision.verdict == Verdict::Allow {
            let index: usize = decision.rule().strip_prefix("rule-").and_then(|n| n.parse().ok()).unwrap();
            prop_assert_eq!(&spec["rule"][index - 1]["effect"], "allow");
        }
        let defaults = decide(&CompiledPolicy::default(), &call);
        if hints.hints.may_destroy() {
            prop_assert_ne!(defaults.verdict, Verdict::Allow);
        }
    }

    #[test]
    fn untrusted_upstreams_never_relax_without_agreeing_inference((_, declared, inference, _, bar) in trust_inputs()) {
        let trusted = untrusted(&declared, inference.as_ref(), bar);
        prop_assert!(trusted.is_consistent());
        for hint in Hint::ALL {
            let value = trusted.hints.get(hint).value;
            if value != hint.relaxed_value() || value == hint.spec_default() {
                continue;
            }
            let agrees = |hint: Hint| {
                let inferred = inference.as_ref().map(|inference| inference.get(hint));
                inferred.is_some_and(|inferred| inferred.value == hint.relaxed_value() && inferred.confidence >= bar)
            };
            match trusted.rules.get(hint) {
                HintRule::Implied => prop_assert!(trusted.hints.read_only.value && agrees(Hint::ReadOnly)),
                _ => prop_assert!(agrees(hint), "{hint:?} relaxed by {:?}", trusted.rules.get(hint)),
            }
        }
    }

    #[test]
    fn overrides_always_win((overrides, declared, inference, trust, bar) in trust_inputs()) {
        let trusted = resolve_trusted_hints(&overrides, &declared, inference.as_ref(), trust, bar);
        for hint in Hint::ALL {
            let Some(value) = overrides.get(hint) else { continue };
            let implied_by_read_only =
                matches!(hint, Hint::Destructive | Hint::Idempotent) && trusted.hints.read_only.value;
            if !implied_by_read_only {
                prop_assert_eq!(trusted.hints.get(hint).value, value);
                prop_assert_eq!(trusted.rules.get(hint), HintRule::Override);
            }
        }
    }

    #[test]
    fn a_declared_destructive_hint_is_never_weakened(
        (overrides, mut declared, inference, trust, bar) in trust_inputs(),
    ) {
        declared.destructive = Some(true);
        prop_assert!(untrusted(&declared, inference.as_ref(), bar).hints.may_destroy());
        // Trusted upstreams: only the server's own `readOnlyHint: true` (or an override) can make it read-only.
        let trusted = resolve_trusted_hints(&HintOverrides::default(), &declared, inference.as_ref(), trust, bar);
        prop_assert!(trusted.hints.may_destroy() || declared.read_only == Some(true));
        let overridden = resolve_trusted_hints(&overrides, &declared, inference.as_ref(), TrustLevel::Untrusted, bar);
        if overrides.read_only != Some(true) && overrides.destructive != Some(false) {
            prop_assert!(overridden.hints.may_destroy());
        }
    }
}
