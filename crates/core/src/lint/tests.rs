//! Data-driven tests of the lint catalogue: each case is a tool and the codes it must (and only) get.
//!
//! The cases pair every rule with a near miss that a careless rule would flag; the catalogue tests keep
//! `RULES`, `docs/lint-rules.md` and the message style in step. Tests only; no rule logic lives here.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::{Value, json};

use super::*;
use crate::infer::infer_annotations;
use crate::normalize::normalize_annotations;

const RULES_DOC: &str = include_str!("../../../../docs/lint-rules.md");

fn lint(value: Value) -> Vec<Finding> {
    let tool = ToolDefinition::from_value(value).expect("test tool is valid");
    lint_tool(&tool, &normalize_annotations(&tool), &infer_annotations(&tool))
}

/// A tool with a title and all required hints, so that only the rule under test can fire.
fn tool(name: &str, description: &str, annotations: Value) -> Value {
    let mut annotations = annotations;
    let defaults = [("readOnlyHint", json!(false)), ("destructiveHint", json!(false)), ("openWorldHint", json!(false))];
    if let Some(object) = annotations.as_object_mut() {
        for (key, value) in defaults {
            object.entry(key).or_insert(value);
        }
    }
    json!({"name": name, "title": "A title", "description": description, "inputSchema": {"type": "object"},
           "annotations": annotations})
}

/// Lints `value` and compares the codes found with `expected` (in finding order).
fn check(value: Value, expected: &[&str]) {
    let findings = lint(value.clone());
    let codes: Vec<&str> = findings.iter().map(|finding| finding.code).collect();
    assert_eq!(codes, expected, "tool {value}\nfindings {findings:#?}");
}

#[test]
fn read_only_and_destructive() {
    check(tool("get_thing", "Gets a thing.", json!({"readOnlyHint": true, "destructiveHint": true})), &["TG101"]);
    let findings = lint(tool("drop_table", "", json!({"readOnlyHint": true, "destructiveHint": true})));
    let codes: Vec<_> = findings.iter().map(|finding| (finding.code, finding.pointer.as_deref())).collect();
    assert_eq!(
        codes,
        [("TG101", Some("/annotations/readOnlyHint")), ("TG102", Some("/annotations/readOnlyHint"))],
        "a writer's contradiction points at readOnlyHint"
    );
}

#[test]
fn delete_declared_read_only() {
    check(tool("delete_customer", "Deletes a customer.", json!({"readOnlyHint": true})), &["TG102"]);
    check(tool("pods_delete", "", json!({"readOnlyHint": true})), &["TG102"]);
    check(tool("drop-collection", "", json!({"readOnlyHint": true})), &["TG102"]);
    // Near misses: a read of deleted things, a read whose description mentions deletion later on.
    check(tool("list_deleted_secrets", "Lists deleted secrets.", json!({"readOnlyHint": true})), &[]);
    check(tool("list_delete_markers", "", json!({"readOnlyHint": true})), &[]);
    check(tool("get_item", "Gets an item. Use delete_item to remove it.", json!({"readOnlyHint": true})), &[]);
    check(tool("delete_report", "Lists the reports a purge would remove.", json!({"readOnlyHint": true})), &[]);
}

#[test]
fn send_declared_read_only() {
    check(tool("communication_email_send", "Send emails.", json!({"readOnlyHint": true})), &["TG103"]);
    let sms = json!({"name": "communication_sms", "description": "Sends SMS messages to recipients.",
                     "annotations": {"title": "Send SMS Message", "readOnlyHint": true, "openWorldHint": true}});
    check(sms, &["TG103"]);
    check(tool("get_email", "Gets one email.", json!({"readOnlyHint": true})), &[]);
    check(tool("list_sent_messages", "", json!({"readOnlyHint": true})), &[]);
}

#[test]
fn export_declared_read_only() {
    let with_path = json!({"name": "export_flows", "title": "Export", "inputSchema": {"type": "object",
        "properties": {"outputPath": {"type": "string"}}},
        "annotations": {"readOnlyHint": true, "openWorldHint": false}});
    check(with_path, &["TG104"]);
    check(tool("save_pdf", "Save the page as PDF.", json!({"readOnlyHint": true})), &["TG104"]);
    check(
        tool("download_report", "Downloads the report and saves it to a file.", json!({"readOnlyHint": true})),
        &["TG104"],
    );
    // Returning CSV to the model writes nothing.
    check(
        tool("export_flows", "Exports flow records as CSV for offline analysis.", json!({"readOnlyHint": true})),
        &[],
    );
}

