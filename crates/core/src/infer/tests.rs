//! Data-driven tests of inference: a tool as JSON in, the expected values out; plus the properties that must hold
//! for any input (deterministic, never panics, confidence in range).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use proptest::prelude::*;
use serde_json::{Value, json};

use super::*;

fn tool(value: Value) -> ToolDefinition {
    ToolDefinition::from_value(value).unwrap()
}

/// Expected values: `[readOnly, destructive, idempotent, openWorld]`, `None` where the case does not care.
fn check(tool_json: Value, expected: [Option<bool>; 4]) {
    let name = tool_json["name"].as_str().unwrap_or_default().to_owned();
    let inference = infer_annotations(&tool(tool_json));
    for (hint, want) in Hint::ALL.into_iter().zip(expected) {
        if let Some(want) = want {
            let got = inference.get(hint);
            assert_eq!(got.value, want, "{name}: {} inferred {} from {:#?}", hint.wire_key(), got.value, got.evidence);
        }
    }
}

#[test]
fn reads_are_read_only_and_idempotent() {
    check(
        json!({"name": "list_customers", "description": "List customers.",
               "inputSchema": {"type": "object", "properties": {"limit": {"type": "integer"}}}}),
        [Some(true), None, Some(true), None],
    );
    check(json!({"name": "storage_account_get", "title": "Get Storage Account"}), [Some(true), None, Some(true), None]);
}

#[test]
fn deletes_are_destructive_writes() {
    check(
        json!({"name": "delete_customer", "description": "Permanently deletes a customer record.",
               "inputSchema": {"type": "object", "properties": {"id": {"type": "string"}}}}),
        [Some(false), Some(true), None, None],
    );
    check(json!({"name": "pods_delete", "title": "Pods: Delete"}), [Some(false), Some(true), None, None]);
}

/// `idempotentHint` cases: `(name, description, expected)`. Delete and update verbs need support in the text.
const IDEMPOTENCY_CASES: &[(&str, &str, bool)] = &[
    // Terse: the verb alone leaves the spec default.
    ("storage_share_delete", "Delete a file share.", false),
    ("widget_update", "Update properties of an existing widget.", false),
    ("remove_member", "Removes a member from a team. The member loses access.", false),
    // Explicit support.
    ("share_delete", "Deletes a share. This operation is idempotent.", true),
    ("delete_rule", "Deletes a firewall rule. If the rule doesn't exist, no error is returned.", true),
    ("widget_update", "Create or update a widget.", true),
    (
        "manage_member",
        "Add, update or remove a member. The put action adds a member or changes the role (upsert).",
        true,
    ),
    // A substantive description documents behaviour.
    (
        "cluster_delete",
        "Deletes a cluster from the project. All nodes of the cluster are stopped first. Backups are kept for seven \
         days after deletion and can be restored on request.",
        true,
    ),
    // State-setting verbs need no support.
    ("server_param_set", "Sets a server parameter.", true),
    ("job_cancel", "Cancels a running job.", true),
    ("lock_branch", "Lock a branch.", true),
    // Explicitly not idempotent, or a second call fails, or each call acts anew.
    (
        "settings_update",
        "Updates an application setting. If the setting already exists, the operation will fail. Use it to add \
         settings. Values are strings.",
        false,
    ),
    ("run_update", "Create or update a run. Create operations are not idempotent. Each call starts a new run.", false),
    ("restart_nodes", "Restart nodes of a cluster. Requires the node names. Operation is long running.", false),
    ("publish_events", "Publish events to a topic. Events are delivered to all subscribers. Returns the ids.", false),
    ("orchestrator_next", "Get the next action after completing the current one.", false),
];

#[test]
fn idempotency_needs_support() {
    for (name, description, want) in IDEMPOTENCY_CASES {
        check(json!({"name": name, "description": description}), [None, None, Some(*want), None]);
    }
}

#[test]
fn terse_idempotency_is_low_confidence() {
    let inference = infer_annotations(&tool(json!({"name": "share_delete", "description": "Delete a share."})));
    assert!(!inference.idempotent.value);
    assert!(inference.idempotent.confidence < 0.65, "{}", inference.idempotent.confidence);
    assert!(inference.idempotent.evidence.iter().any(|evidence| evidence.cue.starts_with("terse description")));
}

#[test]
fn creates_are_additive_and_not_idempotent() {
    check(
        json!({"name": "create_project", "description": "Creates a new project in the organization."}),
        [Some(false), Some(false), Some(false), None],
    );
}

#[test]
fn a_file_written_by_a_read_verb_is_a_write() {
    check(
        json!({"name": "take_screenshot", "description": "Take a screenshot of the page.",
               "inputSchema": {"type": "object", "properties": {"filePath": {"type": "string",
                   "description": "The path to save the screenshot to."}}}}),
        [Some(false), None, None, None],
    );
}

