//! `toolgate verify` against liar.py (every lie caught with its evidence, the honest reader supported) and against
//! real servers (no finding against an honest tool; writes and connections seen where the tools say so). Each run
//! is the real binary, bubblewrap and strace; nothing here asserts how long anything took.

use std::path::Path;

use serde_json::Value;
use toolgate_test_support::{PeerCommand, Peers, evader, liar};

use crate::support::{json_stdout, toolgate};

/// `toolgate verify --format json --allow-writes --no-record --dir DIR [EXTRA...] -- PEER`, with the peer's `PATH`.
fn verify(dir: &Path, extra: &[&str], peer: &PeerCommand) -> (Option<i32>, Value) {
    let argv = peer.argv();
    let dir = dir.to_string_lossy();
    let mut args = vec!["verify", "--format", "json", "--allow-writes", "--dir", &dir];
    if !extra.contains(&"--state-dir") {
        args.push("--no-record");
    }
    args.extend_from_slice(extra);
    args.push("--");
    args.extend(argv.iter().map(String::as_str));
    let run = toolgate(&args, Some(peer));
    (run.code, json_stdout(&run))
}

fn tool<'a>(report: &'a Value, name: &str) -> &'a Value {
    report["tools"]
        .as_array()
        .and_then(|tools| tools.iter().find(|tool| tool["name"] == name))
        .unwrap_or_else(|| panic!("no tool {name} in {report:#}"))
}

fn codes(tool: &Value) -> Vec<String> {
    tool["findings"].as_array().map_or_else(Vec::new, |findings| {
        findings.iter().filter_map(|finding| finding["code"].as_str().map(str::to_owned)).collect()
    })
}

fn message(tool: &Value) -> String {
    tool["findings"][0]["message"].as_str().unwrap_or_default().to_owned()
}

/// Every tool of the report: no finding.
fn no_finding(report: &Value) {
    for tool in report["tools"].as_array().into_iter().flatten() {
        assert!(codes(tool).is_empty(), "{} has findings: {tool:#}", tool["name"]);
    }
}

/// The names of the tools whose calls wrote (or tried to).
fn writers(report: &Value) -> Vec<String> {
    report["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|tool| tool["observed"]["wrote"] == true)
        .filter_map(|tool| tool["name"].as_str().map(str::to_owned))
        .collect()
}

fn supported(report: &Value, name: &str) -> bool {
    tool(report, name)["observed"]["supported"] == true
}

#[test]
fn every_lie_of_the_liar_is_caught_with_its_evidence() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("notes.txt"), "buy milk\n").unwrap();
    let (code, report) = verify(dir.path(), &[], &liar());
    assert_eq!(code, Some(1), "findings exit 1: {report:#}");

    let read_status = tool(&report, "read_status");
    assert_eq!(codes(read_status), ["TG401"]);
    assert!(message(read_status).contains("created status.log"), "{read_status:#}");

    let lookup = tool(&report, "lookup_cache");
    assert_eq!(codes(lookup), ["TG402"]);
    assert!(message(lookup).contains("127.0.0.1:9"), "{lookup:#}");
    assert!(lookup["observed"]["succeeded"] == 0, "the refused connection failed the call, yet it is evidence");

    let set_mode = tool(&report, "set_mode");
    assert_eq!(codes(set_mode), ["TG403"]);
    assert!(message(set_mode).contains("appended to modes.log"), "{set_mode:#}");

    let tidy = tool(&report, "tidy_notes");
    assert_eq!(codes(tidy), ["TG404"]);
    assert!(message(tidy).contains("removed notes.txt"), "{tidy:#}");

    let honest = tool(&report, "read_notes");
    assert!(codes(honest).is_empty() && supported(&report, "read_notes"), "{honest:#}");
    // The report carries the definition the evidence is of, as listed (a record keeps only its fingerprint).
    assert_eq!(honest["definition"]["name"], "read_notes", "{honest:#}");
    assert!(honest["definition"]["inputSchema"].is_object(), "{honest:#}");
    assert_eq!(writers(&report), ["read_status", "set_mode", "tidy_notes"]);
    // The working directory itself was never touched: the calls ran in a scratch copy.
    assert_eq!(std::fs::read_to_string(dir.path().join("notes.txt")).unwrap(), "buy milk\n");
    assert!(!dir.path().join("status.log").exists());
}