#[test]
fn read_declared_destructive() {
    check(tool("API-post-search", "Notion | Search by title", json!({"destructiveHint": true})), &["TG105"]);
    check(tool("find_flaky_tests", "This tool retrieves flaky tests.", json!({"destructiveHint": true})), &["TG105"]);
    let guidance = json!({"name": "lz_getguidance", "description": "Get how-to guidance. Ask about disabling things.",
        "annotations": {"title": "Get Guidance", "readOnlyHint": false, "destructiveHint": true,
                        "openWorldHint": true}});
    let findings = lint(guidance);
    assert_eq!(findings[0].code, "TG105");
    assert_eq!(findings[0].message, "title says `get` but readOnlyHint is false and destructiveHint is true");
    // Near misses: a search that is stopped, a query that runs arbitrary statements, a search-and-replace.
    check(tool("stop_search", "Stops a search.", json!({"destructiveHint": true})), &[]);
    check(tool("postgres_query", "Run a SQL statement, including DELETE.", json!({"destructiveHint": true})), &[]);
    check(tool("search_and_replace", "", json!({"destructiveHint": true})), &[]);
}

#[test]
fn write_declared_read_only() {
    check(tool("update_issue", "Updates an issue.", json!({"readOnlyHint": true})), &["TG106"]);
    check(tool("generate_feedback_link", "Generates a link.", json!({"readOnlyHint": true})), &[]);
    check(tool("get_settings", "Get the settings you can update later.", json!({"readOnlyHint": true})), &[]);
}

#[test]
fn delete_declared_not_destructive() {
    check(tool("delete_job", "Deletes a job.", json!({"destructiveHint": false})), &["TG107"]);
    check(tool("clear_selection", "", json!({"destructiveHint": false})), &[]);
    check(tool("stop_search", "", json!({"destructiveHint": false})), &[]);
}

#[test]
fn create_declared_idempotent() {
    check(tool("create_job", "Creates a new job.", json!({"idempotentHint": true})), &["TG108"]);
    check(tool("resources_create_or_update", "", json!({"idempotentHint": true, "destructiveHint": true})), &[]);
    check(tool("create_bucket", "Creates a bucket if it does not exist.", json!({"idempotentHint": true})), &[]);
    check(tool("hubspot-batch-create-associations", "", json!({"idempotentHint": true})), &[]);
    check(tool("add_label", "Adds a label to an issue.", json!({"idempotentHint": true})), &[]);
    check(tool("git_add", "Adds file contents to the staging area", json!({"idempotentHint": true})), &[]);
    check(tool("add_row", "Adds a new row to the sheet.", json!({"idempotentHint": true})), &["TG108"]);
    // A caller-chosen identity makes a repeat collide: idempotent may be honest.
    let named = |name: &str, required: Value| {
        json!({"name": name, "title": "T", "description": "Create a new one.",
               "inputSchema": {"type": "object", "required": required},
               "annotations": {"readOnlyHint": false, "destructiveHint": true, "idempotentHint": true,
                               "openWorldHint": false}})
    };
    check(named("perses_create_project", json!(["project"])), &[]);
    check(named("create_no_code_workspace", json!(["project_id", "workspace_name"])), &[]);
    check(named("vm_create", json!(["namespace", "name"])), &[]);
    check(named("vm_create_from_template", json!(["namespace", "template_name"])), &["TG108", "TG109"]);
    check(named("create_run", json!(["workspace_name"])), &["TG108", "TG109"]);
    let directory = "Create a new directory or ensure a directory exists.";
    check(tool("create_directory", directory, json!({"idempotentHint": true})), &[]);
    // A read-only tool's idempotentHint means nothing.
    check(tool("create_report_preview", "", json!({"readOnlyHint": true, "idempotentHint": true})), &["TG106"]);
}

