//! The chain's one way in: appending rows in a `BEGIN IMMEDIATE` transaction that reads the tail, fills in each
//! row's seq, prev_hash and hash, and moves the head. The writer, journal recovery and a person's decisions all
//! append through [`append`].
//!
//! A failed append never leaves its connection behind: SQLite may already have rolled the transaction back itself
//! (a full disk at `COMMIT`), and a connection whose rollback then also failed would go back to the pool still
//! believing it is inside a transaction, refusing every later `BEGIN` until a restart. The connection is closed
//! instead and the pool opens a fresh one. Nothing is assumed durable after a failed commit or `fsync`: the next
//! attempt reads the tail again from what the database really holds. This module does not retry; the writer does.

use std::collections::HashMap;

use sqlx::Row;
use sqlx::sqlite::SqliteConnection;

use super::chain::{GENESIS_HASH, PreparedRow, row_hash_with};
use crate::Backend;
use crate::error::StoreError;

/// A row's `reasons_ref` and `hint_sources_ref`: ids in `audit_text`.
type TextReferences = (Option<i64>, Option<i64>);

/// Rows per INSERT statement (18 bound values each; SQLite allows 32766 per statement).
const INSERT_CHUNK: usize = 256;

/// Appends `rows` in one `BEGIN IMMEDIATE` transaction, filling in seq, prev_hash and hash.
///
/// When `recovering` (rows read back from a journal), a row the database already holds is skipped: one with the
/// same time, kind, session, tool and arguments digest (the journaled row and its committed form share these; the
/// outcome is the only thing the commit adds), or, for journals written by an older version that recorded journal
/// ids, one whose id in `journal_ids` (empty, or one entry per row) is known. The check runs inside the write
/// transaction, so two processes recovering the same journal cannot both append a row.
pub(crate) async fn append(
    backend: &Backend,
    rows: &mut [PreparedRow],
    journal_ids: &[Option<&str>],
    recovering: bool,
) -> Result<(), StoreError> {
    let Backend::Sqlite(pool) = backend;
    let mut connection = pool.acquire().await?;
    let appended = append_on(&mut connection, rows, journal_ids, recovering).await;
    if appended.is_err() {
        // See the module documentation: a fresh connection next time, never this one's transaction state.
        connection.close_on_drop();
    }
    appended
}

async fn append_on(
    connection: &mut SqliteConnection,
    rows: &mut [PreparedRow],
    journal_ids: &[Option<&str>],
    recovering: bool,
) -> Result<(), StoreError> {
    let mut transaction = sqlx::Connection::begin_with(connection, "BEGIN IMMEDIATE").await?;
    let tail = sqlx::query("SELECT seq, hash FROM audit_log ORDER BY seq DESC LIMIT 1")
        .fetch_optional(&mut *transaction)
        .await?;
    let (mut seq, mut prev_hash) = match tail {
        Some(row) => (row.try_get::<i64, _>("seq")?, row.try_get::<String, _>("hash")?),
        None => match checkpoint_tail(&mut transaction).await? {
            Some(anchor) => anchor,
            None => (0, GENESIS_HASH.to_owned()),
        },
    };
    let mut skip = vec![false; rows.len()];
    if recovering {
        for (index, prepared) in rows.iter().enumerate() {
            let legacy_id = journal_ids.get(index).copied().flatten();
            skip[index] = already_appended(&mut transaction, prepared, legacy_id).await?;
        }
    }
    let mut appended = Vec::with_capacity(rows.len());
    for (index, prepared) in rows.iter_mut().enumerate() {
        if skip.get(index).copied().unwrap_or(false) {
            continue;
        }
        seq += 1;
        prepared.row.seq = seq;
        prepared.row.prev_hash = prev_hash;
        prepared.row.hash = row_hash_with(&prepared.row, &prepared.json);
        prev_hash = prepared.row.hash.clone();
        appended.push(index);
    }
    // Reasons and hint sources repeat from call to call: each distinct text is stored once (see `intern`).
    let mut interned = HashMap::new();
    let mut references = Vec::with_capacity(appended.len());
    for index in &appended {
        let Some(prepared) = rows.get(*index) else { continue };
        let reasons = intern(&mut transaction, &mut interned, prepared.json.reasons.as_deref()).await?;
        let hint_sources = intern(&mut transaction, &mut interned, prepared.json.hint_sources.as_deref()).await?;
        references.push((reasons, hint_sources));
    }
    // One statement per chunk of rows: each statement is a round trip to sqlx's SQLite thread. The JSON columns
    // are stored as the canonical text the chain hashed, so each is written once per row.
    let rows_with_references: Vec<(&PreparedRow, TextReferences)> =
        appended.iter().filter_map(|index| rows.get(*index)).zip(references).collect();
    for chunk in rows_with_references.chunks(INSERT_CHUNK) {
        let mut insert = sqlx::QueryBuilder::new(
            "INSERT INTO audit_log (seq, time, kind, caller, session, upstream, tool, verdict, reasons_ref, \
             hint_sources_ref, approval_id, duration_us, outcome, args_digest, args, detail, prev_hash, hash) ",
        );
        insert.push_values(chunk, |mut values, (prepared, (reasons, hint_sources))| {
            let (row, json) = (&prepared.row, &prepared.json);
            values
                .push_bind(row.seq)
                .push_bind(row.time.clone())
                .push_bind(row.kind.clone())
                .push_bind(json.caller.clone())
                .push_bind(row.session.clone())
                .push_bind(row.upstream.clone())
                .push_bind(row.tool.clone())
                .push_bind(row.verdict.clone())
                .push_bind(*reasons)
                .push_bind(*hint_sources)
                .push_bind(row.approval_id.clone())
                .push_bind(row.duration_us)
                .push_bind(row.outcome.clone())
                .push_bind(row.args_digest.clone())
                .push_bind(json.args.clone())
                .push_bind(json.detail.clone())
                .push_bind(row.prev_hash.clone())
                .push_bind(row.hash.clone());
        });
        insert.build().execute(&mut *transaction).await?;
    }
    sqlx::query(
        "INSERT INTO audit_head (id, seq, hash) VALUES (1, ?, ?) \
         ON CONFLICT (id) DO UPDATE SET seq = excluded.seq, hash = excluded.hash",
    )
    .bind(seq)
    .bind(&prev_hash)
    .execute(&mut *transaction)
    .await?;
    transaction.commit().await?;
    Ok(())
}