#[test]
fn arbitrary_commands_are_destructive_and_open() {
    check(
        json!({"name": "start_process", "description": "Start a terminal process and run a shell command.",
               "inputSchema": {"type": "object", "properties": {"command": {"type": "string"}}}}),
        [Some(false), Some(true), Some(false), Some(true)],
    );
}

#[test]
fn the_web_is_open_and_local_files_are_closed() {
    check(
        json!({"name": "fetch", "description": "Fetches a URL from the internet.",
               "inputSchema": {"type": "object", "properties": {"url": {"type": "string", "format": "uri"}}}}),
        [Some(true), None, None, Some(true)],
    );
    check(
        json!({"name": "read_file", "description": "Read the complete contents of a file from the file system.",
               "inputSchema": {"type": "object", "properties": {"path": {"type": "string",
                   "description": "Absolute path of the file"}}}}),
        [Some(true), None, None, Some(false)],
    );
}

#[test]
fn sending_a_message_is_an_open_world_write() {
    check(
        json!({"name": "send_email", "description": "Send an email to a recipient.",
               "inputSchema": {"type": "object", "properties": {"to": {"type": "string"}, "body": {"type": "string"}},
                               "required": ["to", "body"]}}),
        [Some(false), Some(false), Some(false), Some(true)],
    );
}

#[test]
fn evidence_names_its_cues() {
    let inference = infer_annotations(&tool(json!({"name": "delete_customer"})));
    let cues: Vec<&str> = inference.destructive.evidence.iter().map(|evidence| evidence.cue.as_str()).collect();
    assert!(cues.contains(&"name verb \"delete\""), "{cues:?}");
    assert_eq!(inference.destructive.evidence.last().map(|evidence| evidence.source), Some(CueSource::Prior));
}

#[test]
fn declared_hints_are_never_read() {
    let bare = json!({"name": "delete_customer", "description": "Deletes a customer."});
    let mut declared = bare.clone();
    declared["annotations"] = json!({"readOnlyHint": true, "destructiveHint": false, "openWorldHint": false});
    assert_eq!(infer_annotations(&tool(bare)), infer_annotations(&tool(declared)));
}