#[test]
fn create_declared_destructive() {
    check(tool("API-create-a-comment", "Notion | Create comment", json!({"destructiveHint": true})), &["TG109"]);
    check(tool("API-post-page", "Notion | Create a page", json!({"destructiveHint": true})), &["TG109"]);
    check(
        tool("create_volume", "Creates a volume; an existing one is overwritten.", json!({"destructiveHint": true})),
        &[],
    );
}

#[test]
fn url_declared_closed_world() {
    let fetch = json!({"name": "fetch", "title": "Fetch", "inputSchema": {"type": "object",
        "properties": {"url": {"type": "string"}}},
        "annotations": {"readOnlyHint": true, "openWorldHint": false}});
    check(fetch, &["TG110"]);
    let cluster = json!({"name": "kusto_query", "title": "Query", "inputSchema": {"type": "object",
        "properties": {"cluster-uri": {"type": "string"}}},
        "annotations": {"readOnlyHint": true, "openWorldHint": false}});
    check(cluster, &[]);
}

#[test]
fn missing_hints() {
    check(json!({"name": "get_thing"}), &["TG201", "TG202", "TG203", "TG204"]);
    check(json!({"name": "get_thing", "annotations": {"title": "Get", "readOnlyHint": true}}), &["TG204"]);
    check(
        json!({"name": "put_thing", "title": "Put", "annotations": {"readOnlyHint": false, "openWorldHint": true}}),
        &["TG203"],
    );
}

#[test]
fn app_only_writers() {
    let app_only = |name: &str| json!({"name": name, "_meta": {"ui": {"visibility": ["app"]}}});
    check(app_only("save_layout"), &["TG201", "TG202", "TG203", "TG204", "TG205"]);
    check(app_only("get_layout"), &["TG201", "TG202", "TG203", "TG204"]);
    let visible = json!({"name": "save_layout", "_meta": {"ui": {"visibility": ["model", "app"]}}});
    check(visible, &["TG201", "TG202", "TG203", "TG204"]);
}

#[test]
fn spelling_and_shape() {
    let vendor = json!({"name": "t", "title": "T", "annotations": {"readOnly": "true", "openWorldHint": false}});
    let findings = lint(vendor);
    let codes: Vec<_> = findings.iter().map(|finding| (finding.code, finding.pointer.as_deref())).collect();
    assert_eq!(codes, [("TG301", Some("/annotations/readOnly")), ("TG302", Some("/annotations/readOnly"))]);

    let misplaced = json!({"name": "t", "title": "T", "readOnlyHint": true, "annotations": {"openWorldHint": false}});
    check(misplaced, &["TG304"]);
    let invalid = json!({"name": "t", "title": "T", "annotations": {"readOnlyHint": "maybe", "openWorldHint": false}});
    check(invalid, &["TG303", "TG202", "TG203"]);
    let conflicting = json!({"name": "t", "title": "T",
        "annotations": {"readOnly": true, "readOnlyHint": false, "destructiveHint": false, "openWorldHint": false}});
    check(conflicting, &["TG305", "TG301"]);
    let extra = json!({"name": "t", "title": "T", "annotations": {"readOnlyHint": true, "openWorldHint": false,
        "category": "x", "costWarning": true}});
    check(extra, &["TG306", "TG307"]);
    check(json!({"name": "t", "title": "T", "annotations": [true]}), &["TG308", "TG202", "TG203", "TG204"]);
    check(
        json!({"name": "t", "title": 3, "annotations": {"title": "T", "readOnlyHint": true, "openWorldHint": false}}),
        &["TG309"],
    );
    let lookalike = json!({"name": "d\u{0435}lete_file", "title": "Delete file", "annotations": {
        "readOnlyHint": false, "destructiveHint": true, "openWorldHint": false}});
    check(lookalike, &["TG310"]);
}

#[test]
fn pointers_escape_and_follow_where_the_hint_was_written() {
    assert_eq!(json_pointer(&["annotations", "a/b~c"]), "/annotations/a~1b~0c");
    let findings = lint(json!({"name": "delete_x", "title": "T", "readOnly": true, "annotations": {}}));
    let contradiction = findings.iter().find(|finding| finding.code == "TG102").expect("TG102");
    assert_eq!(contradiction.pointer.as_deref(), Some("/readOnly"));
}

