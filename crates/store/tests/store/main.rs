//! Integration tests of `toolgate-store` against real SQLite files in temporary directories and a real PostgreSQL
//! (a cluster per test process, a database per test; `support::matrix!` runs a body on both): the audit chain and
//! its tamper detection, the bounded queue, pins and quarantine, approvals across two handles, a `kill -9` of a
//! writing child process, and PostgreSQL's own cases (a server restart under calls, several instances, `postgres`).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod approvals;
mod audit;
mod crash;
mod heartbeat;
mod journal;
mod open;
mod pins;
mod postgres;
mod request_states;
mod retention;
mod support;
