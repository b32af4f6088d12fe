//! One-step onboarding in the browser: a new `pinned` upstream (the bundled demo server, whose hints are honest,
//! missing and lying) waits whole; its page `/console/upstreams/demo` lists every tool with each hint as declared,
//! inferred and enforced, the ones that disagree first; another site's form and the page's own form without the
//! CSRF token are refused and pin nothing; **Pin the agreeing ones** pins exactly those (in the store, by the
//! console, and a client's `tools/list` shows them), then **Pin all** the rest.

use std::collections::HashMap;
use std::path::PathBuf;

use fantoccini::Locator;
use serde_json::{Value, json};
use tokio::task::block_in_place;

use crate::browser::{Browser, OtherSite, auto_submit_page, changing_page};
use crate::login_url;
use crate::support::{HANG_GUARD, HttpSession, Setup, poll, start_serve, toolgate};

const OTHER_HOST: &str = "other-site.test";
/// The demo's tools whose declared hints the trust rule rejects, that declare none, or with a lint error (the same
/// the CLI's `pins approve --agreeing` leaves), and two that agree.
const DISAGREEING: [&str; 3] = ["purge_notes", "archive_notes", "export_notes"];
const AGREEING: [&str; 2] = ["send_email", "search_web"];

/// The demo server as one `pinned` upstream, HTTP on a loopback port the OS picks.
fn pinned_demo() -> Setup {
    let dir = tempfile::tempdir().expect("tempdir");
    let config: PathBuf = dir.path().join("gateway.toml");
    let text = format!(
        "[[upstream]]\nname = \"demo\"\ncommand = {binary:?}\nargs = [\"demo-server\"]\ntrust = \"pinned\"\n\n\
         [listen.http]\nbind = \"127.0.0.1:0\"\n",
        binary = toolgate_test_support::toolgate::binary()
    );
    std::fs::write(&config, text).expect("write the config");
    Setup { dir, config }
}

fn listed(session: &mut HttpSession) -> Vec<String> {
    let response = session.request("tools/list", json!({})).expect("tools/list");
    response["result"]["tools"]
        .as_array()
        .map(|tools| tools.iter().filter_map(|tool| tool["name"].as_str().map(str::to_owned)).collect())
        .unwrap_or_default()
}

