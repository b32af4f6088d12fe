//! Verification records: what `toolgate verify` saw a tool do in the observing sandbox, bound to the fingerprint
//! of the tool's definition (the gateway's pin fingerprint) and to the server command it ran under.
//!
//! `verify` appends records ([`Store::record_verification`]); `serve` reads one record per fingerprint for an
//! upstream's command (the newest, with every record's contradictions; [`Store::verifications_for`]) and the
//! catalog weighs them as evidence. A record for another command or another definition never applies: a changed
//! definition (a rug pull) has a new fingerprint and no record. Nothing here decides what a record means for a hint.

use std::time::SystemTime;

use serde::Serialize;
use serde_json::Value;

use crate::Store;
use crate::backend::{Columns, on_backend};
use crate::error::StoreError;
use crate::time::format_rfc3339;

/// The observed facts of one verification (as `toolgate_verify::Observed` reports them).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct VerifiedFacts {
    /// Calls made.
    pub calls: u32,
    /// Calls that succeeded.
    pub succeeded: u32,
    /// Some call wrote or tried to write.
    pub wrote: bool,
    /// Some call connected or tried to.
    pub connected: bool,
    /// A repeated identical call changed the state again.
    pub repeat_changed: bool,
    /// Some call removed or overwrote existing data.
    pub destroyed: bool,
    /// Every call succeeded and none wrote or connected.
    pub supported: bool,
}

/// One stored verification record.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct VerificationRecord {
    /// The record's number (named `verification/<id>` in `_meta` and the console).
    pub id: i64,
    /// The server command the tool ran under.
    pub command: Vec<String>,
    /// The tool's name.
    pub tool: String,
    /// The fingerprint of the definition verified.
    pub fingerprint: String,
    /// When (RFC 3339, UTC).
    pub verified_at: String,
    /// What was seen.
    pub facts: VerifiedFacts,
    /// The calls' observations and findings, as `verify --format json` shows them.
    pub evidence: Value,
}

impl VerificationRecord {
    /// The name `_meta` and the console use: `verification/<id>`.
    pub fn name(&self) -> String {
        format!("verification/{}", self.id)
    }
}

impl Store {
    /// Appends a record and returns its id.
    pub async fn record_verification(
        &self,
        command: &[String],
        tool: &str,
        fingerprint: &str,
        facts: VerifiedFacts,
        evidence: &Value,
    ) -> Result<i64, StoreError> {
        on_backend!(&self.backend, |pool| {
            let command =
                serde_json::to_string(command).map_err(|source| StoreError::Json { what: "command", source })?;
            let evidence =
                serde_json::to_string(evidence).map_err(|source| StoreError::Json { what: "evidence", source })?;
            let row = sqlx::query(
                "INSERT INTO verification (command, tool, fingerprint, verified_at, calls, succeeded, wrote, connected, \
                 repeat_changed, destroyed, supported, evidence) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12) RETURNING id",
            )
            .bind(command)
            .bind(tool)
            .bind(fingerprint)
            .bind(format_rfc3339(SystemTime::now()))
            .bind(i64::from(facts.calls))
            .bind(i64::from(facts.succeeded))
            .bind(i64::from(facts.wrote))
            .bind(i64::from(facts.connected))
            .bind(i64::from(facts.repeat_changed))
            .bind(i64::from(facts.destroyed))
            .bind(i64::from(facts.supported))
            .bind(evidence)
            .fetch_one(pool)
            .await?;
            Ok(row.column("id")?)
        })
    }

    /// One record per fingerprint for the server `command` (exactly as given to `verify`), oldest first: the
    /// newest record, with the contradictions (`wrote`, `connected`, `repeat_changed`, `destroyed`) of every record
    /// of that fingerprint and command OR-ed into its facts. A later run whose calls all failed (another `--dir`,
    /// generated arguments that missed) saw nothing, which does not undo what an earlier run saw; support is the
    /// newest record's only, and none while any record contradicts it.
    pub async fn verifications_for(&self, command: &[String]) -> Result<Vec<VerificationRecord>, StoreError> {
        on_backend!(&self.backend, |pool| {
            let command =
                serde_json::to_string(command).map_err(|source| StoreError::Json { what: "command", source })?;
            let rows = sqlx::query(
                "SELECT v.id, v.command, v.tool, v.fingerprint, v.verified_at, v.calls, v.succeeded, \
                 seen.wrote <> 0 AS wrote, seen.connected <> 0 AS connected, \
                 seen.repeat_changed <> 0 AS repeat_changed, seen.destroyed <> 0 AS destroyed, \
                 (v.supported <> 0 AND seen.wrote = 0 AND seen.connected = 0) AS supported, v.evidence \
                 FROM verification v JOIN (SELECT max(id) AS newest, max(wrote) AS wrote, max(connected) AS connected, \
                 max(repeat_changed) AS repeat_changed, max(destroyed) AS destroyed \
                 FROM verification WHERE command = $1 GROUP BY fingerprint) seen ON v.id = seen.newest ORDER BY v.id",
            )
            .bind(command)
            .fetch_all(pool)
            .await?;
            rows.iter().map(decode).collect()
        })
    }
}

