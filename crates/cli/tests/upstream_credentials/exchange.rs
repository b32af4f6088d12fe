//! `[upstream.credentials] kind = "token_exchange"`: toolgate as an OAuth resource server (`[listen.http.oauth]`)
//! trades each caller's own access token at the real provider (RFC 8693, the harness's grant) for a token for the
//! upstream, per call. The upstream (`fixtures/oauth_upstream.py`) checks every bearer against the provider's keys,
//! answers `whoami` with the claims of the token its request carried, and records every `Authorization` header:
//! each caller must see its own subject (toolgate as the actor), even over the one upstream session they share;
//! no caller's own token may ever reach it; exchanged tokens are cached per caller and renewed after expiry; a
//! caller without an OAuth token, and the issuer down, fail closed with a clear error. `/metrics` counts the
//! exchanges, the requests a cached token served and the failures by kind.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};
use toolgate_test_support::oidc::{OidcProvider, ProviderConfig, Signer, generate_keys, jwt_parts, sign_jwt};
use toolgate_test_support::toolgate::raw_http::{self, sample};
use toolgate_test_support::toolgate::{Serving, Setup, poll, run};
use toolgate_upstream::Connection;

use super::{
    CLIENT_ID, CLIENT_SECRET, Guard, SCOPE, connect_with_bearer, free_port, serve_secured, start_upstream, state_text,
    whoami, whoami_eventually,
};

/// toolgate's resource identifier: the audience of the callers' tokens.
const GATEWAY: &str = "https://toolgate.test/mcp";
/// The scope callers' tokens carry.
const CALLER_SCOPE: &str = "tools:call";
/// A service calling toolgate with its own client-credentials token.
const ROBOT: &str = "robot";
const ROBOT_SECRET: &str = "robot-client-secret";
/// A static `[[caller]]` token: no OAuth token to exchange.
const OPS_TOKEN: &str = "ops-static-token-0123456789";

/// The provider, the upstream that trusts it, and toolgate exchanging callers' tokens for it.
struct Scene {
    provider: OidcProvider,
    config: ProviderConfig,
    record: std::path::PathBuf,
    _upstream: Guard,
    serving: Serving,
    setup: Setup,
    /// alice's token (a person's, signed by the provider's key) and the robot's (client credentials).
    alice_token: String,
    robot_token: String,
}

impl Scene {
    /// Everything started; tokens for the upstream live `token_ttl` seconds.
    fn start(token_ttl: u64) -> Scene {
        Scene::start_with(token_ttl, generate_keys(&["RS256"]))
    }

    /// With the provider's signing `keys` (it signs with the first; alice's token is signed with the last).
    fn start_with(token_ttl: u64, keys: Value) -> Scene {
        let upstream_port = free_port();
        let upstream_url = format!("http://127.0.0.1:{upstream_port}/mcp");
        let config = ProviderConfig::new(keys.clone())
            .scopes(&[SCOPE, CALLER_SCOPE])
            .exchange_client(CLIENT_ID, CLIENT_SECRET, SCOPE)
            .service_client(ROBOT, ROBOT_SECRET, CALLER_SCOPE)
            .resource(GATEWAY, CALLER_SCOPE, 600)
            .resource(&upstream_url, SCOPE, token_ttl);
        let provider = OidcProvider::start(&config);
        let robot_token = provider.service_token(ROBOT, ROBOT_SECRET, CALLER_SCOPE, GATEWAY);
        let alice_token = person_token(&keys, provider.issuer(), "alice");
        let setup = Setup::demo("");
        let record = setup.dir.path().join("authorization.jsonl");
        let upstream = start_upstream(upstream_port, provider.issuer(), &upstream_url, &record);
        let sections = format!(
            "[listen.http.oauth]\nissuer = \"{issuer}\"\nresource = \"{GATEWAY}\"\n\n\
             [[caller]]\nname = \"ops\"\ntoken_env = \"OPS_TOKEN\"\n\n",
            issuer = provider.issuer(),
        );
        let serving = serve_secured(
            &setup,
            &upstream_url,
            "token_exchange",
            provider.issuer(),
            &sections,
            ("OPS_TOKEN", OPS_TOKEN),
        );
        Scene { provider, config, record, _upstream: upstream, serving, setup, alice_token, robot_token }
    }

    /// A client session with toolgate presenting `token`.
    async fn client(&self, token: &str) -> Connection {
        connect_with_bearer(&self.serving, token).await
    }

