//! End-to-end tests of the guardrail commands of the `toolgate` binary: `audit`, `approvals`, `pins`, `manifest`
//! and `prompt`, each run as a process against a temporary state directory.
//!
//! The database is populated through the `toolgate-store` API (as the gateway would), tampered with through a raw
//! SQL connection (as someone editing the file would), and decisions are observed through the store's own waiter.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod approvals;
mod audit;
mod manifest;
mod pins;
mod prompt;
mod store_config;
mod support;
