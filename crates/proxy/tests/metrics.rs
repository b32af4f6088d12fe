//! Prometheus metrics: an in-process gateway with a state store in front of `misbehave.py --mode tool-faults`, a
//! policy that allows, denies and hides, a few calls, then the rendered exposition and `GET /metrics` over loopback
//! (with the MCP endpoint's `Host`/`Origin` rules).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::net::SocketAddr;
use std::time::Duration;

use reqwest::StatusCode;
use serde_json::json;
use toolgate_core::decision::Verdict;
use toolgate_core::policy::{MatchSpec, PolicySpec, RuleSpec};
use toolgate_proxy::Gateway;
use toolgate_proxy::upstreams::UpstreamStatus;
use toolgate_spec::{GatewaySpec, GuardrailSpec, HttpListenerSpec, Limits};

use support::{Client, GUARD, text_of, tool_error, upstream};

fn rule(effect: Verdict, tool: Option<&str>) -> RuleSpec {
    RuleSpec {
        id: None,
        effect,
        matches: MatchSpec { tool: tool.map(|tool| vec![tool.to_owned()]), ..MatchSpec::default() },
        reason: None,
    }
}

/// A gateway over one `tool-faults` upstream named `faulty` (2 s timeout), with its store in `state`: `progress`
/// is denied, `log` hidden, everything else allowed.
async fn start(state: &std::path::Path) -> Gateway {
    let policy = PolicySpec {
        rules: vec![
            rule(Verdict::Deny, Some("progress")),
            rule(Verdict::Hide, Some("log")),
            rule(Verdict::Allow, None),
        ],
        ..PolicySpec::permissive()
    };
    let spec = GatewaySpec {
        upstreams: vec![upstream("faulty", "tool-faults", Duration::from_secs(2), None)],
        stdio: None,
        http: None,
        limits: Limits::default(),
        guardrails: GuardrailSpec { policy, ..Default::default() },
        source: None,
        sandbox: Default::default(),
    };
    let store = support::gateway_store(state).await;
    let gateway = Gateway::with_store(spec, Some(store)).expect("the gateway spec is valid");
    gateway.start();
    gateway.wait_settled(GUARD).await;
    let status = gateway.status().upstreams.remove(0).status;
    assert!(matches!(status, UpstreamStatus::Ready { .. }), "the upstream did not start: {status:?}");
    gateway
}

/// The value of the exposition line whose name and labels are exactly `series`.
fn value(exposition: &str, series: &str) -> Option<f64> {
    exposition.lines().find_map(|line| line.strip_prefix(series)?.strip_prefix(' ')?.trim().parse().ok())
}

