//! `toolgate status` and `check-config` against a running `toolgate serve`: one failing upstream does not stop the
//! others, and its reason is visible.

use std::time::Duration;

use serde_json::Value;

use toolgate_test_support::toolgate::Serving;

use crate::support::toolgate;

#[test]
fn a_failing_upstream_is_down_with_its_reason_while_the_other_serves() {
    let directory = tempfile::tempdir().unwrap();
    let state = directory.path().join("state");
    let config = directory.path().join("gateway.toml");
    let binary = toolgate_test_support::toolgate::binary();
    std::fs::write(
        &config,
        format!(
            "[[upstream]]\nname = \"demo\"\ncommand = {binary:?}\nargs = [\"demo-server\"]\n\n\
             [[upstream]]\nname = \"broken\"\ncommand = \"/nonexistent/mcp-server\"\nargs = []\n\n\
             [listen.http]\nbind = \"127.0.0.1:0\"\n"
        ),
    )
    .unwrap();
    let checked = toolgate(&["check-config", config.to_str().unwrap()], None);
    assert_eq!(checked.code, Some(0), "{checked:?}");
    assert!(checked.stdout.contains("broken"), "{}", checked.stdout);

    let mut serve = toolgate_test_support::toolgate::command();
    serve.args(["serve", "--config", config.to_str().unwrap(), "--state-dir", state.to_str().unwrap()]);
    let _serve = Serving::start(serve);
    let mut last = Value::Null;
    for _ in 0..300 {
        let run = toolgate(&["status", "--json", "--state-dir", state.to_str().unwrap()], None);
        if let Ok(Value::Array(runs)) = serde_json::from_str::<Value>(&run.stdout)
            && let Some(first) = runs.first()
        {
            last = first.clone();
            let upstreams = first["status"]["upstreams"].as_array().cloned().unwrap_or_default();
            let state_of = |name: &str| {
                upstreams.iter().find(|upstream| upstream["name"] == name).map(|upstream| upstream["state"].clone())
            };
            if state_of("demo") == Some(Value::from("ready")) && state_of("broken") == Some(Value::from("down")) {
                let broken = upstreams.iter().find(|upstream| upstream["name"] == "broken").unwrap();
                assert!(broken["reason"].as_str().unwrap().contains("cannot start"), "{broken:#}");
                assert_eq!(first["status"]["tools"], 10, "the demo's tools are served: {first:#}");
                let text = toolgate(&["status", "--state-dir", state.to_str().unwrap()], None);
                assert!(text.stdout.contains("broken: DOWN"), "{}", text.stdout);
                return;
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("status never showed demo ready and broken down: {last:#}");
}
