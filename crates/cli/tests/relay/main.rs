//! End-to-end tests of `toolgate serve` as a relay: real MCP clients (the Python SDK's `ClientSession` and its 2.3
//! `Client`, the MCP Inspector CLI, a raw JSON-RPC line client) talking through toolgate to real servers
//! (server-everything, server-filesystem, server-memory, mcp-server-git, the modern fixture) and to the misbehave
//! fixture where only a fake can show something (every field a relay must keep).
//!
//! One test binary, modules by topic. The Python clients live in `tests/relay_clients/` and print one JSON object
//! each; the tests assert on it. Peers come from `cargo xtask test`; a missing peer fails the test, never skips it.
//! Every process runs under a generous hang guard; nothing asserts wall-clock time.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod everything;
mod http;
mod inspector;
mod lossless;
mod modern_bridge;
mod modern_sdk;
mod progress_order;
mod protocol;
mod reference_trust;
mod servers;
mod support;

use serde_json::Value;

/// The `_meta` key of toolgate's record on every relayed tool.
pub(crate) const META_KEY: &str = "toolgate/annotations";

/// The four hints are explicit booleans in the tool's annotations.
pub(crate) fn assert_explicit_hints(tool: &Value) {
    for hint in ["readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint"] {
        assert!(tool["annotations"][hint].is_boolean(), "{hint} is not explicit on {}: {tool}", tool["name"]);
    }
}

/// The tool carries toolgate's `_meta` record: a source per hint, category, risk and fingerprint.
pub(crate) fn assert_toolgate_record(tool: &Value) {
    let record = &tool["_meta"][META_KEY];
    assert!(record.is_object(), "no _meta[{META_KEY:?}] on {}: {tool}", tool["name"]);
    for hint in ["readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint"] {
        assert!(record["sources"][hint].is_string(), "no source for {hint} on {}: {record}", tool["name"]);
    }
    assert!(record["category"].as_str().is_some_and(|category| !category.is_empty()), "category: {record}");
    assert!(record["risk"].as_u64().is_some_and(|risk| risk <= 4), "risk 0-4: {record}");
    assert!(record["fingerprint"].as_str().is_some_and(|print| print.starts_with("sha256:")), "fingerprint: {record}");
}
