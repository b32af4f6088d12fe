//! The audit log's hash chain: how a row's hash is computed and how `verify` walks the log.
//!
//! `hash = sha256(prev_hash ++ jcs(entry))`, written `sha256:<hex>`, where `entry` is the JSON object of the
//! row's columns other than `prev_hash` and `hash`, null columns omitted (so a column added by a later schema,
//! such as the writing process's `instance`, leaves older rows verifiable), and `jcs` is RFC 8785. The first row's `prev_hash` is [`GENESIS_HASH`].
//! `audit_head` holds the last row's seq and hash, moved in the same transaction as each append, so rows removed
//! from or added to the end outside the store are caught too. The chain proves the log was not changed by
//! anyone who could not also recompute every later hash; a keyed anchor (signature) is a later addition. After
//! retention pruned the oldest rows, `verify` starts from the checkpoint (`retention`): the seq and hash of the last
//! pruned row; [`verify_rows`] checks exported rows the same way.

use std::fmt;

use serde::Serialize;
use serde_json::Value;
use toolgate_core::fingerprint::digest_parts;
use toolgate_core::jcs;

use super::AuditRow;
use super::query::{audit_columns, decode_row};
use crate::backend::{Backend, Columns, Dialect, on_backend};
use crate::error::StoreError;

/// The `prev_hash` of the first row.
pub const GENESIS_HASH: &str = "sha256:0000000000000000000000000000000000000000000000000000000000000000";

/// Rows read per page while verifying.
const PAGE: usize = 2048;

/// The canonical JSON text (RFC 8785) of a row's JSON columns: what the journal, the chain hash and the database
/// all use, written once per row.
#[derive(Debug, Default, Clone)]
pub(crate) struct JsonColumns {
    pub(crate) caller: Option<String>,
    pub(crate) reasons: Option<String>,
    pub(crate) hint_sources: Option<String>,
    pub(crate) args: Option<String>,
    pub(crate) detail: Option<String>,
}

impl JsonColumns {
    pub(crate) fn of(row: &AuditRow) -> Result<JsonColumns, StoreError> {
        Ok(JsonColumns {
            caller: canonical(row.caller.as_ref())?,
            reasons: canonical(row.reasons.as_ref())?,
            hint_sources: canonical(row.hint_sources.as_ref())?,
            args: canonical(row.args.as_ref())?,
            detail: canonical(row.detail.as_ref())?,
        })
    }
}

/// The canonical text of an optional JSON value, integers exact (`jcs::to_string_exact`): a call's arguments are
/// recorded as the client sent them, and text RFC 8785 wrote before prints the same, so older rows still verify.
pub(crate) fn canonical(value: Option<&Value>) -> Result<Option<String>, StoreError> {
    value.map(|value| jcs::to_string_exact(value).map_err(StoreError::from)).transpose()
}

/// A row on its way into the log: its plain columns, with the JSON ones (left `None` in `row`) as canonical text.
#[derive(Debug, Clone)]
pub(crate) struct PreparedRow {
    pub(crate) row: AuditRow,
    pub(crate) json: JsonColumns,
}

impl PreparedRow {
    /// Moves a row's JSON columns into canonical text.
    pub(crate) fn from_row(mut row: AuditRow) -> Result<PreparedRow, StoreError> {
        let json = JsonColumns::of(&row)?;
        row.caller = None;
        row.reasons = None;
        row.hint_sources = None;
        row.args = None;
        row.detail = None;
        Ok(PreparedRow { row, json })
    }

