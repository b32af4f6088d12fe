//! Fuzz target `normalize`: arbitrary bytes, read as JSON, through normalization, inference, lint and assessment.
//!
//! Any JSON object with a string `name` is used as a tool; any other JSON value is tried as a tool's `annotations`
//! (and as a top-level hint), so that odd annotation shapes are reached quickly. The target checks that nothing
//! panics and that each step is deterministic; it must not assert anything about which findings appear.

#![no_main]

use libfuzzer_sys::fuzz_target;
use serde_json::{Value, json};
use toolgate_core::infer::infer_annotations;
use toolgate_core::lint::{RULES, lint_tool};
use toolgate_core::normalize::normalize_annotations;
use toolgate_core::{ToolDefinition, assess_tool};

fuzz_target!(|data: &[u8]| {
    let Ok(value) = serde_json::from_slice::<Value>(data) else {
        return;
    };
    let candidates = [
        value.clone(),
        json!({"name": "fuzz", "annotations": value.clone()}),
        json!({"name": "delete_fuzz", "readOnlyHint": value.clone(), "_meta": {"ui": {"visibility": ["app"]}}}),
    ];
    for candidate in candidates {
        let Ok(tool) = ToolDefinition::from_value(candidate) else {
            continue;
        };
        let normalized = normalize_annotations(&tool);
        assert_eq!(normalized, normalize_annotations(&tool), "normalization is deterministic");
        let inference = infer_annotations(&tool);
        let findings = lint_tool(&tool, &normalized, &inference);
        assert_eq!(findings, lint_tool(&tool, &normalized, &inference), "lint is deterministic");
        for finding in &findings {
            assert!(RULES.iter().any(|rule| rule.code == finding.code), "unknown code {}", finding.code);
        }
        let _ = assess_tool(&tool, &Default::default());
    }
});
