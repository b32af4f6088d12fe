//! A config reload on SIGHUP: the policy is compiled again, visibility is decided again (a newly hidden tool leaves
//! the listing and calling it looks unknown), and a broken file keeps the running policy. The console's users are
//! replaced too: an added user logs in, a removed user cannot and their session ends; a user whose token is a
//! running caller's is refused, and a broken file keeps the running users. Each upstream added, removed or changed
//! in the file is named as applied (`reload_upstreams` checks what applying does); a changed `[listen.http.oauth]`
//! or `[console.sso]` is named as needing a restart.

use std::io::{Read as _, Write as _};
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::{HANG_GUARD, HttpSession, Serve, Setup, poll, start_serve};

fn tool_names(session: &mut HttpSession) -> Vec<String> {
    let listed = session.request("tools/list", json!({})).unwrap();
    listed["result"]["tools"].as_array().unwrap().iter().map(|tool| tool["name"].as_str().unwrap().to_owned()).collect()
}

fn hangup(serve: &Serve) {
    let status = std::process::Command::new("kill").arg("-HUP").arg(serve.child.id().to_string()).status().unwrap();
    assert!(status.success());
}

#[test]
fn sighup_reloads_the_policy_and_a_broken_file_keeps_the_running_one() {
    let setup = Setup::demo("");
    let serve = start_serve(&setup, &[]);
    let mut session = HttpSession::open(&serve.authority, &[]).unwrap();
    assert!(tool_names(&mut session).contains(&"list_notes".to_owned()));

    let text = std::fs::read_to_string(&setup.config).unwrap();
    std::fs::write(
        &setup.config,
        format!(
            "{text}\n[[policy.rule]]\nid = \"no-listing\"\neffect = \"hide\"\nmatch = {{ tool = \"list_notes\" }}\n"
        ),
    )
    .unwrap();
    hangup(&serve);
    let mut hidden = false;
    for _ in 0..100 {
        if !tool_names(&mut session).contains(&"list_notes".to_owned()) {
            hidden = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(hidden, "list_notes is hidden after the reload; stderr:\n{}", serve.stderr_text());
    let call = session.request("tools/call", json!({"name": "list_notes", "arguments": {}})).unwrap();
    assert_eq!(call["result"]["isError"], Value::Bool(true));
    assert_eq!(call["result"]["content"][0]["text"], "Unknown tool: list_notes");

    std::fs::write(&setup.config, "this is not toml = = =\n").unwrap();
    hangup(&serve);
    let mut reported = false;
    for _ in 0..100 {
        if serve.stderr_text().contains("config reload failed") {
            reported = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(reported, "the broken reload is reported: {}", serve.stderr_text());
    assert!(!tool_names(&mut session).contains(&"list_notes".to_owned()), "the running policy stays");
}

/// Console tokens; each config names them by their SHA-256.
const ALICE: &str = "alice-console-2b7e151628aed2a6abf71588";
const BOB: &str = "bob-console-3243f6a8885a308d313198a2e037";
/// The caller's token, which no console user may have.
const CI: &str = "ci-caller-token-a4093822299f31d0082efa98";

fn digest(token: &str) -> String {
    toolgate_core::fingerprint::digest_bytes(token.as_bytes())
}

fn console_user(name: &str, token: &str) -> String {
    format!("[[console.user]]\nname = \"{name}\"\ntoken_sha256 = \"{}\"\n", digest(token))
}

/// A console request on its own connection: the status and the `Set-Cookie` value's `name=value`.
fn console(serve: &Serve, method: &str, path: &str, cookie: Option<&str>, body: &str) -> (u16, Option<String>) {
    let mut stream = std::net::TcpStream::connect(&serve.authority).unwrap();
    stream.set_read_timeout(Some(HANG_GUARD)).unwrap();
    let cookie = cookie.map(|cookie| format!("Cookie: {cookie}\r\n")).unwrap_or_default();
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: {}\r\n{cookie}Content-Type: application/x-www-form-urlencoded\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        serve.authority,
        body.len()
    );
    stream.write_all(request.as_bytes()).unwrap();
    let mut raw = String::new();
    stream.read_to_string(&mut raw).unwrap();
    let status = raw.split(' ').nth(1).and_then(|code| code.parse().ok()).unwrap();
    let set_cookie = raw
        .lines()
        .take_while(|line| !line.is_empty())
        .filter_map(|line| line.split_once(':'))
        .find(|(name, _)| name.eq_ignore_ascii_case("set-cookie"))
        .and_then(|(_, value)| value.trim().split(';').next().map(str::to_owned));
    (status, set_cookie)
}

fn log_in(serve: &Serve, token: &str) -> (u16, Option<String>) {
    console(serve, "POST", "/console/login", None, &format!("token={token}"))
}

/// Rewrites the config, sends SIGHUP and waits until toolgate logs `what` for the `nth` time.
fn reload(serve: &Serve, setup: &Setup, text: &str, what: &str, nth: usize) {
    std::fs::write(&setup.config, text).unwrap();
    hangup(serve);
    poll(what, || (serve.stderr_text().matches(what).count() >= nth).then_some(()));
}

#[test]
fn sighup_replaces_the_console_users_and_ends_a_removed_users_session() {
    let caller = format!("[[caller]]\nname = \"ci\"\ntoken_sha256 = \"{}\"\n", digest(CI));
    let setup = Setup::demo(&format!("{caller}\n{}", console_user("alice", ALICE)));
    let base = std::fs::read_to_string(&setup.config).unwrap();
    let without_users = base.replace(&console_user("alice", ALICE), "");
    let serve = start_serve(&setup, &[]);

    let (status, alice) = log_in(&serve, ALICE);
    assert_eq!(status, 303, "alice is configured at start");
    let alice = alice.unwrap();
    assert_eq!(console(&serve, "GET", "/console", Some(&alice), "").0, 200);
    assert_eq!(log_in(&serve, BOB).0, 401, "bob is not configured yet");

    // Alice removed, bob added.
    reload(&serve, &setup, &format!("{without_users}\n{}", console_user("bob", BOB)), "console users reloaded", 1);
    assert_eq!(console(&serve, "GET", "/console", Some(&alice), "").0, 401, "alice's session ended");
    assert_eq!(log_in(&serve, ALICE).0, 401, "alice's token opens nothing");
    let (status, bob) = log_in(&serve, BOB);
    assert_eq!(status, 303, "bob logs in after the reload; stderr:\n{}", serve.stderr_text());
    assert_eq!(console(&serve, "GET", "/console", bob.as_deref(), "").0, 200);

    // The file no longer names the caller, but the running relay still accepts its token: no console user may have it.
    let mallory = console_user("mallory", CI);
    let conflicting = format!("{}\n{}\n{mallory}", without_users.replace(&caller, ""), console_user("bob", BOB));
    reload(&serve, &setup, &conflicting, "has the same token as the running caller", 1);
    assert_eq!(log_in(&serve, CI).0, 401, "the caller's token does not open the console");
    assert_eq!(console(&serve, "GET", "/console", bob.as_deref(), "").0, 200, "the running users stay");

    // A file that does not load keeps the running users.
    reload(&serve, &setup, "this is not toml = = =\n", "config reload failed", 1);
    assert_eq!(log_in(&serve, BOB).0, 303, "bob still logs in");
    assert!(!serve.stderr_text().contains(BOB) && !serve.stderr_text().contains(&digest(BOB)), "no token is logged");
}

#[test]
fn sighup_names_each_upstream_change_it_applies() {
    let setup = Setup::demo("");
    let serve = start_serve(&setup, &[]);
    let text = std::fs::read_to_string(&setup.config).unwrap();
    // `demo` changes (its overrides and trust, and its prefix: with two upstreams, names are prefixed) and an
    // upstream `extra` is added.
    let changed = text.replace(
        "args = [\"demo-server\"]\n",
        "args = [\"demo-server\"]\ntrust = \"pinned\"\n\n[upstream.tools.add_note]\nreadOnlyHint = false\n\n\
         [[upstream]]\nname = \"extra\"\ncommand = \"/nonexistent/extra-server\"\nargs = []\n",
    );
    assert_ne!(changed, text);
    reload(&serve, &setup, &changed, ": applied", 2);
    let stderr = serve.stderr_text();
    assert!(stderr.contains("upstream `demo` changed (prefix, tool overrides, trust): applied"), "{stderr}");
    assert!(stderr.contains("upstream `extra` was added: applied"), "{stderr}");
    // And back: `extra` is removed and `demo` runs as at start again.
    reload(&serve, &setup, &text, ": applied", 4);
    let stderr = serve.stderr_text();
    assert!(stderr.contains("upstream `extra` was removed: applied"), "{stderr}");
    assert!(stderr.contains("upstream `demo` changed (prefix, tool overrides, trust): applied"), "{stderr}");
    assert!(!stderr.contains("restart toolgate"), "nothing needs a restart: {stderr}");
}

#[test]
fn sighup_names_an_oauth_or_console_sign_on_change_as_needing_a_restart() {
    // Nothing answers at the issuer: these settings are read, never used, by this test.
    let oauth = "[listen.http.oauth]\nissuer = \"http://127.0.0.1:9\"\nresource = \"http://127.0.0.1:9/mcp\"\n";
    let sso = "[console.sso]\nissuer = \"http://127.0.0.1:9\"\nclient_id = \"console\"\n\
               redirect_uri = \"http://127.0.0.1:9/console/sso/callback\"\n";
    let setup = Setup::demo(&format!("{oauth}\n{sso}"));
    let serve = start_serve(&setup, &[]);
    let text = std::fs::read_to_string(&setup.config).unwrap();
    let changed = text
        .replace(
            "resource = \"http://127.0.0.1:9/mcp\"\n",
            "resource = \"http://127.0.0.1:9/mcp\"\nrequired_scopes = [\"x\"]\n",
        )
        .replace("client_id = \"console\"", "client_id = \"another-console\"");
    assert_ne!(changed, text);
    reload(&serve, &setup, &changed, "[console.sso] changed; restart toolgate to apply it", 1);
    let stderr = serve.stderr_text();
    assert!(stderr.contains("[listen.http.oauth] changed; restart toolgate to apply it"), "{stderr}");
    assert!(!stderr.contains("[listen.http] changed"), "only the OAuth table changed: {stderr}");
}
