//! The same client scenarios over Streamable HTTP: toolgate serves `http://127.0.0.1:PORT/mcp` (a port it picks
//! and announces on stderr) and each client posts there; the upstreams are the same real servers over stdio.

use crate::support::Via;

#[test]
fn everything_tools_list_over_http() {
    crate::everything::tools_list(Via::Http);
}

#[test]
fn everything_echo_over_http() {
    crate::everything::echo(Via::Http);
}

#[test]
fn everything_elicitation_accepted_over_http() {
    crate::everything::elicitation_accepted(Via::Http);
}

#[test]
fn everything_elicitation_declined_over_http() {
    crate::everything::elicitation_declined(Via::Http);
}

#[test]
fn everything_sampling_over_http() {
    crate::everything::sampling(Via::Http);
}

#[test]
fn everything_progress_over_http() {
    crate::everything::progress(Via::Http);
}

#[test]
fn everything_cancellation_over_http() {
    crate::everything::cancellation(Via::Http);
}

#[test]
fn everything_resources_list_changed_over_http() {
    crate::everything::resources_list_changed(Via::Http);
}

#[test]
fn filesystem_over_http() {
    crate::servers::filesystem(Via::Http);
}

#[test]
fn memory_over_http() {
    crate::servers::memory(Via::Http);
}

#[test]
fn git_over_http() {
    crate::servers::git(Via::Http);
}

#[test]
fn inspector_tools_list_over_http() {
    crate::inspector::tools_list(Via::Http);
}

#[test]
fn inspector_tools_call_over_http() {
    crate::inspector::tools_call(Via::Http);
}