/// Issue 10, item 5: read verbs whose texts confess a write, a send or a delete. `(name, description, schema)`.
const CONFESSING_READS: &[(&str, &str, Option<&str>)] = &[
    ("read_notes", "Read the notes of a project. Note: also deletes every file in the project folder.", None),
    ("get_weather", "Get the current weather for a city. Sends an email with the forecast to the operator.", None),
    ("read_config", "Reads the configuration file and overwrites it with the defaults.", None),
    ("get_snippet", "Gets a code snippet by id, then posts to a public pastebin for sharing.", None),
    (
        "list_files",
        "Lists files in a directory. Read-only tool, safe to call.",
        Some(r#"{"deleteAfterListing": {"type": "boolean"}}"#),
    ),
    ("get_report", "Get a report.", Some(r#"{"recipients": {"type": "array", "items": {"type": "string"}}}"#)),
    (
        "fetch_page",
        "Fetch a page.",
        Some(r#"{"savePath": {"type": "string", "description": "Where the page is saved."}}"#),
    ),
    (
        "view_log",
        "View the log.",
        Some(r#"{"tail": {"type": "boolean", "description": "If set, it also truncates the log."}}"#),
    ),
];

#[test]
fn a_stated_write_send_or_delete_defeats_a_read_verb() {
    for (name, description, schema) in CONFESSING_READS {
        let mut value = json!({"name": name, "title": format!("Read {name}"), "description": description});
        if let Some(schema) = schema {
            value["inputSchema"] =
                json!({"type": "object", "properties": serde_json::from_str::<Value>(schema).unwrap()});
        }
        let inference = infer_annotations(&tool(value));
        assert!(!inference.read_only.value, "{name}: {:#?}", inference.read_only.evidence);
        assert!(
            inference.read_only.evidence.iter().any(|evidence| evidence.cue.ends_with("(vetoes reading)")),
            "{name}: the veto is named in the evidence: {:#?}",
            inference.read_only.evidence
        );
    }
}

#[test]
fn a_stated_delete_is_destructive_and_a_stated_send_is_open_world() {
    let deleting = infer_annotations(&tool(json!({"name": "read_notes",
        "description": "Read the notes. Note: also deletes every file in the project folder."})));
    assert!(deleting.destructive.value, "{:#?}", deleting.destructive.evidence);
    let posting = infer_annotations(&tool(json!({"name": "get_snippet",
        "description": "Gets a snippet from the local store, then posts to a public pastebin."})));
    assert!(posting.open_world.value, "{:#?}", posting.open_world.evidence);
}

#[test]
fn honest_reads_that_mention_writes_stay_reads() {
    let honest = [
        ("list_app_config_stores", "List all app configuration stores in a subscription."),
        ("get_plan", "Get a plan. It includes resource changes (create, update, delete) and attribute values."),
        ("read_file", "Read a file. It never deletes anything and does not send data anywhere."),
        ("search_web", "Search the web. 'strict' drops all adult content from search results."),
        ("list_posts", "Lists posts to the channel, newest first."),
        ("read_istio_config", "Read Istio configuration. For writes use manage_istio_config."),
    ];
    for (name, description) in honest {
        check(json!({"name": name, "description": description}), [Some(true), None, None, None]);
    }
}

/// Read-looking names, honest first sentences, read-only claims in the text, and confessions to hide among them.
const READ_NAMES: &[&str] = &["read_notes", "get_file", "list_records", "search_docs", "fetchPage", "show-status"];
const HONEST_LEADS: &[&str] =
    &["Reads the notes of a project.", "Returns the file contents.", "Lists every record, newest first.", ""];
const READ_CLAIMS: &[&str] =
    &["", " This is a read-only tool.", " Safe to call: it does not modify anything.", " Read-only operation."];
const CONFESSIONS: &[&str] = &[
    "It also deletes every file it reads.",
    "Afterwards it sends an email to the operator.",
    "The tool then overwrites it with an empty copy.",
    "Then posts to a public pastebin.",
    "The contents are uploaded to our server.",
    "Finally removes the originals.",
    "It will also erase the backups.",
];

proptest! {
    /// Wherever a confession stands (after the lead, after a long honest text, before the read claim), no read
    /// wording makes the tool read-only.
    #[test]
    fn no_read_wording_outweighs_a_confession(
        name in prop::sample::select(READ_NAMES),
        lead in prop::sample::select(HONEST_LEADS),
        claim in prop::sample::select(READ_CLAIMS),
        confession in prop::sample::select(CONFESSIONS),
        padding in 0usize..60,
        before_claim in any::<bool>(),
    ) {
        let filler = " The result is returned as JSON text.".repeat(padding);
        let description = if before_claim {
            format!("{lead}{filler} {confession}{claim}")
        } else {
            format!("{lead}{claim}{filler} {confession}")
        };
        let inference = infer_annotations(&tool(json!({"name": name, "title": name, "description": description})));
        prop_assert!(!inference.read_only.value, "{} / {}: {:#?}", name, description, inference.read_only.evidence);
    }
}

fn arbitrary_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        ".{0,20}".prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 32, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            prop::collection::btree_map("[a-zA-Z_-]{0,12}|properties|type|enum|required|anyOf|items", inner, 0..6)
                .prop_map(|map| Value::Object(map.into_iter().collect())),
        ]
    })
}

proptest! {
    #[test]
    fn inference_is_deterministic_and_total(
        name in ".{0,40}",
        title in proptest::option::of(".{0,40}"),
        description in ".{0,200}",
        schema in arbitrary_json(),
    ) {
        let mut value = json!({"name": name, "description": description, "inputSchema": schema});
        if let Some(title) = title {
            value["title"] = Value::String(title);
        }
        let tool = tool(value);
        let first = infer_annotations(&tool);
        let second = infer_annotations(&tool);
        prop_assert_eq!(&first, &second);
        for hint in Hint::ALL {
            let inferred = first.get(hint);
            prop_assert!((0.5..=1.0).contains(&inferred.confidence));
            prop_assert!(!inferred.evidence.is_empty());
        }
    }
}

/// Issue 15, fifth round: where the rules find no cue at all (only their prior, "unknown tools are assumed to
/// write"), the learned layer decides alone, but only from a confident reading (0.8): a verb-less report reads,
/// while a vague tool it is unsure of keeps the prior's write. Where the rules found a cue for a write, the model
/// still never turns it into a read.
#[test]
fn the_learned_layer_alone_decides_a_cueless_tool_only_when_confident() {
    let report = infer_annotations(&tool(json!({
        "name": "sales_funnel",
        "description": "Funnel card: counts of leads, opportunities and orders this month."
    })));
    assert!(report.read_only.value && report.read_only.confidence >= 0.8, "{:#?}", report.read_only);
    assert!(report.read_only.evidence.iter().any(|evidence| evidence.source == CueSource::Learned));

    for (name, description) in
        [("nightly", "Nightly maintenance."), ("housekeeping", "Housekeeping for the workspace.")]
    {
        let vague = infer_annotations(&tool(json!({"name": name, "description": description})));
        assert!(!vague.read_only.value, "{name}: {:#?}", vague.read_only);
        assert!(vague.read_only.evidence.iter().all(|evidence| evidence.source == CueSource::Prior), "{name}");
    }

    // A cue for a write (the name's verb) stays a write whatever the model reads in the rest.
    let rotate = infer_annotations(&tool(json!({"name": "rotate", "description": "Rotates the credentials."})));
    assert!(!rotate.read_only.value, "{:#?}", rotate.read_only);
}
