//! The one pending-approval fixture the store, console, CLI and gateway tests share: what the gateway would queue
//! for a destructive call. Tests change the fields their assertions are about with struct update syntax. Only
//! with the `store` feature; it writes nothing itself.

use std::time::{Duration, SystemTime};

use serde_json::Value;
use toolgate_store::{ApprovalId, PendingApproval, ToolRisk, digest_arguments};

/// A fresh pending approval of `files`'s `delete_file` ("Delete file", risk 4, destructive) with `arguments`,
/// asked by session `session-1`, created now and expiring `expires_in` from now.
pub fn pending_approval(arguments: &Value, expires_in: Duration) -> PendingApproval {
    let now = SystemTime::now();
    PendingApproval {
        id: ApprovalId::generate(),
        session: "session-1".into(),
        upstream: "files".into(),
        tool: "delete_file".into(),
        title: "Delete file".into(),
        action: "delete a file".into(),
        risk: Some(ToolRisk { level: 4, category: "destructive".into() }),
        args_summary: arguments.to_string(),
        tool_fingerprint: "sha256:tool".into(),
        args_digest: digest_arguments(arguments),
        created: now,
        expires: now + expires_in,
        caller: Some("agent".into()),
    }
}
