//! Property tests of the core's invariants over generated JSON: fingerprints ignore key order and whitespace,
//! normalization and lint never panic and are deterministic, and inference never weakens a declared
//! `destructiveHint: true`.
//!
//! Generators build nested JSON of bounded depth and size, with tool-like words, vendor spellings and loose booleans
//! mixed in so that the interesting branches are reached. Tests only: nothing here is product code.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use proptest::prelude::*;
use serde_json::{Map, Value, json};
use toolgate_core::effective::{HintOverrides, resolve_hints};
use toolgate_core::fingerprint::fingerprint_tool;
use toolgate_core::infer::infer_annotations;
use toolgate_core::lint::{RULES, lint_tool};
use toolgate_core::normalize::normalize_annotations;
use toolgate_core::{DeclaredHints, HintSource, ToolDefinition};

/// Words that steer inference and lint: verbs of every class, nouns that look like verbs, safety words.
const WORDS: &[&str] = &[
    "get",
    "list",
    "search",
    "query",
    "read",
    "find",
    "delete",
    "remove",
    "drop",
    "send",
    "email",
    "publish",
    "export",
    "download",
    "save",
    "create",
    "add",
    "insert",
    "update",
    "set",
    "run",
    "execute",
    "stop",
    "post",
    "api",
    "file",
    "url",
    "customer",
    "page",
    "safe",
    "read-only",
    "readonly",
    "destroy",
    "permanently",
    "never",
    "only",
    "data",
];

/// Keys an annotation object may hold: spec keys, vendor spellings, extended hints and strangers.
const ANNOTATION_KEYS: &[&str] = &[
    "title",
    "readOnlyHint",
    "destructiveHint",
    "idempotentHint",
    "openWorldHint",
    "readOnly",
    "destructive",
    "idempotent",
    "openWorld",
    "read_only_hint",
    "ReadOnlyHint",
    "isDestructive",
    "open-world",
    "costWarning",
    "progressIndicators",
    "category",
    "",
    "~/",
];

fn word() -> impl Strategy<Value = String> {
    prop::sample::select(WORDS).prop_map(str::to_owned)
}

/// A name or text made of tool words joined by the separators tool names use.
fn wording(max_words: usize) -> impl Strategy<Value = String> {
    (prop::collection::vec(word(), 0..max_words), prop::sample::select(&["_", "-", " ", ".", ""][..]))
        .prop_map(|(words, separator)| words.join(separator))
}

/// Strings with the characters JSON escaping and tokenization find hard.
fn text() -> impl Strategy<Value = String> {
    prop_oneof![wording(6), "[a-zA-Z0-9 _./~\\-\"\\\\\u{e9}\u{1F600}\n\t]{0,12}"]
}

/// JSON leaves; numbers are integers or exact binary fractions so that every parser reads them back exactly.
fn leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        (-4096i32..4096).prop_map(|numerator| Value::from(f64::from(numerator) / 8.0)),
        prop::sample::select(&["true", "false", "yes", "no", "1", "0", "maybe", ""][..])
            .prop_map(|text| Value::String(text.to_owned())),
        text().prop_map(Value::String),
    ]
}

/// Nested JSON: at most 4 levels, about 48 nodes, 5 items per array or object.
fn json_value() -> impl Strategy<Value = Value> {
    leaf().prop_recursive(4, 48, 5, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            prop::collection::vec(
                (prop_oneof![text(), prop::sample::select(ANNOTATION_KEYS).prop_map(str::to_owned)], inner),
                0..5
            )
            .prop_map(|pairs| Value::Object(pairs.into_iter().collect())),
        ]
    })
}

/// An annotation object: known and unknown keys with any values, loose booleans included.
fn annotations() -> impl Strategy<Value = Map<String, Value>> {
    prop::collection::vec((prop::sample::select(ANNOTATION_KEYS).prop_map(str::to_owned), json_value()), 0..8)
        .prop_map(|pairs| pairs.into_iter().collect())
}

/// A tool object with a string name and arbitrary everything else (annotations may be no object at all).
fn tool_value() -> impl Strategy<Value = Value> {
    (
        text(),
        prop::option::of(json_value()),
        prop::option::of(text()),
        prop::option::of(json_value()),
        prop_oneof![annotations().prop_map(Value::Object), json_value()],
        prop::option::of(prop::collection::vec(prop::sample::select(&["model", "app", "other"][..]), 0..3)),
        prop::collection::vec((prop::sample::select(ANNOTATION_KEYS).prop_map(str::to_owned), leaf()), 0..3),
    )
        .prop_map(|(name, title, description, schema, annotations, visibility, top_level)| {
            let mut tool: Map<String, Value> = top_level.into_iter().collect();
            tool.insert("name".into(), Value::String(name));
            if let Some(title) = title {
                tool.insert("title".into(), title);
            }
            if let Some(description) = description {
                tool.insert("description".into(), Value::String(description));
            }
            if let Some(schema) = schema {
                tool.insert("inputSchema".into(), json!({"type": "object", "properties": {"url": schema}}));
            }
            tool.insert("annotations".into(), annotations);
            if let Some(visibility) = visibility {
                tool.insert("_meta".into(), json!({"ui": {"resourceUri": "ui://x", "visibility": visibility}}));
            }
            Value::Object(tool)
        })
}

