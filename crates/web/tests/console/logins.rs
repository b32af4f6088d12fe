//! Who may log in, and how often: failed logins lock an address out (429 with `Retry-After`, a correct token
//! included) while other addresses log in as usual, and users replaced while the console serves (a config reload)
//! change who can log in and end the sessions of removed or changed users at once; a session is accepted by another
//! console on the same store (another process) until it logs out on either, and refused tampered or from another store.
//!
//! The window's end is tested on the limiter itself with its own instants (`login_limit` unit tests); here the
//! window (60 s) never passes.

use toolgate_store::ApprovalState;
use toolgate_web::ConsoleUser;

use super::{ALICE, Console, Reply, TOKEN, TestResult, csrf_of, decide_approval, pending, request, start, state};

/// Bob's console token, configured only after a replacement.
const BOB: &str = "bob-0a1b2c3d4e5f60718293a4b5c6d7e8f9";

fn user(name: &str, token: &str) -> ConsoleUser {
    ConsoleUser { name: name.to_owned(), token_sha256: toolgate_core::fingerprint::digest_bytes(token.as_bytes()) }
}

async fn post_token(console: &Console, token: &str) -> Result<Reply, Box<dyn std::error::Error>> {
    request(console.address, "POST", "/console/login", &[], &format!("token={token}")).await
}

/// The `Cookie:` line of a successful login reply.
fn cookie_of(reply: &Reply) -> Result<String, Box<dyn std::error::Error>> {
    assert_eq!(reply.status, 303, "{}", reply.body);
    let cookie = reply.header("set-cookie").ok_or("no cookie")?;
    Ok(format!("Cookie: {}", cookie.split(';').next().unwrap_or_default()))
}

async fn page_status(console: &Console, cookie: &str) -> Result<u16, Box<dyn std::error::Error>> {
    Ok(request(console.address, "GET", "/console", &[cookie.to_owned()], "").await?.status)
}

#[tokio::test]
async fn failed_logins_lock_the_address_out_even_for_a_correct_token() -> TestResult {
    let console = start().await?;
    // Successful logins never count.
    for _ in 0..6 {
        cookie_of(&post_token(&console, ALICE).await?)?;
    }
    // Five refused logins, through the link and through the form.
    for attempt in 0..5 {
        let reply = if attempt % 2 == 0 {
            request(console.address, "GET", "/console/login?token=guess", &[], "").await?
        } else {
            post_token(&console, "guess").await?
        };
        assert_eq!(reply.status, 401, "attempt {attempt}: {}", reply.body);
    }
    // Now every login from this address is refused before its token is looked at.
    for reply in [
        post_token(&console, "guess").await?,
        post_token(&console, ALICE).await?,
        request(console.address, "GET", &format!("/console/login?token={TOKEN}"), &[], "").await?,
    ] {
        assert_eq!(reply.status, 429, "{}", reply.body);
        assert!(reply.header("set-cookie").is_none());
        let seconds: u64 = reply.header("retry-after").ok_or("no Retry-After")?.parse()?;
        assert!((1..=60).contains(&seconds), "Retry-After: {seconds}");
        assert!(reply.body.contains("Too many failed logins from your address"), "{}", reply.body);
        assert!(reply.header("content-security-policy").is_some(), "the guard's headers too");
    }
    // The login form itself is still shown; only attempts are refused.
    let form = request(console.address, "GET", "/console/login", &[], "").await?;
    assert_eq!(form.status, 401);
    assert!(form.body.contains("type=\"password\""));
    Ok(())
}

/// On Linux every 127.x.y.z address is loopback, so a second client address is available to the test.
#[cfg(target_os = "linux")]
#[tokio::test]
async fn a_locked_out_address_leaves_other_addresses_alone() -> TestResult {
    use std::net::{IpAddr, Ipv4Addr};

    use super::request_from;

    let console = start().await?;
    for _ in 0..5 {
        assert_eq!(post_token(&console, "guess").await?.status, 401);
    }
    assert_eq!(post_token(&console, ALICE).await?.status, 429);
    let other = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2));
    let form = format!("token={ALICE}");
    let reply = request_from(other, console.address, "POST", "/console/login", &[], &form).await?;
    assert_eq!(reply.status, 303, "{}", reply.body);
    // The lockout did not consume the one-time link: it still works, once, from the other address.
    let link = format!("/console/login?token={TOKEN}");
    let reply = request_from(other, console.address, "GET", &link, &[], "").await?;
    assert_eq!(reply.status, 303, "{}", reply.body);
    assert_eq!(post_token(&console, ALICE).await?.status, 429, "the first address is still locked out");
    Ok(())
}