    /// The journal's line for this row: `{"id":ID,"row":{...}}`, the row's columns with its JSON ones embedded;
    /// `{"id":ID,"waiting":true,"row":{...}}` for the row of a call that waits for a person and was not forwarded.
    pub(crate) fn journal_line(&self, id: &str, waiting: bool) -> Vec<u8> {
        let (row, json) = (&self.row, &self.json);
        let mut text = String::with_capacity(1024);
        text.push_str("{\"id\":");
        jcs::write_str(id, &mut text);
        if waiting {
            text.push_str(",\"waiting\":true");
        }
        text.push_str(",\"row\":");
        let mut members = Members::new(&mut text);
        members.raw("seq", Some(&row.seq.to_string()));
        members.text("time", Some(&row.time));
        members.text("kind", Some(&row.kind));
        members.raw("caller", json.caller.as_deref());
        members.text("session", row.session.as_deref());
        members.text("upstream", row.upstream.as_deref());
        members.text("tool", row.tool.as_deref());
        members.text("verdict", row.verdict.as_deref());
        members.raw("reasons", json.reasons.as_deref());
        members.raw("hint_sources", json.hint_sources.as_deref());
        members.text("approval_id", row.approval_id.as_deref());
        members.raw("duration_us", row.duration_us.map(|micros| micros.to_string()).as_deref());
        members.text("outcome", row.outcome.as_deref());
        members.text("args_digest", row.args_digest.as_deref());
        members.raw("args", json.args.as_deref());
        members.raw("detail", json.detail.as_deref());
        members.text("instance", row.instance.as_deref());
        members.text("prev_hash", Some(&row.prev_hash));
        members.text("hash", Some(&row.hash));
        text.push_str("}}\n");
        text.into_bytes()
    }
}

/// The chain hash of `row` given its `prev_hash` (the row's own `hash` is ignored).
pub(crate) fn row_hash(row: &AuditRow) -> Result<String, StoreError> {
    Ok(row_hash_with(row, &JsonColumns::of(row)?))
}

/// [`row_hash`] with the row's JSON columns already in canonical form.
///
/// Writes the canonical text of the row's entry (every non-null column except `prev_hash` and `hash`) directly,
/// members in their RFC 8785 order, without building the object: this runs for every audit row. A test keeps it
/// equal to canonicalizing that object built as a `Value`.
pub(crate) fn row_hash_with(row: &AuditRow, json: &JsonColumns) -> String {
    let mut text = String::with_capacity(1024);
    let mut members = Members::new(&mut text);
    members.text("approval_id", row.approval_id.as_deref());
    members.raw("args", json.args.as_deref());
    members.text("args_digest", row.args_digest.as_deref());
    members.raw("caller", json.caller.as_deref());
    members.raw("detail", json.detail.as_deref());
    members.raw("duration_us", row.duration_us.map(integer).as_deref());
    members.raw("hint_sources", json.hint_sources.as_deref());
    members.text("instance", row.instance.as_deref());
    members.text("kind", Some(&row.kind));
    members.text("outcome", row.outcome.as_deref());
    members.raw("reasons", json.reasons.as_deref());
    members.raw("seq", Some(&integer(row.seq)));
    members.text("session", row.session.as_deref());
    members.text("time", Some(&row.time));
    members.text("tool", row.tool.as_deref());
    members.text("upstream", row.upstream.as_deref());
    members.text("verdict", row.verdict.as_deref());
    text.push('}');
    digest_parts(&[row.prev_hash.as_bytes(), text.as_bytes()])
}

/// An integer as canonical JSON (beyond 2^53 it prints as the double ECMAScript would hold).
fn integer(number: i64) -> String {
    jcs::to_string(&Value::from(number)).unwrap_or_else(|_| number.to_string())
}

/// The members of a canonical JSON object written in order; `None` values are left out.
struct Members<'a> {
    out: &'a mut String,
    first: bool,
}

impl Members<'_> {
    fn new(out: &mut String) -> Members<'_> {
        Members { out, first: true }
    }

    fn name(&mut self, name: &str) {
        self.out.push(if self.first { '{' } else { ',' });
        self.first = false;
        jcs::write_str(name, self.out);
        self.out.push(':');
    }

    fn text(&mut self, name: &str, value: Option<&str>) {
        if let Some(value) = value {
            self.name(name);
            jcs::write_str(value, self.out);
        }
    }

    /// A member whose value is already canonical JSON text.
    fn raw(&mut self, name: &str, value: Option<&str>) {
        if let Some(value) = value {
            self.name(name);
            self.out.push_str(value);
        }
    }
}

