//! Single sign-on in the browser: people log in to the real `toolgate serve`'s console through the real OpenID
//! provider's login and consent pages (authorization code with PKCE), see the queue, and decide. A person outside
//! the approver group is refused, a person approving their own call is refused (the HTTP listener has no
//! `[[caller]]`s, so the waiting client's identity is `anonymous`, and the provider has a person with that subject),
//! and an approver who opens the approval's link without a session logs in and lands on that approval (not the
//! front page); her approval there lets the waiting client's call through, its audit row naming her. Her logout then
//! ends her session at the provider too (RP-initiated logout, confirmed on the provider's page), so the next login
//! shows the provider's login form again.

use fantoccini::Locator;
use serde_json::Value;
use tokio::task::block_in_place;
use toolgate_test_support::oidc::{OidcProvider, ProviderConfig, generate_keys};

use crate::browser::Browser;
use crate::support::{Setup, start_serve, toolgate};
use crate::{client_findings, texts, waiting_client};

/// Logs `account` in from the console's login page; ends on the pending approvals.
async fn sso_login(browser: &Browser, console: &str, account: &str) {
    browser.goto(&format!("{console}/console/login")).await;
    browser.wait_for("#sso-login", "the single sign-on link").await.click().await.expect("click");
    at_the_provider(browser, account).await;
    browser.wait_for_text("No approvals are waiting.").await;
    assert!(browser.url().await.ends_with("/console"), "back at the console");
}

/// Opens the approval at `path` (a URL-mode confirmation's link) without a session: the console answers with its
/// login page, and logging `account` in through the provider ends on that approval's page, not the front page.
async fn sso_login_from_the_approval_link(browser: &Browser, console: &str, path: &str, account: &str) {
    browser.goto(&format!("{console}{path}")).await;
    assert_eq!(browser.status().await, 401, "no session yet");
    browser.wait_for("#sso-login", "the single sign-on link").await.click().await.expect("click");
    at_the_provider(browser, account).await;
    browser.wait_for("article button.approve", "the approval's own Approve button").await;
    let url = browser.url().await;
    assert!(url.ends_with(path), "on the approval's page after the login: {url}");
}

/// Signs `account` in on the provider's login and consent pages (any password); the provider then sends the
/// browser back to the console's callback.
async fn at_the_provider(browser: &Browser, account: &str) {
    let login = browser.wait_for("input[name=login]", "the provider's login form").await;
    login.send_keys(account).await.expect("type the login");
    let password = browser.client.find(Locator::Css("input[name=password]")).await.expect("the password field");
    password.send_keys("any").await.expect("type the password");
    browser.client.find(Locator::Css("button[type=submit]")).await.expect("Sign-in").click().await.expect("click");
    // The provider's consent page, then back to the console.
    browser.wait_for("input[name=prompt][value=consent]", "the provider's consent page").await;
    browser.client.find(Locator::Css("button[type=submit]")).await.expect("Continue").click().await.expect("consent");
}

/// On the provider's logout confirmation page (reached from the console's logout page), signs out there.
async fn browser_confirms_provider_logout(browser: &Browser) {
    let confirm = browser.wait_for("button[name=logout][value=yes]", "the provider's logout confirmation").await;
    confirm.click().await.expect("confirm the logout");
    browser.wait_for_text("Sign-out Success").await;
}

