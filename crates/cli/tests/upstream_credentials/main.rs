//! `toolgate serve` in front of an HTTP upstream that requires an OAuth token, with toolgate's own credentials
//! from a real OpenID provider (npm `oidc-provider`, started by the test-support harness): the client credentials
//! grant through the config file's `[upstream.credentials]`.
//!
//! The upstream (`fixtures/oauth_upstream.py`, PyPI `mcp` 2.3) checks every bearer against the provider's keys and
//! records every `Authorization` header it saw, so each test asserts from the record which tokens reached it: one
//! token for many calls, a new one after expiry or a 401, never the client's own. `exchange` does the same for RFC
//! 8693 token exchange on each caller's behalf. Real processes on loopback only.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod exchange;

use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use toolgate_test_support::Peers;
use toolgate_test_support::oidc::{OidcProvider, ProviderConfig, generate_keys};
use toolgate_test_support::toolgate::{Serving, Setup, start_serve};
use toolgate_upstream::{ConnectOptions, Connection, Endpoint};

/// toolgate's client at the provider.
const CLIENT_ID: &str = "toolgate";
const CLIENT_SECRET: &str = "toolgate-client-secret";
/// The scope the upstream's tokens carry.
const SCOPE: &str = "mcp:tools";
/// The token the test's client presents to toolgate: it must never reach the upstream.
const CALLER_TOKEN: &str = "alice-caller-token-0123456789";

/// Kills a child process when dropped.
struct Guard(Child);

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a loopback port");
    listener.local_addr().expect("its address").port()
}

/// The provider, the upstream that trusts it, and toolgate in front of the upstream.
struct Scene {
    provider: OidcProvider,
    config: ProviderConfig,
    upstream_url: String,
    record: PathBuf,
    _upstream: Guard,
    serving: Serving,
    setup: Setup,
}

impl Scene {
    /// Everything started; the upstream's tokens live `token_ttl` seconds.
    fn start(token_ttl: u64) -> Scene {
        let upstream_port = free_port();
        let upstream_url = format!("http://127.0.0.1:{upstream_port}/mcp");
        let config = ProviderConfig::new(generate_keys(&["RS256"]))
            .scopes(&[SCOPE])
            .service_client(CLIENT_ID, CLIENT_SECRET, SCOPE)
            .resource(&upstream_url, SCOPE, token_ttl);
        let provider = OidcProvider::start(&config);
        let setup = Setup::demo("");
        let record = setup.dir.path().join("authorization.jsonl");
        let upstream = start_upstream(upstream_port, provider.issuer(), &upstream_url, &record);
        let callers = "[[caller]]\nname = \"alice\"\ntoken_env = \"ALICE_TOKEN\"\n\n";
        let serving = serve_secured(
            &setup,
            &upstream_url,
            "client_credentials",
            provider.issuer(),
            callers,
            ("ALICE_TOKEN", CALLER_TOKEN),
        );
        Scene { provider, config, upstream_url, record, _upstream: upstream, serving, setup }
    }

    /// A client session with toolgate, as the caller alice.
    async fn client(&self) -> Connection {
        connect_with_bearer(&self.serving, CALLER_TOKEN).await
    }

    /// Every `Authorization` header the upstream saw, in order (`None`: none sent).
    fn seen(&self) -> Vec<Option<String>> {
        let text = std::fs::read_to_string(&self.record).unwrap_or_default();
        text.lines()
            .filter_map(|line| serde_json::from_str::<Value>(line).ok())
            .map(|entry| entry["authorization"].as_str().map(str::to_owned))
            .collect()
    }

    /// The distinct bearer tokens the upstream saw, in order of first use.
    fn tokens(&self) -> Vec<String> {
        let mut tokens: Vec<String> = Vec::new();
        for header in self.seen().into_iter().flatten() {
            let token = header.strip_prefix("Bearer ").unwrap_or(&header).to_owned();
            if !tokens.contains(&token) {
                tokens.push(token);
            }
        }
        tokens
    }

