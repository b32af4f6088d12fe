//! End-to-end tests of the approval console in a real headless Chromium (WebDriver through Debian's
//! `chromedriver`), against the real `toolgate serve` binary with its HTTP listener and real MCP clients:
//!
//! - [`approvals`]: the MCP Python SDK's client (no elicitation) calls the demo's destructive `delete_note`; the
//!   pending approval appears in the open console without a reload; **Approve** lets the waiting call through (the
//!   note is gone), **Deny** refuses it with an `isError` result (the note stays).
//! - [`pins`]: a pinned upstream changes a tool definition (a rug pull); the tools page shows the diff;
//!   **Pin this definition** releases the tool (listed and callable again) and pins it in the store.
//! - [`onboarding`]: a new pinned upstream's page lists every tool with its hints declared, inferred and enforced,
//!   the disagreeing ones first; forged forms (another site's, one without the CSRF token) pin nothing; **Pin the
//!   agreeing ones** pins exactly those (store, audit, a client's `tools/list`), then **Pin all** the rest.
//! - [`refusals`]: without the login token (401), a form auto-submitted from another site's origin (403), a form
//!   from another loopback port without the CSRF token and one from the console's own page stripped of it (403):
//!   the approval stays pending.
//! - [`sso`]: people log in through the real OpenID provider's pages (PKCE); a person outside the approver group and
//!   one approving their own call are refused, an approver's approval lets the waiting call through, the audit
//!   rows name each person.
//!
//! With `TOOLGATE_SCREENSHOTS=DIR` the tests also save a PNG of each page (`cargo xtask screenshots`).
//! Loopback only; every wait is a hang guard, never a timing assertion.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod approvals;
mod browser;
mod onboarding;
mod pins;
mod refusals;
mod sso;
/// What the console tests share with the guardrail tests: test-support's runner, demo setup and raw HTTP client.
mod support {
    pub(crate) use toolgate_test_support::toolgate::raw_http::HttpSession;
    pub(crate) use toolgate_test_support::toolgate::{Serving as Serve, Setup, poll, run as toolgate, start_serve};
    pub(crate) use toolgate_test_support::{HANG_GUARD, wait_guarded};

    /// The directory of the Python guardrail clients (the guardrail tests use them too).
    pub(crate) fn clients_dir() -> &'static std::path::Path {
        std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/guardrail_clients"))
    }
}

use std::process::{Child, Command, Stdio};

use serde_json::Value;
use toolgate_test_support::Peers;

use crate::support::{Serve, clients_dir, poll};

/// The console's one-time login URL that `toolgate serve` printed.
pub(crate) fn login_url(serve: &Serve) -> String {
    poll("the console's login link on stderr", || {
        serve.stderr_text().lines().find_map(|line| line.split("console at ").nth(1).map(|url| url.trim().to_owned()))
    })
}

/// The Python SDK client without elicitation deleting `note` (it waits for the approval queue), started.
pub(crate) fn waiting_client(serve: &Serve, note: u64) -> Child {
    let peers = Peers::locate();
    let mut command = Command::new(peers.python());
    command.env("PYTHONDONTWRITEBYTECODE", "1").arg(clients_dir().join("confirm_delete.py")).args([
        "--url",
        &serve.url,
        "--scenario",
        "queue",
        "--note",
        &note.to_string(),
    ]);
    command.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    command.spawn().expect("the Python client starts")
}

/// What the Python client printed: its last stdout line as JSON (panics with its output otherwise).
pub(crate) fn client_findings(child: Child, what: &str) -> Value {
    let run = support::wait_guarded(child, what);
    let line = run.stdout.lines().rev().find(|line| !line.trim().is_empty()).unwrap_or_default();
    match (run.code, serde_json::from_str::<Value>(line)) {
        (Some(0), Ok(value)) => value,
        _ => panic!("{what} failed: {run:?}"),
    }
}

/// The texts of a tool result summary.
pub(crate) fn texts(result: &Value) -> String {
    result["texts"]
        .as_array()
        .map(|texts| texts.iter().filter_map(Value::as_str).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

/// The pending approvals `toolgate approvals list --json` shows.
pub(crate) fn pending_approvals(state: &str) -> Vec<Value> {
    let list = support::toolgate(&["approvals", "list", "--json", "--state-dir", state]);
    list.stdout.lines().filter_map(|line| serde_json::from_str::<Value>(line).ok()).collect()
}
