//! The MCP runtime between clients and upstream servers: sessions, upstream management and the call pipeline.
//!
//! The runtime runs from a [`toolgate_spec::GatewaySpec`], the lowered configuration (no config syntax here).
//!
//! - [`session`]: the contract between a downstream transport and the gateway ([`session::SessionFactory`],
//!   [`session::ClientSession`], [`session::ClientBound`]).
//! - [`downstream`]: the transports toward clients (stdio, Streamable HTTP).
//!
//! Messages stay raw JSON (`serde_json::Value`) end to end; only what toolgate means to change is changed.

mod call_routes;
pub mod catalog;
mod client;
mod dispatch;
pub mod downstream;
mod gateway;
pub mod guard;
mod inventory;
mod known_tools;
mod lifecycle;
pub mod metrics;
pub mod naming;
mod outbox;
mod pipeline;
mod relay_quota;
mod resource_index;
mod routing;
pub mod session;
pub mod upstreams;
pub mod uri_template;

// The spec types under their old in-crate path, so that the modules of this crate need not change their imports
// when the spec moved to its own crate; other crates name `toolgate_spec` directly.
use toolgate_spec as spec;

pub use gateway::{Gateway, GatewayError, GatewayStatus, NamedStatus};
pub use guard::waiting::ApprovalDirections;

/// An upstream that is never started (`true` over stdio), for the unit tests of the code that lists, exposes and
/// selects its tools.
#[cfg(test)]
fn unstarted_upstream(name: &str) -> spec::UpstreamSpec {
    spec::UpstreamSpec::new(name, toolgate_upstream::Endpoint::stdio("true", Vec::<String>::new()))
}
