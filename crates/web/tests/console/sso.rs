//! Single sign-on against the real OpenID provider (npm `oidc-provider`, started by test-support): a person logs in
//! with the authorization code and PKCE, sees the queue and approves as themselves (the audit row names them); a
//! person outside the approver group and a person approving their own call are refused, visibly and audited; and
//! the callback's attacks: a wrong `state`, a callback without the browser's login state (no PKCE verifier), a
//! replayed callback, and an ID token for another audience (from a stand-in token endpoint, since the real
//! provider only issues tokens for the client that asks).

use std::net::SocketAddr;
use std::time::Duration;

use serde_json::json;
use toolgate_store::{ApprovalState, PendingApproval, Store};
use toolgate_test_support::oidc::{OidcProvider, ProviderConfig, Signer, generate_keys, public_keys, sign_jwt};
use toolgate_test_support::oidc_login::{ProviderBrowser, log_in};
use toolgate_web::{ConsoleConfig, SsoSpec};

use super::{Reply, TestResult, csrf_of, request, state};

pub(super) struct Sso {
    pub(super) console: super::Console,
    pub(super) provider: OidcProvider,
    /// The console's single sign-on settings, for [`another_console`].
    spec: SsoSpec,
}

/// A second console on the same store with the same single sign-on settings: another gateway process of a fleet,
/// with memory of its own.
pub(super) async fn another_console(sso: &Sso) -> Result<super::Console, Box<dyn std::error::Error>> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    serve(sso.console.store.clone(), tempfile::tempdir()?, listener, sso.spec.clone()).await
}

/// A console with single sign-on at a fresh provider: `alice` is in `approvers`, `bob` is not; the console
/// requires the group and forbids approving one's own call.
pub(super) async fn start_sso() -> Result<Sso, Box<dyn std::error::Error>> {
    start_sso_signing(&["RS256"]).await
}

/// [`start_sso`] at a provider signing its ID tokens with the first of `algorithms`.
async fn start_sso_signing(algorithms: &[&str]) -> Result<Sso, Box<dyn std::error::Error>> {
    start_sso_at(|redirect| console_provider(algorithms, redirect), |sso| sso).await
}

/// A provider with fresh keys of `algorithms` (it signs with the first) and the console's public client
/// (`toolgate-console`, code with PKCE) redirecting to `redirect`, allowed the scopes the console asks for.
pub(super) fn console_provider(algorithms: &[&str], redirect: &str) -> ProviderConfig {
    let keys = tokio::task::block_in_place(|| generate_keys(algorithms));
    ProviderConfig::new(keys).console_client("toolgate-console", redirect, "openid profile email groups")
}

/// A console with single sign-on at the provider `provider` configures (given the console's redirect URI; the
/// scopes and accounts of [`start_sso`] are added), with the console's settings as `sso` changes them.
pub(super) async fn start_sso_at(
    provider: impl FnOnce(&str) -> ProviderConfig,
    sso: impl FnOnce(SsoSpec) -> SsoSpec,
) -> Result<Sso, Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let store = Store::open(dir.path()).await?;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let address = listener.local_addr()?;
    let redirect = format!("http://{address}/console/sso/callback");
    let config = provider(&redirect)
        .scopes(&["groups"])
        .account("alice", "Alice Example", "alice@example.test", &["approvers"])
        .account("bob", "Bob Example", "bob@example.test", &["staff"]);
    let provider = tokio::task::block_in_place(|| OidcProvider::start(&config));
    let spec = SsoSpec {
        scopes: vec!["openid".into(), "profile".into(), "email".into(), "groups".into()],
        approver_group: Some("approvers".into()),
        ..SsoSpec::new(provider.issuer(), "toolgate-console", redirect)
    };
    let spec = sso(spec);
    let console = serve(store, dir, listener, spec.clone()).await?;
    Ok(Sso { console, provider, spec })
}

