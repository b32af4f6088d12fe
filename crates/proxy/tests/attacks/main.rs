//! The guardrails under attack, in process: an in-process gateway with a state store in front of `misbehave.py`
//! upstreams that lie about their tools (a deleting tool declared read-only, a pinned tool whose definition is
//! swapped after approval and announced with `list_changed`), two upstreams shadowing one name, hidden tools
//! called by name, and clients that replay, forge or reuse approvals or fish for the approval id, and 2026-07-28 clients that tamper with,
//! replay or repurpose the sealed state of a confirmation round trip.
//!
//! Every case asserts the safe outcome on what the client received, what the fixture received (it logs every
//! message it read) and what the store holds. Waits are hang guards only; no test asserts how long anything took.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "../support/mod.rs"]
mod support;

mod approval_lifecycle;
mod approval_privacy;
mod approvals;
mod claims;
mod display;
mod harness;
mod pinned_content;
mod pins;
mod queue_flood;
mod round_trip;
mod store_errors;
mod url_mode;
mod visibility;
