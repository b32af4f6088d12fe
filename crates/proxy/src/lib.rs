//! The MCP runtime between clients and upstream servers: sessions, upstream management and the call pipeline.
//!
//! - [`spec`]: the lowered configuration the runtime runs from (no config syntax here).
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
mod resource_index;
mod routing;
pub mod session;
pub mod spec;
pub mod upstreams;
pub mod uri_template;

pub use gateway::{Gateway, GatewayError, GatewayStatus, NamedStatus};
