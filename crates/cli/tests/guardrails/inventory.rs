//! The tool inventory: once `toolgate serve` has listed the demo server, the store holds every demo tool with its
//! effective hints and their sources, toolgate's `_meta` record, risk and the same lint findings `toolgate lint`
//! reports, so the console shows them without talking to the relay; and, per caller, what the policy would do with
//! a call, rewritten when a SIGHUP reloads the policy.

use toolgate_core::decision::Verdict;
use toolgate_store::{InventoryState, InventoryTool, Store};

use crate::support::{HANG_GUARD, Setup, start_serve};

/// Reads the inventory until `done` holds for it, failing after [`HANG_GUARD`].
async fn inventory_when(store: &Store, done: impl Fn(&[InventoryTool]) -> bool) -> Vec<InventoryTool> {
    let started = tokio::time::Instant::now();
    loop {
        let tools = store.inventory().await.unwrap();
        if done(&tools) {
            return tools;
        }
        assert!(started.elapsed() < HANG_GUARD, "the inventory never reached the expected state: {tools:#?}");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

fn verdicts(tools: &[InventoryTool], name: &str) -> Vec<(String, Verdict)> {
    let tool = tools.iter().find(|tool| tool.tool == name).unwrap_or_else(|| panic!("{name} missing"));
    tool.access.iter().map(|access| (access.caller.clone(), access.verdict)).collect()
}

/// The demo server's tools.
const DEMO_TOOLS: usize = 10;

#[test]
fn serve_writes_every_demo_tool_to_the_inventory() {
    let setup = Setup::demo("");
    let serve = start_serve(&setup, &[]);
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let store = runtime.block_on(Store::open(&setup.state())).unwrap();
    let tools = runtime.block_on(inventory_when(&store, |tools| tools.len() == DEMO_TOOLS));
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
    // The one identity of this config (HTTP without callers) under the standard profile.
    assert_eq!(verdicts(&tools, "list_notes"), [("anonymous".to_owned(), Verdict::Allow)]);
    assert_eq!(verdicts(&tools, "purge_notes"), [("anonymous".to_owned(), Verdict::Confirm)]);

    // Read-only mode, reloaded on SIGHUP: the inventory is rewritten with the new verdicts.
    let text = std::fs::read_to_string(&setup.config).unwrap();
    std::fs::write(&setup.config, format!("[policy]\nmode = \"read-only\"\n\n{text}")).unwrap();
    let status = std::process::Command::new("kill").arg("-HUP").arg(serve.child.id().to_string()).status().unwrap();
    assert!(status.success());
    let hidden = |tools: &[InventoryTool]| verdicts(tools, "purge_notes").first().map(|(_, verdict)| *verdict);
    let tools = runtime.block_on(inventory_when(&store, |tools| hidden(tools) == Some(Verdict::Hide)));
    assert_eq!(verdicts(&tools, "list_notes"), [("anonymous".to_owned(), Verdict::Allow)], "reads stay callable");
    runtime.block_on(store.close()).unwrap();
    drop(serve);
}