    /// Asserts what must hold whatever the test did: every request to the upstream carried a bearer, none was the
    /// client's, and no token (nor the client secret) is in toolgate's log or its state (the audit included).
    fn assert_tokens_contained(&self) {
        let seen = self.seen();
        assert!(!seen.is_empty(), "the upstream saw no request");
        for header in &seen {
            let header = header.as_deref().unwrap_or_else(|| panic!("a request reached the upstream without a token"));
            assert!(header.starts_with("Bearer "), "not a bearer: {header}");
            assert!(!header.contains(CALLER_TOKEN), "the client's own token reached the upstream");
        }
        let log = self.serving.stderr_text();
        let state = state_text(&self.setup.state());
        for secret in self.tokens().iter().map(String::as_str).chain([CLIENT_SECRET]) {
            assert!(!log.contains(secret), "a token or the client secret is in toolgate's log");
            assert!(!state.contains(secret), "a token or the client secret is in toolgate's state directory");
        }
    }
}

/// Writes `setup`'s config: the upstream `secured` at `upstream_url` with `[upstream.credentials] kind = KIND` at
/// `issuer` (toolgate's client from `UPSTREAM_CLIENT_ID`/`_SECRET`), an HTTP listener, `sections` (its OAuth table,
/// callers) and a rule allowing every call; then starts `toolgate serve` with the client and `caller_env` in its
/// environment, logging at debug (so the token tests can search the log).
fn serve_secured(
    setup: &Setup,
    upstream_url: &str,
    kind: &str,
    issuer: &str,
    sections: &str,
    caller_env: (&str, &str),
) -> Serving {
    let text = format!(
        "[[upstream]]\nname = \"secured\"\nurl = \"{upstream_url}\"\nprefix = false\n\n\
         [upstream.credentials]\nkind = \"{kind}\"\nissuer = \"{issuer}\"\n\
         client_id_env = \"UPSTREAM_CLIENT_ID\"\nclient_secret_env = \"UPSTREAM_CLIENT_SECRET\"\nscope = \"{SCOPE}\"\n\n\
         [listen.http]\nbind = \"127.0.0.1:0\"\n\n{sections}\
         [[policy.rule]]\nid = \"all\"\neffect = \"allow\"\n",
    );
    std::fs::write(&setup.config, text).expect("write the config");
    let env = [
        ("UPSTREAM_CLIENT_ID", CLIENT_ID),
        ("UPSTREAM_CLIENT_SECRET", CLIENT_SECRET),
        caller_env,
        ("TOOLGATE_LOG", "debug"),
    ];
    start_serve(setup, &env)
}

/// The upstream on `port`, trusting `issuer`'s keys for the audience `audience`.
fn start_upstream(port: u16, issuer: &str, audience: &str, record: &Path) -> Guard {
    let peers = Peers::locate();
    let script = toolgate_test_support::fixtures_dir().join("oauth_upstream.py");
    let mut command = std::process::Command::new(peers.python());
    command
        .arg(script)
        .args(["--port", &port.to_string(), "--issuer", issuer, "--audience", audience, "--record"])
        .arg(record)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit());
    let guard = Guard(command.spawn().expect("the upstream starts"));
    let started = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(started.elapsed() < Duration::from_secs(60), "the upstream did not listen on port {port}");
        std::thread::sleep(Duration::from_millis(50));
    }
    guard
}

/// Every file under `dir`, as lossy text, concatenated.
fn state_text(dir: &Path) -> String {
    let mut text = String::new();
    let Ok(entries) = std::fs::read_dir(dir) else { return text };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            text.push_str(&state_text(&path));
        } else if let Ok(bytes) = std::fs::read(&path) {
            text.push_str(&String::from_utf8_lossy(&bytes));
        }
    }
    text
}

/// Calls `whoami` through toolgate: the token's claims, or why it failed (the error or the `isError` text).
async fn whoami(client: &Connection) -> Result<Value, String> {
    let result = client
        .request("tools/call", Some(json!({"name": "whoami", "arguments": {}})))
        .await
        .map_err(|error| error.to_string())?;
    let text = result["content"][0]["text"].as_str().unwrap_or_default().to_owned();
    if result["isError"] == json!(true) {
        return Err(text);
    }
    serde_json::from_str(&text).map_err(|_| format!("an unexpected result: {result}"))
}

