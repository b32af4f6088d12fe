//! The chain's one way in: appending rows in one write transaction that takes the chain's lock, reads the tail,
//! fills in each row's seq, prev_hash and hash, and moves the head. The writer, journal recovery and a person's
//! decisions all append through [`append`].
//!
//! The chain has one order across every process writing to the store. SQLite takes its database write lock at
//! `BEGIN IMMEDIATE`. PostgreSQL takes a transaction-scoped advisory lock ([`CHAIN_LOCK`]) first: a row lock on
//! `audit_head` (`SELECT ... FOR UPDATE`) would lock nothing for the very first append, when no head row exists,
//! and two processes could both start the chain at seq 1; the advisory lock exists before any row does, is released
//! by the commit or rollback however the transaction ends (a killed process's session ends and frees it), and
//! leaves readers (verify, queries) unblocked. Appends of several processes queue on it, so each reads the tail the
//! previous one committed.
//!
//! A failed append never leaves its connection behind: SQLite may already have rolled the transaction back itself
//! (a full disk at `COMMIT`), and a connection whose rollback then also failed would go back to the pool still
//! believing it is inside a transaction, refusing every later `BEGIN` until a restart; a PostgreSQL connection may
//! be the one that lost its server. The connection is closed instead and the pool opens a fresh one. Nothing is
//! assumed durable after a failed commit or `fsync`: the next attempt reads the tail again from what the database
//! really holds. This module does not retry; the writer does.

use std::collections::HashMap;

use super::chain::{GENESIS_HASH, PreparedRow, row_hash_with};
use crate::backend::{Backend, Columns as _, Dialect};
use crate::error::StoreError;

/// A row's `reasons_ref` and `hint_sources_ref`: ids in `audit_text`.
type TextReferences = (Option<i64>, Option<i64>);

/// Rows per INSERT statement (19 bound values each; SQLite allows 32766 per statement, PostgreSQL 65535).
const INSERT_CHUNK: usize = 256;

/// The PostgreSQL advisory lock key every append takes for its transaction (`pg_advisory_xact_lock`): the chain's
/// one writer at a time across processes. An arbitrary constant ("toolgate" in ASCII, cut to 63 bits).
pub(crate) const CHAIN_LOCK: i64 = 0x746f_6f6c_6761_7465;

/// Appends `rows` in one write transaction, filling in seq, prev_hash and hash.
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
    crate::backend::on_backend!(backend, |pool, dialect| {
        let mut connection = pool.acquire().await?;
        let appended = append_on!(&mut *connection, dialect, rows, journal_ids, recovering);
        if appended.is_err() {
            // See the module documentation: a fresh connection next time, never this one's transaction state.
            connection.close_on_drop();
        }
        appended
    })
}

