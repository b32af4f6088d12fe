//! Bad input: servers that crash, hang, print garbage or send enormous lists get a clear message and exit 2.
//!
//! These use `misbehave.py` (test-support), a deliberate fake, because no real server misbehaves on demand.

use toolgate_test_support::misbehave;

use crate::support::{json_stdout, toolgate, toolgate_against};

#[test]
fn a_server_that_crashes_during_initialize() {
    let run = toolgate_against(&["inspect"], &misbehave("crash-on-initialize"));
    assert_eq!(run.code, Some(2), "{run:?}");
    assert!(run.stderr.contains("cannot initialize an MCP session"), "{}", run.stderr);
    assert!(run.stderr.contains("exit status: 3"), "{}", run.stderr);
}

#[test]
fn a_server_that_never_answers_initialize() {
    let run = toolgate_against(&["inspect", "--timeout", "2"], &misbehave("silent"));
    assert_eq!(run.code, Some(2), "{run:?}");
    assert!(run.stderr.contains("no answer to `initialize` within 2s"), "{}", run.stderr);
}

#[test]
fn a_server_that_prints_garbage_on_stdout() {
    let run = toolgate_against(&["inspect", "--timeout", "2"], &misbehave("garbage"));
    assert_eq!(run.code, Some(2), "{run:?}");
    assert!(run.stderr.contains("not JSON-RPC"), "{}", run.stderr);
}

#[test]
fn a_fifty_megabyte_tools_list() {
    let run = toolgate_against(&["lint"], &misbehave("huge-tools"));
    assert_eq!(run.code, Some(2), "{run:?}");
    assert!(run.stderr.contains("larger than the 16777216-byte limit"), "{}", run.stderr);
}

#[test]
fn a_command_that_does_not_exist() {
    let run = toolgate(&["inspect", "--", "/nonexistent/mcp-server"], None);
    assert_eq!(run.code, Some(2), "{run:?}");
    assert!(run.stderr.contains("cannot start `/nonexistent/mcp-server`"), "{}", run.stderr);
}

#[test]
fn an_http_endpoint_that_is_not_there() {
    let port = crate::inspect::free_port();
    let url = format!("http://127.0.0.1:{port}/mcp");
    let run = toolgate(&["inspect", "--url", &url, "--timeout", "5"], None);
    assert_eq!(run.code, Some(2), "{run:?}");
    assert!(run.stderr.contains("cannot reach"), "{}", run.stderr);
}

#[test]
fn pagination_and_odd_annotations_are_read_in_full() {
    let run = toolgate_against(&["inspect", "--json"], &misbehave("paginated"));
    assert_eq!(run.code, Some(0), "{run:?}");
    let report = json_stdout(&run);
    let tools = report["tools"].as_array().unwrap();
    assert!(tools.len() >= 3, "tools from every page: {report:#}");
    let shape_findings = tools
        .iter()
        .flat_map(|tool| tool["findings"].as_array().unwrap())
        .filter(|finding| finding["code"].as_str().unwrap().starts_with("TG3"))
        .count();
    assert!(shape_findings > 0, "vendor spellings are reported: {report:#}");
}

#[test]
fn stderr_noise_does_not_disturb_the_session() {
    let run = toolgate_against(&["inspect", "--json"], &misbehave("stderr-noise"));
    assert_eq!(run.code, Some(0), "{run:?}");
    assert!(!json_stdout(&run)["tools"].as_array().unwrap().is_empty());
    // With -v the upstream's stderr reaches toolgate's log, each line tagged with the upstream it came from.
    let verbose = toolgate_against(&["-v", "inspect", "--json"], &misbehave("stderr-noise"));
    assert_eq!(verbose.code, Some(0), "{verbose:?}");
    let tagged = verbose.stderr.lines().find(|line| line.contains("diagnostic noise")).unwrap_or_default();
    assert!(tagged.ends_with("upstream=python3"), "an upstream's stderr line carries its name: {tagged:?}");
}
