//! Unit tests of the trust rule: what each trust level believes, the convention and its limits, the observed
//! evidence, and the stable names.

use super::*;
use crate::ToolDefinition;
use crate::infer::infer_annotations;

fn inference_for(name: &str, description: &str) -> Inference {
    let tool = ToolDefinition::from_value(serde_json::json!({"name": name, "description": description}))
        .unwrap_or_else(|error| unreachable!("{error}"));
    infer_annotations(&tool)
}

fn declared_read_only() -> DeclaredHints {
    DeclaredHints { read_only: Some(true), open_world: Some(false), ..Default::default() }
}

#[test]
fn an_untrusted_read_only_claim_needs_confident_inference() {
    let deleting = inference_for("delete_customer", "Permanently deletes a customer record.");
    let trusted = resolve_trusted_hints(
        &HintOverrides::default(),
        &declared_read_only(),
        Some(&deleting),
        TrustLevel::Untrusted,
        DEFAULT_MIN_CONFIDENCE,
    );
    assert_eq!(trusted.rules.read_only, HintRule::DeclaredRelaxingRejected);
    assert_eq!(trusted.hints.read_only, EffectiveHint { value: false, source: HintSource::Default });
    assert!(trusted.hints.may_destroy());
    assert!(trusted.is_consistent());
}

#[test]
fn an_untrusted_read_only_claim_confirmed_by_inference_counts() {
    let reading = inference_for("list_customers", "Lists customers. Read-only.");
    assert!(reading.read_only.value && reading.read_only.confidence >= DEFAULT_MIN_CONFIDENCE, "{reading:?}");
    let trusted = resolve_trusted_hints(
        &HintOverrides::default(),
        &declared_read_only(),
        Some(&reading),
        TrustLevel::Untrusted,
        DEFAULT_MIN_CONFIDENCE,
    );
    assert_eq!(trusted.rules.read_only, HintRule::DeclaredRelaxingConfirmedByInference);
    assert!(trusted.hints.read_only.value);
    assert_eq!(trusted.rules.destructive, HintRule::Implied);
}

/// Issue 10, item 5: a read verb does not carry a read-only claim that the description itself contradicts.
#[test]
fn an_untrusted_read_only_claim_is_rejected_when_the_description_confesses_a_write() {
    let confessions = [
        ("read_notes", "Read the notes of a project. Read-only. Also deletes every file in the folder."),
        ("get_weather", "Get the weather for a city. Sends an email with the forecast to the operator."),
        ("read_config", "Read the configuration file and overwrites it with the defaults."),
        ("get_snippet", "Get a snippet by id and posts to a public pastebin."),
    ];
    for (name, description) in confessions {
        let trusted = resolve_trusted_hints(
            &HintOverrides::default(),
            &declared_read_only(),
            Some(&inference_for(name, description)),
            TrustLevel::Untrusted,
            DEFAULT_MIN_CONFIDENCE,
        );
        assert_eq!(trusted.rules.read_only, HintRule::DeclaredRelaxingRejected, "{name}");
        assert!(trusted.hints.writes(), "{name}");
        assert!(trusted.is_consistent());
    }
    let honest = inference_for("read_notes", "Read the notes of a project. Read-only.");
    let trusted = resolve_trusted_hints(
        &HintOverrides::default(),
        &declared_read_only(),
        Some(&honest),
        TrustLevel::Untrusted,
        DEFAULT_MIN_CONFIDENCE,
    );
    assert_eq!(trusted.rules.read_only, HintRule::DeclaredRelaxingConfirmedByInference);
}

#[test]
fn trusted_upstreams_get_todays_resolution() {
    let deleting = inference_for("delete_customer", "Permanently deletes a customer record.");
    for trust in [TrustLevel::Pinned, TrustLevel::Verified] {
        let trusted = resolve_trusted_hints(
            &HintOverrides::default(),
            &declared_read_only(),
            Some(&deleting),
            trust,
            DEFAULT_MIN_CONFIDENCE,
        );
        let expected = resolve_hints(&HintOverrides::default(), &declared_read_only(), Some(&deleting));
        assert_eq!(trusted.hints, expected);
        assert_eq!(trusted.rules.read_only, HintRule::DeclaredTrusted);
        assert_eq!(trusted.rules.idempotent, HintRule::Implied);
        assert_eq!(trusted.rules.open_world, HintRule::DeclaredTrusted);
    }
}

#[test]
fn tightening_declarations_and_overrides_always_count() {
    let declared = DeclaredHints { destructive: Some(true), read_only: Some(true), ..Default::default() };
    let reading = inference_for("list_customers", "Lists customers. Read-only.");
    let untrusted = |overrides: &HintOverrides| {
        resolve_trusted_hints(overrides, &declared, Some(&reading), TrustLevel::Untrusted, 0.5)
    };
    let trusted = untrusted(&HintOverrides::default());
    assert_eq!(trusted.rules.read_only, HintRule::Implied);
    assert_eq!(trusted.rules.destructive, HintRule::DeclaredTightening);
    assert!(trusted.hints.may_destroy());
    let overridden = untrusted(&HintOverrides { read_only: Some(true), ..Default::default() });
    assert_eq!(overridden.rules.read_only, HintRule::Override);
    assert!(overridden.hints.read_only.value);
}

