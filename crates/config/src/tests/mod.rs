//! Tests of the whole crate through its public functions: error messages with positions, defaults, credentials,
//! imports, and the documented examples.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod credentials;
mod defaults;
mod docs;
mod errors;
mod guardrail_defaults;
mod guardrail_errors;
mod import;
mod oauth;