async fn serve(
    store: Store,
    dir: tempfile::TempDir,
    listener: tokio::net::TcpListener,
    sso: SsoSpec,
) -> Result<super::Console, Box<dyn std::error::Error>> {
    let address = listener.local_addr()?;
    let config = ConsoleConfig {
        login_token: String::new(),
        allowed_hosts: Vec::new(),
        allowed_origins: Vec::new(),
        users: Vec::new(),
        sso: Some(sso),
        forbid_self_approval: true,
    };
    let handle = toolgate_web::ConsoleHandle::new(store.clone(), config);
    let router = handle.router();
    tokio::spawn(
        async move { axum::serve(listener, router.into_make_service_with_connect_info::<SocketAddr>()).await },
    );
    Ok(super::Console { address, store, handle, _dir: dir })
}

/// The `Cookie:` line for the first `Set-Cookie` of `reply` named `name`.
pub(super) fn cookie(reply: &Reply, name: &str) -> Option<String> {
    reply
        .headers
        .iter()
        .filter(|(key, _)| key.eq_ignore_ascii_case("set-cookie"))
        .filter_map(|(_, value)| value.split(';').next())
        .find(|pair| pair.starts_with(&format!("{name}=")) && !pair.ends_with('='))
        .map(|pair| format!("Cookie: {pair}"))
}

/// Starts a login at the console: the provider's authorization URL and the browser's login-state cookie.
pub(super) async fn start_login(sso: &Sso) -> Result<(String, String), Box<dyn std::error::Error>> {
    let reply = request(sso.console.address, "GET", "/console/sso/login", &[], "").await?;
    assert_eq!(reply.status, 303, "{}", reply.body);
    let location = reply.header("location").ok_or("no location")?.to_owned();
    assert!(location.contains("code_challenge_method=S256") && location.contains("nonce="), "{location}");
    Ok((location, cookie(&reply, "toolgate_console_sso").ok_or("no login-state cookie")?))
}

/// The path and query of the callback URL the provider sent the browser to.
pub(super) fn callback_target(url: &str, sso: &Sso) -> Result<String, Box<dyn std::error::Error>> {
    Ok(url.strip_prefix(&format!("http://{}", sso.console.address)).ok_or("callback elsewhere")?.to_owned())
}

/// Logs `account` in through the provider; the session's `Cookie:` line.
async fn sso_login(sso: &Sso, account: &str) -> Result<String, Box<dyn std::error::Error>> {
    let mut browser = ProviderBrowser::new(sso.provider.port());
    let reply = sso_login_with(sso, &mut browser, account).await?;
    cookie(&reply, "toolgate_console").ok_or_else(|| "no session cookie".into())
}

/// Logs `account` in through the provider with `browser`'s cookies there; the console's answer to the callback.
pub(super) async fn sso_login_with(
    sso: &Sso,
    browser: &mut ProviderBrowser,
    account: &str,
) -> Result<Reply, Box<dyn std::error::Error>> {
    let (location, state_cookie) = start_login(sso).await.map_err(|e| format!("start: {e}"))?;
    let login = tokio::task::block_in_place(|| browser.log_in(&location, account))
        .map_err(|e| format!("log_in at {location}: {e}"))?;
    let reply = request(sso.console.address, "GET", &callback_target(&login.redirect, sso)?, &[state_cookie], "")
        .await
        .map_err(|e| format!("callback {}: {e}", login.redirect))?;
    assert_eq!(reply.status, 200, "{}", reply.body);
    Ok(reply)
}