/// `toolgate pins list --json`: the pinned tools with who approved each, and the tools waiting.
fn pins(state: &str) -> (Vec<(String, String)>, Vec<String>) {
    let list = toolgate(&["pins", "list", "--json", "--state-dir", state]);
    let value: Value = serde_json::from_str(&list.stdout).unwrap_or_else(|error| panic!("{error}: {list:?}"));
    let pinned = value["pins"]
        .as_array()
        .map(|pins| {
            pins.iter()
                .map(|pin| {
                    let text = |key: &str| pin[key].as_str().unwrap_or_default().to_owned();
                    (text("tool"), text("approved_by"))
                })
                .collect()
        })
        .unwrap_or_default();
    let pending = value["pending"]
        .as_array()
        .map(|pending| {
            pending
                .iter()
                // The page pins tools; the prompts, resources and instructions a pinned upstream also waits with are
                // `pins approve --kind`'s.
                .filter(|change| change["kind"] == "tool")
                .filter_map(|change| change["tool"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    (pinned, pending)
}

/// The page's table rows as text, in page order.
/// A redirect replacing the document mid-read starts the read again.
async fn table_rows(browser: &Browser) -> Vec<String> {
    let started = std::time::Instant::now();
    'page: loop {
        let mut texts = Vec::new();
        for row in browser.client.find_all(Locator::Css("main table tbody tr")).await.expect("the rows") {
            match row.text().await {
                Ok(text) => texts.push(text),
                Err(error) if changing_page(&error) && started.elapsed() < HANG_GUARD => {
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                    continue 'page;
                }
                Err(error) => panic!("a row's text: {error}"),
            }
        }
        return texts;
    }
}

/// Waits until the page (after a form's redirect) no longer says `needle`.
async fn wait_until_gone(browser: &Browser, needle: &str) {
    let started = std::time::Instant::now();
    loop {
        let text = browser.text().await;
        if !text.contains(needle) {
            return;
        }
        assert!(started.elapsed() < HANG_GUARD, "the page still says {needle:?}:\n{text}");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pinned_upstream_is_onboarded_in_the_browser_the_agreeing_definitions_first_and_forged_forms_pin_nothing() {
    let setup = pinned_demo();
    let state = setup.state_arg();
    let serve = block_in_place(|| start_serve(&setup, &[]));
    let mut session = block_in_place(|| HttpSession::open(&serve.authority, &[]).expect("an MCP session"));
    assert!(block_in_place(|| listed(&mut session)).is_empty(), "a new pinned upstream's tools all wait");
    let console = format!("http://{}", serve.authority);
    let page = format!("{console}/console/upstreams/demo");

    let browser = Browser::start(OTHER_HOST).await;
    browser.goto(&block_in_place(|| login_url(&serve))).await;
    // The inventory is written in the background: reload until every waiting definition is assessed.
    let started = std::time::Instant::now();
    let rows = loop {
        browser.goto(&page).await;
        let text = browser.text().await;
        let rows = table_rows(&browser).await;
        if text.contains("wait to be pinned") && !rows.is_empty() && !text.contains("has not assessed") {
            break rows;
        }
        assert!(started.elapsed() < HANG_GUARD, "the page never assessed the definitions:\n{text}");
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    };
    assert_eq!(browser.status().await, 200);
    // Each hint as declared, inferred and enforced; the ones to look at first, with why.
    for row in &rows {
        for part in ["waiting", "declared", "inferred", "enforced"] {
            assert!(row.contains(part), "{part} in {row}");
        }
    }
    let position = |tool: &str| {
        rows.iter().position(|row| row.split_whitespace().next() == Some(tool)).unwrap_or_else(|| panic!("{tool}"))
    };
    assert!(rows[position("purge_notes")].contains("TG102"), "its lint finding: {}", rows[position("purge_notes")]);
    assert!(rows[position("archive_notes")].contains("declares no hints"), "{}", rows[position("archive_notes")]);
    let agreeing_button = browser.wait_for("div.actions button.approve", "Pin the agreeing ones").await;
    let label = agreeing_button.text().await.expect("its label");
    assert!(label.starts_with("Pin the agreeing ones ("), "{label}");
    browser.screenshot("onboarding").await;

    // Forged forms: another site's page (with the right CSRF token and fingerprints) is refused by its Origin; the
    // page's own form without the token is refused too. Neither pins anything.
    let form = browser.wait_for("div.actions form", "the agreeing form").await;
    let field = |name: &'static str| {
        let form = form.clone();
        async move {
            let mut values = Vec::new();
            for input in form.find_all(Locator::Css(&format!("input[name={name}]"))).await.expect(name) {
                values.push(input.attr("value").await.expect("value").unwrap_or_default());
            }
            values
        }
    };
    let (csrf, tools, fingerprints) = (field("csrf").await, field("tool").await, field("fingerprint").await);
    assert!(AGREEING.iter().all(|tool| tools.contains(&(*tool).to_owned())), "the agreeing form: {tools:?}");
    assert!(DISAGREEING.iter().all(|tool| !tools.contains(&(*tool).to_owned())), "the agreeing form: {tools:?}");
    // Every tool to look at (not in the agreeing form) comes before every agreeing one, whatever their names.
    let first_agreeing = tools.iter().map(|tool| position(tool)).min().unwrap_or_default();
    assert_eq!(first_agreeing, rows.len() - tools.len(), "disagreements first: {rows:#?}");
    let mut forged: Vec<(&str, &str)> = vec![("csrf", csrf[0].as_str())];
    for (tool, fingerprint) in tools.iter().zip(&fingerprints) {
        forged.extend([("tool", tool.as_str()), ("fingerprint", fingerprint.as_str())]);
    }
    let action = format!("{page}/pin");
    let site = OtherSite::serve(HashMap::from([("/forged".to_owned(), auto_submit_page(&action, &forged))])).await;
    browser.goto(&format!("http://{OTHER_HOST}:{}/forged", site.port)).await;
    browser.wait_for_text("origin not allowed").await;
    assert_eq!(browser.status().await, 403);
    browser.goto(&page).await;
    browser.wait_for("div.actions form", "the agreeing form").await;
    let _ = browser
        .client
        .execute(
            "const form = document.querySelector('div.actions form'); \
             form.querySelector('input[name=csrf]').remove(); form.submit();",
            vec![],
        )
        .await;
    browser.wait_for_text("CSRF token is missing or wrong").await;
    assert_eq!(browser.status().await, 403);
    let (pinned, _) = block_in_place(|| pins(&state));
    assert!(pinned.is_empty(), "a refused form pins nothing: {pinned:?}");

    // Pin the agreeing ones: exactly those, by the console; a client sees them, and the rest still waits.
    browser.goto(&page).await;
    browser.wait_for("div.actions button.approve", "Pin the agreeing ones").await.click().await.expect("click");
    wait_until_gone(&browser, "Pin the agreeing ones").await;
    assert!(browser.url().await.ends_with("/console/upstreams/demo"), "back to the page");
    let (pinned, pending) = block_in_place(|| pins(&state));
    let mut pinned_tools: Vec<&str> = pinned.iter().map(|(tool, _)| tool.as_str()).collect();
    pinned_tools.sort_unstable();
    let mut expected: Vec<&str> = tools.iter().map(String::as_str).collect();
    expected.sort_unstable();
    assert_eq!(pinned_tools, expected, "the agreeing ones are pinned");
    assert!(AGREEING.iter().all(|tool| pinned_tools.contains(tool)), "{pinned_tools:?}");
    assert!(pinned.iter().all(|(_, by)| by == "console"), "{pinned:?}");
    assert!(DISAGREEING.iter().all(|tool| pending.contains(&(*tool).to_owned())), "still waiting: {pending:?}");
    let tools_now = block_in_place(|| {
        poll("the agreeing tools listed", || {
            let names = listed(&mut session);
            AGREEING.iter().all(|tool| names.contains(&(*tool).to_owned())).then_some(names)
        })
    });
    assert!(!tools_now.contains(&"purge_notes".to_owned()), "a disagreeing tool still waits: {tools_now:?}");
    let after = table_rows(&browser).await;
    let send_email = after.iter().find(|row| row.starts_with("send_email")).expect("send_email's row");
    assert!(!send_email.contains("waiting"), "{send_email}");

    // Pin all: nothing waits, and every tool reaches the client.
    let all = browser.wait_for("div.actions form button", "Pin all").await;
    assert!(all.text().await.expect("its label").starts_with("Pin all ("));
    all.click().await.expect("click");
    browser.wait_for_text("No definition of this upstream waits to be pinned.").await;
    let (pinned, pending) = block_in_place(|| pins(&state));
    assert!(pending.is_empty(), "{pending:?}");
    assert!(DISAGREEING.iter().all(|tool| pinned.iter().any(|(pinned, _)| pinned == tool)), "{pinned:?}");
    block_in_place(|| {
        poll("every tool listed", || listed(&mut session).contains(&"purge_notes".to_owned()).then_some(()))
    });
    let audit = block_in_place(|| toolgate(&["audit", "--json", "--kind", "pin", "--state-dir", &state]));
    let decided: Vec<Value> = audit.stdout.lines().filter_map(|line| serde_json::from_str(line).ok()).collect();
    assert_eq!(decided.len(), pinned.len(), "one audit row per pin: {}", audit.stdout);
    assert!(decided.iter().all(|row| row["detail"]["decided_by"] == "console"), "{}", audit.stdout);
    browser.close().await;
}