/// The body of [`append`] on one connection of either driver (a macro: each driver's connection type is its own).
macro_rules! append_on {
    ($connection:expr, $dialect:expr, $rows:expr, $journal_ids:expr, $recovering:expr) => {{
        let dialect: Dialect = $dialect;
        let rows: &mut [PreparedRow] = $rows;
        let journal_ids: &[Option<&str>] = $journal_ids;
        async {
            let mut transaction = sqlx::Connection::begin_with($connection, dialect.begin_write()).await?;
            if dialect == Dialect::Postgres {
                sqlx::query("SELECT pg_advisory_xact_lock($1)").bind(CHAIN_LOCK).execute(&mut *transaction).await?;
            }
            let tail = sqlx::query("SELECT seq, hash FROM audit_log ORDER BY seq DESC LIMIT 1")
                .fetch_optional(&mut *transaction)
                .await?;
            let anchor = match tail {
                Some(row) => Some((row.column::<i64>("seq")?, row.column::<String>("hash")?)),
                None => sqlx::query("SELECT seq, hash FROM audit_checkpoint WHERE id = 1")
                    .fetch_optional(&mut *transaction)
                    .await?
                    .map(|row| Ok::<_, sqlx::Error>((row.column::<i64>("seq")?, row.column::<String>("hash")?)))
                    .transpose()?,
            };
            let (mut seq, mut prev_hash) = anchor.unwrap_or_else(|| (0, GENESIS_HASH.to_owned()));
            let mut skip = vec![false; rows.len()];
            if $recovering {
                for (index, prepared) in rows.iter().enumerate() {
                    let legacy_id = journal_ids.get(index).copied().flatten();
                    skip[index] = already_appended_on!(&mut *transaction, dialect, prepared, legacy_id);
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
            // Reasons and hint sources repeat from call to call: each distinct text is stored once. Ids are cached
            // for the transaction only: a rolled back insert must not leave an id that points nowhere.
            let mut interned: HashMap<String, i64> = HashMap::new();
            let mut references: Vec<TextReferences> = Vec::with_capacity(appended.len());
            for index in &appended {
                let Some(prepared) = rows.get(*index) else { continue };
                let mut pair = [None, None];
                for (slot, text) in
                    pair.iter_mut().zip([prepared.json.reasons.as_deref(), prepared.json.hint_sources.as_deref()])
                {
                    let Some(text) = text else { continue };
                    if let Some(id) = interned.get(text) {
                        *slot = Some(*id);
                        continue;
                    }
                    sqlx::query("INSERT INTO audit_text (text) VALUES ($1) ON CONFLICT (text) DO NOTHING")
                        .bind(text)
                        .execute(&mut *transaction)
                        .await?;
                    let id: i64 = sqlx::query_scalar("SELECT id FROM audit_text WHERE text = $1")
                        .bind(text)
                        .fetch_one(&mut *transaction)
                        .await?;
                    interned.insert(text.to_owned(), id);
                    *slot = Some(id);
                }
                references.push((pair[0], pair[1]));
            }
            // One statement per chunk of rows: each statement is a round trip. The JSON columns are stored as the
            // canonical text the chain hashed, so each is written once per row.
            let rows_with_references: Vec<(&PreparedRow, TextReferences)> =
                appended.iter().filter_map(|index| rows.get(*index)).zip(references).collect();
            for chunk in rows_with_references.chunks(INSERT_CHUNK) {
                let mut insert = sqlx::QueryBuilder::new(
                    "INSERT INTO audit_log (seq, time, kind, caller, session, upstream, tool, verdict, reasons_ref, \
                     hint_sources_ref, approval_id, duration_us, outcome, args_digest, args, detail, instance, \
                     prev_hash, hash) ",
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
                        .push_bind(row.instance.clone())
                        .push_bind(row.prev_hash.clone())
                        .push_bind(row.hash.clone());
                });
                insert.build().execute(&mut *transaction).await?;
            }
            sqlx::query(
                "INSERT INTO audit_head (id, seq, hash) VALUES (1, $1, $2) \
                 ON CONFLICT (id) DO UPDATE SET seq = excluded.seq, hash = excluded.hash",
            )
            .bind(seq)
            .bind(&prev_hash)
            .execute(&mut *transaction)
            .await?;
            transaction.commit().await?;
            Ok::<(), StoreError>(())
        }
        .await
    }};
}
use append_on;

/// The lookup behind [`already_appended`], through the time index.
///
/// On SQLite the index is named: with no statistics SQLite prefers the tool index, and when most rows are calls of a
/// few tools that is a scan of the whole log per recovered row (a restart after `kill -9` took minutes on a log of
/// 94,000 rows). A time matches a handful of rows at most. PostgreSQL plans with statistics and has no `INDEXED BY`.
const ALREADY_APPENDED: &str = "SELECT 1 FROM audit_log INDEXED BY audit_log_time WHERE time = $1 AND kind = $2 \
                                AND session IS $3 AND tool IS $4 AND args_digest IS $5 LIMIT 1";
const ALREADY_APPENDED_POSTGRES: &str = "SELECT 1 FROM audit_log WHERE time = $1 AND kind = $2 \
                                         AND session IS NOT DISTINCT FROM $3 AND tool IS NOT DISTINCT FROM $4 \
                                         AND args_digest IS NOT DISTINCT FROM $5 LIMIT 1";

/// Whether a journaled row is already in the log (see [`append`]), on one connection of either driver.
macro_rules! already_appended_on {
    ($connection:expr, $dialect:expr, $prepared:expr, $legacy_id:expr) => {{
        let prepared: &PreparedRow = $prepared;
        let legacy_id: Option<&str> = $legacy_id;
        let mut known = false;
        if let Some(journal_id) = legacy_id {
            known = sqlx::query("SELECT 1 FROM audit_journal_ids WHERE journal_id = $1")
                .bind(journal_id)
                .fetch_optional(&mut *$connection)
                .await?
                .is_some();
        }
        if !known {
            let row = &prepared.row;
            known = sqlx::query($dialect.pick(ALREADY_APPENDED, ALREADY_APPENDED_POSTGRES))
                .bind(&row.time)
                .bind(&row.kind)
                .bind(&row.session)
                .bind(&row.tool)
                .bind(&row.args_digest)
                .fetch_optional(&mut *$connection)
                .await?
                .is_some();
        }
        known
    }};
}
use already_appended_on;

/// Whether a journaled row is already in the log (see [`append`]).
pub(crate) async fn already_appended(
    backend: &Backend,
    prepared: &PreparedRow,
    legacy_id: Option<&str>,
) -> Result<bool, StoreError> {
    crate::backend::on_backend!(backend, |pool, dialect| {
        let mut connection = pool.acquire().await?;
        Ok(already_appended_on!(&mut *connection, dialect, prepared, legacy_id))
    })
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
        let crate::Backend::Sqlite(pool) = &store.backend else { unreachable!("a SQLite store") };
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
