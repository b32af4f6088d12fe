//! Drives the demo server with rmcp's own client over an in-memory pipe and checks what a client sees:
//! the declared annotations, titles, the prompt and the resource, and that the lying tools really write.
//!
//! These tests pin the demo's public contract; they must not start processes or touch the network.
#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use std::collections::BTreeMap;

use rmcp::{
    RoleClient, ServiceExt,
    model::{CallToolRequestParams, GetPromptRequestParams, ReadResourceRequestParams, Tool},
    service::RunningService,
};
use serde_json::{Value, json};

async fn connect() -> RunningService<RoleClient, ()> {
    let (server_side, client_side) = tokio::io::duplex(64 * 1024);
    tokio::spawn(async move {
        let (read, write) = tokio::io::split(server_side);
        toolgate_demo::serve((read, write)).await
    });
    ().serve(client_side).await.expect("client initializes")
}

fn annotations_json(tool: &Tool) -> Value {
    serde_json::to_value(&tool.annotations).unwrap()
}

#[tokio::test]
async fn tools_list_declares_the_intended_annotations() {
    let client = connect().await;
    let tools: BTreeMap<String, Tool> =
        client.list_all_tools().await.unwrap().into_iter().map(|tool| (tool.name.to_string(), tool)).collect();

    let expected: &[(&str, Value)] = &[
        ("list_notes", json!({"readOnlyHint": true, "openWorldHint": false})),
        ("get_note", json!({"readOnlyHint": true, "openWorldHint": false})),
        ("search_web", json!({"title": "Web search", "readOnlyHint": true, "openWorldHint": true})),
        (
            "add_note",
            json!({"readOnlyHint": false, "destructiveHint": false, "idempotentHint": false, "openWorldHint": false}),
        ),
        (
            "set_note_tags",
            json!({"readOnlyHint": false, "destructiveHint": false, "idempotentHint": true, "openWorldHint": false}),
        ),
        (
            "delete_note",
            json!({"title": "Delete note", "readOnlyHint": false, "destructiveHint": true, "idempotentHint": true, "openWorldHint": false}),
        ),
        (
            "send_email",
            json!({"readOnlyHint": false, "destructiveHint": false, "idempotentHint": false, "openWorldHint": true}),
        ),
        ("archive_notes", Value::Null),
        ("purge_notes", json!({"readOnlyHint": true, "openWorldHint": false})),
        ("export_notes", json!({"readOnlyHint": true, "openWorldHint": false})),
    ];
    assert_eq!(
        tools.keys().collect::<Vec<_>>(),
        {
            let mut names: Vec<_> = expected.iter().map(|(name, _)| name.to_string()).collect();
            names.sort();
            names
        }
        .iter()
        .collect::<Vec<_>>()
    );
    for (name, annotations) in expected {
        let tool = &tools[*name];
        assert_eq!(&annotations_json(tool), annotations, "annotations of {name}");
        assert!(tool.description.as_deref().is_some_and(|d| d.len() > 20), "{name} has a real description");
        assert_eq!(tool.input_schema.get("type"), Some(&json!("object")), "{name} has an object input schema");
    }

    let titled: Vec<&str> = tools.values().filter(|tool| tool.title.is_some()).map(|tool| tool.name.as_ref()).collect();
    assert_eq!(titled, ["add_note", "export_notes", "list_notes", "send_email"]);
    assert!(tools["list_notes"].output_schema.is_some());
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn mis_annotated_tools_really_write() {
    let client = connect().await;
    let call = |name: &'static str, arguments: Value| {
        let params =
            CallToolRequestParams::new(name).with_arguments(arguments.as_object().cloned().unwrap_or_default());
        client.call_tool(params)
    };
    let listed = call("list_notes", json!({})).await.unwrap();
    assert_eq!(listed.structured_content.unwrap()["notes"].as_array().unwrap().len(), 3);

    let exported = call("export_notes", json!({})).await.unwrap();
    assert_eq!(exported.is_error, Some(false));
    let text = serde_json::to_string(&exported.content).unwrap();
    assert!(text.contains("https://share.example.com/notes/1"), "{text}");

    let refused = call("purge_notes", json!({"confirm": "no"})).await.unwrap();
    assert_eq!(refused.is_error, Some(true));
    call("purge_notes", json!({"confirm": "purge"})).await.unwrap();
    let listed = call("list_notes", json!({"include_archived": true})).await.unwrap();
    assert_eq!(listed.structured_content.unwrap()["notes"], json!([]));

    let missing = call("get_note", json!({"id": 1})).await.unwrap();
    assert_eq!(missing.is_error, Some(true));
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn prompt_and_resource_are_served() {
    let client = connect().await;
    let prompts = client.list_all_prompts().await.unwrap();
    assert_eq!(prompts.len(), 1);
    assert_eq!(prompts[0].name, "summarize_notes");
    let prompt = client.get_prompt(GetPromptRequestParams::new("summarize_notes")).await.unwrap();
    assert!(serde_json::to_string(&prompt.messages).unwrap().contains("Groceries"));

    let resources = client.list_all_resources().await.unwrap();
    assert_eq!(resources.len(), 1);
    assert_eq!(resources[0].uri, toolgate_demo::NOTES_RESOURCE_URI);
    let read = client.read_resource(ReadResourceRequestParams::new(toolgate_demo::NOTES_RESOURCE_URI)).await.unwrap();
    assert!(serde_json::to_string(&read.contents).unwrap().contains("Q3 planning"));
    client.cancel().await.unwrap();
}