fn decode(row: &impl Columns) -> Result<VerificationRecord, StoreError> {
    let json = |column: &'static str| -> Result<Value, StoreError> {
        let text: String = row.column(column)?;
        serde_json::from_str(&text).map_err(|source| StoreError::Json { what: column, source })
    };
    let command: Vec<String> =
        serde_json::from_value(json("command")?).map_err(|source| StoreError::Json { what: "command", source })?;
    let count = |column: &'static str| -> Result<u32, StoreError> {
        let value: i64 = row.column(column)?;
        u32::try_from(value).map_err(|_| StoreError::Corrupt { what: "verification count", detail: value.to_string() })
    };
    Ok(VerificationRecord {
        id: row.column("id")?,
        command,
        tool: row.column("tool")?,
        fingerprint: row.column("fingerprint")?,
        verified_at: row.column("verified_at")?,
        facts: VerifiedFacts {
            calls: count("calls")?,
            succeeded: count("succeeded")?,
            wrote: row.column("wrote")?,
            connected: row.column("connected")?,
            repeat_changed: row.column("repeat_changed")?,
            destroyed: row.column("destroyed")?,
            supported: row.column("supported")?,
        },
        evidence: json("evidence")?,
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[tokio::test]
    async fn the_newest_record_per_fingerprint_of_a_command_is_read_back() -> Result<(), StoreError> {
        let directory = tempfile::tempdir().map_err(|source| StoreError::StateDir { path: "tmp".into(), source })?;
        let store = Store::open(directory.path()).await?;
        let command = vec!["python3".to_owned(), "liar.py".to_owned()];
        let wrote = VerifiedFacts { calls: 2, succeeded: 2, wrote: true, ..VerifiedFacts::default() };
        let quiet = VerifiedFacts { calls: 2, succeeded: 2, supported: true, ..VerifiedFacts::default() };
        store.record_verification(&command, "read_status", "sha256:a", quiet, &json!({"old": true})).await?;
        let newest = store.record_verification(&command, "read_status", "sha256:a", wrote, &json!([])).await?;
        store.record_verification(&command, "read_notes", "sha256:b", quiet, &json!([])).await?;
        store.record_verification(&["other".to_owned()], "read_notes", "sha256:b", wrote, &json!([])).await?;
        let records = store.verifications_for(&command).await?;
        assert_eq!(records.len(), 2);
        assert_eq!(
            (records[0].id, records[0].facts, records[0].name()),
            (newest, wrote, format!("verification/{newest}"))
        );
        assert_eq!((records[1].tool.as_str(), records[1].facts.supported), ("read_notes", true));
        assert!(store.verifications_for(&["nobody".to_owned()]).await?.is_empty());
        store.close().await
    }

    /// A newer record that saw nothing (every call failed) keeps an older record's contradiction; support comes from
    /// the newest record only, and an older contradiction withdraws it.
    #[tokio::test]
    async fn an_older_contradiction_survives_a_newer_quiet_record() -> Result<(), StoreError> {
        let directory = tempfile::tempdir().map_err(|source| StoreError::StateDir { path: "tmp".into(), source })?;
        let store = Store::open(directory.path()).await?;
        let command = vec!["python3".to_owned(), "liar.py".to_owned()];
        let wrote = VerifiedFacts { calls: 2, succeeded: 2, wrote: true, destroyed: true, ..VerifiedFacts::default() };
        let failed = VerifiedFacts { calls: 2, ..VerifiedFacts::default() };
        let quiet = VerifiedFacts { calls: 2, succeeded: 2, supported: true, ..VerifiedFacts::default() };
        store.record_verification(&command, "read_status", "sha256:a", wrote, &json!([])).await?;
        let newest = store.record_verification(&command, "read_status", "sha256:a", failed, &json!([])).await?;
        store.record_verification(&command, "get_time", "sha256:b", failed, &json!([])).await?;
        let supported = store.record_verification(&command, "get_time", "sha256:b", quiet, &json!([])).await?;
        let records = store.verifications_for(&command).await?;
        assert_eq!(records.len(), 2);
        assert_eq!(
            (records[0].id, records[0].facts),
            (newest, VerifiedFacts { calls: 2, wrote: true, destroyed: true, ..VerifiedFacts::default() })
        );
        assert_eq!((records[1].id, records[1].facts), (supported, quiet));
        store
            .record_verification(
                &command,
                "get_time",
                "sha256:b",
                VerifiedFacts { connected: true, ..failed },
                &json!([]),
            )
            .await?;
        store.record_verification(&command, "get_time", "sha256:b", quiet, &json!([])).await?;
        let records = store.verifications_for(&command).await?;
        assert_eq!((records[1].facts.connected, records[1].facts.supported), (true, false), "{:?}", records[1]);
        store.close().await
    }
}