#[test]
fn good_declarations_get_no_findings() {
    let good = [
        tool("get_customer", "Gets a customer.", json!({"readOnlyHint": true, "idempotentHint": true})),
        tool("delete_customer", "Deletes a customer.", json!({"destructiveHint": true, "idempotentHint": true})),
        tool("create_customer", "Creates a customer.", json!({"idempotentHint": false})),
        tool("send_email", "Sends an email.", json!({"openWorldHint": true})),
        tool("export_report", "Exports a report to a file.", json!({"destructiveHint": true})),
        tool("search_docs", "Search the docs.", json!({"readOnlyHint": true, "openWorldHint": true})),
    ];
    for value in good {
        check(value, &[]);
    }
}

#[test]
fn findings_come_most_severe_first_then_by_code() {
    let findings = lint(json!({"name": "delete_x", "annotations": {"readOnlyHint": true, "category": 1}}));
    let order: Vec<_> = findings.iter().map(|finding| (finding.severity, finding.code)).collect();
    let mut sorted = order.clone();
    sorted.sort_by(|left, right| right.0.cmp(&left.0).then(left.1.cmp(right.1)));
    assert_eq!(order, sorted);
    assert_eq!(order.first(), Some(&(Severity::Error, "TG102")));
}

#[test]
fn codes_are_unique_sorted_and_grouped() {
    let codes: Vec<&str> = RULES.iter().map(|rule| rule.code).collect();
    let mut sorted = codes.clone();
    sorted.sort_unstable();
    sorted.dedup();
    assert_eq!(codes, sorted, "codes must be unique and in order");
    let mut names: Vec<&str> = RULES.iter().map(|rule| rule.name).collect();
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), RULES.len(), "names must be unique");
    for rule in RULES {
        assert!(rule.code.len() == 5 && rule.code.starts_with("TG"), "{}", rule.code);
        assert!(["TG1", "TG2", "TG3"].iter().any(|group| rule.code.starts_with(group)), "{}", rule.code);
        assert!(rule.name.chars().all(|character| character.is_ascii_lowercase() || character == '-'));
        assert_eq!(super::rule(rule.code), Some(rule));
        for line in [rule.summary, rule.fix] {
            assert!(!line.ends_with('.') && line.chars().next().is_some_and(|c| !c.is_uppercase()), "{line}");
        }
    }
}

#[test]
fn every_rule_is_documented() {
    for rule in RULES {
        let heading = format!("## {} `{}`", rule.code, rule.name);
        assert!(RULES_DOC.contains(&heading), "docs/lint-rules.md lacks the heading `{heading}`");
        assert!(
            RULES_DOC.contains(&format!("**Severity:** {}", rule.severity.as_str())),
            "docs/lint-rules.md lacks a severity line"
        );
    }
    let section = |code: &str| {
        let start = RULES_DOC.find(&format!("## {code} ")).expect("documented");
        let rest = &RULES_DOC[start + 3..];
        &rest[..rest.find("\n## ").unwrap_or(rest.len())]
    };
    for rule in RULES {
        let text = section(rule.code);
        assert!(text.contains(&format!("**Severity:** {}", rule.severity.as_str())), "{} severity", rule.code);
        for part in ["**Checks:**", "**Why:**", "**Fix:**", "Bad:", "Good:", "```json"] {
            assert!(text.contains(part), "{} lacks {part}", rule.code);
        }
    }
}

#[test]
fn messages_are_lowercase_without_a_final_period() {
    let tools = [
        json!({"name": "delete_x", "readOnly": "yes", "annotations": {"readOnlyHint": true, "destructiveHint": true,
            "readOnly": false, "x": 1, "costWarning": true, "idempotentHint": []}}),
        json!({"name": "API-post-search", "title": [], "annotations": {"destructiveHint": true}}),
        json!({"name": "t", "annotations": "no"}),
    ];
    for value in tools {
        for finding in lint(value) {
            let first = finding.message.chars().next().expect("message");
            assert!(!first.is_uppercase() && !finding.message.ends_with('.'), "{}", finding.message);
            assert_eq!(rule(finding.code).map(|rule| rule.fix), Some(finding.fix));
        }
    }
}
