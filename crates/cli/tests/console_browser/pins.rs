//! A pinned upstream pulls the rug (a tool now claims to be read-only); a person pins the new definition in the
//! console and the gateway releases the tool.

use std::path::PathBuf;

use fantoccini::Locator;
use serde_json::{Value, json};
use tokio::task::block_in_place;
use toolgate_test_support::misbehave;

use crate::browser::Browser;
use crate::login_url;
use crate::support::{HttpSession, Setup, poll, start_serve, toolgate};

/// A state directory and a config with the rug-pull fixture as the only, pinned, upstream (names unprefixed).
fn rug_pull_setup() -> Setup {
    let dir = tempfile::tempdir().expect("tempdir");
    let config: PathBuf = dir.path().join("gateway.toml");
    let fixture = misbehave("rug-pull");
    let argv = fixture.argv();
    let env: Vec<String> = fixture.env.iter().map(|(key, value)| format!("{key} = {value:?}")).collect();
    let text = format!(
        "[[upstream]]\nname = \"rug\"\ncommand = {:?}\nargs = {:?}\ntrust = \"pinned\"\nenv = {{ {} }}\n\n\
         [listen.http]\nbind = \"127.0.0.1:0\"\n",
        argv[0],
        &argv[1..],
        env.join(", ")
    );
    std::fs::write(&config, text).expect("write the config");
    Setup { dir, config }
}

fn tool_names(session: &mut HttpSession) -> Vec<String> {
    let listed = session.request("tools/list", json!({})).expect("tools/list");
    listed["result"]["tools"]
        .as_array()
        .map(|tools| tools.iter().filter_map(|tool| tool["name"].as_str().map(str::to_owned)).collect())
        .unwrap_or_default()
}

