//! Transports toward clients. Each turns bytes into messages for a [`crate::session::ClientSession`] and
//! [`crate::session::ClientBound`] messages back into bytes; none of them knows MCP beyond its framing.

pub mod http;

pub mod stdio;
