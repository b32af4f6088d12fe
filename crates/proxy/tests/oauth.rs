//! toolgate as an OAuth 2.1 resource server, against a real OpenID provider (npm `oidc-provider`, started by
//! `toolgate_test_support::oidc`): the protected-resource metadata and the 401 that points to it, tokens with and
//! without the required scope (200 / 403 `insufficient_scope`), for another audience, expired, from another
//! issuer, signed with an unknown key, `alg: none`, HS256 with a guessed secret, a key rotation while serving, and
//! the provider down (fails closed, recovers); each with the audit row naming the identity or the reason. The
//! upstream is a small HTTP MCP server that records every header it receives: no client token ever reaches it.
//! A legacy session opened with one identity's token is refused to another identity's. The Python SDK 2.3 client's own
//! OAuth support (`oauth_client.py`) finds the provider from the 401, gets a client-credentials token and calls.
//!
//! Waits are hang guards; no test asserts how long anything took.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::http::{HeaderMap, StatusCode};
use serde_json::{Value, json};
use toolgate_core::policy::PolicySpec;
use toolgate_proxy::session::SessionFactory;
use toolgate_spec::{Endpoint, GuardrailSpec, HttpListenerSpec, Limits, OAuthSpec, UpstreamSpec};
use toolgate_store::{AuditFilter, AuditKind, Store};
use toolgate_test_support::oidc::{OidcProvider, ProviderConfig, Signer, generate_keys, sign_jwt};

use support::GUARD;

/// Headers the recording upstream received, one map per request.
type Seen = Arc<Mutex<Vec<HeaderMap>>>;

/// A minimal legacy MCP server over HTTP (one `echo` tool) that keeps every request's headers.
async fn recording_upstream() -> (String, Seen) {
    let seen: Seen = Arc::default();
    let kept = Arc::clone(&seen);
    let app = axum::Router::new().fallback(move |headers: HeaderMap, body: String| {
        let kept = Arc::clone(&kept);
        async move {
            kept.lock().unwrap().push(headers);
            let Ok(message) = serde_json::from_str::<Value>(&body) else {
                return (StatusCode::METHOD_NOT_ALLOWED, String::new());
            };
            let Some(id) = message.get("id").cloned() else { return (StatusCode::ACCEPTED, String::new()) };
            let answer = match message["method"].as_str().unwrap_or_default() {
                "initialize" => json!({"result": {
                    "protocolVersion": message["params"]["protocolVersion"].as_str().unwrap_or("2025-06-18"),
                    "capabilities": {"tools": {}},
                    "serverInfo": {"name": "recorder", "version": "1"},
                }}),
                "tools/list" => json!({"result": {"tools": [{
                    "name": "echo", "description": "answers echoed",
                    "inputSchema": {"type": "object"},
                    "annotations": {"readOnlyHint": true, "openWorldHint": false},
                }]}}),
                "tools/call" => json!({"result": {"content": [{"type": "text", "text": "echoed"}]}}),
                "ping" => json!({"result": {}}),
                _ => json!({"error": {"code": -32601, "message": "method not found"}}),
            };
            let mut answer = answer;
            answer["jsonrpc"] = json!("2.0");
            answer["id"] = id;
            (StatusCode::OK, answer.to_string())
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    (url, seen)
}

fn provider_config(keys: Value, resource: &str) -> ProviderConfig {
    ProviderConfig::new(keys)
        .scopes(&["tools:call", "tools:admin"])
        .service_client("svc", "svc-secret", "tools:call tools:admin")
        .service_client("other", "other-secret", "tools:call")
        .service_client("reader", "reader-secret", "tools:admin")
        .resource(resource, "tools:call tools:admin", 300)
        .resource("http://127.0.0.1:1/elsewhere", "tools:call", 300)
}

fn now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs()
}

struct Setup {
    url: String,
    base: String,
    store: Store,
    _state: tempfile::TempDir,
    seen: Seen,
    gateway: toolgate_proxy::Gateway,
}

async fn serve(issuer: &str, listener: tokio::net::TcpListener) -> Setup {
    let addr = listener.local_addr().unwrap();
    let resource = format!("http://{addr}/mcp");
    let (upstream_url, seen) = recording_upstream().await;
    let upstream = UpstreamSpec::new("rec", Endpoint::http(upstream_url));
    let state = tempfile::tempdir().unwrap();
    let store = support::gateway_store(state.path()).await;
    let guardrails = GuardrailSpec { policy: PolicySpec::permissive(), ..GuardrailSpec::default() };
    let gateway = support::start_guarded(vec![upstream], guardrails, Some(store.clone())).await;
    let mut oauth = OAuthSpec::new(issuer, &resource);
    oauth.required_scopes = vec!["tools:call".into()];
    // Short, so the rotation and recovery below need no long waits; the default is 10 s.
    oauth.jwks_min_refetch = Duration::from_millis(500);
    let spec = HttpListenerSpec { oauth: Some(oauth), ..HttpListenerSpec::new(addr) };
    let factory: Arc<dyn SessionFactory> = Arc::new(gateway.clone());
    let router = toolgate_proxy::downstream::http::router(factory, &spec, &Limits::default(), &[]);
    tokio::spawn(toolgate_proxy::downstream::http::serve(listener, router, std::future::pending()));
    Setup { url: resource, base: format!("http://{addr}"), store, _state: state, seen, gateway }
}

fn http() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder().no_proxy().build().unwrap()
}

/// One 2026-07-28 `tools/call` of `echo` with `token`: the status, `WWW-Authenticate`, and the body.
async fn call(url: &str, token: Option<&str>) -> (StatusCode, String, String) {
    let meta = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {}});
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "echo", "arguments": {}, "_meta": meta}});
    let mut request = http()
        .post(url)
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "tools/call")
        .header("mcp-name", "echo")
        .body(body.to_string());
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    let response = tokio::time::timeout(GUARD, request.send()).await.unwrap().unwrap();
    let status = response.status();
    let challenge =
        response.headers().get("www-authenticate").map(|value| value.to_str().unwrap().to_owned()).unwrap_or_default();
    let text = tokio::time::timeout(GUARD, response.text()).await.unwrap().unwrap();
    (status, challenge, text)
}

