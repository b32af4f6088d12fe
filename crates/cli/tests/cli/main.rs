//! End-to-end tests of the `toolgate` binary: real MCP servers from npm/PyPI, the bundled demo, saved tool lists,
//! and a misbehaving fixture for faults no real server produces on demand.
//!
//! One test binary (faster to link); modules by command. Output is snapshot-tested with insta, with temporary
//! paths redacted. Peers come from `cargo xtask test`; a missing peer fails the test, never skips it.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod check_config;
mod faults;
mod http_upstream;
mod infer;
mod inspect;
mod instance;
mod lint;
mod status;
mod support;
mod verify;
