//! `toolgate infer --corpus`: one JSON object per input line, labels ignored, bad lines named by number.

use serde_json::{Value, json};

use crate::support::toolgate;

fn corpus_line(name: &str, description: &str, annotations: Value) -> String {
    json!({
        "server": "test-server", "name": name, "title": null, "description": description,
        "input_schema": {"type": "object", "properties": {"id": {"type": "string"}}},
        "annotations": annotations, "explicit_hints": ["readOnlyHint"]
    })
    .to_string()
}

#[test]
fn prints_one_object_per_line_and_ignores_labels() {
    let directory = tempfile::tempdir().unwrap();
    let path = directory.path().join("corpus.jsonl");
    let lines = [
        // The label lies (read-only); inference must not read it.
        corpus_line("delete_customer", "Permanently deletes a customer record.", json!({"readOnlyHint": true})),
        corpus_line("list_customers", "Lists customers.", json!({"readOnlyHint": false, "destructiveHint": true})),
    ];
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    let run = toolgate(&["infer", "--corpus", path.to_str().unwrap()], None);
    assert_eq!(run.code, Some(0), "{run:?}");
    let outputs: Vec<Value> = run.stdout.lines().map(|line| serde_json::from_str(line).unwrap()).collect();
    assert_eq!(outputs.len(), 2);
    assert_eq!(outputs[0]["server"], "test-server");
    assert_eq!(outputs[0]["name"], "delete_customer");
    assert_eq!(outputs[0]["variant"], Value::Null);
    assert_eq!(outputs[0]["inferred"]["readOnlyHint"], false);
    assert_eq!(outputs[0]["inferred"]["destructiveHint"], true);
    assert_eq!(outputs[1]["inferred"]["readOnlyHint"], true);
    for output in &outputs {
        for hint in ["readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint"] {
            assert!(output["inferred"][hint].is_boolean());
            let confidence = output["confidence"][hint].as_f64().unwrap();
            assert!((0.5..=1.0).contains(&confidence), "{hint}: {confidence}");
            assert!(output["evidence"][hint].is_array());
        }
    }
}

#[test]
fn a_malformed_line_is_named_by_number() {
    let directory = tempfile::tempdir().unwrap();
    let path = directory.path().join("corpus.jsonl");
    let good = corpus_line("get_user", "Gets a user.", json!({}));
    std::fs::write(&path, format!("{good}\n{good}\n{{\"server\": \"x\", \"name\": \n")).unwrap();
    let run = toolgate(&["infer", "--corpus", path.to_str().unwrap()], None);
    assert_eq!(run.code, Some(2), "{run:?}");
    assert!(run.stderr.contains("corpus.jsonl:3:"), "{}", run.stderr);
    let missing_name = directory.path().join("nameless.jsonl");
    std::fs::write(&missing_name, "{\"server\": \"x\"}\n").unwrap();
    let run = toolgate(&["infer", "--corpus", missing_name.to_str().unwrap()], None);
    assert_eq!(run.code, Some(2), "{run:?}");
    assert!(run.stderr.contains("nameless.jsonl:1: missing field `name`"), "{}", run.stderr);
}
