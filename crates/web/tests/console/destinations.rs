//! Where a login leads: a person who opens an approval's link without a session gets the login page, and logging
//! in (the password form, the one-time link, or single sign-on, whose destination rides in the sealed login state)
//! leads to that approval; a destination that is not a same-origin console path (an absolute URL, `//host`, a
//! backslash, an encoded slash or dot segment, a path outside `/console/`) is refused and replaced by the front page.

use super::sso::{Sso, callback_target, cookie, start_sso};
use super::{ALICE, Console, TOKEN, TestResult, encoded, pending, request, start};
use toolgate_test_support::oidc_login::ProviderBrowser;

/// Destinations a login must never lead to, as a person (or an attacker's link) could write them.
const REFUSED: [&str; 14] = [
    "https://evil.test/console/approvals/1",
    "//evil.test/console",
    "/\\evil.test",
    "/console/\\evil.test",
    "\\\\evil.test",
    "/console/%2e%2e/%2e%2e/evil",
    "/console/..//evil.test",
    "/console/%2F%2Fevil.test",
    "/console/%5Cevil.test",
    "/console//evil.test",
    "/consolex/approvals/1",
    "/other/approvals/1",
    "javascript:alert(1)",
    "/console/approvals/1%0d%0aSet-Cookie:%20x=1",
];

async fn post_login(console: &Console, token: &str, next: &str) -> Result<super::Reply, Box<dyn std::error::Error>> {
    let body = format!("token={token}&next={}", encoded(next));
    request(console.address, "POST", "/console/login", &[], &body).await
}

#[tokio::test]
async fn a_password_login_from_an_approval_link_leads_back_to_that_approval_and_only_to_console_paths() -> TestResult {
    let console = start().await?;
    let id = pending(&console.store, "delete_file").await?;
    let path = format!("/console/approvals/{id}");

    // Without a session the approval's link answers with the login page, which carries the destination.
    let page = request(console.address, "GET", &path, &[], "").await?;
    assert_eq!(page.status, 401, "{}", page.body);
    assert!(page.body.contains(&format!("name=\"next\" value=\"{path}\"")), "{}", page.body);
    assert!(page.body.contains(&format!("id=\"next-link\" href=\"{path}\"")), "a same-site link: {}", page.body);

    // The form's login goes there, with the session.
    let reply = post_login(&console, ALICE, &path).await?;
    assert_eq!((reply.status, reply.header("location")), (303, Some(path.as_str())), "{}", reply.body);
    let session = cookie(&reply, "toolgate_console").ok_or("no session cookie")?;
    let shown = request(console.address, "GET", &path, std::slice::from_ref(&session), "").await?;
    assert_eq!(shown.status, 200, "{}", shown.body);
    assert!(shown.body.contains("/approve\""), "the approval's own page: {}", shown.body);
    // Logged in already, the login page goes straight on.
    let again =
        request(console.address, "GET", &format!("/console/login?next={}", encoded(&path)), &[session], "").await?;
    assert_eq!(again.header("location"), Some(path.as_str()));

    // A wrong token keeps the destination for the next try.
    let wrong = post_login(&console, "guess", &path).await?;
    assert_eq!(wrong.status, 401);
    assert!(wrong.body.contains(&format!("name=\"next\" value=\"{path}\"")), "{}", wrong.body);

    // Every other kind of destination: the front page.
    for refused in REFUSED {
        let reply = post_login(&console, ALICE, refused).await?;
        assert_eq!((reply.status, reply.header("location")), (303, Some("/console")), "{refused}: {:?}", reply.headers);
        let page =
            request(console.address, "GET", &format!("/console/login?next={}", encoded(refused)), &[], "").await?;
        assert!(!page.body.contains("name=\"next\""), "{refused} is not carried: {}", page.body);
    }

    // The one-time link takes a destination too.
    let link = format!("/console/login?token={TOKEN}&next={}", encoded(&path));
    let reply = request(console.address, "GET", &link, &[], "").await?;
    assert_eq!((reply.status, reply.header("location")), (303, Some(path.as_str())));
    Ok(())
}

/// Starts a single sign-on login asking for `next`, logs `alice` in at the provider, and returns where the
/// console's answer to the callback goes on to.
async fn sso_destination(sso: &Sso, next: &str) -> Result<String, Box<dyn std::error::Error>> {
    let start = format!("/console/sso/login?next={}", encoded(next));
    let reply = request(sso.console.address, "GET", &start, &[], "").await?;
    assert_eq!(reply.status, 303, "{}", reply.body);
    let location = reply.header("location").ok_or("no location")?.to_owned();
    // Never in what the provider sees and echoes: only in the sealed login state.
    assert!(!location.contains("next") && !location.contains("approvals"), "{location}");
    let state = cookie(&reply, "toolgate_console_sso").ok_or("no login-state cookie")?;
    let mut browser = ProviderBrowser::new(sso.provider.port());
    let login = tokio::task::block_in_place(|| browser.log_in(&location, "alice"))?;
    let answer = request(sso.console.address, "GET", &callback_target(&login.redirect, sso)?, &[state], "").await?;
    assert_eq!(answer.status, 200, "{}", answer.body);
    let refresh = answer.body.split("content=\"0;url=").nth(1).and_then(|rest| rest.split('"').next());
    Ok(refresh.ok_or("no refresh")?.replace("&amp;", "&"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_single_sign_on_login_carries_its_destination_in_the_login_state_and_only_a_console_path() -> TestResult {
    let sso = start_sso().await?;
    let id = pending(&sso.console.store, "delete_file").await?;
    let path = format!("/console/approvals/{id}");
    let page = request(sso.console.address, "GET", &path, &[], "").await?;
    assert_eq!(page.status, 401);
    let link = format!("id=\"sso-login\" href=\"/console/sso/login?next={}\"", encoded(&path));
    assert!(page.body.contains(&link), "{}", page.body);

    assert_eq!(sso_destination(&sso, &path).await?, path);
    for refused in ["//evil.test/console", "https://evil.test/", "/console/%2e%2e/x", "/\\evil.test", "/elsewhere"] {
        assert_eq!(sso_destination(&sso, refused).await?, "/console", "{refused}");
    }
    Ok(())
}

/// Every console page a person opens leads back to itself after the login, not only an approval's: the audit log
/// with its filters, the tools, an upstream's onboarding page, the activity chart and the front page. What a script
/// fetches (the pending list's fragment) gets the plain 401.
#[tokio::test]
async fn every_console_page_leads_back_to_itself_after_the_login() -> TestResult {
    let console = start().await?;
    for path in [
        "/console/audit?tool=delete_file&verdict=deny",
        "/console/tools",
        "/console/upstreams/files",
        "/console/activity?span=day",
    ] {
        let page = request(console.address, "GET", path, &[], "").await?;
        assert_eq!(page.status, 401, "{path}: {}", page.body);
        let carried = path.replace('&', "&amp;");
        assert!(page.body.contains(&format!("name=\"next\" value=\"{carried}\"")), "{path}: {}", page.body);
        let reply = post_login(&console, ALICE, path).await?;
        assert_eq!((reply.status, reply.header("location")), (303, Some(path)), "{}", reply.body);
    }
    let front = request(console.address, "GET", "/console", &[], "").await?;
    assert_eq!(front.status, 401);
    assert!(!front.body.contains("name=\"next\" value=\"/console/"), "{}", front.body);
    let fragment = request(console.address, "GET", "/console/fragment/pending", &[], "").await?;
    assert_eq!(fragment.status, 401);
    assert!(!fragment.body.contains("name=\"next\""), "{}", fragment.body);
    Ok(())
}
