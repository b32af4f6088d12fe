//! One-step onboarding of a `pinned` upstream through `toolgate serve` and the real `toolgate pins approve
//! --upstream NAME --agreeing|--all`: every tool of a new pinned upstream waits hidden; `--agreeing` pins only the
//! definitions whose declared hints the trust rule accepted and lint found no error in (naming why each other one
//! was left), `--all` pins the rest, each decision is an audit row, and the pinned tools reach clients.

use serde_json::{Value, json};

use crate::support::{HttpSession, Setup, poll, start_serve, toolgate, toolgate_binary};

/// The demo server as one `pinned` upstream, HTTP on a loopback port the OS picks.
fn pinned_demo() -> Setup {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("gateway.toml");
    let text = format!(
        "[[upstream]]\nname = \"demo\"\ncommand = {binary:?}\nargs = [\"demo-server\"]\ntrust = \"pinned\"\n\n\
         [listen.http]\nbind = \"127.0.0.1:0\"\n",
        binary = toolgate_binary()
    );
    std::fs::write(&config, text).expect("write the config");
    Setup { dir, config }
}

fn listed(session: &mut HttpSession) -> Vec<String> {
    let response = session.request("tools/list", json!({})).expect("tools/list");
    response["result"]["tools"]
        .as_array()
        .map(|tools| tools.iter().filter_map(|tool| tool["name"].as_str().map(str::to_owned)).collect())
        .unwrap_or_default()
}

#[test]
fn a_pinned_upstream_is_onboarded_in_two_commands_the_agreeing_definitions_first() {
    let setup = pinned_demo();
    let serve = start_serve(&setup, &[]);
    let state = setup.state_arg();
    let mut session = HttpSession::open(&serve.authority, &[]).expect("a session");
    assert!(listed(&mut session).is_empty(), "a new pinned upstream's tools all wait for a person");

    // Usage: a bulk approval says which, and an upstream with nothing waiting is an error.
    let neither = toolgate(&["pins", "approve", "--upstream", "demo", "--state-dir", &state]);
    assert_eq!(neither.code, Some(2), "{neither:?}");
    let both = toolgate(&["pins", "approve", "--upstream", "demo", "--all", "--agreeing", "--state-dir", &state]);
    assert_eq!(both.code, Some(2), "{both:?}");

    // The agreeing ones, once the gateway has assessed the definitions that wait.
    let agreeing = poll("the agreeing definitions pinned", || {
        let run = toolgate(&["pins", "approve", "--upstream", "demo", "--agreeing", "--state-dir", &state]);
        (run.code == Some(0) && !run.stdout.contains("not assessed")).then_some(run)
    });
    for expected in ["pinned demo/send_email at sha256:", "pinned demo/search_web at sha256:"] {
        assert!(agreeing.stdout.contains(expected), "{expected}: {}", agreeing.stdout);
    }
    for (left, why) in [
        ("left demo/purge_notes:", "lint TG102"),
        ("left demo/archive_notes:", "declares no hints"),
        ("left demo/export_notes:", "declares readOnlyHint more relaxed than inference supports"),
    ] {
        let line = agreeing.stdout.lines().find(|line| line.starts_with(left)).unwrap_or_default();
        assert!(line.contains(why), "{left} {why}: {}", agreeing.stdout);
    }
    let tools = poll("the agreeing tools listed", || {
        let tools = listed(&mut session);
        tools.contains(&"send_email".to_owned()).then_some(tools)
    });
    assert!(!tools.contains(&"purge_notes".to_owned()), "a disagreeing tool still waits: {tools:?}");

    // The rest, in one step.
    let all = toolgate(&["pins", "approve", "--upstream", "demo", "--all", "--state-dir", &state]);
    assert_eq!(all.code, Some(0), "{all:?}");
    assert!(all.stdout.contains("pinned demo/purge_notes at sha256:"), "{}", all.stdout);
    assert!(all.stdout.ends_with(" pinned, 0 left waiting (approved by tester)\n"), "{}", all.stdout);
    poll("every tool listed", || listed(&mut session).contains(&"purge_notes".to_owned()).then_some(()));
    let again = toolgate(&["pins", "approve", "--upstream", "demo", "--all", "--state-dir", &state]);
    assert_eq!(again.code, Some(2), "nothing waits any more: {again:?}");

    // Each pin is an audit row with who decided.
    let audit = toolgate(&["audit", "--json", "--kind", "pin", "--state-dir", &state]);
    let rows: Vec<Value> = audit.stdout.lines().filter_map(|line| serde_json::from_str(line).ok()).collect();
    let pinned = [&agreeing.stdout, &all.stdout]
        .iter()
        .map(|stdout| stdout.lines().filter(|line| line.starts_with("pinned ")).count())
        .sum::<usize>();
    assert_eq!(rows.len(), pinned, "{}", audit.stdout);
    assert!(rows.iter().all(|row| row["detail"]["decided_by"] == "tester"), "{}", audit.stdout);
}