/// The id of `text` in `audit_text`, storing it the first time (ids are cached for the transaction only: a rolled
/// back insert must not leave an id that points nowhere).
async fn intern(
    connection: &mut SqliteConnection,
    interned: &mut HashMap<String, i64>,
    text: Option<&str>,
) -> Result<Option<i64>, StoreError> {
    let Some(text) = text else { return Ok(None) };
    if let Some(id) = interned.get(text) {
        return Ok(Some(*id));
    }
    sqlx::query("INSERT INTO audit_text (text) VALUES (?) ON CONFLICT (text) DO NOTHING")
        .bind(text)
        .execute(&mut *connection)
        .await?;
    let id: i64 =
        sqlx::query_scalar("SELECT id FROM audit_text WHERE text = ?").bind(text).fetch_one(&mut *connection).await?;
    interned.insert(text.to_owned(), id);
    Ok(Some(id))
}

/// Where the chain continues when every row has been pruned: the checkpoint's last pruned row.
async fn checkpoint_tail(connection: &mut SqliteConnection) -> Result<Option<(i64, String)>, StoreError> {
    let row =
        sqlx::query("SELECT seq, hash FROM audit_checkpoint WHERE id = 1").fetch_optional(&mut *connection).await?;
    Ok(row.map(|row| Ok::<_, sqlx::Error>((row.try_get("seq")?, row.try_get("hash")?))).transpose()?)
}

/// The lookup behind [`already_appended`], through the time index.
///
/// The index is named: with no statistics SQLite prefers the tool index, and when most rows are calls of a few
/// tools that is a scan of the whole log per recovered row (a restart after `kill -9` took minutes on a log of
/// 94,000 rows). A time matches a handful of rows at most.
const ALREADY_APPENDED: &str = "SELECT 1 FROM audit_log INDEXED BY audit_log_time WHERE time = ? AND kind = ? \
                                AND session IS ? AND tool IS ? AND args_digest IS ? LIMIT 1";

/// Whether a journaled row is already in the log (see [`append`]).
pub(crate) async fn already_appended(
    connection: &mut SqliteConnection,
    prepared: &PreparedRow,
    legacy_id: Option<&str>,
) -> Result<bool, StoreError> {
    if let Some(journal_id) = legacy_id {
        let known = sqlx::query("SELECT 1 FROM audit_journal_ids WHERE journal_id = ?")
            .bind(journal_id)
            .fetch_optional(&mut *connection)
            .await?;
        if known.is_some() {
            return Ok(true);
        }
    }
    let row = &prepared.row;
    let found = sqlx::query(ALREADY_APPENDED)
        .bind(&row.time)
        .bind(&row.kind)
        .bind(&row.session)
        .bind(&row.tool)
        .bind(&row.args_digest)
        .fetch_optional(&mut *connection)
        .await?;
    Ok(found.is_some())
}

#[cfg(test)]
mod tests {
    use super::ALREADY_APPENDED;

    /// The recovery lookup searches by time: any other plan is a scan per recovered row once the log holds many
    /// calls of one tool.
    #[tokio::test]
    async fn the_recovery_lookup_searches_by_time() -> Result<(), Box<dyn std::error::Error>> {
        let directory = tempfile::tempdir()?;
        let store = crate::Store::open_file(&directory.path().join("toolgate.db"), Default::default()).await?;
        let crate::Backend::Sqlite(pool) = &store.backend;
        let plan: Vec<(i64, i64, i64, String)> =
            sqlx::query_as(sqlx::AssertSqlSafe(format!("EXPLAIN QUERY PLAN {ALREADY_APPENDED}")))
                .bind("2026-11-26T00:00:00.000000Z")
                .bind("call")
                .bind("session")
                .bind("tool")
                .bind("sha256:x")
                .fetch_all(pool)
                .await?;
        let details: Vec<&str> = plan.iter().map(|(_, _, _, detail)| detail.as_str()).collect();
        assert!(details.iter().any(|detail| detail.contains("INDEX audit_log_time")), "{details:?}");
        store.close().await?;
        Ok(())
    }
}
