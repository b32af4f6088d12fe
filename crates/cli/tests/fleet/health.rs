//! The health endpoints a load balancer checks: live while the process serves HTTP, ready only while the store
//! answers and every upstream is connected; both without a caller's token and under any `Host`, and neither says
//! anything an upstream wrote.

use toolgate_test_support::toolgate::fleet::{get, get_with_host};
use toolgate_test_support::toolgate::{Setup, poll, start_serve};

#[test]
fn ready_is_503_while_an_upstream_is_down_and_neither_endpoint_needs_a_token_or_repeats_upstream_text() {
    // The demo upstream starts; `broken` never does (its program does not exist), and its reason names the path.
    let setup = Setup::demo(
        "[[upstream]]\nname = \"broken\"\ncommand = \"/nonexistent/secret-upstream-path\"\n\n\
         [[caller]]\nname = \"alice\"\ntoken_env = \"ALICE_TOKEN\"\n",
    );
    let serve =
        start_serve(&setup, &[("ALICE_TOKEN", "alice-token-0123456789abcdef"), ("TOOLGATE_INSTANCE_ID", "edge-7")]);

    let (status, body) = get(&serve.authority, "/healthz/live").expect("live answers");
    assert_eq!((status, body.contains("\"live\"")), (200, true), "{body}");
    let (status, body) = poll("the broken upstream's first failure", || {
        let answer = get(&serve.authority, "/healthz/ready")?;
        answer.1.contains("\"upstreams_ready\":1").then_some(answer)
    });
    assert_eq!(status, 503, "one upstream is down: not ready: {body}");
    let ready: serde_json::Value = serde_json::from_str(&body).expect("a JSON body");
    assert_eq!(ready["status"], "not_ready", "{body}");
    assert_eq!(ready["instance"], "edge-7", "{body}");
    assert_eq!(ready["store"], "ok", "{body}");
    assert_eq!(ready["upstreams"], 2, "{body}");
    for secret in ["broken", "nonexistent", "secret", "demo"] {
        assert!(!body.contains(secret), "the readiness body repeats upstream names or text ({secret}): {body}");
    }
    // A balancer may name the service by any host: the MCP endpoint's DNS-rebinding rule does not apply here.
    let (status, _) = get_with_host(&serve.authority, "/healthz/live", "lb.example").expect("live answers");
    assert_eq!(status, 200, "live under a foreign Host");
    let (status, _) = get_with_host(&serve.authority, "/healthz/ready", "lb.example").expect("ready answers");
    assert_eq!(status, 503, "ready under a foreign Host");
    // The metrics stay behind the caller's token: health is a separate, smaller door.
    let (metrics, _) = get(&serve.authority, "/metrics").expect("metrics answers");
    assert_eq!(metrics, 401, "metrics need a caller's token");
}