/// What `verify` found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ChainReport {
    /// Rows read (up to the first break).
    pub rows_checked: u64,
    /// The recorded head (seq, hash), if any row was ever written.
    pub head: Option<(i64, String)>,
    /// Where verification started when rows were pruned: the last pruned row (seq, hash).
    pub checkpoint: Option<(i64, String)>,
    /// The first problem, in chain order; `None` when the chain is intact.
    pub first_break: Option<ChainBreak>,
}

impl ChainReport {
    /// True when no problem was found.
    pub fn is_intact(&self) -> bool {
        self.first_break.is_none()
    }
}

/// The first place where the log stops being the chain the store wrote.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ChainBreak {
    /// The row where the problem shows.
    pub seq: i64,
    /// What is wrong.
    pub kind: ChainBreakKind,
}

/// The kinds of break `verify` distinguishes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum ChainBreakKind {
    /// Rows `first..=last` are missing (removed).
    Missing {
        /// First missing seq.
        first: i64,
        /// Last missing seq.
        last: i64,
    },
    /// A row with a seq the chain never had (inserted before the start).
    OutOfSequence {
        /// The seq expected at this point.
        expected: i64,
    },
    /// `prev_hash` is not the previous row's hash: a row before it was replaced or inserted.
    PrevHashMismatch,
    /// The row's content does not match its hash: a column was changed.
    HashMismatch,
    /// A JSON column does not parse: a column was changed.
    Unreadable {
        /// The decoding error.
        detail: String,
    },
    /// Rows exist after the recorded head: appended outside the store.
    PastHead {
        /// The head's seq.
        head_seq: i64,
    },
    /// The log ends before the recorded head: rows at the end were removed.
    EndsBeforeHead {
        /// The head's seq.
        head_seq: i64,
    },
    /// The last row's hash is not the head's hash.
    HeadMismatch,
    /// Rows exist but the head record does not.
    HeadMissing,
}

impl fmt::Display for ChainBreak {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let seq = self.seq;
        match &self.kind {
            ChainBreakKind::Missing { first, last } if first == last => {
                write!(f, "row {first} is missing: the log jumps from {} to {seq} (row removed)", first - 1)
            }
            ChainBreakKind::Missing { first, last } => {
                write!(f, "rows {first}..{last} are missing: the log jumps from {} to {seq} (rows removed)", first - 1)
            }
            ChainBreakKind::OutOfSequence { expected } => {
                write!(f, "row {seq} is out of sequence where row {expected} was expected (row inserted)")
            }
            ChainBreakKind::PrevHashMismatch => write!(
                f,
                "row {seq}: prev_hash does not match the hash of row {} (a row was inserted or replaced before it)",
                seq - 1
            ),
            ChainBreakKind::HashMismatch => {
                write!(f, "row {seq}: content does not match its hash (a column was changed)")
            }
            ChainBreakKind::Unreadable { detail } => {
                write!(f, "row {seq}: unreadable ({detail}): a column was changed")
            }
            ChainBreakKind::PastHead { head_seq } => {
                write!(f, "row {seq} follows the recorded head (row {head_seq}): rows were appended outside the store")
            }
            ChainBreakKind::EndsBeforeHead { head_seq } => write!(
                f,
                "the log ends at row {seq} but its recorded head is row {head_seq}: rows at the end were removed"
            ),
            ChainBreakKind::HeadMissing => {
                write!(f, "row {seq} exists but the chain head record is missing (the head was removed)")
            }
            ChainBreakKind::HeadMismatch => {
                write!(f, "row {seq}: hash does not match the recorded head (the last row was replaced)")
            }
        }
    }
}