#[test]
fn without_allow_writes_the_claimed_writers_are_not_called_and_sarif_names_the_rules() {
    let dir = tempfile::tempdir().unwrap();
    let argv = liar().argv();
    let dir_text = dir.path().to_string_lossy();
    let mut args = vec!["verify", "--format", "sarif", "--no-record", "--dir", &dir_text, "--"];
    args.extend(argv.iter().map(String::as_str));
    let run = toolgate(&args, None);
    assert_eq!(run.code, Some(1), "{run:?}");
    let sarif = json_stdout(&run);
    let results = sarif["runs"][0]["results"].as_array().unwrap();
    let rules: Vec<&str> = results.iter().filter_map(|result| result["ruleId"].as_str()).collect();
    assert_eq!(rules, ["TG401", "TG402"], "only the read-only claims were called: {sarif:#}");
    assert_eq!(sarif["runs"][0]["tool"]["driver"]["rules"].as_array().map(Vec::len), Some(4));
}

#[test]
fn server_filesystem_writes_only_with_its_write_tools() {
    let peers = Peers::locate();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("readme.txt"), "hello\n").unwrap();
    // `.`, not an absolute path: the server is allowed the scratch copy it runs in, not the directory it copies.
    let script = std::fs::canonicalize(peers.node_bin_dir().join("mcp-server-filesystem")).unwrap();
    let server = PeerCommand::new(peers.node()).arg(script.to_string_lossy()).arg(".").env("PATH", peers.path_env());
    let (code, report) = verify(dir.path(), &[], &server);
    assert_eq!(code, Some(0), "{report:#}");
    no_finding(&report);
    let writers = writers(&report);
    for writer in &writers {
        assert!(["write_file", "edit_file", "create_directory", "move_file"].contains(&writer.as_str()), "{writer}");
    }
    assert!(writers.contains(&"write_file".to_owned()), "{writers:?}");
    for reader in ["read_text_file", "list_directory", "directory_tree", "search_files", "get_file_info"] {
        assert!(supported(&report, reader), "{reader}: {:#}", tool(&report, reader));
    }
}

#[test]
fn server_memory_writes_its_file_with_create_and_delete_only() {
    let peers = Peers::locate();
    let dir = tempfile::tempdir().unwrap();
    let memory = peers.server_memory(&dir.path().join("unused.jsonl"));
    let (code, report) = verify(dir.path(), &["--env", "MEMORY_FILE_PATH={scratch}/memory.jsonl"], &memory);
    assert_eq!(code, Some(0), "{report:#}");
    no_finding(&report);
    let writers = writers(&report);
    assert!(writers.contains(&"create_entities".to_owned()) && writers.contains(&"delete_entities".to_owned()));
    for writer in &writers {
        assert!(writer.starts_with("create_") || writer.starts_with("delete_") || writer == "add_observations");
    }
    for reader in ["read_graph", "search_nodes", "open_nodes"] {
        assert!(supported(&report, reader), "{reader}: {:#}", tool(&report, reader));
    }
}

#[test]
fn mcp_server_git_writes_with_add_commit_and_checkout_only() {
    let peers = Peers::locate();
    let dir = tempfile::tempdir().unwrap();
    let git = |args: &[&str]| {
        let status = std::process::Command::new("git").current_dir(dir.path()).args(args).status().unwrap();
        assert!(status.success(), "git {args:?}");
    };
    git(&["init", "-q", "-b", "main"]);
    git(&["config", "user.email", "verify@example.com"]);
    git(&["config", "user.name", "verify"]);
    std::fs::write(dir.path().join("a.txt"), "one\n").unwrap();
    git(&["add", "a.txt"]);
    git(&["commit", "-q", "-m", "first"]);
    // A staged change for git_commit, an unstaged one for the diffs.
    std::fs::write(dir.path().join("a.txt"), "one\ntwo\n").unwrap();
    git(&["add", "a.txt"]);
    std::fs::write(dir.path().join("b.txt"), "untracked\n").unwrap();
    let server = PeerCommand::new(Path::new(peers.dir()).join("venv/bin/mcp-server-git")).env("PATH", peers.path_env());
    let (code, report) = verify(dir.path(), &[], &server);
    assert_eq!(code, Some(0), "{report:#}");
    no_finding(&report);
    let writers = writers(&report);
    for expected in ["git_add", "git_commit", "git_checkout"] {
        assert!(writers.contains(&expected.to_owned()), "{expected} wrote: {writers:?}");
    }
    for reader in ["git_status", "git_diff_unstaged", "git_diff_staged", "git_log", "git_show"] {
        assert!(supported(&report, reader), "{reader}: {:#}", tool(&report, reader));
    }
}

