//! The HTTP listener refuses DNS-rebinding requests (a foreign `Host` or `Origin`) with 403 before anything else,
//! refuses requests without a configured caller's token with 401, and never lets one caller use another caller's
//! session id (404, as for a session that does not exist).

use serde_json::json;

use crate::support::{HttpSession, Setup, post, start_serve};

const CALLERS: &str = "[[caller]]\nname = \"alice\"\ntoken_env = \"ALICE_TOKEN\"\n\n\
                       [[caller]]\nname = \"bob\"\ntoken_env = \"BOB_TOKEN\"\n";
const ALICE: &str = "alice-token-7f3a";
const BOB: &str = "bob-token-91c2";

fn initialize() -> serde_json::Value {
    json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "rebinding", "version": "0"}}})
}

#[test]
fn dns_rebinding_is_refused_with_403_and_callers_need_their_own_token_and_session() {
    let setup = Setup::demo(CALLERS);
    let serve = start_serve(&setup, &[("ALICE_TOKEN", ALICE), ("BOB_TOKEN", BOB)]);
    let authority = serve.authority.clone();
    let alice_auth = format!("Bearer {ALICE}");
    let bob_auth = format!("Bearer {BOB}");

    // A page on evil.example that rebinds its name to 127.0.0.1: the browser sends its own Host and Origin.
    let reply = post(&authority, &[("Host", "evil.example"), ("Authorization", &alice_auth)], &initialize()).unwrap();
    assert_eq!(reply.status, 403, "foreign Host: {reply:?}");
    let reply = post(&authority, &[("Host", "evil.example:80")], &initialize()).unwrap();
    assert_eq!(reply.status, 403, "foreign Host without a token is refused as rebinding first: {reply:?}");
    let reply =
        post(&authority, &[("Origin", "http://evil.example"), ("Authorization", &alice_auth)], &initialize()).unwrap();
    assert_eq!(reply.status, 403, "foreign Origin: {reply:?}");
    assert!(reply.header("mcp-session-id").is_none(), "no session for a refused request");

    // Callers: no token, a wrong token, an X-API-Key that is nobody's.
    for headers in [vec![], vec![("Authorization", "Bearer not-a-token")], vec![("X-API-Key", "nobody")]] {
        let reply = post(&authority, &headers, &initialize()).unwrap();
        assert_eq!(reply.status, 401, "{headers:?}: {reply:?}");
        assert!(reply.header("mcp-session-id").is_none());
    }

    // Alice's session works for Alice, and is not found for Bob.
    let mut alice = HttpSession::open(&authority, &[("Authorization", &alice_auth)]).unwrap();
    let tools = alice.request("tools/list", json!({})).unwrap();
    assert!(tools["result"]["tools"].as_array().is_some_and(|tools| !tools.is_empty()), "{tools}");
    // Bob has a session of his own (his token is valid), then presents Alice's session id.
    let mut stolen = HttpSession::open(&authority, &[("Authorization", &bob_auth)]).unwrap();
    stolen.id = alice.id.clone();
    let reply = stolen.post(&json!({"jsonrpc": "2.0", "id": 9, "method": "tools/list", "params": {}})).unwrap();
    assert_eq!(reply.status, 404, "another caller's session id: {reply:?}");
    let reply = post(
        &authority,
        &[("Mcp-Session-Id", &alice.id), ("MCP-Protocol-Version", "2025-11-25")],
        &json!({"jsonrpc": "2.0", "id": 10, "method": "tools/list", "params": {}}),
    )
    .unwrap();
    assert_eq!(reply.status, 401, "a session id without a token: {reply:?}");
    // And Alice still has hers.
    let again = alice.request("tools/list", json!({})).unwrap();
    assert!(again["result"]["tools"].is_array(), "{again}");
}