    /// One sample of toolgate's `/metrics` (scraped as the static caller): the token exchange series of the
    /// upstream `secured`, `series` being its name and `extra` any label after `upstream`.
    fn exchange_metric(&self, series: &str, extra: &str) -> u64 {
        let reply = raw_http::metrics(&self.serving.authority, OPS_TOKEN).expect("toolgate answers /metrics");
        assert_eq!(reply.status, 200, "{}", reply.body);
        sample(&reply.body, &format!("{series}{{upstream=\"secured\"{extra}}}"))
    }

    /// Every `(method, Authorization)` the upstream saw, in order.
    fn seen(&self) -> Vec<(String, Option<String>)> {
        let text = std::fs::read_to_string(&self.record).unwrap_or_default();
        text.lines()
            .filter_map(|line| serde_json::from_str::<Value>(line).ok())
            .map(|entry| {
                let method = entry["method"].as_str().unwrap_or_default().to_owned();
                (method, entry["authorization"].as_str().map(str::to_owned))
            })
            .collect()
    }

    /// The distinct bearer tokens the upstream saw whose subject is `sub`.
    fn tokens_of(&self, sub: &str) -> Vec<String> {
        let mut tokens: Vec<String> = Vec::new();
        for (_, header) in self.seen() {
            let Some(token) = header.as_deref().and_then(|header| header.strip_prefix("Bearer ")) else { continue };
            if jwt_parts(token).1["sub"] == json!(sub) && !tokens.iter().any(|known| known == token) {
                tokens.push(token.to_owned());
            }
        }
        tokens
    }

    /// What must hold whatever the test did: every request to the upstream carried a bearer, none was a caller's
    /// own token, and no token (nor the client secret) is in toolgate's log or its state.
    fn assert_tokens_contained(&self) {
        let seen = self.seen();
        assert!(!seen.is_empty(), "the upstream saw no request");
        let callers = [self.alice_token.as_str(), self.robot_token.as_str(), OPS_TOKEN];
        let mut sent = Vec::new();
        for (_, header) in &seen {
            let header = header.as_deref().unwrap_or_else(|| panic!("a request reached the upstream without a token"));
            let token = header.strip_prefix("Bearer ").unwrap_or_else(|| panic!("not a bearer: {header}"));
            assert!(!callers.contains(&token), "a caller's own token reached the upstream");
            sent.push(token.to_owned());
        }
        let log = self.serving.stderr_text();
        let state = state_text(&self.setup.state());
        for secret in sent.iter().map(String::as_str).chain(callers).chain([CLIENT_SECRET, ROBOT_SECRET]) {
            assert!(!log.contains(secret), "a token or a client secret is in toolgate's log");
            assert!(!state.contains(secret), "a token or a client secret is in toolgate's state directory");
        }
    }
}

/// A person's access token for toolgate, as the provider would issue it after a login (signed with its last key).
fn person_token(keys: &Value, issuer: &str, sub: &str) -> String {
    let key = keys["keys"].as_array().and_then(|keys| keys.last()).expect("a signing key");
    let now = SystemTime::now().duration_since(UNIX_EPOCH).expect("a clock after 1970").as_secs();
    let header = json!({"alg": "RS256", "kid": key["kid"], "typ": "at+jwt"});
    let payload = json!({
        "iss": issuer, "sub": sub, "aud": GATEWAY, "scope": CALLER_SCOPE, "client_id": "console",
        "iat": now, "exp": now + 900, "jti": format!("{sub}-{now}"),
    });
    sign_jwt(&header, &payload, Signer::Key(key))
}

#[tokio::test(flavor = "multi_thread")]
async fn each_caller_reaches_the_upstream_as_itself_with_a_cached_exchanged_token_never_its_own() {
    let scene = Scene::start(8);
    let alice = scene.client(&scene.alice_token).await;
    let robot = scene.client(&scene.robot_token).await;
    let claims = whoami_eventually(&alice, &scene.serving).await;
    assert_eq!(claims["sub"], json!("alice"), "the upstream sees alice: {claims}");
    assert_eq!(claims["act"]["sub"], json!(CLIENT_ID), "toolgate is the actor: {claims}");
    let claims = whoami_eventually(&robot, &scene.serving).await;
    assert_eq!(claims["sub"], json!(ROBOT), "the upstream sees the service: {claims}");

    // Interleaved calls over the one upstream session: each answer names its own caller.
    for _ in 0..4 {
        let (for_alice, for_robot) = tokio::join!(whoami(&alice), whoami(&robot));
        assert_eq!(for_alice.expect("alice's call")["sub"], json!("alice"));
        assert_eq!(for_robot.expect("the robot's call")["sub"], json!(ROBOT));
    }
    assert_eq!(scene.tokens_of("alice").len(), 1, "alice's exchanged token is cached across her calls");
    assert_eq!(scene.tokens_of(ROBOT).len(), 1, "the robot's exchanged token is cached across its calls");
    assert!(!scene.tokens_of(CLIENT_ID).is_empty(), "toolgate's own traffic carries its own token");

    // Past the exchanged token's lifetime (8 s, renewed a fifth early), alice's next call is exchanged anew.
    tokio::time::sleep(Duration::from_secs(9)).await;
    assert_eq!(whoami(&alice).await.expect("a call after the token expired")["sub"], json!("alice"));
    assert_eq!(scene.tokens_of("alice").len(), 2, "alice's expired token was renewed once");
    // Each exchanged token the upstream saw is one exchange; every other call was served from the cache.
    let exchanged = scene.tokens_of("alice").len() + scene.tokens_of(ROBOT).len();
    assert_eq!(scene.exchange_metric("toolgate_token_exchanges_total", ""), exchanged as u64);
    assert!(scene.exchange_metric("toolgate_token_exchange_cache_hits_total", "") >= 8, "the interleaved calls");
    scene.assert_tokens_contained();
}

