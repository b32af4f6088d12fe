//! What the browser must not be able to do: see the console without logging in, decide from another site's page,
//! or post a form without the session's CSRF token. A real call waits throughout and is still pending at the end,
//! when a configured console user logs in with the form and denies it under their own name.

use std::collections::HashMap;

use fantoccini::Locator;
use tokio::task::block_in_place;

use crate::browser::{Browser, OtherSite, auto_submit_page};
use crate::support::{Setup, start_serve};
use crate::{client_findings, login_url, pending_approvals, waiting_client};

const OTHER_HOST: &str = "other-site.test";
/// Alice's console token, given to `toolgate serve` through the environment (the config names the variable).
const ALICE: &str = "alice-console-9d8c7b6a5f4e3d2c1b0a";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_browser_is_refused_without_login_from_another_origin_and_without_the_csrf_token() {
    let setup = Setup::demo(
        "[confirmation]\ntimeout_seconds = 120\n\n[[console.user]]\nname = \"alice\"\ntoken_env = \"ALICE_CONSOLE\"\n",
    );
    let serve = block_in_place(|| start_serve(&setup, &[("ALICE_CONSOLE", ALICE)]));
    let login = block_in_place(|| login_url(&serve));
    let state = setup.state_arg();
    let console = format!("http://{}", serve.authority);
    let client = block_in_place(|| waiting_client(&serve, 1));
    let id = block_in_place(|| {
        crate::support::poll("the pending approval", || {
            pending_approvals(&state).first().and_then(|record| record["id"].as_str().map(str::to_owned))
        })
    });
    let browser = Browser::start(OTHER_HOST).await;

    // Without the login token: 401 on every page, and a wrong token does not log in.
    for path in ["/console", "/console/tools", "/console/audit", "/console/activity", "/console/login?token=wrong"] {
        browser.goto(&format!("{console}{path}")).await;
        assert_eq!(browser.status().await, 401, "{path}");
        let text = browser.text().await;
        assert!(!text.contains("delete_note"), "{path} shows nothing of the pending call: {text}");
    }

    // Log in; the page's forms carry the session's CSRF token.
    browser.goto(&login).await;
    browser.wait_for("#pending article", "the pending approval").await;
    let csrf = browser
        .client
        .find(Locator::Css("#pending input[name=csrf]"))
        .await
        .expect("the CSRF field")
        .attr("value")
        .await
        .expect("value")
        .expect("a token");
    let action = format!("{console}/console/approvals/{id}/approve");
    let site = OtherSite::serve(HashMap::from([
        // Even with the right CSRF token, another site's page is refused by its Origin.
        ("/with-token".to_owned(), auto_submit_page(&action, &[("csrf", &csrf)])),
        ("/without-token".to_owned(), auto_submit_page(&action, &[])),
    ]))
    .await;

    browser.goto(&format!("http://{OTHER_HOST}:{}/with-token", site.port)).await;
    let text = browser.wait_for_text("origin not allowed").await;
    assert!(browser.url().await.starts_with(&console), "the form was posted to the console: {text}");
    assert_eq!(browser.status().await, 403);

    // Another port on loopback is the same site, so the cookie goes along; the missing CSRF token is refused.
    browser.goto(&format!("http://127.0.0.1:{}/without-token", site.port)).await;
    browser.wait_for_text("CSRF token is missing or wrong").await;
    assert_eq!(browser.status().await, 403);

    // The console's own page, its form stripped of the token: refused too.
    browser.goto(&format!("{console}/console")).await;
    let form = browser.wait_for("#pending form", "the approve form").await;
    let stripped = browser.client.execute(
        "const form = document.querySelector('#pending form'); form.querySelector('input[name=csrf]').remove(); \
         form.submit(); return form.action;",
        vec![],
    );
    let posted = stripped.await.expect("the stripped form is submitted");
    assert_eq!(posted.as_str(), Some(action.as_str()), "{form:?}");
    browser.wait_for_text("CSRF token is missing or wrong").await;
    assert_eq!(browser.status().await, 403);

    // Nothing was decided: the call still waits.
    let pending = block_in_place(|| pending_approvals(&state));
    assert_eq!(pending.first().and_then(|record| record["id"].as_str()), Some(id.as_str()), "{pending:?}");

    // Alice logs out of the link's session, logs in with her own token and denies the call under her name.
    browser.goto(&format!("{console}/console")).await;
    browser.wait_for("header form button", "Log out").await.click().await.expect("click");
    browser.wait_for_text("The console session ended.").await;
    browser.goto(&format!("{console}/console/login")).await;
    assert_eq!(browser.status().await, 401, "the form is shown to someone not logged in");
    let field = browser.wait_for("input[name=token]", "the token field").await;
    field.send_keys("not-her-token").await.expect("type");
    browser.client.find(Locator::Css("main form button")).await.expect("Log in").click().await.expect("click");
    browser.wait_for_text("That token opens nothing.").await;
    let field = browser.wait_for("input[name=token]", "the token field").await;
    field.send_keys(ALICE).await.expect("type");
    browser.client.find(Locator::Css("main form button")).await.expect("Log in").click().await.expect("click");
    browser.wait_for("#pending button.deny", "the Deny button").await.click().await.expect("click");
    browser.wait_for_text("No approvals are waiting.").await;
    let denied = block_in_place(|| client_findings(client, "the waiting client"));
    assert_eq!(denied["delete"]["isError"], true, "{denied}");
    assert!(crate::texts(&denied["delete"]).contains("console:alice denied this call"), "{denied}");
    assert_eq!(denied["after"]["isError"], false, "note 1 is still there: {denied}");
    let audit = block_in_place(|| {
        crate::support::toolgate(&["audit", "--json", "--kind", "confirmation", "--state-dir", &state])
    });
    assert!(audit.stdout.contains("\"decided_by\":\"console:alice\""), "{}", audit.stdout);
    assert!(!serve.stderr_text().contains(ALICE), "the token is never logged");
    browser.close().await;
}
