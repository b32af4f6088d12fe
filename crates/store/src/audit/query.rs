//! Reading audit rows: decoding a SQL row into an [`AuditRow`], and `query` for `toolgate audit`.
//!
//! JSON columns are parsed here; a column that does not parse is reported, never skipped (verification treats it
//! as tampering). This module never writes.

use serde_json::Value;
use sqlx::sqlite::SqliteRow;
use sqlx::{QueryBuilder, Row, Sqlite};

use super::{AuditFilter, AuditRow, verdict_name};
use crate::Backend;
use crate::error::StoreError;
use crate::time::format_rfc3339;

/// Every column, in table order (a macro so statements stay `&'static str` literals, which sqlx requires). `reasons`
/// and `hint_sources` may be stored once in `audit_text` and referred to by id (migration 7): the text is put back
/// here, so every reader sees the row's columns as they were hashed.
macro_rules! audit_columns {
    () => {
        "seq, time, kind, caller, session, upstream, tool, verdict, \
         COALESCE(reasons, (SELECT text FROM audit_text WHERE id = reasons_ref)) AS reasons, \
         COALESCE(hint_sources, (SELECT text FROM audit_text WHERE id = hint_sources_ref)) AS hint_sources, \
         approval_id, duration_us, outcome, args_digest, args, detail, prev_hash, hash"
    };
}
pub(crate) use audit_columns;

/// The columns the free-text filter searches: fixed SQL expressions, never built from input.
const TEXT_COLUMNS: [&str; 6] =
    ["tool", "upstream", "session", "json_extract(caller, '$.identity')", "outcome", REASONS_TEXT];

/// The reasons' text wherever it is stored (see [`audit_columns`]).
const REASONS_TEXT: &str = "COALESCE(reasons, (SELECT text FROM audit_text WHERE id = reasons_ref))";

fn json_column(row: &SqliteRow, column: &'static str) -> Result<Option<Value>, StoreError> {
    let text: Option<String> = row.try_get(column)?;
    text.map(|text| serde_json::from_str(&text).map_err(|source| StoreError::Json { what: column, source })).transpose()
}

/// Decodes one `SELECT audit_columns!()` row.
pub(crate) fn decode_row(row: &SqliteRow) -> Result<AuditRow, StoreError> {
    Ok(AuditRow {
        seq: row.try_get("seq")?,
        time: row.try_get("time")?,
        kind: row.try_get("kind")?,
        caller: json_column(row, "caller")?,
        session: row.try_get("session")?,
        upstream: row.try_get("upstream")?,
        tool: row.try_get("tool")?,
        verdict: row.try_get("verdict")?,
        reasons: json_column(row, "reasons")?,
        hint_sources: json_column(row, "hint_sources")?,
        approval_id: row.try_get("approval_id")?,
        duration_us: row.try_get("duration_us")?,
        outcome: row.try_get("outcome")?,
        args_digest: row.try_get("args_digest")?,
        args: json_column(row, "args")?,
        detail: json_column(row, "detail")?,
        prev_hash: row.try_get("prev_hash")?,
        hash: row.try_get("hash")?,
    })
}

/// The rows matching `filter`, in chain order.
pub(crate) async fn query(backend: &Backend, filter: &AuditFilter) -> Result<Vec<AuditRow>, StoreError> {
    let Backend::Sqlite(pool) = backend;
    let mut sql = QueryBuilder::<Sqlite>::new(concat!("SELECT ", audit_columns!(), " FROM audit_log WHERE 1 = 1"));
    if let Some(since) = filter.since {
        sql.push(" AND time >= ").push_bind(format_rfc3339(since));
    }
    if let Some(until) = filter.until {
        sql.push(" AND time < ").push_bind(format_rfc3339(until));
    }
    if let Some(glob) = &filter.tool_glob {
        // SQLite's GLOB: `*`, `?`, `[...]`, case-sensitive. PostgreSQL will translate the glob to a regex.
        sql.push(" AND tool GLOB ").push_bind(glob.clone());
    }
    if let Some(verdict) = filter.verdict {
        sql.push(" AND verdict = ").push_bind(verdict_name(verdict));
    }
    if let Some(kind) = filter.kind {
        sql.push(" AND kind = ").push_bind(kind.as_str());
    }
    if let Some(session) = &filter.session {
        sql.push(" AND session = ").push_bind(session.clone());
    }
    if let Some(upstream) = &filter.upstream {
        sql.push(" AND upstream = ").push_bind(upstream.clone());
    }
    if let Some(caller) = &filter.caller {
        sql.push(" AND json_extract(caller, '$.identity') = ").push_bind(caller.clone());
    }
    if let Some(text) = filter.text.as_deref().filter(|text| !text.is_empty()) {
        // instr, not LIKE: the text is matched literally (no `%` or `_` wildcards to escape). SQLite's lower() folds
        // ASCII only, so the needle is folded the same way.
        let needle = text.to_ascii_lowercase();
        sql.push(" AND (");
        for (index, column) in TEXT_COLUMNS.into_iter().enumerate() {
            if index > 0 {
                sql.push(" OR ");
            }
            sql.push("instr(lower(").push(column).push("), ").push_bind(needle.clone()).push(") > 0");
        }
        sql.push(")");
    }
    match filter.limit {
        Some(limit) => {
            sql.push(" ORDER BY seq DESC LIMIT ").push_bind(i64::from(limit));
        }
        None => {
            sql.push(" ORDER BY seq");
        }
    }
    let rows = sql.build().fetch_all(pool).await?;
    let mut decoded = rows.iter().map(decode_row).collect::<Result<Vec<_>, _>>()?;
    if filter.limit.is_some() {
        decoded.reverse();
    }
    Ok(decoded)
}
