//! The MCP runtime between clients and upstream servers: sessions, upstream management and the call pipeline.
//!
//! The runtime runs from a [`toolgate_spec::GatewaySpec`], the lowered configuration (no config syntax here).
//!
//! - [`session`]: the contract between a downstream transport and the gateway ([`session::SessionFactory`],
//!   [`session::ClientSession`], [`session::ClientBound`]).
//! - [`downstream`]: the transports toward clients (stdio, Streamable HTTP).
//!
//! Messages stay raw JSON (`serde_json::Value`) end to end; only what toolgate means to change is changed.

mod access;
mod bridge;
mod call;
pub mod catalog;
pub mod downstream;
mod era;
mod gateway;
pub mod guard;
pub mod health;
mod intake;
mod inventory;
mod known_tools;
mod lifecycle;
mod listen;
mod mcp_headers;
mod methods;
pub mod metrics;
pub mod naming;
mod outbox;
mod relay;
mod relay_quota;
mod resource_index;
mod sandboxing;
pub mod session;
mod state;
mod upstream_events;
mod upstream_input;
mod upstream_rounds;
pub mod upstream_set;
pub mod upstreams;
pub mod uri_template;

pub use gateway::{Gateway, GatewayError, GatewayStatus, NamedStatus};
pub use state::approvals::ApprovalDirections;
pub use upstream_set::{UpstreamChange, diff_upstreams};

/// An upstream that is never started (`true` over stdio), for the unit tests of the code that lists, exposes and
/// selects its tools.
#[cfg(test)]
fn unstarted_upstream(name: &str) -> toolgate_spec::UpstreamSpec {
    toolgate_spec::UpstreamSpec::new(name, toolgate_upstream::Endpoint::stdio("true", Vec::<String>::new()))
}
