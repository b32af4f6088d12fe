//! A person approves, then denies, a real pending call in the console while the MCP Python SDK's client waits.

use fantoccini::Locator;
use serde_json::Value;
use tokio::task::block_in_place;

use crate::browser::Browser;
use crate::support::{Setup, start_serve, toolgate};
use crate::{client_findings, login_url, pending_approvals, texts, waiting_client};

/// Waits for the pending approval of `delete_note` to appear in the open page (the refresh script, no reload) and
/// returns its approval id.
async fn wait_for_card(browser: &Browser, note: u64) -> String {
    let card = browser.wait_for("#pending article", "the pending approval").await;
    let text = card.text().await.expect("the card's text");
    assert!(text.contains("delete_note") && text.contains("demo"), "{text}");
    assert!(text.contains(&format!("\"id\": {note}")), "the arguments are shown: {text}");
    let reloaded = browser.client.execute("return window.toolgateTestMarker === 1;", vec![]).await.expect("marker");
    assert_eq!(reloaded, Value::Bool(true), "the approval appeared without a reload");
    let form = card.find(Locator::Css("form")).await.expect("the approve form");
    let action = form.attr("action").await.expect("action").expect("the form has an action");
    action.trim_start_matches("/console/approvals/").split('/').next().unwrap_or_default().to_owned()
}

async fn mark_page(browser: &Browser) {
    browser.client.execute("window.toolgateTestMarker = 1;", vec![]).await.expect("the marker is set");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_person_approves_then_denies_a_waiting_call_in_the_browser() {
    let setup = Setup::demo("[confirmation]\ntimeout_seconds = 120\n");
    let serve = block_in_place(|| start_serve(&setup, &[]));
    let login = block_in_place(|| login_url(&serve));
    let state = setup.state_arg();
    let browser = Browser::start("other-site.test").await;

    browser.goto(&login).await;
    assert!(browser.url().await.ends_with("/console"), "the login link leads to the console");
    browser.wait_for_text("No approvals are waiting.").await;
    mark_page(&browser).await;

    // Approve: the call goes through and the note is gone.
    let client = block_in_place(|| waiting_client(&serve, 3));
    let id = wait_for_card(&browser, 3).await;
    browser.screenshot("pending-approvals").await;
    browser.client.find(Locator::Css("#pending button.approve")).await.expect("Approve").click().await.expect("click");
    browser.wait_for_text("No approvals are waiting.").await;
    let approved = block_in_place(|| client_findings(client, "the approved client"));
    assert_eq!(approved["elicitations"].as_array().map(Vec::len), Some(0), "{approved}");
    assert_eq!(approved["delete"]["isError"], false, "{approved}");
    assert!(texts(&approved["delete"]).contains("deleted note 3"), "{approved}");
    assert_eq!(approved["after"]["isError"], true, "note 3 is gone: {approved}");

    // Deny: the waiting call gets an isError refusal and the note stays.
    mark_page(&browser).await;
    let client = block_in_place(|| waiting_client(&serve, 2));
    let denied_id = wait_for_card(&browser, 2).await;
    browser.client.find(Locator::Css("#pending button.deny")).await.expect("Deny").click().await.expect("click");
    browser.wait_for_text("No approvals are waiting.").await;
    let denied = block_in_place(|| client_findings(client, "the denied client"));
    assert_eq!(denied["delete"]["isError"], true, "{denied}");
    let refusal = texts(&denied["delete"]);
    assert!(refusal.contains("console denied this call") && refusal.contains("not made"), "{refusal}");
    assert_eq!(denied["after"]["isError"], false, "note 2 is still there: {denied}");
    assert!(block_in_place(|| pending_approvals(&state)).is_empty());

    // Both decisions are audit rows naming the console, and the chain verifies.
    let audit = block_in_place(|| toolgate(&["audit", "--json", "--kind", "confirmation", "--state-dir", &state]));
    let decided: Vec<(String, String, String)> = audit
        .stdout
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|row| row["detail"]["decided_by"].is_string())
        .map(|row| {
            let text = |value: &Value| value.as_str().unwrap_or_default().to_owned();
            (text(&row["approval_id"]), text(&row["outcome"]), text(&row["detail"]["decided_by"]))
        })
        .collect();
    assert_eq!(
        decided,
        [(id, "approved".to_owned(), "console".to_owned()), (denied_id, "denied".to_owned(), "console".to_owned())],
        "{}",
        audit.stdout
    );
    let verify = block_in_place(|| toolgate(&["audit", "verify", "--state-dir", &state]));
    assert_eq!(verify.code, Some(0), "{verify:?}");

    // The audit log and the activity chart, as a person sees them after this.
    browser.goto(&format!("http://{}/console/audit", serve.authority)).await;
    browser.wait_for_text("Hash chain verified").await;
    // Every row laid out (the last one is the denial's confirmation row) before the picture is taken.
    browser.wait_for_text("denied").await;
    browser.screenshot("audit-log").await;
    browser.goto(&format!("http://{}/console/activity", serve.authority)).await;
    let text = browser.wait_for_text("Tool calls by verdict").await;
    assert!(text.contains("confirmed, approved"), "{text}");
    let table = browser.client.execute(
        "return [...document.querySelectorAll('#activity-table td[data-verdict]')].map(cell => \
         [cell.dataset.verdict, Number(cell.textContent)]);",
        vec![],
    );
    let cells = table.await.expect("the activity table");
    let sum = |verdict: &str| -> u64 {
        cells
            .as_array()
            .into_iter()
            .flatten()
            .filter(|cell| cell[0] == verdict)
            .filter_map(|cell| cell[1].as_u64())
            .sum()
    };
    assert_eq!((sum("confirm-approved"), sum("confirm-refused")), (1, 1), "{cells}");
    assert!(sum("allow") >= 2, "the two get_note calls were allowed: {cells}");
    browser.screenshot("activity").await;
    browser.close().await;
}
