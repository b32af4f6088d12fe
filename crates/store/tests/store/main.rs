//! Integration tests of `toolgate-store` against real SQLite files in temporary directories: the audit chain and
//! its tamper detection, the bounded queue, pins and quarantine, approvals across two handles, and a `kill -9` of a
//! writing child process.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod approvals;
mod audit;
mod crash;
mod journal;
mod open;
mod pins;
mod retention;
mod support;
