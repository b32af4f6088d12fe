//! The tool inventory: once `toolgate serve` has listed the demo server, the store holds every demo tool with its
//! effective hints and their sources, toolgate's `_meta` record, risk and the same lint findings `toolgate lint`
//! reports, so the console shows them without talking to the relay.

use toolgate_store::{InventoryState, InventoryTool, Store};

use crate::support::{HANG_GUARD, Serve, Setup};

/// The demo server's tools.
const DEMO_TOOLS: usize = 10;

#[test]
fn serve_writes_every_demo_tool_to_the_inventory() {
    let setup = Setup::demo("");
    let serve = Serve::start(&setup, &[]);
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let tools: Vec<InventoryTool> = runtime.block_on(async {
        let store = Store::open(&setup.state()).await.unwrap();
        let started = tokio::time::Instant::now();
        loop {
            let tools = store.inventory().await.unwrap();
            if tools.len() == DEMO_TOOLS {
                return tools;
            }
            assert!(started.elapsed() < HANG_GUARD, "inventory never held the demo's tools: {tools:#?}");
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    });
    let tool = |name: &str| tools.iter().find(|tool| tool.tool == name).unwrap_or_else(|| panic!("{name} missing"));
    assert!(tools.iter().all(|tool| tool.upstream == "demo" && tool.state == InventoryState::Visible), "{tools:#?}");
    for tool in &tools {
        for hint in ["readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint"] {
            assert!(tool.hints[hint]["value"].is_boolean(), "{} {hint}: {}", tool.tool, tool.hints);
            assert!(tool.hints[hint]["source"].is_string(), "{} {hint}: {}", tool.tool, tool.hints);
        }
        assert_eq!(tool.annotations["upstream"], "demo", "{}", tool.annotations);
        assert_eq!(tool.annotations["fingerprint"].as_str(), Some(tool.fingerprint.as_str()));
        assert_eq!(tool.annotations["risk"], u64::from(tool.risk.level));
    }
    // The config overrides get_note as read-only: the source says so.
    assert_eq!(tool("get_note").hints["readOnlyHint"]["source"], "overridden");
    // The lint findings `toolgate lint` reports for the demo (its declared read-only purge is an error).
    let codes = |name: &str| tool(name).findings.iter().map(|finding| finding.code.clone()).collect::<Vec<_>>();
    assert!(codes("purge_notes").contains(&"TG102".to_owned()), "{:?}", tool("purge_notes").findings);
    assert_eq!(codes("archive_notes"), ["TG201", "TG202", "TG203", "TG204"]);
    assert!(tool("purge_notes").findings.iter().any(|finding| finding.severity == "error"));
    assert_eq!(tool("purge_notes").risk.level, 4, "untrusted: the relaxing declaration does not count");
    drop(serve);
}