/// Walks the whole log in one read transaction (a consistent snapshot: in SQLite's WAL mode writers keep going; on
/// PostgreSQL the transaction is `REPEATABLE READ`, so rows other processes append meanwhile are not half seen).
pub(crate) async fn verify(backend: &Backend) -> Result<ChainReport, StoreError> {
    on_backend!(backend, |pool, dialect| {
        let mut transaction =
            pool.begin_with(dialect.pick("BEGIN", "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")).await?;
        let head =
            sqlx::query("SELECT seq, hash FROM audit_head WHERE id = 1").fetch_optional(&mut *transaction).await?;
        let head: Option<(i64, String)> =
            head.map(|row| Ok::<_, sqlx::Error>((row.column("seq")?, row.column("hash")?))).transpose()?;
        // A pruned log continues from its checkpoint; a SQLite database from before retention existed has no such
        // table (a read-only verify does not migrate it). PostgreSQL's first schema has it.
        let has_checkpoints: Option<i64> = match dialect {
            Dialect::Sqlite => {
                sqlx::query_scalar("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'audit_checkpoint'")
                    .fetch_optional(&mut *transaction)
                    .await?
            }
            Dialect::Postgres => Some(1),
        };
        let checkpoint: Option<(i64, String)> = match has_checkpoints {
            Some(_) => sqlx::query("SELECT seq, hash FROM audit_checkpoint WHERE id = 1")
                .fetch_optional(&mut *transaction)
                .await?
                .map(|row| Ok::<_, sqlx::Error>((row.column("seq")?, row.column("hash")?)))
                .transpose()?,
            None => None,
        };
        let mut walk = Walk::start(head, checkpoint);
        // The cursor starts below 1 so that a row inserted before the first one is seen.
        let mut after = i64::MIN;
        loop {
            let page = sqlx::query(concat!(
                "SELECT ",
                audit_columns!(),
                " FROM audit_log WHERE seq > $1 ORDER BY seq LIMIT $2"
            ))
            .bind(after)
            .bind(PAGE as i64)
            .fetch_all(&mut *transaction)
            .await?;
            for sql_row in &page {
                let seq: i64 = sql_row.column("seq")?;
                if !walk.step(sql_row, seq) {
                    transaction.rollback().await?;
                    return Ok(walk.report);
                }
                after = seq;
            }
            if page.len() < PAGE {
                break;
            }
        }
        transaction.rollback().await?;
        Ok(walk.finish())
    })
}

/// `verify`'s progress along the chain.
struct Walk {
    report: ChainReport,
    head: Option<(i64, String)>,
    expected_seq: i64,
    previous_hash: String,
}

impl Walk {
    fn start(head: Option<(i64, String)>, checkpoint: Option<(i64, String)>) -> Walk {
        let report =
            ChainReport { rows_checked: 0, head: head.clone(), checkpoint: checkpoint.clone(), first_break: None };
        let (expected_seq, previous_hash) = match checkpoint {
            Some((seq, hash)) => (seq + 1, hash),
            None => (1_i64, GENESIS_HASH.to_owned()),
        };
        Walk { report, head, expected_seq, previous_hash }
    }

    /// Checks the next row; false (with the break recorded) when the chain stops there.
    fn step(&mut self, sql_row: &impl Columns, seq: i64) -> bool {
        match check_row(sql_row, seq, self.expected_seq, &self.previous_hash, self.head.as_ref()) {
            Ok(hash) => self.previous_hash = hash,
            Err(kind) => {
                self.report.first_break = Some(ChainBreak { seq, kind });
                return false;
            }
        }
        self.report.rows_checked += 1;
        self.expected_seq = seq + 1;
        true
    }

    /// The report once every row was read: the end of the log must be the recorded head.
    fn finish(mut self) -> ChainReport {
        let last_seq = self.expected_seq - 1;
        self.report.first_break = match self.head {
            Some((head_seq, _)) if last_seq < head_seq => {
                Some(ChainBreak { seq: last_seq, kind: ChainBreakKind::EndsBeforeHead { head_seq } })
            }
            Some((_, head_hash)) if head_hash != self.previous_hash => {
                Some(ChainBreak { seq: last_seq, kind: ChainBreakKind::HeadMismatch })
            }
            _ => None,
        };
        self.report
    }
}