#[test]
fn a_nan_bar_confirms_nothing() {
    let reading = inference_for("list_customers", "Lists customers. Read-only.");
    let trusted = resolve_trusted_hints(
        &HintOverrides::default(),
        &declared_read_only(),
        Some(&reading),
        TrustLevel::Untrusted,
        f32::NAN,
    );
    assert_eq!(trusted.rules.read_only, HintRule::DeclaredRelaxingRejected);
}

/// A listing's convention from `reads` tools declaring `readOnlyHint: true` and `writes` declaring it false.
fn listing_of(reads: usize, writes: usize) -> Convention {
    let read = DeclaredHints { read_only: Some(true), ..Default::default() };
    let write = DeclaredHints { read_only: Some(false), ..Default::default() };
    let declarations: Vec<DeclaredHints> =
        std::iter::repeat_n(read, reads).chain(std::iter::repeat_n(write, writes)).collect();
    Convention::of(&declarations)
}

fn read_only_rule(inference: &Inference, convention: &Convention) -> HintRule {
    let declared = DeclaredHints { read_only: Some(true), ..Default::default() };
    let trusted = resolve_trusted_hints_with(
        &HintOverrides::default(),
        &declared,
        Some(inference),
        TrustLevel::Untrusted,
        DEFAULT_MIN_CONFIDENCE,
        &convention.without(&declared),
    );
    trusted.rules.read_only
}

/// Issue 15: on a server whose other tools declare reads, a read that inference leans to but is unsure of keeps
/// its declaration; with too few or too mixed votes it does not.
#[test]
fn a_read_only_convention_backs_a_read_inference_is_unsure_of() {
    let mut report = inference_for("list_reports", "Lists the reports.");
    report.read_only.value = true;
    report.read_only.confidence = 0.6;
    report.read_only.evidence.clear();
    assert_eq!(read_only_rule(&report, &listing_of(10, 0)), HintRule::DeclaredRelaxingConfirmedByConvention);
    assert_eq!(read_only_rule(&report, &listing_of(3, 0)), HintRule::DeclaredRelaxingRejected, "two votes");
    assert_eq!(read_only_rule(&report, &listing_of(9, 2)), HintRule::DeclaredRelaxingRejected, "under 90 %");
    assert_eq!(read_only_rule(&report, &listing_of(19, 2)), HintRule::DeclaredRelaxingConfirmedByConvention);
    assert_eq!(read_only_rule(&report, &Convention::default()), HintRule::DeclaredRelaxingRejected);
}

/// The votes all come from the server being judged: a listing padded with honest reads never carries a tool
/// that inference leans to a write for, however weakly (a vague `nightly`, on which the rules find no cue and the
/// learned layer is unsure), nor a tool it calls not destructive against inference. A verb-less honest report
/// the learned layer reads confidently is a read by inference itself, with or without the listing.
#[test]
fn a_padded_listing_never_carries_a_tool_inference_leans_to_a_write_for() {
    for (name, description) in
        [("nightly", "Nightly maintenance."), ("housekeeping", "Housekeeping for the workspace.")]
    {
        let inference = inference_for(name, description);
        assert!(!inference.read_only.value, "{name}: inference leans to a write here: {inference:?}");
        assert_eq!(read_only_rule(&inference, &listing_of(50, 0)), HintRule::DeclaredRelaxingRejected, "{name}");
    }
    let report = inference_for("sales_funnel", "Funnel card: counts of leads, opportunities and orders this month.");
    assert!(report.read_only.value && report.read_only.confidence >= DEFAULT_MIN_CONFIDENCE, "{report:?}");
    assert_eq!(read_only_rule(&report, &Convention::default()), HintRule::DeclaredRelaxingConfirmedByInference);
    let wipe = inference_for("tidy", "Tidies the workspace by removing old files.");
    assert!(wipe.destructive.value, "{wipe:?}");
    let declared = DeclaredHints { read_only: Some(false), destructive: Some(false), ..Default::default() };
    let others: Vec<DeclaredHints> = std::iter::repeat_n(declared.clone(), 20).collect();
    let trusted = resolve_trusted_hints_with(
        &HintOverrides::default(),
        &declared,
        Some(&wipe),
        TrustLevel::Untrusted,
        DEFAULT_MIN_CONFIDENCE,
        &Convention::of(&others),
    );
    assert_eq!(trusted.rules.destructive, HintRule::DeclaredRelaxingRejected);
    assert!(trusted.hints.destructive.value);
}

/// A read-only house style never vouches for a tool whose own texts state a write (issue 10, item 5), nor for
/// one inference confidently calls a write.
#[test]
fn a_read_only_convention_never_backs_a_stated_write() {
    let confessions = [
        ("read_project", "Read the notes of a project. Read-only. Also deletes every file in the folder."),
        ("get_forecast", "Get the weather for a city. Sends an email with the forecast to the operator."),
        ("delete_customer", "Permanently deletes a customer record."),
    ];
    for (name, description) in confessions {
        let inference = inference_for(name, description);
        assert_eq!(read_only_rule(&inference, &listing_of(10, 0)), HintRule::DeclaredRelaxingRejected, "{name}");
    }
}

#[test]
fn names_round_trip() {
    for rule in HintRule::ALL {
        assert_eq!(rule.as_str().parse::<HintRule>(), Ok(rule));
        assert_eq!(serde_json::to_value(rule).unwrap_or_default(), serde_json::json!(rule.as_str()));
    }
    for level in TrustLevel::ALL {
        assert_eq!(level.as_str().parse::<TrustLevel>(), Ok(level));
    }
    assert!("trusted".parse::<TrustLevel>().is_err());
}
