//! A pending approval as the gateway would queue it (a destructive `files` tool, risk 4), for the console's test
//! suites; each passes the tool, title and argument summary its assertions look for.

use std::time::{Duration, SystemTime};

use toolgate_store::{ApprovalId, PendingApproval, Store, ToolRisk};

/// Queues a pending approval of `tool` in `store` and returns its id.
pub(crate) async fn pending_approval(
    store: &Store,
    tool: &str,
    title: &str,
    args_summary: &str,
) -> Result<ApprovalId, Box<dyn std::error::Error>> {
    let id = ApprovalId::generate();
    let now = SystemTime::now();
    store
        .approvals()
        .create(&PendingApproval {
            id: id.clone(),
            session: "s1".into(),
            upstream: "files".into(),
            tool: tool.into(),
            title: title.into(),
            action: "delete a file".into(),
            risk: Some(ToolRisk { level: 4, category: "destructive".into() }),
            args_summary: args_summary.into(),
            tool_fingerprint: "sha256:aa".into(),
            args_digest: "sha256:bb".into(),
            created: now,
            expires: now + Duration::from_secs(600),
        })
        .await?;
    Ok(id)
}