/// Calls `whoami` until it succeeds, for at most a minute (toolgate at `serving` may still be connecting); its log
/// is in the failure.
async fn whoami_eventually(client: &Connection, serving: &Serving) -> Value {
    let started = Instant::now();
    loop {
        match whoami(client).await {
            Ok(claims) => return claims,
            Err(failure) if started.elapsed() > Duration::from_secs(60) => {
                panic!("whoami never succeeded: {failure}\ntoolgate log:\n{}", serving.stderr_text())
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    }
}

/// A client session with toolgate at `serving`, presenting `token` as its bearer.
async fn connect_with_bearer(serving: &Serving, token: &str) -> Connection {
    let endpoint = Endpoint::Http {
        url: serving.url.clone(),
        headers: vec![("Authorization".to_owned(), format!("Bearer {token}"))],
    };
    let options = ConnectOptions { request_timeout: Duration::from_secs(30), ..ConnectOptions::default() };
    Connection::connect(&endpoint, options).await.expect("a client connects to toolgate")
}

#[tokio::test(flavor = "multi_thread")]
async fn one_token_serves_many_calls_until_it_expires_and_the_clients_token_never_goes_upstream() {
    let scene = Scene::start(20);
    let client = scene.client().await;
    let claims = whoami_eventually(&client, &scene.serving).await;
    assert_eq!(claims["sub"], json!(CLIENT_ID), "the upstream sees toolgate's own identity");
    for _ in 0..5 {
        assert_eq!(whoami(&client).await.expect("a call with the cached token")["client_id"], json!(CLIENT_ID));
    }
    let requests = scene.seen().len();
    assert!(requests >= 7, "the upstream saw only {requests} requests");
    assert_eq!(scene.tokens().len(), 1, "one token served the session and six calls: {requests} requests");

    // Past its lifetime (20 s, renewed a fifth early), the next call goes out with a new token.
    tokio::time::sleep(Duration::from_secs(21)).await;
    whoami(&client).await.expect("a call after the token expired");
    assert_eq!(scene.tokens().len(), 2, "the expired token was renewed once");
    scene.assert_tokens_contained();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_refused_token_is_renewed_once_and_the_call_goes_through() {
    let mut scene = Scene::start(300);
    let client = scene.client().await;
    whoami_eventually(&client, &scene.serving).await;
    assert_eq!(scene.tokens().len(), 1);

    // New signing keys: the upstream no longer accepts the cached token (401), though it has not expired.
    let rotated = scene.config.clone().keys(generate_keys(&["RS256"]));
    scene.provider.restart(&rotated);
    let claims = whoami(&client).await.expect("the call goes through with a renewed token, at the first try");
    assert_eq!(claims["sub"], json!(CLIENT_ID));
    assert_eq!(scene.tokens().len(), 2, "one new token after the 401");
    whoami(&client).await.expect("later calls use the renewed token");
    assert_eq!(scene.tokens().len(), 2);
    scene.assert_tokens_contained();
}

#[tokio::test(flavor = "multi_thread")]
async fn the_provider_down_fails_calls_closed_with_a_clear_error_and_service_resumes_when_it_is_back() {
    let mut scene = Scene::start(4);
    let client = scene.client().await;
    whoami_eventually(&client, &scene.serving).await;
    scene.provider.stop();
    // The cached token has expired: a call needs a new one, and the provider is gone.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let requests = scene.seen().len();
    let failure = whoami(&client).await.expect_err("no token, no call");
    let issuer = scene.provider.issuer().to_owned();
    assert!(
        failure.contains(&format!("no upstream credentials from {issuer}")),
        "the failure names the missing credentials and the issuer: {failure}"
    );
    assert_eq!(scene.seen().len(), requests, "nothing was sent upstream without a token");

    let config = scene.config.clone();
    scene.provider.restart(&config);
    let claims = whoami_eventually(&client, &scene.serving).await;
    assert_eq!(claims["sub"], json!(CLIENT_ID), "service resumed once the provider was back");
    assert!(scene.upstream_url.starts_with("http://127.0.0.1:"));
    scene.assert_tokens_contained();
}