/// The `authentication` rows so far, oldest first, as (identity, outcome).
async fn refusals(store: &Store) -> Vec<(Option<String>, String)> {
    store.audit().flush().await.unwrap();
    let filter = AuditFilter { kind: Some(AuditKind::Authentication), ..AuditFilter::default() };
    let rows = store.query_audit(&filter).await.unwrap();
    let mut rows: Vec<_> = rows
        .into_iter()
        .map(|row| {
            let identity = row.caller.as_ref().and_then(|caller| caller["identity"].as_str()).map(str::to_owned);
            (row.seq, identity, row.outcome.unwrap_or_default())
        })
        .collect();
    rows.sort_by_key(|row| row.0);
    rows.into_iter().map(|(_, identity, outcome)| (identity, outcome)).collect()
}

/// Asserts a refusal (401 `invalid_token`, pointing to the metadata) and that its audit row names `reason`.
async fn assert_refused(setup: &Setup, token: &str, reason: &str) {
    let (status, challenge, body) = call(&setup.url, Some(token)).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{reason}: {body}");
    assert!(challenge.contains("error=\"invalid_token\""), "{reason}: {challenge}");
    assert!(challenge.contains(&format!("error_description=\"{reason}\"")), "{reason}: {challenge}");
    let rows = refusals(&setup.store).await;
    assert_eq!(rows.last(), Some(&(None, format!("refused: {reason}"))), "{rows:?}");
}

