//! The trust rule with a verification record's observation as evidence: a contradiction tightens whatever the
//! trust, support lets an untrusted relaxing declaration count only where inference is unsure.

use toolgate_core::trust::{
    Convention, DEFAULT_MIN_CONFIDENCE, HintRule, Observation, TrustLevel, resolve_trusted_hints_observed,
};
use toolgate_core::{DeclaredHints, HintOverrides, HintSource, ToolDefinition, infer::infer_annotations};

fn resolve(
    name: &str,
    description: &str,
    declared: &DeclaredHints,
    overrides: &HintOverrides,
    trust: TrustLevel,
    observation: Option<&Observation>,
) -> toolgate_core::trust::TrustedHints {
    let tool = ToolDefinition::from_value(serde_json::json!({"name": name, "description": description}))
        .unwrap_or_else(|error| unreachable!("{error}"));
    let inference = infer_annotations(&tool);
    resolve_trusted_hints_observed(
        overrides,
        declared,
        Some(&inference),
        trust,
        DEFAULT_MIN_CONFIDENCE,
        &Convention::default(),
        observation,
    )
}

fn read_only_closed() -> DeclaredHints {
    DeclaredHints { read_only: Some(true), open_world: Some(false), ..Default::default() }
}

#[test]
fn a_contradiction_tightens_whatever_the_trust_and_only_an_override_beats_it() {
    let seen = Observation { record: "verification/1".into(), wrote: true, connected: true, ..Default::default() };
    for trust in TrustLevel::ALL {
        let trusted = resolve(
            "read_status",
            "Read the service status.",
            &read_only_closed(),
            &HintOverrides::default(),
            trust,
            Some(&seen),
        );
        assert_eq!(trusted.rules.read_only, HintRule::ObservedContradiction, "{trust:?}");
        assert_eq!(trusted.rules.open_world, HintRule::ObservedContradiction, "{trust:?}");
        assert!(!trusted.hints.read_only.value && trusted.hints.open_world.value);
        assert_eq!(trusted.hints.read_only.source, HintSource::Observed);
        assert_ne!(trusted.rules.destructive, HintRule::Implied, "a tool seen writing is not implied harmless");
        assert!(trusted.is_consistent());
    }
    let overridden = HintOverrides { read_only: Some(true), ..Default::default() };
    let trusted = resolve(
        "read_status",
        "Read the service status.",
        &read_only_closed(),
        &overridden,
        TrustLevel::Pinned,
        Some(&seen),
    );
    assert_eq!(trusted.rules.read_only, HintRule::Override);
    let repeat = Observation { repeat_changed: true, destroyed: true, wrote: true, ..Default::default() };
    let declared = DeclaredHints {
        read_only: Some(false),
        destructive: Some(false),
        idempotent: Some(true),
        ..Default::default()
    };
    let trusted =
        resolve("set_mode", "Set the mode.", &declared, &HintOverrides::default(), TrustLevel::Verified, Some(&repeat));
    assert!(trusted.hints.destructive.value && !trusted.hints.idempotent.value);
    assert_eq!(trusted.rules.idempotent, HintRule::ObservedContradiction);
}

#[test]
fn support_lets_an_untrusted_declaration_count_where_inference_is_unsure() {
    let quiet = Observation { record: "verification/2".into(), supported: true, ..Default::default() };
    // A name and text with no cue: inference alone cannot carry an untrusted read-only claim.
    let untrusted = |observation| {
        resolve(
            "frobnicate",
            "Frobnicates.",
            &read_only_closed(),
            &HintOverrides::default(),
            TrustLevel::Untrusted,
            observation,
        )
    };
    let without = untrusted(None);
    assert_eq!(without.rules.read_only, HintRule::DeclaredRelaxingRejected);
    let with = untrusted(Some(&quiet));
    assert_eq!(with.rules.read_only, HintRule::DeclaredRelaxingConfirmedByObservation);
    assert_eq!(with.rules.open_world, HintRule::DeclaredRelaxingConfirmedByObservation);
    assert!(with.hints.read_only.value && !with.hints.open_world.value);
    assert!(with.is_consistent());
    // Inference that confidently sees a delete vetoes the support: the calls may not have reached the delete.
    let deleting = resolve(
        "delete_customer",
        "Permanently deletes a customer record.",
        &read_only_closed(),
        &HintOverrides::default(),
        TrustLevel::Untrusted,
        Some(&quiet),
    );
    assert_eq!(deleting.rules.read_only, HintRule::DeclaredRelaxingRejected);
}
