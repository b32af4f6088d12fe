//! Fuzz target `fingerprint`: arbitrary bytes, read as JSON, fingerprinted and linted.
//!
//! Checks that fingerprinting never panics, that the canonical form is a fixpoint (canonical JSON read back
//! canonicalizes to the same text) and that a tool's fingerprint survives a round trip through its canonical text.
//! It must not assume any particular digest value.

#![no_main]

use libfuzzer_sys::fuzz_target;
use serde_json::Value;
use toolgate_core::ToolDefinition;
use toolgate_core::fingerprint::{canonical_json, fingerprint_tool};
use toolgate_core::infer::infer_annotations;
use toolgate_core::lint::lint_tool;
use toolgate_core::normalize::normalize_annotations;

fuzz_target!(|data: &[u8]| {
    let Ok(value) = serde_json::from_slice::<Value>(data) else {
        return;
    };
    if let Ok(canonical) = canonical_json(&value) {
        let reparsed: Value = serde_json::from_str(&canonical).expect("canonical JSON parses");
        assert_eq!(canonical_json(&reparsed).ok().as_deref(), Some(canonical.as_str()), "canonical form is a fixpoint");
    }
    let Ok(tool) = ToolDefinition::from_value(value) else {
        return;
    };
    let fingerprint = fingerprint_tool(&tool);
    if let Ok(canonical) = canonical_json(&Value::Object(tool.raw().clone())) {
        let reparsed = ToolDefinition::from_value(serde_json::from_str(&canonical).expect("canonical JSON parses"))
            .expect("still a tool");
        assert_eq!(fingerprint_tool(&reparsed), fingerprint, "fingerprint survives canonical round trip");
    }
    let _ = lint_tool(&tool, &normalize_annotations(&tool), &infer_annotations(&tool));
});