#[tokio::test]
async fn replacing_the_users_changes_who_can_log_in_and_ends_removed_sessions() -> TestResult {
    let console = start().await?;
    let id = pending(&console.store, "delete_file").await?;
    let alice = cookie_of(&post_token(&console, ALICE).await?)?;
    let link = super::login(&console).await?;
    assert_eq!(post_token(&console, BOB).await?.status, 401, "bob is not configured yet");
    let page = request(console.address, "GET", "/console", std::slice::from_ref(&alice), "").await?;
    let csrf = csrf_of(&page.body)?;

    let replaced = console.handle.replace_users(vec![user("bob", BOB)]);
    assert_eq!(
        (replaced.added, replaced.removed, replaced.sessions_ended),
        (vec!["bob".into()], vec!["alice".into()], 1)
    );
    // Alice's session ended: her next request, a decision included, is not logged in.
    assert_eq!(page_status(&console, &alice).await?, 401);
    let reply = decide_approval(&console, &alice, &csrf, &id, "approve").await?;
    assert_eq!(reply.status, 401);
    assert_eq!(state(&console.store, &id).await?, ApprovalState::Pending);
    assert_eq!(post_token(&console, ALICE).await?.status, 401, "her token opens nothing now");
    // Bob logs in; the link's session is untouched.
    let bob = cookie_of(&post_token(&console, BOB).await?)?;
    assert_eq!(page_status(&console, &bob).await?, 200);
    assert_eq!(page_status(&console, &link).await?, 200);

    // Bob's token changes: his session ends and only the new token logs in.
    const BOB_NEW: &str = "bob-ffeeddccbbaa99887766554433221100";
    let replaced = console.handle.replace_users(vec![user("bob", BOB_NEW)]);
    assert_eq!((replaced.changed, replaced.sessions_ended), (vec!["bob".into()], 1));
    assert_eq!(page_status(&console, &bob).await?, 401);
    assert_eq!(post_token(&console, BOB).await?.status, 401);
    let bob = cookie_of(&post_token(&console, BOB_NEW).await?)?;
    assert_eq!(page_status(&console, &bob).await?, 200);
    assert_eq!(page_status(&console, &link).await?, 200);
    Ok(())
}

/// A second console on the same store, as another `toolgate serve` process on it would serve (same users).
async fn beside(console: &Console) -> Result<std::net::SocketAddr, Box<dyn std::error::Error>> {
    let config = toolgate_web::ConsoleConfig {
        login_token: String::new(),
        allowed_hosts: Vec::new(),
        allowed_origins: Vec::new(),
        users: vec![user("alice", ALICE)],
        sso: None,
        forbid_self_approval: false,
    };
    let router = toolgate_web::ConsoleHandle::new(console.store.clone(), config).router();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let address = listener.local_addr()?;
    tokio::spawn(async move {
        axum::serve(listener, router.into_make_service_with_connect_info::<std::net::SocketAddr>()).await
    });
    Ok(address)
}

#[tokio::test]
async fn a_session_is_accepted_by_another_console_on_the_store_until_logged_out_on_either() -> TestResult {
    let console = start().await?;
    let other = beside(&console).await?;
    let id = pending(&console.store, "delete_file").await?;
    for cookie in [super::login(&console).await?, cookie_of(&post_token(&console, ALICE).await?)?] {
        let csrf =
            csrf_of(&request(console.address, "GET", "/console", std::slice::from_ref(&cookie), "").await?.body)?;
        let page = request(other, "GET", "/console", std::slice::from_ref(&cookie), "").await?;
        assert_eq!(page.status, 200, "{}", page.body);
        assert_eq!(csrf_of(&page.body)?, csrf, "the CSRF token is the session's, whichever console renders it");
        // Tampered with (one character of the seal), it is refused by both.
        let (head, last) = cookie.split_at(cookie.len() - 1);
        let tampered = format!("{head}{}", if last == "0" { "1" } else { "0" });
        for address in [console.address, other] {
            assert_eq!(request(address, "GET", "/console", std::slice::from_ref(&tampered), "").await?.status, 401);
        }
        let reply =
            request(other, "POST", "/console/logout", std::slice::from_ref(&cookie), &format!("csrf={csrf}")).await?;
        assert_eq!(reply.status, 200, "{}", reply.body);
        for address in [console.address, other] {
            assert_eq!(request(address, "GET", "/console", std::slice::from_ref(&cookie), "").await?.status, 401);
        }
    }
    // A cookie of a console on another store opens nothing here.
    let elsewhere = start().await?;
    let foreign = super::login(&elsewhere).await?;
    assert_eq!(request(elsewhere.address, "GET", "/console", std::slice::from_ref(&foreign), "").await?.status, 200);
    for address in [console.address, other] {
        assert_eq!(request(address, "GET", "/console", std::slice::from_ref(&foreign), "").await?.status, 401);
    }
    assert_eq!(state(&console.store, &id).await?, ApprovalState::Pending);
    Ok(())
}
