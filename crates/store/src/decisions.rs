//! A person's decisions made outside any call, as audit rows: a quarantined tool definition pinned or rejected
//! (kind `pin`), an approval approved or denied (kind `confirmation`, outcome `approved` / `denied`). The console
//! and the `toolgate pins` / `toolgate approvals` commands write them after the decision itself succeeded, so the
//! log says who let which definition in and who let which call through.
//!
//! Each row is appended in its own transaction through the chain's append (the same `BEGIN IMMEDIATE` as the audit
//! writer), not through the bounded queue: the deciding process is often a short-lived command that must know the
//! row is written before it exits. Nothing here decides anything; the caller has already decided.

use serde_json::json;

use crate::audit::AuditRow;
use crate::audit::append::append;
use crate::audit::chain::PreparedRow;
use crate::error::StoreError;
use crate::time::format_rfc3339;
use crate::{ApprovalDecision, AuditReceipt, PendingApproval, Store};

/// The `kind` of a pin decision's audit row.
pub const PIN_DECISION_KIND: &str = crate::audit::AuditKind::Pin.as_str();

/// What a person did with a definition held in quarantine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PinDecision {
    /// The definition was pinned.
    Approved,
    /// The definition was dropped; the previous pin (if any) stays.
    Rejected,
}

impl PinDecision {
    /// The stable name stored in the row's `outcome` column.
    pub fn as_str(self) -> &'static str {
        match self {
            PinDecision::Approved => "approved",
            PinDecision::Rejected => "rejected",
        }
    }
}

/// A pin decision about one definition, as its audit row records it.
#[derive(Debug, Clone, Copy)]
pub struct PinDecisionRecord<'a> {
    /// The upstream that lists the definition.
    pub upstream: &'a str,
    /// Which kind of definition (a tool, a prompt, ...).
    pub kind: crate::pins::PinKind,
    /// The definition's name (a tool's name, a resource's URI).
    pub name: &'a str,
    /// The fingerprint decided (or, for a refusal, the one the person tried to decide).
    pub fingerprint: &'a str,
    /// What was decided (or tried).
    pub decision: PinDecision,
    /// Who decided: the identity `caller.identity` and `detail.decided_by` name.
    pub decided_by: &'a str,
    /// The person's display name, when a console login gave one (`detail.decided_by_name`).
    pub decided_by_name: Option<&'a str>,
}

/// The stable name of an approval decision, as stored in the row's `outcome` column.
fn approval_outcome(decision: ApprovalDecision) -> &'static str {
    match decision {
        ApprovalDecision::Approve => "approved",
        ApprovalDecision::Deny => "denied",
    }
}

/// A row with only the chain-independent columns set; `append` fills in seq and the hashes.
fn blank_row(kind: &str, decided_by: &str) -> AuditRow {
    AuditRow {
        seq: 0,
        time: format_rfc3339(std::time::SystemTime::now()),
        kind: kind.to_owned(),
        caller: Some(json!({"identity": decided_by})),
        session: None,
        upstream: None,
        tool: None,
        verdict: None,
        reasons: None,
        hint_sources: None,
        approval_id: None,
        duration_us: None,
        outcome: None,
        args_digest: None,
        args: None,
        detail: None,
        instance: None,
        prev_hash: String::new(),
        hash: String::new(),
    }
}

impl Store {
    /// Appends (and commits) the row of a pin decision: `upstream`, `tool`, the decided `fingerprint` and who
    /// decided (`caller.identity` and `detail.decided_by`).
    pub async fn record_pin_decision(
        &self,
        upstream: &str,
        tool: &str,
        fingerprint: &str,
        decision: PinDecision,
        decided_by: &str,
    ) -> Result<AuditReceipt, StoreError> {
        self.record_pin_decision_of(upstream, crate::pins::PinKind::Tool, tool, fingerprint, decision, decided_by).await
    }