/// Verifies rows read back from an export (`toolgate audit export`, or the files retention writes), in chain
/// order: each must follow the one before it, and the first must follow `start` (the seq and hash of the row
/// before it: a checkpoint, or the last row of the previous file; `None` for the chain's start, seq 1 after the
/// genesis hash). The report's head is the last row read.
pub fn verify_rows<'a>(rows: impl IntoIterator<Item = &'a AuditRow>, start: Option<(i64, String)>) -> ChainReport {
    let (mut expected_seq, mut previous_hash) = match &start {
        Some((seq, hash)) => (seq + 1, hash.clone()),
        None => (1, GENESIS_HASH.to_owned()),
    };
    let mut report = ChainReport { rows_checked: 0, head: None, checkpoint: start, first_break: None };
    for row in rows {
        let problem = if row.seq < expected_seq {
            Some(ChainBreakKind::OutOfSequence { expected: expected_seq })
        } else if row.seq > expected_seq {
            Some(ChainBreakKind::Missing { first: expected_seq, last: row.seq - 1 })
        } else if row.prev_hash != previous_hash {
            Some(ChainBreakKind::PrevHashMismatch)
        } else {
            match row_hash(row) {
                Ok(hash) if hash == row.hash => None,
                Ok(_) => Some(ChainBreakKind::HashMismatch),
                Err(error) => Some(ChainBreakKind::Unreadable { detail: error.to_string() }),
            }
        };
        if let Some(kind) = problem {
            report.first_break = Some(ChainBreak { seq: row.seq, kind });
            return report;
        }
        report.rows_checked += 1;
        report.head = Some((row.seq, row.hash.clone()));
        expected_seq = row.seq + 1;
        previous_hash = row.hash.clone();
    }
    report
}

