//! A config reload on SIGHUP: the policy is compiled again, visibility is decided again (a newly hidden tool leaves
//! the listing and calling it looks unknown), and a broken file keeps the running policy.

use std::time::Duration;

use serde_json::{Value, json};

use crate::support::{HttpSession, Serve, Setup};

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
    let serve = Serve::start(&setup, &[]);
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
