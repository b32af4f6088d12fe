//! The MCP Inspector CLI (`inspector --cli`) as a client of toolgate relaying server-everything: `tools/list` and
//! `tools/call`, parsed from the JSON it prints.

use serde_json::Value;
use toolgate_test_support::Peers;

use crate::support::{HttpToolgate, Via, run_guarded, serve_flags, temp_dir, toolgate_binary};

/// Runs the Inspector CLI with `method_args` against toolgate relaying server-everything, and parses its output.
fn inspector(method_args: &[&str], via: Via) -> Value {
    let peers = Peers::locate();
    let everything = peers.server_everything();
    let inspector = peers.inspector_cli();
    let mut command = inspector.command();
    command.args(method_args);
    // Kept alive until the Inspector is done.
    let state = temp_dir();
    let mut _server = None;
    match via {
        // Options first, then `--` and the server command: the Inspector passes everything after its first `--`
        // to the server untouched (including toolgate's own `--`).
        Via::Stdio => {
            command.arg("--").arg(toolgate_binary()).arg("serve").args(serve_flags(state.path()));
            command.arg("--").args(everything.argv());
            for (key, value) in &everything.env {
                command.env(key, value);
            }
        }
        Via::Http => {
            let server = HttpToolgate::start(&everything);
            command.args(["--transport", "http", "--server-url", &server.url]);
            _server = Some(server);
        }
    }
    let what = format!("inspector {method_args:?} over {via:?}");
    let run = run_guarded(command, &what);
    match (run.code, serde_json::from_str::<Value>(&run.stdout)) {
        (Some(0), Ok(value)) => value,
        _ => panic!("{what} failed (exit {:?})\nstdout:\n{}\nstderr:\n{}", run.code, run.stdout, run.stderr),
    }
}

pub(crate) fn tools_list(via: Via) {
    let listed = inspector(&["--method", "tools/list"], via);
    let tools = listed["tools"].as_array().unwrap_or_else(|| panic!("no tools in {listed}"));
    assert!(tools.iter().any(|tool| tool["name"] == "echo"), "{listed}");
    for tool in tools {
        crate::assert_explicit_hints(tool);
        crate::assert_toolgate_record(tool);
    }
}

pub(crate) fn tools_call(via: Via) {
    let called = inspector(&["--method", "tools/call", "--tool-name", "echo", "--tool-arg", "message=hi"], via);
    assert_eq!(called["content"][0]["type"], "text", "{called}");
    assert_eq!(called["content"][0]["text"], "Echo: hi", "{called}");
    assert_ne!(called["isError"], true, "{called}");
}

#[test]
fn inspector_tools_list_over_stdio() {
    tools_list(Via::Stdio);
}

#[test]
fn inspector_tools_call_over_stdio() {
    tools_call(Via::Stdio);
}