/// Checks one row; its hash when it continues the chain, else what is wrong with it.
fn check_row(
    sql_row: &impl Columns,
    seq: i64,
    expected_seq: i64,
    previous_hash: &str,
    head: Option<&(i64, String)>,
) -> Result<String, ChainBreakKind> {
    if seq < expected_seq {
        return Err(ChainBreakKind::OutOfSequence { expected: expected_seq });
    }
    if seq > expected_seq {
        return Err(ChainBreakKind::Missing { first: expected_seq, last: seq - 1 });
    }
    match head {
        None => return Err(ChainBreakKind::HeadMissing),
        Some((head_seq, _)) if seq > *head_seq => return Err(ChainBreakKind::PastHead { head_seq: *head_seq }),
        Some(_) => {}
    }
    let row = decode_row(sql_row).map_err(|error| ChainBreakKind::Unreadable { detail: error.to_string() })?;
    if row.prev_hash != previous_hash {
        return Err(ChainBreakKind::PrevHashMismatch);
    }
    let recomputed = row_hash(&row).map_err(|error| ChainBreakKind::Unreadable { detail: error.to_string() })?;
    if recomputed != row.hash {
        return Err(ChainBreakKind::HashMismatch);
    }
    Ok(row.hash)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Map, json};
    use toolgate_core::fingerprint::{canonical_json, digest_bytes};

    /// The JSON object hashed for a row: every non-null column except `prev_hash` and `hash`.
    fn entry_value(row: &AuditRow) -> Value {
        let mut entry = Map::new();
        entry.insert("seq".into(), Value::from(row.seq));
        entry.insert("time".into(), Value::from(row.time.as_str()));
        entry.insert("kind".into(), Value::from(row.kind.as_str()));
        let optional: [(&str, Option<Value>); 14] = [
            ("caller", row.caller.clone()),
            ("session", row.session.clone().map(Value::from)),
            ("upstream", row.upstream.clone().map(Value::from)),
            ("tool", row.tool.clone().map(Value::from)),
            ("verdict", row.verdict.clone().map(Value::from)),
            ("reasons", row.reasons.clone()),
            ("hint_sources", row.hint_sources.clone()),
            ("approval_id", row.approval_id.clone().map(Value::from)),
            ("duration_us", row.duration_us.map(Value::from)),
            ("outcome", row.outcome.clone().map(Value::from)),
            ("args_digest", row.args_digest.clone().map(Value::from)),
            ("args", row.args.clone()),
            ("detail", row.detail.clone()),
            ("instance", row.instance.clone().map(Value::from)),
        ];
        for (key, value) in optional {
            if let Some(value) = value {
                entry.insert(key.into(), value);
            }
        }
        Value::Object(entry)
    }

    fn full_row() -> AuditRow {
        AuditRow {
            seq: 42,
            time: "2026-11-26T02:00:00.000001Z".into(),
            kind: "call".into(),
            caller: Some(json!({"identity": "alice", "scopes": ["read", "write"]})),
            session: Some("s-1".into()),
            upstream: Some("git".into()),
            tool: Some("git_commit".into()),
            verdict: Some("allow".into()),
            reasons: Some(json!([{"rule": "default", "detail": "a \"quoted\" reason\n"}])),
            hint_sources: Some(json!({"readOnlyHint": {"value": false, "source": "declared"}})),
            approval_id: Some("ap-1".into()),
            duration_us: Some(1234),
            outcome: Some("ok".into()),
            args_digest: Some("sha256:00".into()),
            args: Some(json!({"message": "caf\u{e9} \u{1f600}", "n": 1.5, "z": null, "a": [1, 2]})),
            detail: Some(json!({"b": 1, "a": 2})),
            instance: Some("gw-1".into()),
            prev_hash: GENESIS_HASH.into(),
            hash: String::new(),
        }
    }

    fn reference_hash(row: &AuditRow) -> String {
        let canonical = canonical_json(&entry_value(row)).unwrap_or_default();
        digest_bytes(format!("{}{canonical}", row.prev_hash).as_bytes())
    }

    #[test]
    fn a_journal_line_reads_back_as_the_row() {
        let row = AuditRow { duration_us: Some(i64::MAX), ..full_row() };
        let line =
            PreparedRow::from_row(row.clone()).map(|prepared| prepared.journal_line("id-1", false)).unwrap_or_default();
        assert_eq!(line.last(), Some(&b'\n'));
        let parsed: super::super::journal::JournalLine =
            serde_json::from_slice(&line).unwrap_or_else(|error| unreachable!("journal line: {error}"));
        assert_eq!(parsed.id, "id-1");
        assert_eq!(parsed.row, row);
        assert!(!parsed.waiting, "a forwarded call's line");
        let line =
            PreparedRow::from_row(row.clone()).map(|prepared| prepared.journal_line("id-2", true)).unwrap_or_default();
        let parsed: super::super::journal::JournalLine =
            serde_json::from_slice(&line).unwrap_or_else(|error| unreachable!("journal line: {error}"));
        assert!(parsed.waiting, "a waiting call's line says so");
        assert_eq!(parsed.row, row);
    }

    #[test]
    fn the_direct_hash_equals_hashing_the_canonical_entry_object() {
        let full = full_row();
        let sparse = AuditRow {
            caller: None,
            session: None,
            reasons: None,
            approval_id: None,
            duration_us: None,
            args: None,
            detail: None,
            instance: None,
            ..full_row()
        };
        let bare = AuditRow {
            upstream: None,
            tool: None,
            verdict: None,
            hint_sources: None,
            outcome: None,
            args_digest: None,
            duration_us: Some(i64::MAX),
            ..sparse.clone()
        };
        for row in [full, sparse, bare] {
            assert_eq!(row_hash(&row).ok(), Some(reference_hash(&row)), "row {row:?}");
        }
    }
}
