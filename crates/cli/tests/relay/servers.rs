//! The MCP Python SDK talking through toolgate to the filesystem, memory and git reference servers, each in a
//! fresh temporary directory: real writes and reads, and the hints toolgate emits for writing tools.
//!
//! Each check runs `relay_clients/servers.py --scenario NAME` and asserts on the JSON it prints, and on what the
//! server left on disk.

use std::path::Path;
use std::process::Command;

use serde_json::Value;
use toolgate_test_support::Peers;

use crate::support::{Via, python_via};

fn text(call: &Value) -> &str {
    call["texts"][0].as_str().unwrap_or_default()
}

/// write_file then read_text_file through toolgate; write_file is listed as writing and destructive.
pub(crate) fn filesystem(via: Via) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let root = std::fs::canonicalize(dir.path()).expect("the temporary directory has a canonical path");
    let root_text = root.to_string_lossy().into_owned();
    let peer = Peers::locate().server_filesystem(&root);
    let findings = python_via("servers.py", &["--scenario", "filesystem", "--dir", root_text.as_str()], &peer, via);

    assert_eq!(findings["write"]["isError"], false, "{findings}");
    assert_eq!(findings["read"]["isError"], false, "{findings}");
    assert_eq!(text(&findings["read"]), findings["content"], "read back what was written: {findings}");
    let on_disk = std::fs::read_to_string(root.join("through-toolgate.txt")).expect("the file was written");
    assert_eq!(on_disk, findings["content"].as_str().unwrap_or_default());

    let tools = findings["tools"].as_object().expect("tools by name");
    let write = &tools["write_file"];
    assert_eq!(write["annotations"]["readOnlyHint"], false, "write_file is not read-only: {write}");
    assert_eq!(write["annotations"]["destructiveHint"], true, "write_file overwrites: {write}");
    assert_eq!(tools["read_text_file"]["annotations"]["readOnlyHint"], true);
    for tool in tools.values() {
        crate::assert_explicit_hints(tool);
        crate::assert_toolgate_record(tool);
    }
}

/// create_entities then read_graph; the graph is in the memory file afterwards.
pub(crate) fn memory(via: Via) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let memory_file = dir.path().join("memory.jsonl");
    let peer = Peers::locate().server_memory(&memory_file);
    let findings = python_via("servers.py", &["--scenario", "memory"], &peer, via);

    assert_eq!(findings["create"]["isError"], false, "{findings}");
    assert_eq!(findings["graph"]["isError"], false, "{findings}");
    let entities = findings["graph"]["structured"]["entities"].as_array().expect("read_graph has structured entities");
    let names: Vec<&str> = entities.iter().filter_map(|entity| entity["name"].as_str()).collect();
    assert_eq!(names, ["toolgate", "relay-test"], "{findings}");
    assert_eq!(entities[0]["observations"], findings["entities"][0]["observations"]);
    let stored = std::fs::read_to_string(&memory_file).expect("the memory file was written");
    assert!(stored.contains("rewrites annotations"), "{stored}");
}

/// git_status and git_log on a repository with one commit.
pub(crate) fn git(via: Via) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let repo = std::fs::canonicalize(dir.path()).expect("canonical path");
    let head = init_repository(&repo);
    let repo_text = repo.to_string_lossy().into_owned();
    let peer = Peers::locate().mcp_server_git(&repo);
    let findings = python_via("servers.py", &["--scenario", "git", "--repo", repo_text.as_str()], &peer, via);

    assert_eq!(findings["status"]["isError"], false, "{findings}");
    let status = text(&findings["status"]);
    assert!(status.contains("working tree clean") || status.contains("nothing to commit"), "{status}");
    let log = text(&findings["log"]);
    assert!(log.contains(&head), "git_log shows commit {head}: {log}");
    assert!(log.contains("first commit through the relay test"), "{log}");
}

/// `git init`, one file, one commit; returns the commit id.
pub(crate) fn init_repository(repo: &Path) -> String {
    let git = |args: &[&str]| {
        let output = Command::new("git")
            .args([
                "-c",
                "user.name=Relay Test",
                "-c",
                "user.email=relay@example.invalid",
                "-c",
                "commit.gpgsign=false",
            ])
            .args(args)
            .current_dir(repo)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .output()
            .expect("git runs");
        assert!(output.status.success(), "git {args:?} failed: {}", String::from_utf8_lossy(&output.stderr));
        String::from_utf8_lossy(&output.stdout).trim().to_owned()
    };
    git(&["init", "--quiet"]);
    std::fs::write(repo.join("README.md"), "relay test\n").expect("write a file");
    git(&["add", "README.md"]);
    git(&["commit", "--quiet", "-m", "first commit through the relay test"]);
    git(&["rev-parse", "HEAD"])
}

#[test]
fn filesystem_over_stdio() {
    filesystem(Via::Stdio);
}

#[test]
fn memory_over_stdio() {
    memory(Via::Stdio);
}

#[test]
fn git_over_stdio() {
    git(Via::Stdio);
}
