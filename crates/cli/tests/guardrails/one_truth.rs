//! One truth everywhere: for the reference servers installed as peers (server-everything, server-filesystem,
//! server-memory, mcp-server-git; mcp-server-time and mcp-server-fetch are not among the peers), behind `toolgate
//! serve` with the default trust, the relay's listing, the console's inventory, `inspect --json`, `lint --format
//! json` and `prompt` (the last three through `--config FILE --upstream NAME`) give every tool the same enforced
//! hints and the same category.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use serde_json::{Value, json};
use toolgate_test_support::{PeerCommand, Peers};

use crate::support::{HttpSession, Setup, poll, start_serve, toolgate};

/// The four hints and the category of one tool, as one view shows them.
type Views = BTreeMap<String, (Vec<bool>, String)>;

const HINTS: [&str; 4] = ["readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint"];

/// `peer` as the only upstream, named `ref`, with the default trust and policy.
fn setup_for(peer: &PeerCommand) -> Setup {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("gateway.toml");
    let env: Vec<String> = peer.env.iter().map(|(key, value)| format!("{key:?} = {value:?}")).collect();
    let text = format!(
        "[[upstream]]\nname = \"ref\"\ncommand = {program:?}\nargs = {args:?}\nenv = {{ {env} }}\n\n\
         [listen.http]\nbind = \"127.0.0.1:0\"\n",
        program = peer.program.to_string_lossy(),
        args = peer.args,
        env = env.join(", ")
    );
    std::fs::write(&config, text).expect("write the config");
    Setup { dir, config }
}

fn hints_of(hints: &Value, value: impl Fn(&Value) -> Option<bool>) -> Vec<bool> {
    HINTS.iter().map(|hint| value(&hints[*hint]).unwrap_or_else(|| panic!("no {hint} in {hints}"))).collect()
}

fn relay(session: &mut HttpSession) -> Views {
    let response = session.request("tools/list", json!({})).expect("tools/list");
    let tools = response["result"]["tools"].as_array().cloned().unwrap_or_default();
    tools
        .iter()
        .map(|tool| {
            let category = tool["_meta"]["toolgate/annotations"]["category"].as_str().unwrap_or("?").to_owned();
            (
                tool["name"].as_str().unwrap_or("?").to_owned(),
                (hints_of(&tool["annotations"], Value::as_bool), category),
            )
        })
        .collect()
}

fn report(stdout: &str, what: &str) -> Views {
    let report: Value = serde_json::from_str(stdout).unwrap_or_else(|error| panic!("{what}: {error}: {stdout}"));
    assert_eq!(report["trust"], "untrusted", "{what} takes the upstream's trust");
    let tools = report["tools"].as_array().cloned().unwrap_or_default();
    tools
        .iter()
        .map(|tool| {
            let hints = hints_of(&tool["effective"], |hint| hint["value"].as_bool());
            (
                tool["name"].as_str().unwrap_or("?").to_owned(),
                (hints, tool["category"].as_str().unwrap_or("?").to_owned()),
            )
        })
        .collect()
}

/// Each tool's category from the safety prompt's sections.
pub(crate) fn prompt_categories(text: &str) -> BTreeMap<String, String> {
    let mut category = "?";
    let mut categories = BTreeMap::new();
    for line in text.lines() {
        for (heading, name) in [
            ("## Read-only", "read"),
            ("## Write", "write"),
            ("## External", "external"),
            ("## Destructive", "destructive"),
        ] {
            if line.starts_with(heading) {
                category = name;
            }
        }
        if let Some(rest) = line.strip_prefix("- \"")
            && let Some(end) = rest.find('"')
        {
            categories.insert(rest[..end].to_owned(), category.to_owned());
        }
    }
    categories
}

fn five_views_agree(peer: PeerCommand, what: &str) {
    let setup = setup_for(&peer);
    let serve = start_serve(&setup, &[]);
    let (state, config) = (setup.state_arg(), setup.config.to_string_lossy().into_owned());
    let mut session = HttpSession::open(&serve.authority, &[]).expect("a session");
    let relayed = poll(&format!("{what}'s tools through the relay"), || {
        let views = relay(&mut session);
        (!views.is_empty()).then_some(views)
    });

    let view = ["--config", config.as_str(), "--upstream", "ref"];
    let inspect = toolgate(&[&["inspect", "--json"][..], &view[..]].concat());
    assert_eq!(inspect.code, Some(0), "{inspect:?}");
    let lint = toolgate(&[&["lint", "--format", "json", "--deny", "errors"][..], &view[..]].concat());
    assert!(matches!(lint.code, Some(0 | 1)), "{lint:?}");
    let prompt = toolgate(&[&["prompt"][..], &view[..]].concat());
    assert_eq!(prompt.code, Some(0), "{prompt:?}");

    let console = poll(&format!("{what}'s tools in the console's inventory"), || {
        let views: Views = inventory(&state).into_iter().filter(|(name, _)| relayed.contains_key(name)).collect();
        (views.len() == relayed.len()).then_some(views)
    });

    let (inspected, linted) = (report(&inspect.stdout, "inspect"), report(&lint.stdout, "lint"));
    let prompted = prompt_categories(&prompt.stdout);
    // The relay's listing and a one-shot command's differ at the edges: a server lists some tools only to clients
    // declaring roots, sampling or elicitation (as the relay's clients do), and the relay hides task-required
    // tools. Every tool both see is compared, and that is nearly all of them.
    let common: Vec<&String> = inspected.keys().filter(|name| relayed.contains_key(*name)).collect();
    assert!(common.len() * 4 >= inspected.len() * 3, "{what}: {inspected:?} vs {relayed:?}");
    for name in common {
        let (hints, category) = &inspected[name];
        for (view, seen) in [("the relay", &relayed), ("lint", &linted), ("the console", &console)] {
            assert_eq!(seen.get(name), Some(&(hints.clone(), category.clone())), "{what}: {name} in {view}");
        }
        assert_eq!(prompted.get(name), Some(category), "{what}: {name} in prompt:\n{}", prompt.stdout);
    }
}

/// The console's inventory, read as the console reads it (the gateway writes it in the background).
fn inventory(state: &str) -> Views {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime");
    runtime.block_on(async {
        let store = toolgate_store::Store::open(Path::new(state)).await.expect("the state store");
        let rows = store.inventory().await.expect("the inventory");
        store.close().await.expect("close");
        rows.into_iter()
            .map(|row| {
                let hints = hints_of(&row.hints, |hint| hint["value"].as_bool());
                (row.tool, (hints, row.risk.category))
            })
            .collect()
    })
}

#[test]
fn server_everything_shows_the_same_hints_in_all_five_views() {
    five_views_agree(Peers::locate().server_everything(), "server-everything");
}

#[test]
fn server_filesystem_shows_the_same_hints_in_all_five_views() {
    let root = tempfile::tempdir().expect("tempdir");
    five_views_agree(Peers::locate().server_filesystem(root.path()), "server-filesystem");
}

#[test]
fn server_memory_shows_the_same_hints_in_all_five_views() {
    let dir = tempfile::tempdir().expect("tempdir");
    five_views_agree(Peers::locate().server_memory(&dir.path().join("memory.jsonl")), "server-memory");
}

#[test]
fn mcp_server_git_shows_the_same_hints_in_all_five_views() {
    let repo = tempfile::tempdir().expect("tempdir");
    let status = Command::new("git").args(["init", "--quiet"]).current_dir(repo.path()).status().expect("git runs");
    assert!(status.success());
    five_views_agree(Peers::locate().mcp_server_git(repo.path()), "mcp-server-git");
}