    /// [`Store::record_pin_decision`] for a definition of any kind; a row about another kind than a tool says which
    /// in `detail.kind` (and `tool` holds the definition's name).
    pub async fn record_pin_decision_of(
        &self,
        upstream: &str,
        kind: crate::pins::PinKind,
        name: &str,
        fingerprint: &str,
        decision: PinDecision,
        decided_by: &str,
    ) -> Result<AuditReceipt, StoreError> {
        let record =
            PinDecisionRecord { upstream, kind, name, fingerprint, decision, decided_by, decided_by_name: None };
        self.record_pin(&record).await
    }

    /// Appends (and commits) the row of a pin decision, with the person's display name (a console login's name or
    /// email) as `detail.decided_by_name` when there is one.
    pub async fn record_pin(&self, record: &PinDecisionRecord<'_>) -> Result<AuditReceipt, StoreError> {
        let row = pin_row(record, record.decision.as_str(), &[("decision", json!(record.decision.as_str()))]);
        self.append_one(row).await
    }

    /// Appends the row of a pin decision the console refused to take (the person is not an approver): outcome
    /// `refused`, the person as the caller, `detail.attempted` and `detail.reason`. The definition stays waiting.
    pub async fn record_pin_refusal(
        &self,
        record: &PinDecisionRecord<'_>,
        reason: &str,
    ) -> Result<AuditReceipt, StoreError> {
        let fields = [("attempted", json!(record.decision.as_str())), ("reason", json!(reason))];
        self.append_one(pin_row(record, "refused", &fields)).await
    }

    /// Appends (and commits) the row of a decided approval: the approval's id, session, upstream, tool and argument
    /// digest, the decision as `outcome`, and who decided.
    pub async fn record_approval_decision(
        &self,
        approval: &PendingApproval,
        decision: ApprovalDecision,
        decided_by: &str,
    ) -> Result<AuditReceipt, StoreError> {
        self.record_approval_decision_named(approval, decision, decided_by, None).await
    }

    /// [`record_approval_decision`](Self::record_approval_decision), with the person's display name (a console
    /// login's name or email) as `detail.decided_by_name` beside their identity.
    pub async fn record_approval_decision_named(
        &self,
        approval: &PendingApproval,
        decision: ApprovalDecision,
        decided_by: &str,
        name: Option<&str>,
    ) -> Result<AuditReceipt, StoreError> {
        let mut row = approval_row(approval, decided_by);
        row.outcome = Some(approval_outcome(decision).to_owned());
        row.detail = Some(json!({
            "decision": approval_outcome(decision),
            "decided_by": decided_by,
            "tool_fingerprint": approval.tool_fingerprint,
        }));
        if let (Some(name), Some(detail)) = (name, row.detail.as_mut().and_then(|detail| detail.as_object_mut())) {
            detail.insert("decided_by_name".into(), json!(name));
        }
        self.append_one(row).await
    }

    /// Appends the row of a decision the console refused to take (the person may not approve, or the call is their
    /// own): outcome `refused`, the person as the caller, `detail.reason` saying why. The approval stays pending.
    pub async fn record_approval_refusal(
        &self,
        approval: &PendingApproval,
        decision: ApprovalDecision,
        decided_by: &str,
        reason: &str,
    ) -> Result<AuditReceipt, StoreError> {
        let mut row = approval_row(approval, decided_by);
        row.outcome = Some("refused".to_owned());
        row.detail = Some(json!({
            "attempted": approval_outcome(decision),
            "decided_by": decided_by,
            "reason": reason,
        }));
        self.append_one(row).await
    }

    async fn append_one(&self, mut row: AuditRow) -> Result<AuditReceipt, StoreError> {
        row.instance = self.instance.as_deref().map(str::to_owned);
        let mut rows = [PreparedRow::from_row(row)?];
        append(&self.backend, &mut rows, &[], false).await?;
        let [prepared] = rows;
        Ok(AuditReceipt { seq: prepared.row.seq, hash: prepared.row.hash })
    }
}