fn tool(value: Value) -> ToolDefinition {
    ToolDefinition::from_value(value).expect("generated tools have a string name")
}

/// The same JSON with every object's keys in another order, chosen by `seed`.
fn reorder(value: &Value, seed: &mut u64) -> Value {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            // Fisher-Yates with a xorshift stream: deterministic per seed, different orders across seeds.
            for index in (1..entries.len()).rev() {
                *seed ^= *seed << 13;
                *seed ^= *seed >> 7;
                *seed ^= *seed << 17;
                let other = usize::try_from(*seed % (index as u64 + 1)).unwrap_or(0);
                entries.swap(index, other);
            }
            Value::Object(entries.into_iter().map(|(key, value)| (key.clone(), reorder(value, seed))).collect())
        }
        Value::Array(items) => Value::Array(items.iter().map(|item| reorder(item, seed)).collect()),
        other => other.clone(),
    }
}

/// Declares `destructiveHint: true` (and the given others) on a tool with these texts, lets inference fill the
/// gaps, and checks that the effective destructiveHint is still the declared `true`.
fn check_destructive_survives(
    name: &str,
    description: &str,
    read_only: Option<bool>,
    idempotent: Option<bool>,
    open_world: Option<bool>,
) -> Result<(), TestCaseError> {
    let definition = tool(json!({"name": name, "description": description}));
    let declared =
        DeclaredHints { read_only, destructive: Some(true), idempotent, open_world, ..DeclaredHints::default() };
    let effective = resolve_hints(&HintOverrides::default(), &declared, Some(&infer_annotations(&definition)));
    prop_assert!(effective.destructive.value, "{:?}", effective);
    prop_assert_eq!(effective.destructive.source, HintSource::Declared);
    prop_assert!(effective.may_destroy());
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn fingerprints_ignore_key_order_and_whitespace(value in tool_value(), seed in 1u64.., pretty in any::<bool>()) {
        let original = fingerprint_tool(&tool(value.clone()));
        let shuffled = reorder(&value, &mut seed.clone());
        let text = if pretty {
            serde_json::to_string_pretty(&shuffled).expect("serializable")
        } else {
            serde_json::to_string(&shuffled).expect("serializable")
        };
        let reparsed: Value = serde_json::from_str(&text).expect("reparsable");
        prop_assert_eq!(fingerprint_tool(&tool(reparsed)), original);
    }

    #[test]
    fn normalization_is_total_and_deterministic(value in tool_value()) {
        let definition = tool(value);
        let first = normalize_annotations(&definition);
        prop_assert_eq!(&first, &normalize_annotations(&definition));
        // A spec key holding a real boolean always wins over any other spelling.
        if let Some(annotations) = definition.annotations() {
            for (key, declared) in [
                ("readOnlyHint", first.declared.read_only),
                ("destructiveHint", first.declared.destructive),
                ("idempotentHint", first.declared.idempotent),
                ("openWorldHint", first.declared.open_world),
            ] {
                if let Some(Value::Bool(flag)) = annotations.get(key) {
                    prop_assert_eq!(declared, Some(*flag), "{}", key);
                }
            }
        }
    }

    #[test]
    fn inference_never_weakens_a_declared_destructive_hint(
        name in wording(4),
        description in wording(12),
        idempotent in any::<Option<bool>>(),
        open_world in any::<Option<bool>>(),
    ) {
        check_destructive_survives(&name, &description, Some(false), idempotent, open_world)?;
    }

    // With readOnlyHint undeclared, inference fills it; a declared destructiveHint: true must still win (minimal
    // case once found here: name "", description "read-only", only destructiveHint: true declared).
    #[test]
    fn inference_never_weakens_a_declared_destructive_hint_when_read_only_is_undeclared(
        name in wording(4),
        description in wording(12),
        idempotent in any::<Option<bool>>(),
        open_world in any::<Option<bool>>(),
    ) {
        check_destructive_survives(&name, &description, None, idempotent, open_world)?;
    }

    #[test]
    fn lint_is_total_sorted_and_uses_catalogued_codes(value in tool_value()) {
        let definition = tool(value);
        let normalized = normalize_annotations(&definition);
        let findings = lint_tool(&definition, &normalized, &infer_annotations(&definition));
        for pair in findings.windows(2) {
            let ordered = pair[0].severity > pair[1].severity
                || (pair[0].severity == pair[1].severity && pair[0].code <= pair[1].code);
            prop_assert!(ordered, "{:?}", findings);
        }
        for finding in &findings {
            let rule = RULES.iter().find(|rule| rule.code == finding.code);
            prop_assert!(rule.is_some_and(|rule| rule.name == finding.rule && rule.fix == finding.fix));
            prop_assert!(finding.pointer.as_deref().is_none_or(|pointer| pointer.starts_with('/')));
            prop_assert!(!finding.message.is_empty() && !finding.message.ends_with('.'), "{}", finding.message);
        }
        prop_assert_eq!(findings, lint_tool(&definition, &normalized, &infer_annotations(&definition)));
    }
}