/// Clicks Approve on the one waiting call; returns the page's text after the answer.
/// Clicks Approve on the waiting call and returns the page the decision leads to, once it says `answer`: the
/// click starts a navigation, and reading the page at once could read the list it was clicked on.
async fn approve_waiting(browser: &Browser, console: &str, answer: &str) -> String {
    browser.goto(&format!("{console}/console")).await;
    browser.wait_for("#pending article", "the pending approval").await;
    browser.client.find(Locator::Css("#pending button.approve")).await.expect("Approve").click().await.expect("click");
    browser.wait_for_text(answer).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn people_log_in_through_the_provider_and_only_an_approver_approves_anothers_call() {
    let port = crate::browser::free_port();
    let console = format!("http://127.0.0.1:{port}");
    let redirect = format!("{console}/console/sso/callback");
    let config = ProviderConfig::new(block_in_place(|| generate_keys(&["RS256"])))
        .scopes(&["groups"])
        .console_client("toolgate-console", &redirect, "openid profile email groups")
        .account("alice", "Alice Example", "alice@example.test", &["approvers"])
        .account("bob", "Bob Example", "bob@example.test", &["staff"])
        .account("anonymous", "Anne Onymous", "anne@example.test", &["approvers"]);
    let provider = block_in_place(|| OidcProvider::start(&config));
    let sso = format!(
        "[console]\nforbid_self_approval = true\n\n[console.sso]\nissuer = \"{}\"\nclient_id = \"toolgate-console\"\n\
         redirect_uri = \"{redirect}\"\nscopes = [\"openid\", \"profile\", \"email\", \"groups\"]\n\
         approver_group = \"approvers\"\n\n[confirmation]\ntimeout_seconds = 120\n",
        provider.issuer()
    );
    let setup = Setup::demo(&sso);
    let text = std::fs::read_to_string(&setup.config).expect("the config");
    std::fs::write(&setup.config, text.replace("127.0.0.1:0", &format!("127.0.0.1:{port}"))).expect("the config");
    let serve = block_in_place(|| start_serve(&setup, &[]));
    let state = setup.state_arg();

    // Everyone logs in first, so the decisions follow the call closely (the client does not wait forever).
    let bob = Browser::start("other-site.test").await;
    sso_login(&bob, &console, "bob").await;
    let anne = Browser::start("other-site.test").await;
    sso_login(&anne, &console, "anonymous").await;
    let mut client = block_in_place(|| waiting_client(&serve, 3));
    // The call waits in the queue (or the client's own output says why not).
    let started = std::time::Instant::now();
    while block_in_place(|| crate::pending_approvals(&state)).is_empty() {
        if client.try_wait().ok().flatten().is_some() || started.elapsed() > std::time::Duration::from_secs(60) {
            let _ = client.kill();
            let output = client.wait_with_output().expect("the client's output");
            panic!("no call waits: {output:?}\nserve: {}", serve.stderr_text());
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }

    // Bob is not in the approver group: he sees the call and may not approve it.
    let refused = approve_waiting(&bob, &console, "approver group").await;
    assert!(refused.contains("Not allowed") && refused.contains("approver group"), "{refused}");
    bob.close().await;

    // Anne's subject is the waiting client's identity: her own call.
    let refused = approve_waiting(&anne, &console, "own call").await;
    assert!(refused.contains("Not allowed") && refused.contains("own call"), "{refused}");
    anne.close().await;

    // Alice opens the approval's link without a session, logs in through the provider and lands on that approval,
    // where she approves: the waiting client's call goes through.
    let waiting = block_in_place(|| crate::pending_approvals(&state));
    let id = waiting.first().and_then(|approval| approval["id"].as_str()).expect("the waiting approval's id");
    let alice = Browser::start("other-site.test").await;
    sso_login_from_the_approval_link(&alice, &console, &format!("/console/approvals/{id}"), "alice").await;
    alice.client.find(Locator::Css("article button.approve")).await.expect("Approve").click().await.expect("click");
    let answered = alice.wait_for_text("Approved by alice").await;
    assert!(!answered.contains("Not allowed"), "{answered}");
    let approved = block_in_place(|| client_findings(client, "the approved client"));
    assert_eq!(approved["delete"]["isError"], false, "{approved}");
    assert!(texts(&approved["delete"]).contains("deleted note 3"), "{approved}");

    // Alice logs out: the console's page goes on to the provider's logout (not a redirect of the form's POST, which
    // the console's `form-action 'self'` would stop), she confirms there, and her session at the provider ends: the
    // next login asks who she is instead of going straight back to the console.
    alice
        .client
        .find(Locator::Css("form[action='/console/logout'] button"))
        .await
        .expect("Log out")
        .click()
        .await
        .expect("click");
    browser_confirms_provider_logout(&alice).await;
    alice.goto(&format!("{console}/console")).await;
    assert_eq!(alice.status().await, 401, "the console session ended");
    alice.goto(&format!("{console}/console/sso/login")).await;
    alice.wait_for("input[name=login]", "the provider's login form again").await;
    alice.close().await;

    // The audit rows name each person: two refusals, then Alice's approval.
    let audit = block_in_place(|| toolgate(&["audit", "--json", "--kind", "confirmation", "--state-dir", &state]));
    let rows: Vec<(String, String)> = audit
        .stdout
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|row| row["detail"]["decided_by"].is_string())
        .map(|row| {
            let text = |value: &Value| value.as_str().unwrap_or_default().to_owned();
            (text(&row["outcome"]), text(&row["caller"]["identity"]))
        })
        .collect();
    let expected = [("refused", "bob"), ("refused", "anonymous"), ("approved", "alice")];
    let expected: Vec<(String, String)> = expected.iter().map(|(a, b)| ((*a).to_owned(), (*b).to_owned())).collect();
    assert_eq!(rows, expected, "{}", audit.stdout);
    let verify = block_in_place(|| toolgate(&["audit", "verify", "--state-dir", &state]));
    assert_eq!(verify.code, Some(0), "{verify:?}");
    drop(provider);
}