async fn queue(store: &Store, caller: &str) -> Result<toolgate_store::ApprovalId, Box<dyn std::error::Error>> {
    let pending = PendingApproval {
        caller: Some(caller.into()),
        ..toolgate_test_support::pending_approval(&json!({"path": "/tmp/x"}), Duration::from_secs(600))
    };
    store.approvals().create(&pending).await?;
    Ok(pending.id)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_person_logs_in_with_pkce_and_approves_as_themselves() -> TestResult {
    let sso = start_sso().await?;
    let console = &sso.console;
    let page = request(console.address, "GET", "/console/login", &[], "").await?;
    assert!(page.body.contains("/console/sso/login"), "the login page offers single sign-on: {}", page.body);
    let alice = sso_login(&sso, "alice").await?;
    let id = queue(&console.store, "agent").await?;
    let page = request(console.address, "GET", "/console", std::slice::from_ref(&alice), "").await?;
    assert_eq!(page.status, 200);
    assert!(page.body.contains(id.as_str()), "the queue shows the waiting call");
    let csrf = csrf_of(&page.body)?;
    let reply = super::decide_approval(console, &alice, &csrf, &id, "approve").await?;
    assert_eq!(reply.status, 303, "{}", reply.body);
    assert_eq!(state(&console.store, &id).await?, ApprovalState::Approved);
    let record = console.store.approvals().get(&id).await?.ok_or("gone")?;
    assert_eq!(record.decided_by.as_deref(), Some("alice"), "the decision names the person's subject");
    let rows = console.store.query_audit(&toolgate_store::AuditFilter::default()).await?;
    let row = rows.iter().find(|row| row.approval_id.as_deref() == Some(id.as_str())).ok_or("no audit row")?;
    assert_eq!(row.caller, Some(json!({"identity": "alice"})));
    assert_eq!(row.outcome.as_deref(), Some("approved"));
    assert_eq!(row.detail.as_ref().and_then(|detail| detail.get("decided_by_name")), Some(&json!("Alice Example")));
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_id_token_signed_with_eddsa_opens_a_session() -> TestResult {
    // The ID token goes through toolgate-auth's allow-list (the access tokens' asymmetric list), not a shorter list
    // of the console's own: a provider signing with EdDSA (oidc-provider's other default besides the RSA and P-256
    // ones) logs people in as one signing with RS256 does.
    let sso = start_sso_signing(&["EdDSA"]).await?;
    let alice = sso_login(&sso, "alice").await?;
    let page = request(sso.console.address, "GET", "/console", &[alice], "").await?;
    assert_eq!(page.status, 200, "{}", page.body);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_person_outside_the_approver_group_and_self_approval_are_refused_and_audited() -> TestResult {
    let sso = start_sso().await?;
    let console = &sso.console;
    let bob = sso_login(&sso, "bob").await?;
    let id = queue(&console.store, "agent").await?;
    let csrf = csrf_for_page(console, &bob).await?;
    let reply = super::decide_approval(console, &bob, &csrf, &id, "approve").await?;
    assert_eq!(reply.status, 403, "{}", reply.body);
    assert!(reply.body.contains("approver group"), "{}", reply.body);
    assert_eq!(state(&console.store, &id).await?, ApprovalState::Pending, "the call still waits");
    // Alice is an approver, but this call is her own.
    let alice = sso_login(&sso, "alice").await?;
    let own = queue(&console.store, "alice").await?;
    let csrf = csrf_for_page(console, &alice).await?;
    let reply = super::decide_approval(console, &alice, &csrf, &own, "approve").await?;
    assert_eq!(reply.status, 403, "{}", reply.body);
    assert!(reply.body.contains("own call"), "{}", reply.body);
    assert_eq!(state(&console.store, &own).await?, ApprovalState::Pending);
    let rows = console.store.query_audit(&toolgate_store::AuditFilter::default()).await?;
    let refused: Vec<_> = rows
        .iter()
        .filter(|row| row.outcome.as_deref() == Some("refused"))
        .map(|row| (row.approval_id.clone(), row.caller.clone()))
        .collect();
    assert_eq!(
        refused,
        [
            (Some(id.to_string()), Some(json!({"identity": "bob"}))),
            (Some(own.to_string()), Some(json!({"identity": "alice"})))
        ]
    );
    assert!(console.store.verify_audit().await?.is_intact());
    Ok(())
}

pub(super) async fn csrf_for_page(
    console: &super::Console,
    cookie: &str,
) -> Result<String, Box<dyn std::error::Error>> {
    let page = request(console.address, "GET", "/console", &[cookie.to_owned()], "").await?;
    csrf_of(&page.body)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_callback_refuses_a_wrong_state_a_missing_verifier_and_a_replay() -> TestResult {
    let sso = start_sso().await?;
    let console = &sso.console;
    let (location, state_cookie) = start_login(&sso).await?;
    let url = tokio::task::block_in_place(|| log_in(sso.provider.port(), &location, "alice"))?;
    let target = callback_target(&url, &sso)?;
    let no_session = |reply: &Reply| cookie(reply, "toolgate_console").is_none();
    // Another state than the one this browser started with.
    let (good_state, wrong) = {
        let state = target.split("state=").nth(1).ok_or("no state")?.split('&').next().ok_or("no state")?.to_owned();
        (state.clone(), target.replace(&format!("state={state}"), "state=forged"))
    };
    let reply = request(console.address, "GET", &wrong, std::slice::from_ref(&state_cookie), "").await?;
    assert_eq!(reply.status, 400, "{}", reply.body);
    assert!(no_session(&reply) && reply.body.contains("does not match"), "{}", reply.body);
    // Without the browser's login state there is no PKCE verifier: an injected code opens nothing.
    let reply = request(console.address, "GET", &target, &[], "").await?;
    assert_eq!(reply.status, 400, "{}", reply.body);
    assert!(no_session(&reply) && reply.body.contains("PKCE verifier"), "{}", reply.body);
    // The real callback works once; replayed, it is refused before the code goes anywhere.
    let reply = request(console.address, "GET", &target, std::slice::from_ref(&state_cookie), "").await?;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert!(!good_state.is_empty());
    let reply = request(console.address, "GET", &target, &[state_cookie], "").await?;
    assert_eq!(reply.status, 400, "{}", reply.body);
    assert!(no_session(&reply) && reply.body.contains("already completed"), "{}", reply.body);
    Ok(())
}

/// A stand-in provider whose token endpoint answers with an ID token signed by its published key, for `aud`.
async fn stand_in_provider(audience: &'static str) -> Result<String, Box<dyn std::error::Error>> {
    let keys = tokio::task::block_in_place(|| generate_keys(&["RS256"]));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let issuer = format!("http://{}", listener.local_addr()?);
    let private = keys["keys"][0].clone();
    let public = public_keys(&keys);
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH)?.as_secs();
    let claims = json!({"iss": issuer, "sub": "mallory", "aud": audience, "iat": now, "exp": now + 300, "nonce": "x"});
    let header = json!({"alg": "RS256", "kid": private["kid"], "typ": "JWT"});
    let id_token = tokio::task::block_in_place(|| sign_jwt(&header, &claims, Signer::Key(&private)));
    let discovery = json!({
        "issuer": issuer,
        "authorization_endpoint": format!("{issuer}/auth"),
        "token_endpoint": format!("{issuer}/token"),
        "jwks_uri": format!("{issuer}/jwks"),
    });
    let router = axum::Router::new()
        .route("/.well-known/openid-configuration", axum::routing::get(move || async move { axum::Json(discovery) }))
        .route("/jwks", axum::routing::get(move || async move { axum::Json(public) }))
        .route(
            "/token",
            axum::routing::post(move || async move {
                axum::Json(json!({"access_token": "opaque", "token_type": "Bearer", "id_token": id_token}))
            }),
        );
    tokio::spawn(async move { axum::serve(listener, router).await });
    Ok(issuer)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_id_token_for_another_audience_opens_nothing() -> TestResult {
    let issuer = stand_in_provider("another-client").await?;
    let dir = tempfile::tempdir()?;
    let store = Store::open(dir.path()).await?;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let redirect = format!("http://{}/console/sso/callback", listener.local_addr()?);
    let sso = SsoSpec { scopes: vec!["openid".into()], ..SsoSpec::new(issuer, "toolgate-console", redirect) };
    let console = serve(store, dir, listener, sso).await?;
    let reply = request(console.address, "GET", "/console/sso/login", &[], "").await?;
    assert_eq!(reply.status, 303, "{}", reply.body);
    let location = reply.header("location").ok_or("no location")?;
    let state = location.split("state=").nth(1).ok_or("no state")?.split('&').next().ok_or("no state")?;
    let state_cookie = cookie(&reply, "toolgate_console_sso").ok_or("no login-state cookie")?;
    let target = format!("/console/sso/callback?code=anything&state={state}");
    let reply = request(console.address, "GET", &target, &[state_cookie], "").await?;
    assert_eq!(reply.status, 401, "{}", reply.body);
    assert!(reply.body.contains("another audience"), "{}", reply.body);
    assert!(cookie(&reply, "toolgate_console").is_none());
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_an_approver_pins_or_rejects_a_definition_and_the_audit_names_them() -> TestResult {
    let sso = start_sso().await?;
    let console = &sso.console;
    let (_, changed) = crate::tools::rug_pull(&console.store).await?;
    let fingerprint = changed.fingerprint.whole.clone();
    let form = |csrf: &str| format!("csrf={csrf}&upstream=files&tool=delete_file&fingerprint={fingerprint}");
    // Bob is not in the approver group: neither pinning nor rejecting, nor pinning from the onboarding page.
    let bob = sso_login(&sso, "bob").await?;
    let csrf = csrf_for_page(console, &bob).await?;
    for decision in ["approve", "reject"] {
        let target = format!("/console/pins/{decision}");
        let reply = request(console.address, "POST", &target, std::slice::from_ref(&bob), &form(&csrf)).await?;
        assert_eq!(reply.status, 403, "{decision}: {}", reply.body);
        assert!(reply.body.contains("approver group"), "{}", reply.body);
    }
    let onboarding = format!("csrf={csrf}&tool=delete_file&fingerprint={fingerprint}");
    let reply = request(console.address, "POST", "/console/upstreams/files/pin", &[bob], &onboarding).await?;
    assert_eq!(reply.status, 403, "{}", reply.body);
    let waiting = console.store.pins().pending("files", "delete_file").await?;
    assert_eq!(waiting.map(|change| change.proposed.fingerprint.whole), Some(fingerprint.clone()), "still waits");
    // Alice is: her pin goes through, and its row names her.
    let alice = sso_login(&sso, "alice").await?;
    let csrf = csrf_for_page(console, &alice).await?;
    let reply = request(console.address, "POST", "/console/pins/approve", &[alice], &form(&csrf)).await?;
    assert_eq!(reply.status, 303, "{}", reply.body);
    assert!(console.store.pins().pending("files", "delete_file").await?.is_none(), "pinned");
    let rows = console.store.query_audit(&toolgate_store::AuditFilter::default()).await?;
    let pins: Vec<_> = rows
        .iter()
        .filter(|row| row.kind == "pin")
        .map(|row| {
            let detail = row.detail.clone().unwrap_or_default();
            (row.outcome.clone(), row.caller.clone(), detail["decided_by_name"].clone(), detail["attempted"].clone())
        })
        .collect();
    let bob_refused = |attempted: &str| {
        (Some("refused".to_owned()), Some(json!({"identity": "bob"})), json!("Bob Example"), json!(attempted))
    };
    assert_eq!(
        pins,
        [
            bob_refused("approved"),
            bob_refused("rejected"),
            bob_refused("approved"),
            (Some("approved".to_owned()), Some(json!({"identity": "alice"})), json!("Alice Example"), json!(null)),
        ]
    );
    assert!(console.store.verify_audit().await?.is_intact());
    Ok(())
}
