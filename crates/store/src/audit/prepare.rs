//! Turning an entry into a row ([`prepare`]): redaction applied, JSON columns as canonical text, time taken if
//! absent, the writing process's instance stamped ([`RowStamp`]); and the argument digest an approval is bound to.
//!
//! Below the handle (`writer`) and a call's pending row (`pending`), which both prepare rows. Pure: no IO, no queue.

use std::sync::Arc;
use std::time::SystemTime;

use serde::Serialize;
use serde_json::Value;
use toolgate_core::fingerprint::digest_bytes;
use toolgate_core::jcs;

use super::chain::{JsonColumns, PreparedRow};
use super::{ArgumentRedaction, AuditEntry, AuditRow, verdict_name};
use crate::time::format_rfc3339;

/// What the store adds to every row it is handed: how arguments are kept, and which process wrote it.
#[derive(Debug, Clone, Default)]
pub(crate) struct RowStamp {
    /// How tool-call arguments are kept.
    pub(crate) redaction: ArgumentRedaction,
    /// The writing process's instance id (none for a store that only reads).
    pub(crate) instance: Option<Arc<str>>,
}

/// Turns an entry into a row without chain fields: redaction applied, JSON columns as canonical text, time taken
/// if absent, the instance stamped. Runs on the caller's task, so the writer thread and the journal reuse the text;
/// a row journaled by one process and recovered by another keeps the instance that wrote it.
pub(crate) fn prepare(entry: AuditEntry, stamp: &RowStamp) -> PreparedRow {
    let redaction = stamp.redaction;
    let args_text = entry.args.as_ref().map(canonical_text);
    let args_digest = args_text.as_ref().map(|text| digest_bytes(text.as_bytes()));
    let json = JsonColumns {
        caller: entry.caller.as_ref().map(|caller| canonical_text(&to_json(caller))),
        reasons: (!entry.reasons.is_empty()).then(|| canonical_text(&to_json(&entry.reasons))),
        hint_sources: entry.hint_sources.as_ref().map(|hints| canonical_text(&to_json(hints))),
        args: match redaction {
            ArgumentRedaction::Digest => None,
            ArgumentRedaction::Clear => args_text,
        },
        detail: entry.detail.as_ref().map(canonical_text),
    };
    let row = AuditRow {
        seq: 0,
        time: format_rfc3339(entry.time.unwrap_or_else(SystemTime::now)),
        kind: entry.kind.as_str().to_owned(),
        caller: None,
        session: entry.session,
        upstream: entry.upstream,
        tool: entry.tool,
        verdict: entry.verdict.map(|verdict| verdict_name(verdict).to_owned()),
        reasons: None,
        hint_sources: None,
        approval_id: entry.approval_id,
        duration_us: entry.duration_us.map(|micros| i64::try_from(micros).unwrap_or(i64::MAX)),
        outcome: entry.outcome,
        args_digest,
        args: None,
        detail: None,
        instance: stamp.instance.as_deref().map(str::to_owned),
        prev_hash: String::new(),
        hash: String::new(),
    };
    PreparedRow { row, json }
}

/// The canonical text of a JSON value. serde_json values always canonicalize today; if that ever changes, the plain
/// text is kept rather than the row lost.
fn canonical_text(value: &Value) -> String {
    jcs::to_string_exact(value).unwrap_or_else(|_| value.to_string())
}

/// A typed entry field as a JSON column. These types (strings, booleans, enums, vectors of them) always serialize.
fn to_json<T: Serialize>(value: &T) -> Value {
    serde_json::to_value(value).unwrap_or(Value::Null)
}

/// `sha256:` of the canonical arguments; the same function gives the digest an approval is bound to.
pub fn digest_arguments(args: &Value) -> String {
    digest_bytes(canonical_text(args).as_bytes())
}
