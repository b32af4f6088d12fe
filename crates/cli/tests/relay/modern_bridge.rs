//! Issue 12, "an upstream elicitation bridged": the Python SDK 2.3 `Client` on the 2026-07-28 wire (auto and
//! pinned, stdio and HTTP) calls server-everything's `trigger-elicitation-request`, whose legacy server pushes
//! `elicitation/create` mid-call. A modern client accepts no request from the server, so toolgate must answer it
//! `input_required` and resume the held upstream call on the retry: the client's elicitation callback sees the
//! server's question, and the tool's answer carries what the callback said (accepted) or the decline.
//!
//! The client's `protocolVersion` is the proof that the modern wire carried it: pinned, the SDK never falls back,
//! and in auto mode it says what `server/discover` negotiated. Every wait is a hang guard.

use crate::modern_sdk::{Gate, MODERN, Upstream, texts};
use crate::support::Via;

fn bridged(via: Via, mode: &str) {
    let gate = Gate::new(Upstream::Everything, via);
    let (findings, serving) = gate.run_client(via, mode, Upstream::Everything, "bridge");
    assert_eq!(findings["protocolVersion"], MODERN, "{findings}");
    let accepted = &findings["accepted"];
    let asked = accepted["asked"].as_array().expect("asked");
    assert_eq!(asked.len(), 1, "the server's question reached the callback once: {findings}");
    assert!(asked[0]["message"].as_str().is_some_and(|message| message.contains("Please provide")), "{findings}");
    assert_eq!(accepted["isError"], false, "{findings}");
    let answer = texts(accepted);
    assert!(answer.contains("User provided the requested information"), "{answer}");
    assert!(answer.contains("Ada Lovelace"), "{answer}");
    let declined = &findings["declined"];
    assert_eq!(declined["asked"].as_array().map(Vec::len), Some(1), "{findings}");
    let answer = texts(declined);
    assert!(answer.contains("User declined"), "{answer}");
    assert!(!answer.contains("Ada Lovelace"), "{answer}");
    // Both calls reached their end upstream: each has a completed row.
    let rows = gate.call_rows(2);
    let done = rows.iter().filter(|row| row["tool"] == "trigger-elicitation-request" && row["outcome"] == "ok").count();
    assert_eq!(done, 2, "toolgate's call rows: {rows:#?}");
    drop(serving);
}

#[test]
fn bridged_elicitation_auto_over_stdio() {
    bridged(Via::Stdio, "auto");
}

#[test]
fn bridged_elicitation_pinned_over_http() {
    bridged(Via::Http, MODERN);
}

#[test]
fn bridged_elicitation_pinned_over_stdio() {
    bridged(Via::Stdio, MODERN);
}