#[tokio::test(flavor = "multi_thread")]
async fn an_exchanged_token_the_upstream_refuses_is_exchanged_again_once_and_the_call_goes_through() {
    // The provider signs with `first` and also publishes `second`, which signed alice's own token.
    let first = generate_keys(&["RS256"]);
    let second = generate_keys(&["RS256"]);
    let both = json!({"keys": [first["keys"][0].clone(), second["keys"][0].clone()]});
    let mut scene = Scene::start_with(300, both);
    let alice = scene.client(&scene.alice_token).await;
    whoami_eventually(&alice, &scene.serving).await;
    assert_eq!(scene.tokens_of("alice").len(), 1);

    // Only `second` from now on: the upstream refuses alice's cached exchanged token (401), signed with `first`,
    // though it has not expired; her own token is still good for a new exchange.
    let rotated = scene.config.clone().keys(second);
    scene.provider.restart(&rotated);
    let claims = whoami(&alice).await.expect("the call goes through with a new exchanged token, at the first try");
    assert_eq!(claims["sub"], json!("alice"));
    assert_eq!(scene.tokens_of("alice").len(), 2, "one new exchange after the 401");
    whoami(&alice).await.expect("later calls use the new exchanged token");
    assert_eq!(scene.tokens_of("alice").len(), 2);
    scene.assert_tokens_contained();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_caller_without_an_oauth_token_fails_closed_audited_and_nothing_is_sent_for_it() {
    let scene = Scene::start(300);
    let alice = scene.client(&scene.alice_token).await;
    whoami_eventually(&alice, &scene.serving).await;
    let ops = scene.client(OPS_TOKEN).await;
    let posts = |scene: &Scene| scene.seen().iter().filter(|(method, _)| method == "POST").count();
    let before = posts(&scene);
    let failure = whoami(&ops).await.expect_err("no token to exchange, no call");
    assert!(
        failure.contains("caller `ops` presented no OAuth access token to exchange") && failure.contains("secured"),
        "the failure says why: {failure}"
    );
    assert_eq!(posts(&scene), before, "nothing was sent upstream for the caller without a token");

    // The audit writer runs in the background: its row may land a moment after the answer.
    let state = scene.setup.state_arg();
    let row = tokio::task::block_in_place(|| {
        poll("the refused call's audit row", || {
            let audit = run(&["audit", "--json", "--kind", "call", "--state-dir", &state]);
            audit
                .stdout
                .lines()
                .filter_map(|line| serde_json::from_str::<Value>(line).ok())
                .find(|row| row["caller"]["identity"] == json!("ops"))
        })
    });
    assert_eq!(row["tool"], json!("whoami"));
    assert_eq!(row["outcome"], json!("is_error"), "the refused call is audited as failed: {row}");
    assert_eq!(row["detail"]["unsent"], json!("no_caller_token"), "the row says why it went nowhere: {row}");
    let failed = scene.exchange_metric("toolgate_token_exchange_failures_total", ",kind=\"no_caller_token\"");
    assert!(failed >= 1, "the caller without a token is counted");
    scene.assert_tokens_contained();
}

#[tokio::test(flavor = "multi_thread")]
async fn the_issuer_down_fails_exchanges_closed_with_a_clear_error_and_they_resume_when_it_is_back() {
    let mut scene = Scene::start(4);
    let alice = scene.client(&scene.alice_token).await;
    whoami_eventually(&alice, &scene.serving).await;
    scene.provider.stop();
    // alice's exchanged token has expired: her next call needs an exchange, and the issuer is gone.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let before = scene.tokens_of("alice").len();
    let failure = whoami(&alice).await.expect_err("no exchanged token, no call");
    let issuer = scene.provider.issuer().to_owned();
    assert!(
        failure.contains(&format!("no upstream credentials from {issuer}: exchanging alice's token")),
        "the failure names the issuer and the caller whose exchange failed: {failure}"
    );
    assert_eq!(scene.tokens_of("alice").len(), before, "nothing was sent for alice without an exchanged token");
    let unreachable = scene.exchange_metric("toolgate_token_exchange_failures_total", ",kind=\"unreachable\"");
    assert!(unreachable >= 1, "the failed exchange is counted as the issuer unreachable");
    let state = scene.setup.state_arg();
    tokio::task::block_in_place(|| {
        poll("the failed call's audit row", || {
            let audit = run(&["audit", "--json", "--kind", "call", "--state-dir", &state]);
            audit.stdout.lines().filter_map(|line| serde_json::from_str::<Value>(line).ok()).find(|row| {
                row["caller"]["identity"] == json!("alice")
                    && row["detail"]["unsent"] == json!("no_upstream_credentials")
            })
        })
    });

    let config = scene.config.clone();
    scene.provider.restart(&config);
    let claims = whoami_eventually(&alice, &scene.serving).await;
    assert_eq!(claims["sub"], json!("alice"), "service resumed once the issuer was back");
    scene.assert_tokens_contained();
}

/// One raw HTTP/1.1 POST of `message` to toolgate with `token` (and `session`): the session id it answers with, and
/// the JSON-RPC answer (from a JSON body, or the last event of an SSE one).
fn post_raw(url: &str, token: &str, session: Option<&str>, message: &Value) -> (Option<String>, Value) {
    use std::io::{Read, Write};
    let rest = url.strip_prefix("http://").expect("an http URL");
    let (authority, path) = rest.split_once('/').expect("a path");
    let mut stream = std::net::TcpStream::connect(authority).expect("toolgate accepts a connection");
    stream.set_read_timeout(Some(Duration::from_secs(60))).expect("a read timeout");
    let body = message.to_string();
    let mut head = format!(
        "POST /{path} HTTP/1.1\r\nHost: {authority}\r\nConnection: close\r\nAuthorization: Bearer {token}\r\n\
         Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\
         MCP-Protocol-Version: 2025-06-18\r\nContent-Length: {}\r\n",
        body.len()
    );
    if let Some(session) = session {
        head.push_str(&format!("Mcp-Session-Id: {session}\r\n"));
    }
    stream.write_all(format!("{head}\r\n{body}").as_bytes()).expect("the request is written");
    let mut raw = Vec::new();
    let _ = stream.read_to_end(&mut raw);
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let session = head.lines().find_map(|line| {
        let (name, value) = line.split_once(':')?;
        name.eq_ignore_ascii_case("mcp-session-id").then(|| value.trim().to_owned())
    });
    // Whatever the framing (length, chunks, SSE), the answer is the last line that parses as JSON (or its `data:`).
    let answer = body
        .lines()
        .rev()
        .filter_map(|line| serde_json::from_str::<Value>(line.trim().trim_start_matches("data:").trim()).ok())
        .find(Value::is_object)
        .unwrap_or(Value::Null);
    (session, answer)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_session_exchanges_the_token_its_caller_presented_last() {
    let scene = Scene::start(300);
    let alice = scene.client(&scene.alice_token).await;
    whoami_eventually(&alice, &scene.serving).await;
    let first = scene.tokens_of("alice").len();
    let url = scene.serving.url.clone();
    let older = scene.alice_token.clone();
    // The same person with a refreshed token (another `jti`) on the session she opened with the older one.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let keys = scene.config.json()["keys"].clone();
    let newer = person_token(&keys, scene.provider.issuer(), "alice");
    assert_ne!(older, newer);
    let answers = tokio::task::spawn_blocking(move || {
        let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}});
        let (session, _) = post_raw(&url, &older, None, &initialize);
        let session = session.expect("toolgate names the session");
        let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        post_raw(&url, &older, Some(&session), &initialized);
        let call = |id: u64, token: &str| {
            let request = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                "params": {"name": "whoami", "arguments": {}}});
            post_raw(&url, token, Some(&session), &request).1
        };
        [call(2, &older), call(3, &newer)]
    })
    .await
    .expect("the raw client ran");
    for answer in &answers {
        let text = answer["result"]["content"][0]["text"].as_str().unwrap_or_default();
        let claims: Value = serde_json::from_str(text).unwrap_or_else(|_| panic!("a whoami result: {answer}"));
        assert_eq!(claims["sub"], json!("alice"));
    }
    assert_eq!(
        scene.tokens_of("alice").len(),
        first + 1,
        "the refreshed token was exchanged on the session opened with the older one"
    );
    scene.assert_tokens_contained();
}
