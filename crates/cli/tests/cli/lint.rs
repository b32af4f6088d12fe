//! `toolgate lint`: exit codes, the three formats, saved tool lists and real servers.

use serde_json::{Value, json};
use toolgate_test_support::Peers;

use crate::support::{json_stdout, snapshot_settings, toolgate, toolgate_against};

fn write_tools(directory: &tempfile::TempDir, tools: Value) -> std::path::PathBuf {
    let path = directory.path().join("tools.json");
    let text = serde_json::to_string_pretty(&json!({"tools": tools})).unwrap();
    std::fs::write(&path, text).unwrap();
    path
}

fn clean_tools() -> Value {
    json!([
        {"name": "list_notes", "title": "List notes", "description": "Lists the notes in the local notebook.",
         "inputSchema": {"type": "object", "properties": {}},
         "annotations": {"readOnlyHint": true, "destructiveHint": false, "idempotentHint": true, "openWorldHint": false}},
        {"name": "delete_note", "title": "Delete note", "description": "Deletes one note from the local notebook.",
         "inputSchema": {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]},
         "annotations": {"readOnlyHint": false, "destructiveHint": true, "idempotentHint": true, "openWorldHint": false}}
    ])
}

fn lying_tools() -> Value {
    json!([
        {"name": "delete_customer", "title": "Delete customer", "description": "Permanently deletes a customer.",
         "inputSchema": {"type": "object", "properties": {"id": {"type": "string"}}},
         "annotations": {"readOnlyHint": true, "openWorldHint": false}},
        {"name": "send_email", "description": "Sends an email to the given address.",
         "inputSchema": {"type": "object", "properties": {"to": {"type": "string"}, "body": {"type": "string"}}},
         "annotations": {"readOnly": "true", "openWorldHint": true}}
    ])
}

#[test]
fn clean_tools_exit_zero_even_when_warnings_are_denied() {
    let directory = tempfile::tempdir().unwrap();
    let path = write_tools(&directory, clean_tools());
    let run = toolgate(&["lint", "--deny", "warnings", "--tools", path.to_str().unwrap()], None);
    assert_eq!(run.code, Some(0), "{run:?}");
    assert!(run.stdout.contains("no findings"), "{}", run.stdout);
}

#[test]
fn contradictions_exit_one_with_text_findings() {
    let directory = tempfile::tempdir().unwrap();
    let path = write_tools(&directory, lying_tools());
    let run = toolgate(&["lint", "--tools", path.to_str().unwrap()], None);
    assert_eq!(run.code, Some(1), "{run:?}");
    assert!(run.stdout.contains("delete_customer: error"), "{}", run.stdout);
    assert!(run.stdout.contains("send_email: error"), "{}", run.stdout);
    snapshot_settings(&[directory.path()]).bind(|| insta::assert_snapshot!("lint_lying_text", run.stdout));
}

#[test]
fn deny_level_decides_the_exit_code() {
    let directory = tempfile::tempdir().unwrap();
    // Honest hints, but no title and no openWorldHint: warnings only.
    let path = write_tools(
        &directory,
        json!([{"name": "list_notes", "description": "Lists notes.", "inputSchema": {"type": "object"},
                "annotations": {"readOnlyHint": true}}]),
    );
    let path = path.to_str().unwrap();
    let lenient = toolgate(&["lint", "--tools", path], None);
    assert_eq!(lenient.code, Some(0), "{lenient:?}");
    let strict = toolgate(&["lint", "--deny", "warnings", "--tools", path], None);
    assert_eq!(strict.code, Some(1), "{strict:?}");
}

