//! Reading audit rows: decoding a SQL row into an [`AuditRow`], and `query` for `toolgate audit`.
//!
//! JSON columns are parsed here; a column that does not parse is reported, never skipped (verification treats it
//! as tampering). This module never writes.

use serde_json::Value;
use sqlx::QueryBuilder;

use super::{AuditFilter, AuditRow, verdict_name};
use crate::backend::{Backend, Columns, Dialect, glob_to_regex, on_backend};
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
         approval_id, duration_us, outcome, args_digest, args, detail, instance, prev_hash, hash"
    };
}
pub(crate) use audit_columns;

/// The columns the free-text filter searches: fixed SQL expressions, never built from input.
fn text_columns(dialect: Dialect) -> [&'static str; 7] {
    ["tool", "upstream", "session", caller_identity(dialect), "outcome", REASONS_TEXT, "instance"]
}

/// The caller's identity inside the JSON text of `caller`.
fn caller_identity(dialect: Dialect) -> &'static str {
    dialect.pick("json_extract(caller, '$.identity')", "(caller::jsonb ->> 'identity')")
}

/// The reasons' text wherever it is stored (see [`audit_columns`]).
const REASONS_TEXT: &str = "COALESCE(reasons, (SELECT text FROM audit_text WHERE id = reasons_ref))";

fn json_column(row: &impl Columns, column: &'static str) -> Result<Option<Value>, StoreError> {
    let text: Option<String> = row.column(column)?;
    text.map(|text| serde_json::from_str(&text).map_err(|source| StoreError::Json { what: column, source })).transpose()
}

/// Decodes one `SELECT audit_columns!()` row.
pub(crate) fn decode_row(row: &impl Columns) -> Result<AuditRow, StoreError> {
    Ok(AuditRow {
        seq: row.column("seq")?,
        time: row.column("time")?,
        kind: row.column("kind")?,
        caller: json_column(row, "caller")?,
        session: row.column("session")?,
        upstream: row.column("upstream")?,
        tool: row.column("tool")?,
        verdict: row.column("verdict")?,
        reasons: json_column(row, "reasons")?,
        hint_sources: json_column(row, "hint_sources")?,
        approval_id: row.column("approval_id")?,
        duration_us: row.column("duration_us")?,
        outcome: row.column("outcome")?,
        args_digest: row.column("args_digest")?,
        args: json_column(row, "args")?,
        detail: json_column(row, "detail")?,
        instance: row.column("instance")?,
        prev_hash: row.column("prev_hash")?,
        hash: row.column("hash")?,
    })
}

/// The rows matching `filter`, in chain order.
pub(crate) async fn query(backend: &Backend, filter: &AuditFilter) -> Result<Vec<AuditRow>, StoreError> {
    on_backend!(backend, |pool, dialect| {
        let mut sql = QueryBuilder::new(concat!("SELECT ", audit_columns!(), " FROM audit_log WHERE 1 = 1"));
        if let Some(since) = filter.since {
            sql.push(" AND time >= ").push_bind(format_rfc3339(since));
        }
        if let Some(until) = filter.until {
            sql.push(" AND time < ").push_bind(format_rfc3339(until));
        }
        if let Some(glob) = &filter.tool_glob {
            // SQLite's GLOB: `*`, `?`, `[...]`, case-sensitive; PostgreSQL matches the same glob as a regex.
            match dialect {
                Dialect::Sqlite => sql.push(" AND tool GLOB ").push_bind(glob.clone()),
                Dialect::Postgres => sql.push(" AND tool ~ ").push_bind(glob_to_regex(glob)),
            };
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
        if let Some(instance) = &filter.instance {
            sql.push(" AND instance = ").push_bind(instance.clone());
        }
        if let Some(caller) = &filter.caller {
            sql.push(" AND ").push(caller_identity(dialect)).push(" = ").push_bind(caller.clone());
        }
        if let Some(text) = filter.text.as_deref().filter(|text| !text.is_empty()) {
            // instr (strpos), not LIKE: the text is matched literally (no `%` or `_` wildcards to escape). SQLite's
            // lower() folds ASCII only, so the needle is folded the same way.
            let needle = text.to_ascii_lowercase();
            sql.push(" AND (");
            let find = dialect.pick("instr(lower(", "strpos(lower(");
            for (index, column) in text_columns(dialect).into_iter().enumerate() {
                if index > 0 {
                    sql.push(" OR ");
                }
                sql.push(find).push(column).push("), ").push_bind(needle.clone()).push(") > 0");
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
    })
}
