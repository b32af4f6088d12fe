//! `toolgate inspect` against the bundled demo and real servers from npm and PyPI.

use serde_json::Value;
use toolgate_test_support::Peers;

use crate::support::{json_stdout, snapshot_settings, toolgate, toolgate_against};

fn tool<'a>(report: &'a Value, name: &str) -> &'a Value {
    report["tools"].as_array().and_then(|tools| tools.iter().find(|tool| tool["name"] == name)).unwrap_or_else(|| {
        panic!("no tool {name} in {report:#}");
    })
}

#[test]
fn demo_table_shows_sources_and_findings() {
    let run = toolgate(&["inspect"], None);
    assert_eq!(run.code, Some(0), "{run:?}");
    assert!(run.stdout.contains("sources: decl = declared"), "{}", run.stdout);
    insta::assert_snapshot!("inspect_demo_table", run.stdout);
}

#[test]
fn demo_json_marks_the_lying_and_the_silent_tools() {
    let run = toolgate(&["inspect", "--json"], None);
    assert_eq!(run.code, Some(0), "{run:?}");
    let report = json_stdout(&run);
    // purge_notes declares read-only but deletes everything: lint says so, with an error.
    let purge = tool(&report, "purge_notes");
    assert_eq!(purge["declared"]["readOnlyHint"], true);
    assert!(purge["findings"].as_array().unwrap().iter().any(|finding| finding["severity"] == "error"), "{purge:#}");
    // archive_notes declares nothing: every effective hint is inferred, with confidence and evidence.
    let archive = tool(&report, "archive_notes");
    for hint in ["readOnlyHint", "destructiveHint", "openWorldHint"] {
        assert_eq!(archive["effective"][hint]["source"], "inferred", "{hint}: {archive:#}");
        assert!(archive["inferred"][hint]["confidence"].as_f64().unwrap() >= 0.5);
    }
    assert_eq!(archive["effective"]["readOnlyHint"]["value"], false, "archiving writes: {archive:#}");
    assert!(archive["fingerprint"].as_str().unwrap().starts_with("sha256:"));
    insta::assert_snapshot!("inspect_demo_json", run.stdout);
}

#[test]
fn server_everything_over_stdio() {
    let peers = Peers::locate();
    let run = toolgate_against(&["inspect", "--json"], &peers.server_everything());
    assert_eq!(run.code, Some(0), "{run:?}");
    let report = json_stdout(&run);
    assert!(report["tools"].as_array().unwrap().len() >= 10, "{report:#}");
    assert_eq!(report["server"]["protocolVersion"], "2025-11-25");
    insta::assert_snapshot!("inspect_everything_json", run.stdout);
}

#[test]
fn server_everything_over_streamable_http() {
    let peers = Peers::locate();
    let port = free_port();
    let server = peers.server_everything_http(port);
    let mut child =
        server.command().stdout(std::process::Stdio::null()).stderr(std::process::Stdio::null()).spawn().unwrap();
    let url = format!("http://127.0.0.1:{port}/mcp");
    wait_for_port(port);
    let run = toolgate(&["inspect", "--json", "--url", &url], None);
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(run.code, Some(0), "{run:?}");
    let report = json_stdout(&run);
    assert_eq!(report["server"]["transport"], "http");
    let stdio = json_stdout(&toolgate_against(&["inspect", "--json"], &peers.server_everything()));
    let names = |report: &Value| -> Vec<String> {
        report["tools"].as_array().unwrap().iter().map(|tool| tool["name"].as_str().unwrap().to_owned()).collect()
    };
    assert_eq!(names(&report), names(&stdio), "the same server lists the same tools over both transports");
}

#[test]
fn server_filesystem_table() {
    let peers = Peers::locate();
    let root = tempfile::tempdir().unwrap();
    let run = toolgate_against(&["inspect"], &peers.server_filesystem(root.path()));
    assert_eq!(run.code, Some(0), "{run:?}");
    assert!(run.stdout.contains("write_file"), "{}", run.stdout);
    snapshot_settings(&[root.path()]).bind(|| insta::assert_snapshot!("inspect_filesystem_table", run.stdout));
}

#[test]
fn server_memory_json() {
    let peers = Peers::locate();
    let directory = tempfile::tempdir().unwrap();
    let run = toolgate_against(&["inspect", "--json"], &peers.server_memory(&directory.path().join("memory.jsonl")));
    assert_eq!(run.code, Some(0), "{run:?}");
    let report = json_stdout(&run);
    let delete = tool(&report, "delete_entities");
    assert_eq!(delete["effective"]["destructiveHint"]["value"], true, "{delete:#}");
    snapshot_settings(&[directory.path()]).bind(|| insta::assert_snapshot!("inspect_memory_json", run.stdout));
}

#[test]
fn mcp_server_git_table() {
    let peers = Peers::locate();
    let repository = tempfile::tempdir().unwrap();
    let status = std::process::Command::new("git").arg("init").arg("-q").arg(repository.path()).status().unwrap();
    assert!(status.success());
    let run = toolgate_against(&["inspect"], &peers.mcp_server_git(repository.path()));
    assert_eq!(run.code, Some(0), "{run:?}");
    assert!(run.stdout.contains("git_status"), "{}", run.stdout);
    snapshot_settings(&[repository.path()]).bind(|| insta::assert_snapshot!("inspect_git_table", run.stdout));
}

pub(crate) fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

fn wait_for_port(port: u16) {
    for _ in 0..300 {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    panic!("nothing listened on port {port} within 15 s");
}

/// stderr is a pipe, as when a desktop client launches toolgate and keeps its log in a file: the log carries no
/// colour escape codes, even without `NO_COLOR`.
#[test]
fn the_log_on_a_pipe_has_no_colour_codes() {
    let mut command = toolgate_test_support::toolgate::command();
    command.args(["-v", "inspect"]).env_remove("NO_COLOR");
    let run = toolgate_test_support::run_guarded(command, "toolgate -v inspect");
    assert_eq!(run.code, Some(0), "{run:?}");
    assert!(run.stderr.contains("spawning upstream server"), "{}", run.stderr);
    assert!(!run.stderr.contains('\u{1b}'), "escape codes in a piped log: {:?}", run.stderr);
}