fn calls(tool: &str, verdict: &str, outcome: &str) -> String {
    format!(
        "toolgate_tool_calls_total{{upstream=\"faulty\",tool=\"{tool}\",verdict=\"{verdict}\",outcome=\"{outcome}\"}}"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_are_counted_by_upstream_tool_verdict_and_outcome_and_relayed_calls_timed() {
    let state = tempfile::tempdir().unwrap();
    let gateway = start(state.path()).await;
    let mut client = Client::connect(&gateway).await;

    for n in 0..2 {
        let echo = client.call(json!(n), "faulty_echo", json!({"text": "hi"})).await;
        assert_eq!(text_of(&echo), "hi");
    }
    let hung = client.call(json!("hang"), "faulty_hang", json!({"text": "x"})).await;
    assert!(tool_error(&hung).contains("`faulty`"), "{hung}");
    let denied = client.call(json!("deny"), "faulty_progress", json!({"n": 1})).await;
    assert!(tool_error(&denied).contains("refused"), "{denied}");
    let hidden = client.call(json!("hide"), "faulty_log", json!({"text": "x"})).await;
    assert!(tool_error(&hidden).contains("Unknown tool"), "{hidden}");
    // An unknown tool is counted without its name (verdict `none`, empty upstream and tool): the client chose it.
    client.call(json!("unknown"), "no_such_tool", json!({})).await;

    let exposition = gateway.render_metrics().await;
    let expect = |series: &str, wanted: f64| {
        assert_eq!(value(&exposition, series), Some(wanted), "{series} in:\n{exposition}");
    };
    expect(&calls("echo", "allow", "ok"), 2.0);
    expect(&calls("hang", "allow", "is_error"), 1.0);
    expect(&calls("progress", "deny", "is_error"), 1.0);
    expect(&calls("log", "hide", "is_error"), 1.0);
    assert!(!exposition.contains("no_such_tool"), "{exposition}");
    assert!(exposition.contains("# TYPE toolgate_tool_calls_total counter"), "{exposition}");

    // Three relayed calls (two echoes and the timed-out hang); denied and hidden calls never went upstream.
    assert!(exposition.contains("# TYPE toolgate_upstream_call_duration_seconds histogram"), "{exposition}");
    expect("toolgate_upstream_call_duration_seconds_count{upstream=\"faulty\"}", 3.0);
    expect("toolgate_upstream_call_duration_seconds_bucket{upstream=\"faulty\",le=\"+Inf\"}", 3.0);
    // The hang took the 2 s timeout, the echoes far less.
    expect("toolgate_upstream_call_duration_seconds_bucket{upstream=\"faulty\",le=\"1\"}", 2.0);
    let sum = value(&exposition, "toolgate_upstream_call_duration_seconds_sum{upstream=\"faulty\"}").unwrap();
    assert!(sum >= 2.0, "{sum}");

    expect("toolgate_upstream_up{upstream=\"faulty\"}", 1.0);
    expect("toolgate_pending_approvals", 0.0);
    expect("toolgate_audit_rejected_total", 0.0);
    expect("toolgate_audit_failed_total", 0.0);
    assert!(value(&exposition, "toolgate_audit_queue_depth").is_some(), "{exposition}");
    assert!(value(&exposition, "toolgate_audit_written_total").is_some(), "{exposition}");

    // Counters keep counting between renders.
    client.call(json!("again"), "faulty_echo", json!({"text": "again"})).await;
    expect_again(&gateway, &calls("echo", "allow", "ok"), 3.0).await;

    gateway.shutdown().await;
}

async fn expect_again(gateway: &Gateway, series: &str, wanted: f64) {
    let exposition = gateway.render_metrics().await;
    assert_eq!(value(&exposition, series), Some(wanted), "{series} in:\n{exposition}");
}

struct Server {
    addr: SocketAddr,
    client: reqwest::Client,
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<std::io::Result<()>>,
}

async fn serve(gateway: &Gateway) -> Server {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let spec = HttpListenerSpec {
        bind: addr,
        path: "/mcp".into(),
        allowed_origins: vec!["https://dashboard.example".into()],
        allowed_hosts: vec!["gateway.internal".into()],
        oauth: None,
    };
    let router = toolgate_proxy::metrics::router(gateway.clone(), &spec);
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(toolgate_proxy::downstream::http::serve(listener, router, async move {
        let _ = stopped.await;
    }));
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = reqwest::Client::builder().no_proxy().build().unwrap();
    Server { addr, client, stop, task }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_metrics_answers_on_loopback_and_refuses_foreign_hosts_origins_and_other_methods() {
    let state = tempfile::tempdir().unwrap();
    let gateway = start(state.path()).await;
    let mut client = Client::connect(&gateway).await;
    client.call(json!(1), "faulty_echo", json!({"text": "hi"})).await;
    let server = serve(&gateway).await;
    let url = format!("http://{}/metrics", server.addr);

    let response = server.client.get(&url).send().await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let content_type = response.headers()["content-type"].to_str().unwrap().to_owned();
    assert!(content_type.starts_with("text/plain"), "{content_type}");
    let body = response.text().await.unwrap();
    assert_eq!(value(&body, &calls("echo", "allow", "ok")), Some(1.0), "{body}");
    assert_eq!(value(&body, "toolgate_upstream_up{upstream=\"faulty\"}"), Some(1.0), "{body}");

    for host in ["localhost", "127.0.0.1:9", "gateway.internal"] {
        let response = server.client.get(&url).header("host", host).send().await.unwrap();
        assert_eq!(response.status(), StatusCode::OK, "host {host}");
    }
    for host in ["evil.example", "evil.example:80", "127.0.0.1.evil.example"] {
        let response = server.client.get(&url).header("host", host).send().await.unwrap();
        assert_eq!(response.status(), StatusCode::FORBIDDEN, "host {host}");
        let body = response.text().await.unwrap();
        assert!(!body.contains("toolgate_"), "a refused request got metrics: {body}");
    }
    let foreign = server.client.get(&url).header("origin", "http://evil.example").send().await.unwrap();
    assert_eq!(foreign.status(), StatusCode::FORBIDDEN);
    let allowed = server.client.get(&url).header("origin", "https://dashboard.example").send().await.unwrap();
    assert_eq!(allowed.status(), StatusCode::OK);

    let post = server.client.post(&url).body("x").send().await.unwrap();
    assert_eq!(post.status(), StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(post.headers()["allow"], "GET");
    // The host check comes first, as on the MCP endpoint.
    let foreign_post = server.client.post(&url).header("host", "evil.example").send().await.unwrap();
    assert_eq!(foreign_post.status(), StatusCode::FORBIDDEN);
    // Only `/metrics` is served by this router.
    let other = server.client.get(format!("http://{}/metrics/x", server.addr)).send().await.unwrap();
    assert_eq!(other.status(), StatusCode::NOT_FOUND);

    let _ = server.stop.send(());
    server.task.await.unwrap().unwrap();
    gateway.shutdown().await;
}