/// A pin row about `record`'s definition by its decider with `outcome`: the upstream, the name, and in `detail` the
/// fingerprint, `fields`, who decided (and their name) and the kind when it is not a tool.
fn pin_row(record: &PinDecisionRecord<'_>, outcome: &str, fields: &[(&str, serde_json::Value)]) -> AuditRow {
    let mut row = blank_row(PIN_DECISION_KIND, record.decided_by);
    row.upstream = Some(record.upstream.to_owned());
    row.tool = Some(record.name.to_owned());
    row.outcome = Some(outcome.to_owned());
    let mut detail = json!({"fingerprint": record.fingerprint});
    for (name, value) in fields {
        detail[*name] = value.clone();
    }
    detail["decided_by"] = json!(record.decided_by);
    if let Some(name) = record.decided_by_name {
        detail["decided_by_name"] = json!(name);
    }
    if record.kind != crate::pins::PinKind::Tool {
        detail["kind"] = json!(record.kind.as_str());
    }
    row.detail = Some(detail);
    row
}

/// A confirmation row about `approval` by `decided_by`: its session, upstream, tool, id and argument digest.
fn approval_row(approval: &PendingApproval, decided_by: &str) -> AuditRow {
    let mut row = blank_row(crate::audit::AuditKind::Confirmation.as_str(), decided_by);
    row.session = Some(approval.session.clone());
    row.upstream = Some(approval.upstream.clone());
    row.tool = Some(approval.tool.clone());
    row.approval_id = Some(approval.id.as_str().to_owned());
    row.args_digest = Some(approval.args_digest.clone());
    row
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, SystemTime};

    use super::*;
    use crate::{ApprovalId, AuditEntry, AuditFilter, AuditKind};

    #[tokio::test]
    async fn decisions_are_chained_rows_that_verify() -> Result<(), StoreError> {
        let dir = tempfile::tempdir().map_err(|source| StoreError::StateDir { path: "tmp".into(), source })?;
        let store = Store::open(dir.path()).await?;
        store.audit().record_durable(AuditEntry::new(AuditKind::Listing)).await?;
        let pinned =
            store.record_pin_decision("files", "delete_file", "sha256:ab", PinDecision::Approved, "alice").await?;
        let now = SystemTime::now();
        let approval = PendingApproval {
            id: ApprovalId::generate(),
            session: "s1".into(),
            upstream: "files".into(),
            tool: "delete_file".into(),
            title: "Delete file".into(),
            action: "delete a file".into(),
            risk: None,
            args_summary: "{}".into(),
            tool_fingerprint: "sha256:ab".into(),
            args_digest: "sha256:cd".into(),
            created: now,
            expires: now + Duration::from_secs(60),
            caller: None,
        };
        let decided = store.record_approval_decision(&approval, ApprovalDecision::Deny, "console:bob").await?;
        assert_eq!((pinned.seq, decided.seq), (2, 3));
        // Rows written by the queue after these continue the same chain.
        store.audit().record_durable(AuditEntry::new(AuditKind::Listing)).await?;
        assert!(store.verify_audit().await?.is_intact());

        let rows = store.query_audit(&AuditFilter::default()).await?;
        let pin = &rows[1];
        assert_eq!(pin.kind, "pin");
        assert_eq!((pin.upstream.as_deref(), pin.tool.as_deref()), (Some("files"), Some("delete_file")));
        assert_eq!(pin.outcome.as_deref(), Some("approved"));
        assert_eq!(pin.caller, Some(json!({"identity": "alice"})));
        assert_eq!(pin.detail.as_ref().map(|detail| detail["fingerprint"].clone()), Some(json!("sha256:ab")));
        let confirmation = &rows[2];
        assert_eq!(confirmation.kind, "confirmation");
        assert_eq!(confirmation.outcome.as_deref(), Some("denied"));
        assert_eq!(confirmation.approval_id.as_deref(), Some(approval.id.as_str()));
        assert_eq!(confirmation.args_digest.as_deref(), Some("sha256:cd"));
        assert_eq!(confirmation.detail.as_ref().map(|detail| detail["decided_by"].clone()), Some(json!("console:bob")));
        Ok(())
    }
}
