//! The audit log's records: what the proxy hands in ([`AuditEntry`]), what comes back out ([`AuditRow`]), and how
//! rows are selected ([`AuditFilter`]).
//!
//! Every listing, decision, confirmation and call becomes one row (older logs also hold result summaries).
//! Arguments arrive in clear and the store applies the [`ArgumentRedaction`] setting: by default only a `sha256:`
//! digest of their RFC 8785 form is kept. Rows are append-only and hash-chained ([`chain`]); this module holds no SQL.

pub(crate) mod append;
pub(crate) mod batches;
pub(crate) mod chain;
pub(crate) mod journal;
pub(crate) mod pending;
pub(crate) mod prepare;
pub(crate) mod query;
pub(crate) mod queue;
pub(crate) mod retention;
pub(crate) mod writer;

use std::time::SystemTime;

use serde::Serialize;
use serde_json::Value;
use toolgate_core::EffectiveHints;
use toolgate_core::decision::{Reason, Verdict};

pub use chain::{ChainBreak, ChainBreakKind, ChainReport};
pub use writer::{AuditStats, AuditWriter};

/// What an audit row records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AuditKind {
    /// A `tools/list` answered to a client.
    Listing,
    /// A policy decision on a call.
    Decision,
    /// A person's answer to a confirmation (elicited or through the approvals queue).
    Confirmation,
    /// A call forwarded upstream or put to a person: journaled before it is forwarded
    /// (`AuditWriter::record_journaled`) or as the person is asked (`AuditWriter::record_waiting`), and committed
    /// once, with its outcome and duration, when it ends ([`crate::PendingCall`]).
    Call,
    /// A call's outcome and duration as a row of its own: written by versions that recorded a call without a
    /// journal in two rows; no longer written, still read and verified.
    Result,
    /// A person pinned or rejected a quarantined tool definition (written by `Store::record_pin_decision`).
    Pin,
    /// An HTTP request refused at authentication (an OAuth token refused, or lacking the required scopes): the
    /// identity when known and the reason in `outcome`. Accepted tokens need no row of their own: every row of
    /// the calls they make names the identity.
    Authentication,
    /// A request other than a tool call (`prompts/get`, `resources/read`, `resources/subscribe`) that toolgate
    /// refused itself before anything was sent upstream for it: the request's `method` and the reason in `detail`,
    /// the prompt's name or the resource's URI (bounded) in `tool`, why in `outcome`. Its own kind, not `decision`:
    /// no tool policy ran, and a prompt is not a call in the console's chart.
    Request,
}

impl AuditKind {
    /// Every kind, in the order a form lists them.
    pub const ALL: [AuditKind; 8] = [
        AuditKind::Listing,
        AuditKind::Decision,
        AuditKind::Confirmation,
        AuditKind::Call,
        AuditKind::Result,
        AuditKind::Pin,
        AuditKind::Authentication,
        AuditKind::Request,
    ];

    /// The kind whose stable name is `name`.
    pub fn parse(name: &str) -> Option<AuditKind> {
        AuditKind::ALL.into_iter().find(|kind| kind.as_str() == name)
    }

    /// The stable name stored in the `kind` column.
    pub const fn as_str(self) -> &'static str {
        match self {
            AuditKind::Listing => "listing",
            AuditKind::Decision => "decision",
            AuditKind::Confirmation => "confirmation",
            AuditKind::Call => "call",
            AuditKind::Result => "result",
            AuditKind::Pin => "pin",
            AuditKind::Authentication => "authentication",
            AuditKind::Request => "request",
        }
    }
}

/// The stable name of a verdict, as stored in the `verdict` column.
pub fn verdict_name(verdict: Verdict) -> &'static str {
    match verdict {
        Verdict::Allow => "allow",
        Verdict::Confirm => "confirm",
        Verdict::Deny => "deny",
        Verdict::Hide => "hide",
    }
}

/// Who made a request: an authenticated identity (when the transport has one) and its scopes.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Caller {
    /// The identity, e.g. an OAuth subject or `stdio`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub identity: Option<String>,
    /// Granted scopes.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub scopes: Vec<String>,
    /// A person-readable name beside the identity (an OAuth token's `email` or `name`), for the console.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub display: Option<String>,
}

/// How tool-call arguments are kept in the log.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ArgumentRedaction {
    /// Only `sha256:<hex>` of the RFC 8785 canonical arguments (the default: the log can prove which arguments
    /// were used without holding secrets they may contain).
    #[default]
    Digest,
    /// The digest and the arguments in clear.
    Clear,
}

