//! Held calls over stdio, both ways: a 2026-07-28 client speaking to the real `toolgate serve` on its stdin and
//! stdout, in front of the legacy fixture over stdio, where nothing on the wire says which call an upstream's
//! request belongs to. One call is held for its retry while another call of the same client runs: what the
//! upstream asks for the running one must reach it at once, not wait in the held call until that call's retry (or
//! its expiry, 120 s by default), and must never be shown as the held call's question.
//!
//! Waits are hang guards only.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Stdio};
use std::sync::mpsc;

use serde_json::{Value, json};
use toolgate_test_support::HANG_GUARD;
use toolgate_test_support::toolgate::command;

use super::bridging::{asked, modern_params, text};

/// The fixture's tool that asks twice (a name, then a colour).
const MULTI_ROUND: &str = "test_input_required_result_multi_round";
/// The fixture's tool that asks once (a name).
const ELICITATION: &str = "test_input_required_result_elicitation";

/// `toolgate serve` with `[listen.stdio]` only, its stdin to write and its stdout lines to read.
struct StdioToolgate {
    child: Child,
    stdin: ChildStdin,
    lines: mpsc::Receiver<String>,
    /// Messages read while waiting for another id.
    unread: Vec<Value>,
    _dir: tempfile::TempDir,
}

impl StdioToolgate {
    /// In front of the fixture over stdio (passthrough, every call allowed), held calls kept 120 s.
    fn start() -> StdioToolgate {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let config = dir.path().join("gateway.toml");
        let text = format!(
            "[[upstream]]\nname = \"fixture\"\ncommand = {binary:?}\nargs = [\"--stdio\"]\npassthrough = true\n\n\
             [listen.stdio]\n\n\
             [[policy.rule]]\nid = \"all\"\neffect = \"allow\"\nmatch = {{ tool = \"*\" }}\n",
            binary = toolgate_test_support::fixture_binary(),
        );
        std::fs::write(&config, text).expect("write the config");
        let mut serve = command();
        serve.args(["serve", "--config"]).arg(&config).arg("--state-dir").arg(dir.path().join("state"));
        serve.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::null());
        let mut child = serve.spawn().expect("toolgate serve starts");
        let stdin = child.stdin.take().expect("stdin is piped");
        let stdout = child.stdout.take().expect("stdout is piped");
        let (sender, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if sender.send(line).is_err() {
                    break;
                }
            }
        });
        StdioToolgate { child, stdin, lines, unread: Vec::new(), _dir: dir }
    }

    /// Writes a modern `tools/call` of `tool` declaring elicitation, with `extra` params.
    fn call(&mut self, id: u64, tool: &str, extra: Value) {
        let mut params = modern_params(("name", tool), json!({"elicitation": {}}), extra);
        params["arguments"] = json!({});
        let request = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params});
        writeln!(self.stdin, "{request}").and_then(|()| self.stdin.flush()).expect("toolgate reads its stdin");
    }

    /// Retries `tool` (request `id`) with `state` and `content` as the answer under `key`; returns the response.
    fn retry(&mut self, id: u64, tool: &str, state: &str, key: &str, content: Value) -> Value {
        let answer = json!({key: {"action": "accept", "content": content}});
        self.call(id, tool, json!({"requestState": state, "inputResponses": answer}));
        self.response(id)
    }

    /// The response to request `id`, waiting for it (a hang guard, not a timing).
    fn response(&mut self, id: u64) -> Value {
        let is_it = |message: &Value| message["id"] == json!(id) && message.get("method").is_none();
        if let Some(at) = self.unread.iter().position(is_it) {
            return self.unread.remove(at);
        }
        loop {
            let line = self
                .lines
                .recv_timeout(HANG_GUARD)
                .unwrap_or_else(|_| panic!("no response to {id}; read meanwhile: {:#?}", self.unread));
            let Ok(message) = serde_json::from_str::<Value>(&line) else { continue };
            if is_it(&message) {
                return message;
            }
            self.unread.push(message);
        }
    }
}

impl Drop for StdioToolgate {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn over_stdio_a_call_held_for_its_retry_never_holds_up_what_the_upstream_asks_for_another_call() {
    let mut toolgate = StdioToolgate::start();
    // The two-round call asks its first question and is held.
    toolgate.call(1, MULTI_ROUND, json!({}));
    let (first_key, _, first_state) = asked(&toolgate.response(1));
    // Another call asks and is held too: it is now the latest call in flight to the upstream.
    toolgate.call(2, ELICITATION, json!({}));
    let (name_key, request, name_state) = asked(&toolgate.response(2));
    assert!(request["params"]["message"].as_str().unwrap_or_default().contains("What is your name?"), "{request}");

    // The first call's retry: its upstream asks its second question, which must come back to this retry, now.
    let second = toolgate.retry(3, MULTI_ROUND, &first_state, &first_key, json!({"name": "Bo"}));
    let (color_key, request, color_state) = asked(&second);
    assert!(request["params"]["message"].as_str().unwrap_or_default().contains("favorite color"), "{second}");

    // The held call resumes with its own answer only, and neither call saw the other's question.
    let named = toolgate.retry(4, ELICITATION, &name_state, &name_key, json!({"name": "Alice"}));
    assert_eq!(text(&named), "Hello, Alice!", "{named}");
    let done = toolgate.retry(5, MULTI_ROUND, &color_state, &color_key, json!({"color": "green"}));
    assert_eq!(text(&done), "Hello Bo, your favorite color is green.", "{done}");
}
