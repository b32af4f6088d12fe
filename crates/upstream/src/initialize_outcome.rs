//! What a server said when its connection opened ([`InitializeOutcome`]): the `initialize` result of a legacy
//! session, or what `server/discover` said for a 2026-07-28 one.
//!
//! A plain value below both the connection, which keeps it, and `modern`, which reads it from a discover answer, so
//! neither names the other for it. No IO.

use serde_json::Value;

/// What the server said in its `initialize` result.
#[derive(Debug, Clone, PartialEq)]
pub struct InitializeOutcome {
    /// The negotiated protocol version.
    pub protocol_version: String,
    /// `serverInfo` (name, version, title...), raw.
    pub server_info: Value,
    /// The server's `capabilities`, raw.
    pub capabilities: Value,
    /// The server's `instructions`, if any.
    pub instructions: Option<String>,
    /// True when the server is spoken to in the 2026-07-28 era (no `initialize`: this is what `server/discover`
    /// said, and every request carries its own `_meta`); false for a legacy session.
    pub modern: bool,
}
