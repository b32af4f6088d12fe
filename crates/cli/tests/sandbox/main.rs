//! Sandboxed stdio upstreams through the real `toolgate serve` (docs/sandbox.md): the lying fixture's write and
//! loopback connection refused under `strict` with a clear `isError` naming the rule; escapes tried and refused
//! (writing outside the writable paths, reading the state directory and the config, reaching toolgate's own port,
//! reading a variable that was not passed, a fork bomb); and real servers still working under `auto`.
//!
//! These tests need bubblewrap, util-linux and Linux 6.14 or later, as CI has (`.ci/run` installs bubblewrap).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod escapes;
mod real_servers;

use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use toolgate_test_support::toolgate::raw_http::HttpSession;
use toolgate_test_support::toolgate::{Serving, command};

/// A config directory, a state directory and a work directory for one test.
pub(crate) struct Sandboxed {
    pub(crate) dir: tempfile::TempDir,
    pub(crate) serve: Serving,
}

impl Sandboxed {
    /// Writes `gateway.toml` (the `upstreams` text, an HTTP listener on a port the OS picks, every call allowed)
    /// and starts `toolgate serve` with `env` added to its environment.
    pub(crate) fn start(dir: tempfile::TempDir, upstreams: &str, env: &[(&str, &str)]) -> Sandboxed {
        Sandboxed::start_on(dir, upstreams, env, 0)
    }

    /// Like [`Sandboxed::start`], listening on `port` (0: one the OS picks).
    pub(crate) fn start_on(dir: tempfile::TempDir, upstreams: &str, env: &[(&str, &str)], port: u16) -> Sandboxed {
        let config = dir.path().join("gateway.toml");
        let text = format!(
            "{upstreams}\n[listen.http]\nbind = \"127.0.0.1:{port}\"\n\n[[policy.rule]]\nid = \"all\"\neffect = \"allow\"\n"
        );
        std::fs::write(&config, text).unwrap();
        let mut serve = command();
        serve.args(["serve", "--config"]).arg(&config).arg("--state-dir").arg(dir.path().join("state"));
        serve.env("TOOLGATE_LOG", "info");
        for (key, value) in env {
            serve.env(key, value);
        }
        Sandboxed { serve: Serving::start(serve), dir }
    }

    pub(crate) fn session(&self) -> HttpSession {
        HttpSession::open(&self.serve.authority, &[]).unwrap()
    }

    pub(crate) fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
}

/// A stdio upstream table running the fixture `script` with the venv's Python, in `cwd`, with `sandbox` as its
/// `[upstream.sandbox]` body.
pub(crate) fn fixture_upstream(name: &str, script: &str, cwd: &Path, env: &str, sandbox: &str) -> String {
    let python = toolgate_test_support::Peers::locate().python();
    let script = toolgate_test_support::fixtures_dir().join(script);
    format!(
        "[[upstream]]\nname = \"{name}\"\ncommand = {python:?}\nargs = [{script:?}]\ncwd = {cwd:?}\nenv = {{ {env} }}\n\
         [upstream.sandbox]\n{sandbox}\n"
    )
}

/// Calls `tool` and returns the result object (an `isError` result included).
pub(crate) fn call(session: &mut HttpSession, tool: &str, arguments: Value) -> Value {
    let response = session.request("tools/call", json!({"name": tool, "arguments": arguments})).unwrap();
    response.get("result").cloned().unwrap_or_else(|| panic!("no result for {tool}: {response}"))
}

/// Every text of a result, joined.
pub(crate) fn texts(result: &Value) -> String {
    result["content"]
        .as_array()
        .map(|items| items.iter().filter_map(|item| item["text"].as_str()).collect::<Vec<_>>().join("\n"))
        .unwrap_or_default()
}

pub(crate) fn is_error(result: &Value) -> bool {
    result["isError"].as_bool() == Some(true)
}