/// One event to record. Build it with [`AuditEntry::new`] and struct update syntax; absent fields stay `None`.
#[derive(Debug, Clone, PartialEq)]
pub struct AuditEntry {
    /// What happened.
    pub kind: AuditKind,
    /// When; `None` takes the clock when the entry is queued.
    pub time: Option<SystemTime>,
    /// Who asked.
    pub caller: Option<Caller>,
    /// The downstream session id.
    pub session: Option<String>,
    /// The upstream server's configured name.
    pub upstream: Option<String>,
    /// The tool's exposed name.
    pub tool: Option<String>,
    /// The policy verdict.
    pub verdict: Option<Verdict>,
    /// The reasons behind the verdict.
    pub reasons: Vec<Reason>,
    /// The effective hints and the source of each, as the decision saw them.
    pub hint_sources: Option<EffectiveHints>,
    /// The approval that allowed the call.
    pub approval_id: Option<String>,
    /// How long the call took.
    pub duration_us: Option<u64>,
    /// How it ended (`ok`, `is_error`, `jsonrpc_error`, `timeout`, `cancelled`, ...): the proxy's vocabulary.
    pub outcome: Option<String>,
    /// The call's arguments, in clear; the store keeps a digest or the value per [`ArgumentRedaction`].
    pub args: Option<Value>,
    /// Anything else worth keeping for this kind (listing size, result summary), as JSON.
    pub detail: Option<Value>,
}

impl AuditEntry {
    /// An entry of `kind` with every other field absent.
    pub fn new(kind: AuditKind) -> AuditEntry {
        AuditEntry {
            kind,
            time: None,
            caller: None,
            session: None,
            upstream: None,
            tool: None,
            verdict: None,
            reasons: Vec::new(),
            hint_sources: None,
            approval_id: None,
            duration_us: None,
            outcome: None,
            args: None,
            detail: None,
        }
    }
}

/// What the writer reports for a row it committed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditReceipt {
    /// The row's sequence number.
    pub seq: i64,
    /// The row's chain hash.
    pub hash: String,
}

/// One stored row, as `toolgate audit --json` prints it. JSON columns come back as JSON values.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct AuditRow {
    /// Position in the chain, from 1 without gaps.
    pub seq: i64,
    /// RFC 3339 UTC with microseconds.
    pub time: String,
    /// [`AuditKind::as_str`].
    pub kind: String,
    /// [`Caller`] as JSON.
    pub caller: Option<Value>,
    /// Downstream session id.
    pub session: Option<String>,
    /// Upstream name.
    pub upstream: Option<String>,
    /// Exposed tool name.
    pub tool: Option<String>,
    /// [`verdict_name`].
    pub verdict: Option<String>,
    /// The reasons as JSON (`[{"rule", "detail"}]`).
    pub reasons: Option<Value>,
    /// The effective hints with their sources as JSON.
    pub hint_sources: Option<Value>,
    /// The approval used.
    pub approval_id: Option<String>,
    /// Duration in microseconds.
    pub duration_us: Option<i64>,
    /// Outcome.
    pub outcome: Option<String>,
    /// `sha256:` digest of the canonical arguments.
    pub args_digest: Option<String>,
    /// The arguments, only under [`ArgumentRedaction::Clear`].
    pub args: Option<Value>,
    /// Kind-specific detail.
    pub detail: Option<Value>,
    /// The instance id of the gateway process that wrote the row (rows written before instance ids, and by
    /// commands other than `serve`, have none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance: Option<String>,
    /// The previous row's hash (a fixed genesis value for the first row).
    pub prev_hash: String,
    /// SHA-256 over `prev_hash` and the RFC 8785 form of this row's other columns.
    pub hash: String,
}

/// Which rows `query` returns; every condition present must hold. Rows come in chain order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AuditFilter {
    /// Rows at or after this time.
    pub since: Option<SystemTime>,
    /// Rows before this time.
    pub until: Option<SystemTime>,
    /// Tool name glob (`*`, `?`, `[...]`, case-sensitive).
    pub tool_glob: Option<String>,
    /// Only this verdict.
    pub verdict: Option<Verdict>,
    /// Only this kind.
    pub kind: Option<AuditKind>,
    /// Only this session.
    pub session: Option<String>,
    /// Only this upstream (exact name).
    pub upstream: Option<String>,
    /// Only rows whose caller identity is exactly this (`console:alice`, an OAuth subject, `stdio`).
    pub caller: Option<String>,
    /// Only rows written by this gateway instance ([`AuditRow::instance`]).
    pub instance: Option<String>,
    /// Only rows where this text occurs (ASCII case-insensitive, no wildcards) in the tool, upstream, session,
    /// caller identity, outcome, reasons or instance.
    pub text: Option<String>,
    /// At most this many rows (the most recent ones when set).
    pub limit: Option<u32>,
}

/// The outcome given to a journaled call row recovered after its process ended: the row was journaled before the
/// call was forwarded, so the call left toolgate; whether and how it was answered was not recorded.
pub const NOT_RECORDED_OUTCOME: &str = "not_recorded";