fn call_text(session: &mut HttpSession, name: &str, arguments: Value) -> Value {
    let response = session.request("tools/call", json!({"name": name, "arguments": arguments})).expect("tools/call");
    response["result"].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pinning_a_quarantined_definition_in_the_browser_releases_the_tool() {
    let setup = rug_pull_setup();
    let state = setup.state_arg();
    // First run: a pinned upstream's tools are all new, so all wait for review; a person pins them with the CLI.
    {
        let _first = block_in_place(|| start_serve(&setup, &[]));
        let pending = block_in_place(|| {
            poll("four definitions in quarantine", || {
                let list = toolgate(&["pins", "list", "--json", "--state-dir", &state]);
                let value: Value = serde_json::from_str(&list.stdout).ok()?;
                let pending: Vec<String> = value["pending"]
                    .as_array()?
                    .iter()
                    .filter_map(|change| change["tool"].as_str().map(str::to_owned))
                    .collect();
                (pending.len() == 4).then_some(pending)
            })
        });
        for tool in &pending {
            let approve = block_in_place(|| toolgate(&["pins", "approve", "rug", tool, "--state-dir", &state]));
            assert_eq!(approve.code, Some(0), "{approve:?}");
        }
    }
    // Second run: every tool matches its pin. Then the server changes update_record and announces it.
    let serve = block_in_place(|| start_serve(&setup, &[]));
    let mut session = block_in_place(|| HttpSession::open(&serve.authority, &[]).expect("an MCP session"));
    let names = block_in_place(|| poll("the pinned tools", || Some(tool_names(&mut session)).filter(|n| n.len() == 4)));
    assert!(names.contains(&"update_record".to_owned()), "{names:?}");
    let pulled = block_in_place(|| call_text(&mut session, "rug_pull", json!({"change": "relax"})));
    assert_eq!(pulled["content"][0]["text"], "changed: relax", "{pulled}");
    block_in_place(|| {
        poll("update_record quarantined", || {
            Some(()).filter(|()| !tool_names(&mut session).contains(&"update_record".to_owned()))
        })
    });

    // The person opens the tools page, reads the diff and pins the new definition.
    let browser = Browser::start("other-site.test").await;
    browser.goto(&block_in_place(|| login_url(&serve))).await;
    browser.goto(&format!("http://{}/console/tools", serve.authority)).await;
    let card = browser.wait_for("main article.card", "the quarantined definition").await;
    let text = card.text().await.expect("the card's text");
    assert!(text.contains("update_record") && text.contains("changed since it was pinned"), "{text}");
    assert!(text.contains("annotations.readOnlyHint") && text.contains("+ true"), "the diff: {text}");
    let fingerprint = card
        .find(Locator::Css("input[name=fingerprint]"))
        .await
        .expect("the fingerprint field")
        .attr("value")
        .await
        .expect("value")
        .expect("a fingerprint");
    browser.screenshot("tools-quarantine").await;
    card.find(Locator::Css("button.approve")).await.expect("Pin this definition").click().await.expect("click");
    browser.wait_for_text("No changed definitions are waiting.").await;
    assert!(browser.url().await.ends_with("/console/tools"));

    // The pin is in the store, by the console, and the decision is an audit row.
    let list = block_in_place(|| toolgate(&["pins", "list", "--json", "--state-dir", &state]));
    let pins: Value = serde_json::from_str(&list.stdout).expect("pins JSON");
    let pin = pins["pins"]
        .as_array()
        .and_then(|pins| pins.iter().find(|pin| pin["tool"] == "update_record").cloned())
        .expect("update_record is pinned");
    assert_eq!(pin["fingerprint"]["whole"], fingerprint.as_str(), "{pin}");
    assert_eq!(pin["approved_by"], "console", "{pin}");
    let audit = block_in_place(|| toolgate(&["audit", "--json", "--state-dir", &state]));
    assert!(
        audit.stdout.lines().filter_map(|line| serde_json::from_str::<Value>(line).ok()).any(|row| row["kind"]
            == "pin"
            && row["tool"] == "update_record"
            && row["detail"]["fingerprint"] == fingerprint.as_str()
            && row["detail"]["decided_by"] == "console"),
        "{}",
        audit.stdout
    );

    // At the upstream's next listing the gateway releases the tool, as approved, and a call goes through.
    let relisted = block_in_place(|| call_text(&mut session, "rug_pull", json!({"change": "none"})));
    assert_eq!(relisted["content"][0]["text"], "changed: none", "{relisted}");
    block_in_place(|| {
        poll("update_record released", || {
            Some(()).filter(|()| tool_names(&mut session).contains(&"update_record".to_owned()))
        })
    });
    let called = block_in_place(|| call_text(&mut session, "update_record", json!({"id": 1})));
    assert_eq!(called["content"][0]["text"], "called update_record", "{called}");

    // The inventory the gateway wrote to the store lists every tool of the upstream, update_record pinned as
    // approved and listed again (the write is in the background: reload until it shows).
    // (Without a fragment: going to the same URL with a fragment only scrolls, it does not reload.)
    let tools_url = format!("http://{}/console/tools", serve.authority);
    let started = std::time::Instant::now();
    let inventory = loop {
        browser.goto(&tools_url).await;
        let table = browser.wait_for("table.inventory", "the inventory of every tool").await;
        let text = table.text().await.expect("the inventory's text");
        let mut row = String::new();
        for tr in table.find_all(Locator::Css("tbody tr")).await.expect("the inventory's rows") {
            let cells = tr.text().await.expect("a row's text");
            if cells.contains("update_record") {
                row = cells;
            }
        }
        if row.contains("pinned by console") && row.contains("listed") {
            break text;
        }
        assert!(
            started.elapsed() < crate::support::HANG_GUARD,
            "the inventory never showed the release: {text}\ntoolgate's log:\n{}",
            serve.stderr_text()
        );
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    };
    assert!(inventory.contains("Risk ") && inventory.contains("finding(s)"), "{inventory}");
    browser.goto(&format!("{tools_url}#every-tool")).await;
    browser.screenshot("tools-inventory").await;
    let verify = block_in_place(|| toolgate(&["audit", "verify", "--state-dir", &state]));
    assert_eq!(verify.code, Some(0), "{verify:?}");
    browser.close().await;
}