#[test]
fn sarif_is_a_valid_2_1_0_log_pointing_at_the_file() {
    let directory = tempfile::tempdir().unwrap();
    let path = write_tools(&directory, lying_tools());
    let run = toolgate(&["lint", "--format", "sarif", "--tools", path.to_str().unwrap()], None);
    assert_eq!(run.code, Some(1), "{run:?}");
    let log = json_stdout(&run);
    assert_eq!(log["version"], "2.1.0");
    let run_object = &log["runs"][0];
    let rules = run_object["tool"]["driver"]["rules"].as_array().unwrap();
    assert!(!rules.is_empty());
    let results = run_object["results"].as_array().unwrap();
    assert!(!results.is_empty());
    let text = std::fs::read_to_string(&path).unwrap();
    for result in results {
        let index = result["ruleIndex"].as_u64().unwrap() as usize;
        assert_eq!(rules[index]["id"], result["ruleId"], "ruleIndex points at the rule");
        assert!(["error", "warning", "note"].contains(&result["level"].as_str().unwrap()));
        let physical = &result["locations"][0]["physicalLocation"];
        assert_eq!(physical["artifactLocation"]["uri"], path.to_str().unwrap());
        let line = physical["region"]["startLine"].as_u64().unwrap() as usize;
        let tool = result["locations"][0]["logicalLocations"][0]["name"].as_str().unwrap();
        let written = text.lines().nth(line - 1).unwrap();
        assert!(written.contains(&format!("\"{tool}\"")), "line {line} is {written:?}, not tool {tool}");
    }
}

#[test]
fn json_format_carries_codes_and_fixes() {
    let directory = tempfile::tempdir().unwrap();
    let path = write_tools(&directory, lying_tools());
    let run = toolgate(&["lint", "--format", "json", "--tools", path.to_str().unwrap()], None);
    assert_eq!(run.code, Some(1));
    let report = json_stdout(&run);
    for tool in report["tools"].as_array().unwrap() {
        for finding in tool["findings"].as_array().unwrap() {
            assert!(finding["code"].as_str().unwrap().starts_with("TG"));
            assert!(!finding["fix"].as_str().unwrap().is_empty());
        }
    }
}

#[test]
fn a_whole_json_rpc_response_or_a_bare_array_is_accepted() {
    let directory = tempfile::tempdir().unwrap();
    let response = directory.path().join("response.json");
    std::fs::write(&response, json!({"jsonrpc": "2.0", "id": 1, "result": {"tools": clean_tools()}}).to_string())
        .unwrap();
    let bare = directory.path().join("bare.json");
    std::fs::write(&bare, clean_tools().to_string()).unwrap();
    for path in [response, bare] {
        let run = toolgate(&["lint", "--tools", path.to_str().unwrap()], None);
        assert_eq!(run.code, Some(0), "{run:?}");
    }
}

#[test]
fn usage_and_file_errors_exit_two() {
    let directory = tempfile::tempdir().unwrap();
    let broken = directory.path().join("broken.json");
    std::fs::write(&broken, "{\n  \"tools\": [\n    {\"name\": }\n  ]\n}\n").unwrap();
    let run = toolgate(&["lint", "--tools", broken.to_str().unwrap()], None);
    assert_eq!(run.code, Some(2), "{run:?}");
    assert!(run.stderr.contains("broken.json:3:"), "names the line: {}", run.stderr);

    let missing = toolgate(&["lint", "--tools", "/nonexistent/tools.json"], None);
    assert_eq!(missing.code, Some(2), "{missing:?}");
    let conflicting = toolgate(&["lint", "--tools", broken.to_str().unwrap(), "--url", "http://127.0.0.1:1/mcp"], None);
    assert_eq!(conflicting.code, Some(2), "{conflicting:?}");
    let bad_format = toolgate(&["lint", "--format", "xml", "--tools", broken.to_str().unwrap()], None);
    assert_eq!(bad_format.code, Some(2), "{bad_format:?}");
}

#[test]
fn real_servers_lint_text() {
    let peers = Peers::locate();
    let everything = toolgate_against(&["lint"], &peers.server_everything());
    assert!(matches!(everything.code, Some(0 | 1)), "{everything:?}");
    insta::assert_snapshot!("lint_everything_text", everything.stdout);

    let root = tempfile::tempdir().unwrap();
    let filesystem = toolgate_against(&["lint", "--format", "sarif"], &peers.server_filesystem(root.path()));
    assert!(matches!(filesystem.code, Some(0 | 1)), "{filesystem:?}");
    let log = json_stdout(&filesystem);
    assert_eq!(log["version"], "2.1.0");
}