/// Appends the rows of dead processes' journals that the database lacks, then removes those journals. Safe to run
/// from any process and from several at once: only journals of processes that are gone are read, and a row already
/// appended is skipped inside the write transaction. A recovered row without an outcome gets
/// [`NOT_RECORDED_OUTCOME`], or [`pending::UNANSWERED_OUTCOME`] when only its `waiting` line was written (the call
/// waited for a person and was never forwarded); lines that do not parse (a torn write) are counted and reported.
pub(crate) async fn recover_journals(
    backend: &crate::backend::Backend,
    database: &std::path::Path,
) -> Result<(), crate::error::StoreError> {
    let orphans = journal::Journal::orphans(database);
    let files: Vec<journal::JournalContents> = orphans.iter().map(|path| journal::read_lines(path)).collect();
    let forwarded = forwarded_ids(&files);
    for (path, contents) in orphans.iter().zip(files) {
        if contents.torn > 0 {
            tracing::warn!(
                journal = %path.display(),
                lines = contents.torn,
                "audit journal lines that do not parse were skipped (a write cut short by a crash or a full disk)"
            );
        }
        let lines: Vec<journal::JournalLine> =
            contents.lines.into_iter().filter(|line| !superseded(line, &forwarded)).collect();
        if !lines.is_empty() {
            let mut rows = Vec::with_capacity(lines.len());
            let mut ids = Vec::with_capacity(lines.len());
            for line in lines {
                let mut row = line.row;
                let outcome = if line.waiting { pending::UNANSWERED_OUTCOME } else { NOT_RECORDED_OUTCOME };
                row.outcome.get_or_insert_with(|| outcome.to_owned());
                // One row that cannot be put in canonical form is skipped and reported: failing here would fail
                // every command's Store::open, and the journal's other rows would never reach the log.
                match chain::PreparedRow::from_row(row) {
                    Ok(prepared) => {
                        rows.push(prepared);
                        ids.push(line.id);
                    }
                    Err(error) => tracing::error!(
                        journal = %path.display(),
                        id = %line.id,
                        %error,
                        "an audit journal row cannot be canonicalized and was skipped"
                    ),
                }
            }
            let ids: Vec<Option<&str>> = ids.iter().map(|id| Some(id.as_str())).collect();
            append::append(backend, &mut rows, &ids, true).await?;
            tracing::info!(journal = %path.display(), "audit rows of a process that is gone were recovered");
        }
        match std::fs::remove_file(path) {
            Ok(()) => {}
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
            Err(source) => return Err(crate::error::StoreError::Journal { path: path.clone(), source }),
        }
        // The dead process's lock goes with its journal (tidiness: a missing lock is never taken for a live one).
        let _ = std::fs::remove_file(journal::lock_path(path));
    }
    Ok(())
}

/// The ids journaled as forwarded, in any of the files (a call approved after waiting may have its lines in two
/// files of one process, when the journal moved on to a new file meanwhile).
fn forwarded_ids(files: &[journal::JournalContents]) -> std::collections::HashSet<String> {
    files.iter().flat_map(|contents| &contents.lines).filter(|line| !line.waiting).map(|line| line.id.clone()).collect()
}

/// A `waiting` line whose call was journaled again as forwarded: the later line is the row.
fn superseded(line: &journal::JournalLine, forwarded: &std::collections::HashSet<String>) -> bool {
    line.waiting && forwarded.contains(&line.id)
}

/// What journals of dead processes hold that the database does not, found without writing anything.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct JournalBacklog {
    /// Journal files of processes that are gone.
    pub files: usize,
    /// Their rows the database lacks (the next store opened for writing appends them).
    pub rows: usize,
    /// Lines that do not parse (skipped at recovery).
    pub torn_lines: usize,
}

/// Counts rows in dead processes' journals that the database lacks; reads only.
pub(crate) async fn journal_backlog(
    backend: &crate::backend::Backend,
    database: &std::path::Path,
) -> Result<JournalBacklog, crate::error::StoreError> {
    let mut backlog = JournalBacklog::default();
    let orphans = journal::Journal::orphans(database);
    let files: Vec<journal::JournalContents> = orphans.iter().map(|path| journal::read_lines(path)).collect();
    let forwarded = forwarded_ids(&files);
    for contents in files {
        backlog.files += 1;
        backlog.torn_lines += contents.torn;
        for line in contents.lines.into_iter().filter(|line| !superseded(line, &forwarded)) {
            let id = line.id;
            let row = chain::PreparedRow::from_row(line.row)?;
            if !append::already_appended(backend, &row, Some(&id)).await? {
                backlog.rows += 1;
            }
        }
    }
    Ok(backlog)
}
