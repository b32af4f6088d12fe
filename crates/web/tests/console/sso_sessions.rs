//! A single sign-on session ends with the identity that opened it: it lasts no longer than the ID token (or the
//! configured maximum, when shorter), and its logout also ends the person's session at the real provider
//! (RP-initiated logout, hinted with the ID token the console kept server-side, in the store, so another process of
//! the fleet sends it too), so the next login there asks who they are again.

use std::time::Duration;

use serde_json::json;
use toolgate_test_support::oidc::{ProviderConfig, generate_keys, jwt_parts};
use toolgate_test_support::oidc_login::ProviderBrowser;

use super::sso::{
    Sso, another_console, callback_target, console_provider, cookie, csrf_for_page, sso_login_with, start_login,
    start_sso_at,
};
use super::{Reply, TestResult, request};

/// The `Max-Age` of the session cookie a login set.
fn max_age(reply: &Reply) -> Result<u64, Box<dyn std::error::Error>> {
    let set = reply
        .headers
        .iter()
        .filter(|(key, _)| key.eq_ignore_ascii_case("set-cookie"))
        .map(|(_, value)| value)
        .find(|value| value.starts_with("toolgate_console="))
        .ok_or("no session cookie")?;
    let age = set.split("Max-Age=").nth(1).ok_or("no Max-Age")?.split(';').next().ok_or("no Max-Age")?;
    Ok(age.trim().parse()?)
}

/// Logs alice in with a fresh browser; the callback's answer and the session's `Cookie:` line.
async fn alice(sso: &Sso) -> Result<(Reply, String), Box<dyn std::error::Error>> {
    let reply = sso_login_with(sso, &mut ProviderBrowser::new(sso.provider.port()), "alice").await?;
    let session = cookie(&reply, "toolgate_console").ok_or("no session cookie")?;
    Ok((reply, session))
}

/// Polls `/console` with `session` until it is refused (401), for at most `bound`; the last status seen.
async fn status_once_expired(sso: &Sso, session: &str, bound: Duration) -> Result<u16, Box<dyn std::error::Error>> {
    let deadline = tokio::time::Instant::now() + bound;
    loop {
        let page = request(sso.console.address, "GET", "/console", &[session.to_owned()], "").await?;
        if page.status != 200 || tokio::time::Instant::now() > deadline {
            return Ok(page.status);
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_lasts_no_longer_than_the_id_token_nor_the_configured_maximum() -> TestResult {
    // ID tokens valid for 8 seconds: the session and its cookie end with the token, not 12 hours later.
    let sso = start_sso_at(|redirect| console_provider(&["RS256"], redirect).ttl("IdToken", 8), |sso| sso).await?;
    let (reply, session) = alice(&sso).await?;
    assert!(max_age(&reply)? <= 8, "the cookie ends with the ID token: {:?}", reply.headers);
    let page = request(sso.console.address, "GET", "/console", std::slice::from_ref(&session), "").await?;
    assert_eq!(page.status, 200, "the session works while the token is valid: {}", page.body);
    assert_eq!(status_once_expired(&sso, &session, Duration::from_secs(60)).await?, 401, "ended with the token");

    // A configured maximum shorter than the token's hour bounds it too.
    let sso = start_sso_at(
        |redirect| console_provider(&["RS256"], redirect),
        |sso| toolgate_web::SsoSpec { max_session: Duration::from_secs(3), ..sso },
    )
    .await?;
    let (reply, session) = alice(&sso).await?;
    assert!(max_age(&reply)? <= 3, "the cookie ends at the configured maximum: {:?}", reply.headers);
    assert_eq!(status_once_expired(&sso, &session, Duration::from_secs(60)).await?, 401, "ended at the maximum");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn logging_out_ends_the_persons_session_at_the_provider_too() -> TestResult {
    // The console's login page is where the provider sends the browser once the person's session there ended.
    let keys = tokio::task::block_in_place(|| generate_keys(&["RS256"]));
    let sso = start_sso_at(
        |redirect| {
            let post_logout = redirect.replace("/console/sso/callback", "/console/login");
            ProviderConfig::new(keys).client(json!({
                "client_id": "toolgate-console",
                "grant_types": ["authorization_code"],
                "response_types": ["code"],
                "redirect_uris": [redirect],
                "post_logout_redirect_uris": [post_logout],
                "token_endpoint_auth_method": "none",
                "scope": "openid profile email groups",
            }))
        },
        |sso| toolgate_web::SsoSpec {
            post_logout_redirect_uri: Some(sso.redirect_uri.replace("/console/sso/callback", "/console/login")),
            ..sso
        },
    )
    .await?;
    let console = &sso.console;
    let mut browser = ProviderBrowser::new(sso.provider.port());
    let reply = sso_login_with(&sso, &mut browser, "alice").await?;
    let session = cookie(&reply, "toolgate_console").ok_or("no session cookie")?;
    // While alice's session at the provider lives, another login there goes through without asking who she is.
    let asks_again = |browser: &mut ProviderBrowser, location: String| {
        tokio::task::block_in_place(|| browser.log_in(&location, "alice")).map(|login| login.asked_to_log_in)
    };
    let (location, _) = start_login(&sso).await?;
    assert!(!asks_again(&mut browser, location)?, "the provider session is open");

    // The person logs out on another process of the fleet (the same store, its own memory).
    let other = another_console(&sso).await?;
    let csrf = csrf_for_page(&other, &session).await?;
    let reply =
        request(other.address, "POST", "/console/logout", std::slice::from_ref(&session), &format!("csrf={csrf}"))
            .await?;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let page = request(console.address, "GET", "/console", std::slice::from_ref(&session), "").await?;
    assert_eq!(page.status, 401, "the console session ended at once, on the process that opened it too");
    let logout = reply
        .body
        .split("id=\"provider-logout\" href=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .ok_or("the logout page leads on to the provider's logout")?
        .replace("&amp;", "&");
    assert!(logout.starts_with(&format!("{}/", sso.provider.issuer())), "{logout}");
    // The ID token the provider issued at login, kept server-side with the session in the store, hints whose session
    // ends (without it the provider may refuse the post-logout redirect or not know whom to log out).
    let hint = logout
        .split(['?', '&'])
        .find_map(|pair| pair.strip_prefix("id_token_hint="))
        .ok_or("the logout carries id_token_hint")?;
    let (_, claims) = jwt_parts(hint);
    assert_eq!((claims["iss"].as_str(), claims["sub"].as_str()), (Some(sso.provider.issuer()), Some("alice")));
    assert_eq!(claims["aud"], "toolgate-console", "{claims}");
    assert!(!session.contains(hint), "the ID token stays on the server");
    let after = tokio::task::block_in_place(|| browser.log_out(&logout))?;
    assert_eq!(callback_target(&after, &sso)?, "/console/login", "back at the console's login page");

    let (location, _) = start_login(&sso).await?;
    assert!(asks_again(&mut browser, location)?, "the provider session ended: the next login asks who it is");
    Ok(())
}
