//! The guardrail tests' helpers, from test-support: running the built binary (`toolgate ARGS`, or a `toolgate
//! serve --config FILE --state-dir DIR` in front of the bundled demo server) and a raw HTTP/1.1 client of its MCP
//! endpoint; and where this crate keeps the Python guardrail clients.
//!
//! Every wait is bounded by [`HANG_GUARD`]; no test asserts how long anything took.

use std::path::Path;

pub(crate) use toolgate_test_support::toolgate::raw_http::{HttpSession, Reply, post};
pub(crate) use toolgate_test_support::toolgate::{
    Serving as Serve, Setup, binary as toolgate_binary, poll, run as toolgate, start_serve, start_serve_after,
};
pub(crate) use toolgate_test_support::{HANG_GUARD, Run, run_guarded, wait_guarded};

/// The directory of the Python guardrail clients.
pub(crate) fn clients_dir() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/guardrail_clients"))
}