#[test]
fn server_everything_time_and_fetch_have_no_finding_and_fetch_tries_to_reach_out() {
    let peers = Peers::locate();
    let dir = tempfile::tempdir().unwrap();
    let (code, everything) = verify(dir.path(), &["--timeout-per-call", "30"], &peers.server_everything());
    assert_eq!(code, Some(0), "{everything:#}");
    no_finding(&everything);
    assert!(supported(&everything, "echo") && supported(&everything, "get-sum"));
    // Asked for an error message (`messageType: error`, the schema's first choice), the tool answers
    // `Error: Operation failed` without `isError`: a failed call, with the answer's first line as its reason.
    let annotated = tool(&everything, "get-annotated-message");
    assert_eq!(annotated["arguments"]["messageType"], "error", "{annotated:#}");
    assert!(annotated["observed"]["succeeded"] == 0 && !supported(&everything, "get-annotated-message"));
    assert_eq!(
        annotated["observations"][0]["error"], "answered an error without isError: \"Error: Operation failed\"",
        "{annotated:#}"
    );

    let (code, time) = verify(dir.path(), &[], &peers.mcp_server_time());
    assert_eq!(code, Some(0), "{time:#}");
    assert!(supported(&time, "get_current_time") && supported(&time, "convert_time"), "{time:#}");

    let (code, fetch) = verify(dir.path(), &[], &peers.mcp_server_fetch());
    assert_eq!(code, Some(0), "open-world as declared: {fetch:#}");
    let fetch_tool = tool(&fetch, "fetch");
    assert_eq!(fetch_tool["observed"]["connected"], true, "no network, yet the attempt is seen: {fetch_tool:#}");
    let connections = fetch_tool["observations"][0]["connections"].as_array().unwrap();
    assert!(connections.iter().any(|connection| connection.as_str().unwrap().contains("refused")), "{connections:?}");
}

/// A server that connects out and then truncates verify's trace through `/proc/self/root` is still caught: the
/// trace is outside the sandbox's reach (strace runs outside bwrap), and the attempt on it is itself a write.
/// A local (`AF_UNIX`) socket is no finding but no support either.
#[test]
fn a_server_cannot_wipe_the_trace_and_a_local_socket_is_never_support() {
    let dir = tempfile::tempdir().unwrap();
    let (code, report) = verify(dir.path(), &[], &evader());
    assert_eq!(code, Some(1), "{report:#}");
    let clock = tool(&report, "read_clock");
    assert!(!supported(&report, "read_clock"), "{clock:#}");
    let mut found = codes(clock);
    found.sort();
    assert_eq!(found, ["TG401", "TG402"], "{clock:#}");
    let connections = clock["observations"][0]["connections"].to_string();
    assert!(connections.contains("127.0.0.1:9"), "the connection survived the truncation: {clock:#}");
    let socket = tool(&report, "read_socket");
    assert!(codes(socket).is_empty() && !supported(&report, "read_socket"), "{socket:#}");
    let local = socket["observations"][0]["local_connections"].to_string();
    assert!(local.contains("unix:/run/toolgate-evader.sock"), "{socket:#}");
}

/// The user's repository configures a command (`core.fsmonitor`): preparing the copy must not run it outside
/// the sandbox (it would write a marker outside the copy).
#[test]
fn a_repository_s_fsmonitor_never_runs_outside_the_sandbox() {
    let dir = tempfile::tempdir().unwrap();
    let elsewhere = tempfile::tempdir().unwrap();
    let marker = elsewhere.path().join("fsmonitor-ran");
    let git = |args: &[&str]| {
        let status = std::process::Command::new("git").current_dir(dir.path()).args(args).status().unwrap();
        assert!(status.success(), "git {args:?}");
    };
    git(&["init", "-q", "-b", "main"]);
    std::fs::write(dir.path().join("notes.txt"), "buy milk\n").unwrap();
    git(&["add", "notes.txt"]);
    let hook = format!("touch {}; false", marker.display());
    git(&["config", "core.fsmonitor", &hook]);
    let (_, report) = verify(dir.path(), &[], &liar());
    assert!(report["tools"].as_array().is_some_and(|tools| !tools.is_empty()), "{report:#}");
    assert!(!marker.exists(), "the repository's fsmonitor ran outside the sandbox");
}

/// A FIFO and a link to a file outside the tree in the verified directory: verify finishes, the link is copied as
/// a link (never followed), and the honest reader keeps its support.
#[test]
fn a_fifo_and_an_outside_link_in_the_directory_are_not_followed() {
    let dir = tempfile::tempdir().unwrap();
    let elsewhere = tempfile::tempdir().unwrap();
    let secret = elsewhere.path().join("secret.txt");
    std::fs::write(&secret, "secret\n").unwrap();
    std::fs::write(dir.path().join("notes.txt"), "buy milk\n").unwrap();
    std::os::unix::fs::symlink(&secret, dir.path().join("link.txt")).unwrap();
    let status = std::process::Command::new("mkfifo").arg(dir.path().join("pipe")).status().unwrap();
    assert!(status.success());
    let (code, report) = verify(dir.path(), &[], &liar());
    assert_eq!(code, Some(1), "the liar's findings, and a finished run: {report:#}");
    assert!(supported(&report, "read_notes"), "{:#}", tool(&report, "read_notes"));
    assert_eq!(std::fs::read_to_string(&secret).unwrap(), "secret\n");
}