/// A token as the provider would issue it for `svc` (claims right), signed with `key` under `kid`.
fn forged(key: &Value, claims: Value) -> String {
    sign_jwt(&json!({"alg": "RS256", "typ": "at+jwt", "kid": key["kid"]}), &claims, Signer::Key(key))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn access_tokens_are_accepted_or_refused_as_they_must_be_with_an_audit_row_each() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let resource = format!("http://{}/mcp", listener.local_addr().unwrap());
    let first_keys = generate_keys(&["RS256"]);
    let mut provider = OidcProvider::start(&provider_config(first_keys.clone(), &resource));
    let issuer = provider.issuer().to_owned();
    let setup = serve(&issuer, listener).await;

    // RFC 9728 metadata at the path-suffixed location, and the 401 without a token points there.
    let metadata: Value = http()
        .get(format!("{}/.well-known/oauth-protected-resource/mcp", setup.base))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(metadata["resource"], resource);
    assert_eq!(metadata["authorization_servers"], json!([issuer]));
    let (status, challenge, _) = call(&setup.url, None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert!(
        challenge.contains(&format!("resource_metadata=\"{}/.well-known/oauth-protected-resource/mcp\"", setup.base)),
        "{challenge}"
    );
    assert!(challenge.contains("scope=\"tools:call\""), "{challenge}");

    // With the scope: answered, and the call's row names the service.
    let token = provider.service_token("svc", "svc-secret", "tools:call", &resource);
    let (status, _, body) = call(&setup.url, Some(&token)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert!(body.contains("echoed"), "{body}");
    setup.store.audit().flush().await.unwrap();
    let calls =
        setup.store.query_audit(&AuditFilter { kind: Some(AuditKind::Call), ..AuditFilter::default() }).await.unwrap();
    assert_eq!(calls.last().and_then(|row| row.caller.clone()).unwrap()["identity"], "svc", "{calls:?}");

    // Without it: 403 insufficient_scope naming the scope, and the row names who lacked it.
    let reader = provider.service_token("reader", "reader-secret", "tools:admin", &resource);
    let (status, challenge, _) = call(&setup.url, Some(&reader)).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert!(
        challenge.contains("error=\"insufficient_scope\"") && challenge.contains("scope=\"tools:call\""),
        "{challenge}"
    );
    assert_eq!(
        refusals(&setup.store).await.last(),
        Some(&(Some("reader".to_owned()), "refused: insufficient_scope".to_owned()))
    );

    // Another audience: a real token of the same provider, for another resource.
    let elsewhere = provider.service_token("svc", "svc-secret", "tools:call", "http://127.0.0.1:1/elsewhere");
    assert_refused(&setup, &elsewhere, "wrong_audience").await;

    // Tokens the provider would never issue, signed with its own key where the signature is not the point.
    let key = &first_keys["keys"][0];
    let claims = |iss: &str, exp: u64| json!({"iss": iss, "sub": "svc", "aud": resource, "scope": "tools:call", "iat": now() - 600, "exp": exp});
    assert_refused(&setup, &forged(key, claims(&issuer, now() - 300)), "expired").await;
    assert_refused(&setup, &forged(key, claims("http://127.0.0.1:1", now() + 300)), "wrong_issuer").await;
    let stranger = generate_keys(&["RS256"]);
    assert_refused(&setup, &forged(&stranger["keys"][0], claims(&issuer, now() + 300)), "unknown_key").await;
    let unsigned = sign_jwt(&json!({"alg": "none"}), &claims(&issuer, now() + 300), Signer::Unsigned);
    assert_refused(&setup, &unsigned, "algorithm_not_allowed").await;
    let guessed = sign_jwt(&json!({"alg": "HS256"}), &claims(&issuer, now() + 300), Signer::Secret("svc-secret"));
    assert_refused(&setup, &guessed, "algorithm_not_allowed").await;

    // Key rotation while serving: the provider comes back on the same port with a new key; its new tokens are
    // accepted without restarting toolgate (an unknown kid makes toolgate fetch the keys again).
    let second_keys = generate_keys(&["RS256"]);
    provider.restart(&provider_config(second_keys.clone(), &resource));
    let rotated = provider.service_token("svc", "svc-secret", "tools:call", &resource);
    let (status, _, body) = call(&setup.url, Some(&rotated)).await;
    assert_eq!(status, StatusCode::OK, "a token signed with the rotated key: {body}");

    // Provider down: a token whose key toolgate has not seen cannot be checked, so it is refused (503, audited),
    // and accepted once the provider is back with that key.
    let third_keys = generate_keys(&["RS256"]);
    let mut pending_claims = claims(&issuer, now() + 300);
    // A display claim: the audit row (and so the console) shows it beside the subject.
    pending_claims["email"] = json!("svc@example.org");
    let pending = forged(&third_keys["keys"][0], pending_claims);
    provider.stop();
    tokio::time::sleep(Duration::from_millis(600)).await;
    let (status, _, body) = call(&setup.url, Some(&pending)).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert!(body.contains("identity provider is unreachable"), "{body}");
    // What failed (the provider's address, the transport's error) goes to the log, not to the client.
    assert!(!body.contains(&issuer) && !body.contains("127.0.0.1"), "the provider's detail leaked: {body}");
    assert_eq!(refusals(&setup.store).await.last(), Some(&(None, "refused: provider_unavailable".to_owned())));
    provider.restart(&provider_config(third_keys, &resource));
    let deadline = tokio::time::Instant::now() + GUARD;
    loop {
        let (status, _, body) = call(&setup.url, Some(&pending)).await;
        if status == StatusCode::OK {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "never recovered: {status} {body}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    setup.store.audit().flush().await.unwrap();
    let calls =
        setup.store.query_audit(&AuditFilter { kind: Some(AuditKind::Call), ..AuditFilter::default() }).await.unwrap();
    let caller = calls.iter().max_by_key(|row| row.seq).and_then(|row| row.caller.clone()).unwrap();
    assert_eq!((&caller["identity"], &caller["display"]), (&json!("svc"), &json!("svc@example.org")), "{caller}");

    // Refusals are counted by reason, a bounded label (never the subject).
    let metrics = setup.gateway.render_metrics().await;
    assert!(metrics.contains("toolgate_authentication_refused_total{reason=\"expired\"} 1"), "{metrics}");
    assert!(!metrics.contains("reader"), "a caller reached a metric label");

    // No request toolgate made upstream carried a client's token or any Authorization header.
    let seen = setup.seen.lock().unwrap().clone();
    assert!(!seen.is_empty());
    for headers in &seen {
        assert!(headers.get("authorization").is_none(), "an Authorization header reached the upstream: {headers:?}");
        for value in headers.values() {
            let value = value.to_str().unwrap_or_default();
            for secret in [&token, &rotated, &pending] {
                assert!(!value.contains(secret.as_str()), "a client's token reached the upstream");
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_opened_with_one_identity_is_refused_to_another() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let resource = format!("http://{}/mcp", listener.local_addr().unwrap());
    let provider = OidcProvider::start(&provider_config(generate_keys(&["ES256"]), &resource));
    let setup = serve(provider.issuer(), listener).await;
    let svc = provider.service_token("svc", "svc-secret", "tools:call", &resource);
    let other = provider.service_token("other", "other-secret", "tools:call", &resource);

    let post = |token: &str, session: Option<&str>, body: Value| {
        let mut request = http()
            .post(&setup.url)
            .bearer_auth(token)
            .header("accept", "application/json, text/event-stream")
            .header("content-type", "application/json")
            .body(body.to_string());
        if let Some(session) = session {
            request = request.header("mcp-session-id", session).header("mcp-protocol-version", "2025-06-18");
        }
        request.send()
    };
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}});
    let opened = post(&svc, None, initialize).await.unwrap();
    assert_eq!(opened.status(), StatusCode::OK);
    let session = opened.headers()["mcp-session-id"].to_str().unwrap().to_owned();
    let list = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"});
    let own = post(&svc, Some(&session), list.clone()).await.unwrap();
    assert_eq!(own.status(), StatusCode::OK, "the identity that opened it uses it");
    let stolen = post(&other, Some(&session), list).await.unwrap();
    assert_eq!(stolen.status(), StatusCode::NOT_FOUND, "another identity's token finds no such session");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_sdk_client_discovers_the_provider_from_the_401_gets_a_token_and_calls() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let resource = format!("http://{}/mcp", listener.local_addr().unwrap());
    let provider = OidcProvider::start(&provider_config(generate_keys(&["RS256"]), &resource));
    let setup = serve(provider.issuer(), listener).await;

    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests").join("oauth_client.py");
    let mut command = std::process::Command::new(toolgate_test_support::Peers::locate().python());
    command.arg(script).args([&setup.url, provider.issuer(), "svc", "svc-secret", "tools:call", "echo"]);
    let run = tokio::task::spawn_blocking(move || toolgate_test_support::run_guarded(command, "oauth_client.py"))
        .await
        .unwrap();
    assert_eq!(run.code, Some(0), "the SDK client failed: {}", run.stderr);
    let findings: Value = serde_json::from_str(run.stdout.lines().last().unwrap_or_default()).unwrap();
    assert_eq!(findings["texts"], json!(["echoed"]), "{findings}");
    assert_eq!(findings["isError"], false);

    // The SDK found everything from toolgate's 401: the metadata it names, then the issuer's token endpoint.
    let requests = findings["requests"].as_array().unwrap();
    let first_refused = requests.iter().position(|r| r["url"] == setup.url && r["status"] == 401);
    let metadata = requests.iter().position(|r| {
        r["url"].as_str().unwrap().starts_with(&format!("{}/.well-known/oauth-protected-resource", setup.base))
            && r["status"] == 200
    });
    let token = requests.iter().position(|r| r["url"] == format!("{}/token", provider.issuer()) && r["status"] == 200);
    let answered = requests.iter().rposition(|r| r["url"] == setup.url && r["status"] == 200);
    assert!(
        matches!((first_refused, metadata, token, answered), (Some(a), Some(b), Some(c), Some(d)) if a < b && b < c && c < d),
        "{requests:#?}"
    );

    setup.store.audit().flush().await.unwrap();
    let calls =
        setup.store.query_audit(&AuditFilter { kind: Some(AuditKind::Call), ..AuditFilter::default() }).await.unwrap();
    assert_eq!(calls.last().and_then(|row| row.caller.clone()).unwrap()["identity"], "svc", "{calls:?}");
}