/// Under `strict`, the liar's `read_status` (a write in its working directory while it claims read-only) and
/// `lookup_cache` (a loopback connection while it claims closed-world) are refused, each with the server's own
/// error and toolgate's note naming the rule, at once rather than after a timeout; its honest read still works.
#[test]
fn strict_refuses_the_liars_write_and_connection_with_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path().join("work");
    std::fs::create_dir(&work).unwrap();
    std::fs::write(work.join("notes.txt"), "hello").unwrap();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let upstream = fixture_upstream("liar", "liar.py", &work, "", "mode = \"strict\"");
    let gateway = Sandboxed::start(dir, &upstream, &[]);
    let mut session = gateway.session();

    let write = call(&mut session, "read_status", json!({}));
    let text = texts(&write);
    assert!(is_error(&write), "{write}");
    assert!(text.contains("Read-only file system"), "{text}");
    assert!(
        text.contains("toolgate: upstream \"liar\" runs in a sandbox (mode strict)")
            && text.contains("a write outside the writable paths (the file system is read-only except: (none))"),
        "{text}"
    );
    assert!(!work.join("status.log").exists());

    let connect = call(&mut session, "lookup_cache", json!({"key": "k", "port": port}));
    let text = texts(&connect);
    assert!(is_error(&connect), "{connect}");
    assert!(
        text.contains("Connection refused") && text.contains("a network connection (the sandbox has no network)"),
        "{text}"
    );
    listener.set_nonblocking(true).unwrap();
    assert!(listener.accept().is_err(), "nothing reached the test's listener");

    let read = call(&mut session, "read_notes", json!({}));
    assert!(!is_error(&read) && texts(&read) == "hello", "{read}");
}

/// Under `auto`, the network follows the effective hints: the liar starts without it, its listing shows an
/// open-world tool (here by an override), and it is started again with the network before any client sees it, so
/// the connection goes through; its write is still refused (nothing is writable).
#[test]
fn auto_gives_the_network_when_a_tool_is_open_world() {
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path().join("work");
    std::fs::create_dir(&work).unwrap();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let mut upstream = fixture_upstream("liar", "liar.py", &work, "", "mode = \"auto\"");
    upstream.push_str("[upstream.tools.lookup_cache]\nopenWorldHint = true\n");
    let gateway = Sandboxed::start(dir, &upstream, &[]);
    let mut session = gateway.session();
    let connect = call(&mut session, "lookup_cache", json!({"key": "k", "port": port}));
    assert!(!is_error(&connect) && texts(&connect).contains("connected"), "{connect}");
    assert!(gateway.serve.stderr_text().contains("need another sandbox profile"), "{}", gateway.serve.stderr_text());
    let write = call(&mut session, "read_status", json!({}));
    assert!(is_error(&write) && texts(&write).contains("Read-only file system"), "{write}");
}

/// A strict sandbox that cannot be built (here a writable path that does not exist) fails its upstream closed: it is
/// not started unsandboxed, its tools are absent, and the status says why.
#[test]
fn a_strict_sandbox_that_cannot_be_built_fails_closed() {
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path().join("work");
    std::fs::create_dir(&work).unwrap();
    let missing = dir.path().join("missing");
    let sandbox = format!("mode = \"strict\"\nwritable = [{:?}]", missing.to_string_lossy());
    let upstream = fixture_upstream("liar", "liar.py", &work, "", &sandbox);
    let gateway = Sandboxed::start(dir, &upstream, &[]);
    let mut session = gateway.session();
    let listed = session.request("tools/list", json!({})).unwrap();
    assert_eq!(listed["result"]["tools"], json!([]), "{listed}");
    let status =
        toolgate_test_support::toolgate::run(&["status", "--state-dir", &gateway.path("state").to_string_lossy()]);
    assert!(status.stdout.contains("sandbox mode strict") && status.stdout.contains("does not exist"), "{status:?}");
}
