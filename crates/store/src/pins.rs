//! Pins: the definition an operator approved for `(upstream, kind, name)`, and changed definitions held in
//! quarantine with a field-by-field diff until someone approves or rejects them. Tools are the first kind; a pinned
//! upstream's prompts, resources, resource templates and server instructions are pinned the same way ([`PinKind`]).
//!
//! The store compares fingerprints and keeps records; whether an unpinned tool is trusted on first use, or a
//! quarantined one hidden, is the proxy's policy. Approving takes the fingerprint the approver saw, so a change that
//! arrives while they look is never approved by accident, nor taken out of review by the approval (only the pending
//! change that is the approved definition is cleared, checked in the pinning transaction). A pending change is written
//! only against the pin it was compared with, checked in the writing transaction: a gateway's re-check racing a
//! person's approval never leaves a change waiting for a definition that is already pinned.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::SystemTime;

use serde::Serialize;
use serde_json::Map;
use serde_json::Value;
use toolgate_core::fingerprint::{
    FieldChange, ToolFingerprint, diff_fingerprints, digest_parts, fingerprint_definition, fingerprint_tool,
};
use toolgate_core::{EffectiveHints, ToolDefinition};

use crate::backend::{Backend, Columns, Dialect, on_backend};
use crate::error::StoreError;
use crate::feed::{Feed, StoreChange};
use crate::time::format_rfc3339;

/// One definition's pinned fingerprint and pending change (its proposed and its pinned fingerprint), as stored.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PinState {
    /// The approved definition's fingerprint, if it is pinned.
    pub pinned: Option<String>,
    /// The pending change's proposed fingerprint and the pin it was compared with (empty for a new definition).
    pub pending: Option<(String, String)>,
}

impl PinState {
    /// What [`PinStore::observe`] (or [`PinStore::propose_new`]) would conclude for a definition listed now with
    /// `fingerprint` without writing anything: `Some(true)` when it is its pin with nothing pending, `Some(false)`
    /// when it is already the pending change against the current pin (or against none), `None` when the store
    /// must be asked (and may write).
    pub fn settled(&self, fingerprint: &str) -> Option<bool> {
        match (&self.pinned, &self.pending) {
            (Some(pinned), None) if pinned == fingerprint => Some(true),
            (pinned, Some((proposed, against)))
                if proposed == fingerprint && against.as_str() == pinned.as_deref().unwrap_or_default() =>
            {
                Some(false)
            }
            _ => None,
        }
    }
}

/// What kind of definition a pin holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PinKind {
    /// A tool (`tools/list`), named by its name.
    Tool,
    /// A prompt (`prompts/list`), named by its name.
    Prompt,
    /// A listed resource (`resources/list`), named by its URI.
    Resource,
    /// A resource template (`resources/templates/list`), named by its `uriTemplate`.
    ResourceTemplate,
    /// The server's `instructions` from `initialize`, named [`INSTRUCTIONS`].
    Instructions,
}

/// The name of an upstream's instructions pin (there is one per upstream).
pub const INSTRUCTIONS: &str = "instructions";

impl PinKind {
    /// Every kind, in the order they are listed.
    pub const ALL: [PinKind; 5] =
        [PinKind::Tool, PinKind::Prompt, PinKind::Resource, PinKind::ResourceTemplate, PinKind::Instructions];

    /// The name stored and shown: `tool`, `prompt`, `resource`, `resource_template`, `instructions`.
    pub fn as_str(self) -> &'static str {
        match self {
            PinKind::Tool => "tool",
            PinKind::Prompt => "prompt",
            PinKind::Resource => "resource",
            PinKind::ResourceTemplate => "resource_template",
            PinKind::Instructions => "instructions",
        }
    }

    /// The kind [`PinKind::as_str`] names.
    pub fn parse(text: &str) -> Option<PinKind> {
        PinKind::ALL.into_iter().find(|kind| kind.as_str() == text)
    }
}

/// One definition as an upstream lists it now: what a pin is compared with.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolSnapshot {
    /// The upstream's configured name.
    pub upstream: String,
    /// What kind of definition this is.
    pub kind: PinKind,
    /// Its name at the upstream: a tool's or prompt's name, a resource's URI, a template's `uriTemplate`, or
    /// [`INSTRUCTIONS`].
    pub tool: String,
    /// Whole and per-field digests of `definition`.
    pub fingerprint: ToolFingerprint,
    /// The definition as received.
    pub definition: Value,
    /// The effective hints with their sources, as JSON (`null` for kinds other than tools).
    pub effective_hints: Value,
}

impl ToolSnapshot {
    /// Fingerprints a definition as received, with the effective hints toolgate derived for it.
    pub fn new(upstream: &str, definition: &ToolDefinition, effective: &EffectiveHints) -> Result<Self, StoreError> {
        Ok(ToolSnapshot {
            upstream: upstream.to_owned(),
            kind: PinKind::Tool,
            tool: definition.name().to_owned(),
            fingerprint: fingerprint_tool(definition)?,
            definition: Value::Object(definition.raw().clone()),
            effective_hints: serde_json::to_value(effective)
                .map_err(|source| StoreError::Json { what: "effective hints", source })?,
        })
    }

    /// Fingerprints a definition of another kind (a prompt, resource or template as listed; instructions as
    /// `{"instructions": text}`).
    pub fn of_content(
        upstream: &str,
        kind: PinKind,
        name: &str,
        definition: Map<String, Value>,
    ) -> Result<Self, StoreError> {
        Ok(ToolSnapshot {
            upstream: upstream.to_owned(),
            kind,
            tool: name.to_owned(),
            fingerprint: fingerprint_definition(&definition)?,
            definition: Value::Object(definition),
            effective_hints: Value::Null,
        })
    }
}

/// An approved definition.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PinnedTool {
    /// The snapshot that was approved.
    #[serde(flatten)]
    pub snapshot: ToolSnapshot,
    /// When (RFC 3339).
    pub approved_at: String,
    /// By whom (`tofu` for trust on first use, an operator's name, ...).
    pub approved_by: String,
}

/// A definition that differs from its pin, waiting for a decision.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PendingPinChange {
    /// The new definition.
    #[serde(flatten)]
    pub proposed: ToolSnapshot,
    /// The pinned fingerprint it differs from.
    pub pinned_fingerprint: String,
    /// Fields added, removed or changed, in field-name order.
    pub changes: Vec<(String, FieldChange)>,
    /// When it was first seen (RFC 3339).
    pub detected_at: String,
}

/// What comparing a listed tool with its pin found.
#[derive(Debug, Clone, PartialEq)]
pub enum PinObservation {
    /// No pin exists for this tool.
    Unpinned,
    /// The definition is the pinned one.
    Matches(PinnedTool),
    /// The definition changed; it is now (or still) in quarantine.
    Quarantined(PendingPinChange),
}

/// How many times [`PinStore::observe`] compares again when the pin moved before it could write (each move is a
/// person's decision, so more than a few in a row means something writes pins in a loop).
const OBSERVE_TRIES: usize = 4;

/// Pins and their quarantine.
#[derive(Debug, Clone)]
pub struct PinStore {
    backend: Backend,
    feed: Arc<Feed>,
}

macro_rules! pin_columns {
    () => {
        "upstream, kind, tool, fingerprint, field_digests, definition, effective_hints"
    };
}

/// A table of definitions keyed by `(upstream, kind, tool)` whose rows start with `pin_columns!()`. `pins` and
/// `pin_changes` are read alike (one row by key, or every row in key order) and differ only in their own columns
/// and how a row decodes, so [`PinStore::row_of`] and [`PinStore::rows_of`] serve both.
trait DefinitionTable {
    /// What a row decodes to.
    type Row;
    /// The row of one key (`$1` upstream, `$2` kind, `$3` name).
    const BY_KEY: &'static str;
    /// Every row, by upstream, kind, then name.
    const ALL: &'static str;
    fn decode(row: &impl Columns) -> Result<Self::Row, StoreError>;
}

/// `SELECT` of the shared columns and a table's own, from that table, then `tail` (its condition or order).
macro_rules! select_from {
    ($own_columns:literal, $table:literal, $tail:literal) => {
        concat!("SELECT ", pin_columns!(), ", ", $own_columns, " FROM ", $table, $tail)
    };
}

/// Declares a [`DefinitionTable`]: its marker type, what a row is, its own columns, its name and its decoder.
macro_rules! definition_table {
    ($marker:ident, $row:ty, $own_columns:literal, $table:literal, $decode:ident) => {
        struct $marker;

        impl DefinitionTable for $marker {
            type Row = $row;
            const BY_KEY: &'static str =
                select_from!($own_columns, $table, " WHERE upstream = $1 AND kind = $2 AND tool = $3");
            const ALL: &'static str = select_from!($own_columns, $table, " ORDER BY upstream, kind, tool");
            fn decode(row: &impl Columns) -> Result<$row, StoreError> {
                $decode(row)
            }
        }
    };
}

definition_table!(Pins, PinnedTool, "approved_at, approved_by", "pins", decode_pin);
definition_table!(
    PinChanges,
    PendingPinChange,
    "pinned_fingerprint, changes, detected_at",
    "pin_changes",
    decode_pending
);

impl PinStore {
    pub(crate) fn new(backend: Backend, feed: Arc<Feed>) -> PinStore {
        PinStore { backend, feed }
    }

    /// The row of `(upstream, kind, name)` in `T`, decoded.
    async fn row_of<T: DefinitionTable>(
        &self,
        upstream: &str,
        kind: PinKind,
        name: &str,
    ) -> Result<Option<T::Row>, StoreError> {
        on_backend!(&self.backend, |pool| {
            let row = sqlx::query(T::BY_KEY).bind(upstream).bind(kind.as_str()).bind(name).fetch_optional(pool).await?;
            row.as_ref().map(|row| T::decode(row)).transpose()
        })
    }

    /// Every row of `T` in key order, decoded.
    async fn rows_of<T: DefinitionTable>(&self) -> Result<Vec<T::Row>, StoreError> {
        on_backend!(&self.backend, |pool| {
            let rows = sqlx::query(T::ALL).fetch_all(pool).await?;
            rows.iter().map(|row| T::decode(row)).collect()
        })
    }

    /// Tells every process that `upstream`'s pins or pending changes changed, so each re-checks its listing.
    async fn announce(&self, upstream: &str) {
        self.feed.announce(&self.backend, StoreChange::Pins { upstream: upstream.to_owned() }).await;
    }

    /// The pin of one tool.
    pub async fn get(&self, upstream: &str, tool: &str) -> Result<Option<PinnedTool>, StoreError> {
        self.get_of(upstream, PinKind::Tool, tool).await
    }

    /// The pin of one definition of any kind.
    pub async fn get_of(&self, upstream: &str, kind: PinKind, name: &str) -> Result<Option<PinnedTool>, StoreError> {
        self.row_of::<Pins>(upstream, kind, name).await
    }

    /// Every pin, by upstream, kind, then name.
    pub async fn list(&self) -> Result<Vec<PinnedTool>, StoreError> {
        self.rows_of::<Pins>().await
    }

    /// The pinned and pending fingerprints of every definition of `upstream`, in two queries: what a re-check needs
    /// to tell, without a statement per definition, that nothing about a definition changed
    /// ([`PinState::settled`]). Only what differs goes through [`PinStore::observe`] and its writes.
    pub async fn states_of(&self, upstream: &str) -> Result<HashMap<(PinKind, String), PinState>, StoreError> {
        on_backend!(&self.backend, |pool| {
            let mut states: HashMap<(PinKind, String), PinState> = HashMap::new();
            fn kind_of(row: &impl Columns) -> Result<Option<PinKind>, StoreError> {
                let kind: String = row.column("kind")?;
                Ok(PinKind::parse(&kind))
            }
            let pins = sqlx::query("SELECT kind, tool, fingerprint FROM pins WHERE upstream = $1")
                .bind(upstream)
                .fetch_all(pool)
                .await?;
            for row in &pins {
                let Some(kind) = kind_of(row)? else { continue };
                let state = states.entry((kind, row.column("tool")?)).or_default();
                state.pinned = Some(row.column("fingerprint")?);
            }
            let pending =
                sqlx::query("SELECT kind, tool, fingerprint, pinned_fingerprint FROM pin_changes WHERE upstream = $1")
                    .bind(upstream)
                    .fetch_all(pool)
                    .await?;
            for row in &pending {
                let Some(kind) = kind_of(row)? else { continue };
                let state = states.entry((kind, row.column("tool")?)).or_default();
                state.pending = Some((row.column("fingerprint")?, row.column("pinned_fingerprint")?));
            }
            Ok(states)
        })
    }

    /// Pins `snapshot` (approving it), replacing any earlier pin, and clears the pending change that is this very
    /// definition. A pending change that differs from it (the upstream changed again) stays in review: it still
    /// differs from the new pin, and [`PinStore::observe`] compares it with that pin when it is next listed.
    pub async fn upsert(&self, snapshot: &ToolSnapshot, approved_by: &str) -> Result<PinnedTool, StoreError> {
        self.pin(snapshot, approved_by, false).await
    }

    /// [`PinStore::upsert`]; with `pending_only`, only while the pending change is still `snapshot` (checked in the
    /// writing transaction): otherwise [`StoreError::NotFound`], and nothing is written.
    async fn pin(&self, snapshot: &ToolSnapshot, by: &str, pending_only: bool) -> Result<PinnedTool, StoreError> {
        on_backend!(&self.backend, |pool, dialect| {
            let approved_at = format_rfc3339(SystemTime::now());
            let mut transaction = pool.begin_with(dialect.begin_write()).await?;
            if dialect == Dialect::Postgres {
                let key = definition_lock(&snapshot.upstream, snapshot.kind, &snapshot.tool);
                sqlx::query("SELECT pg_advisory_xact_lock($1)").bind(key).execute(&mut *transaction).await?;
            }
            if pending_only {
                let pending: Option<String> = sqlx::query_scalar(
                    "SELECT fingerprint FROM pin_changes WHERE upstream = $1 AND kind = $2 AND tool = $3",
                )
                .bind(&snapshot.upstream)
                .bind(snapshot.kind.as_str())
                .bind(&snapshot.tool)
                .fetch_optional(&mut *transaction)
                .await?;
                if pending.as_deref() != Some(snapshot.fingerprint.whole.as_str()) {
                    transaction.rollback().await?;
                    return Err(not_pending(
                        &snapshot.upstream,
                        snapshot.kind,
                        &snapshot.tool,
                        &snapshot.fingerprint.whole,
                    ));
                }
            }
            sqlx::query(concat!(
                "INSERT INTO pins (",
                pin_columns!(),
                ", approved_at, approved_by) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) \
                 ON CONFLICT (upstream, kind, tool) DO UPDATE SET fingerprint = excluded.fingerprint, \
                 field_digests = excluded.field_digests, definition = excluded.definition, \
                 effective_hints = excluded.effective_hints, approved_at = excluded.approved_at, \
                 approved_by = excluded.approved_by"
            ))
            .bind(&snapshot.upstream)
            .bind(snapshot.kind.as_str())
            .bind(&snapshot.tool)
            .bind(&snapshot.fingerprint.whole)
            .bind(json_text(&snapshot.fingerprint.fields)?)
            .bind(snapshot.definition.to_string())
            .bind(snapshot.effective_hints.to_string())
            .bind(&approved_at)
            .bind(by)
            .execute(&mut *transaction)
            .await?;
            // Only the pending change that is what was pinned: a newer one the upstream sent meanwhile stays.
            sqlx::query("DELETE FROM pin_changes WHERE upstream = $1 AND kind = $2 AND tool = $3 AND fingerprint = $4")
                .bind(&snapshot.upstream)
                .bind(snapshot.kind.as_str())
                .bind(&snapshot.tool)
                .bind(&snapshot.fingerprint.whole)
                .execute(&mut *transaction)
                .await?;
            transaction.commit().await?;
            self.announce(&snapshot.upstream).await;
            Ok(PinnedTool { snapshot: snapshot.clone(), approved_at, approved_by: by.to_owned() })
        })
    }

    /// Compares a listed tool with its pin: unpinned, matching (a stale pending change is dropped), or changed (the
    /// new definition is quarantined with its diff, replacing an older pending change). When a person's decision
    /// moves the pin between the comparison and the write, it compares again with the new pin.
    pub async fn observe(&self, snapshot: &ToolSnapshot) -> Result<PinObservation, StoreError> {
        for _ in 0..OBSERVE_TRIES {
            if let Some(observation) = self.observe_once(snapshot).await? {
                return Ok(observation);
            }
        }
        Err(StoreError::PinMoved(format!("{} {}/{}", snapshot.kind.as_str(), snapshot.upstream, snapshot.tool)))
    }

    /// One comparison; `None` when the pin moved before the pending change could be written against it.
    async fn observe_once(&self, snapshot: &ToolSnapshot) -> Result<Option<PinObservation>, StoreError> {
        let Some(pin) = self.get_of(&snapshot.upstream, snapshot.kind, &snapshot.tool).await? else {
            return Ok(Some(PinObservation::Unpinned));
        };
        on_backend!(&self.backend, |pool| {
            if pin.snapshot.fingerprint.whole == snapshot.fingerprint.whole {
                let dropped = sqlx::query("DELETE FROM pin_changes WHERE upstream = $1 AND kind = $2 AND tool = $3")
                    .bind(&snapshot.upstream)
                    .bind(snapshot.kind.as_str())
                    .bind(&snapshot.tool)
                    .execute(pool)
                    .await?;
                if dropped.rows_affected() > 0 {
                    self.announce(&snapshot.upstream).await;
                }
                return Ok(Some(PinObservation::Matches(pin)));
            }
            if let Some(pending) = self.pending_of(&snapshot.upstream, snapshot.kind, &snapshot.tool).await?
                && pending.proposed.fingerprint.whole == snapshot.fingerprint.whole
                && pending.pinned_fingerprint == pin.snapshot.fingerprint.whole
            {
                return Ok(Some(PinObservation::Quarantined(pending)));
            }
            let change = PendingPinChange {
                proposed: snapshot.clone(),
                pinned_fingerprint: pin.snapshot.fingerprint.whole.clone(),
                changes: diff_fingerprints(&pin.snapshot.fingerprint, &snapshot.fingerprint),
                detected_at: format_rfc3339(SystemTime::now()),
            };
            Ok(self.insert_pending(&change).await?.then_some(PinObservation::Quarantined(change)))
        })
    }

    /// Records a definition that had no pin when the caller looked ([`PinObservation::Unpinned`]) as a pending
    /// change (an empty pinned fingerprint, every field added), so a person can review and approve it like any
    /// change: `Quarantined` with it (a definition already pending is left as it is). If a person pinned it in the
    /// meantime, nothing is proposed and the answer is [`PinStore::observe`]'s against that pin (usually `Matches`).
    pub async fn propose_new(&self, snapshot: &ToolSnapshot) -> Result<PinObservation, StoreError> {
        if let Some(pending) = self.pending_of(&snapshot.upstream, snapshot.kind, &snapshot.tool).await?
            && pending.proposed.fingerprint.whole == snapshot.fingerprint.whole
        {
            return Ok(PinObservation::Quarantined(pending));
        }
        let change = PendingPinChange {
            proposed: snapshot.clone(),
            pinned_fingerprint: String::new(),
            changes: snapshot.fingerprint.fields.keys().map(|field| (field.clone(), FieldChange::Added)).collect(),
            detected_at: format_rfc3339(SystemTime::now()),
        };
        if self.insert_pending(&change).await? {
            return Ok(PinObservation::Quarantined(change));
        }
        self.observe(snapshot).await
    }

    /// Writes `change` if the definition's pin is still the one it was compared with (none, for a new definition);
    /// `false`, writing nothing, when a person's decision moved it meanwhile. The check and the write are one write
    /// transaction, which [`PinStore::upsert`] cannot interleave with (SQLite's write lock; on PostgreSQL both take
    /// the definition's advisory lock first, since a pin not yet written has no row to lock).
    async fn insert_pending(&self, change: &PendingPinChange) -> Result<bool, StoreError> {
        on_backend!(&self.backend, |pool, dialect| {
            let snapshot = &change.proposed;
            let mut transaction = pool.begin_with(dialect.begin_write()).await?;
            if dialect == Dialect::Postgres {
                let key = definition_lock(&snapshot.upstream, snapshot.kind, &snapshot.tool);
                sqlx::query("SELECT pg_advisory_xact_lock($1)").bind(key).execute(&mut *transaction).await?;
            }
            let pinned: Option<String> =
                sqlx::query_scalar("SELECT fingerprint FROM pins WHERE upstream = $1 AND kind = $2 AND tool = $3")
                    .bind(&snapshot.upstream)
                    .bind(snapshot.kind.as_str())
                    .bind(&snapshot.tool)
                    .fetch_optional(&mut *transaction)
                    .await?;
            if pinned.unwrap_or_default() != change.pinned_fingerprint {
                transaction.rollback().await?;
                return Ok(false);
            }
            let changes: Vec<Value> = change
                .changes
                .iter()
                .map(|(field, kind)| serde_json::json!({"field": field, "change": field_change_name(*kind)}))
                .collect();
            sqlx::query(concat!(
                "INSERT INTO pin_changes (",
                pin_columns!(),
                ", pinned_fingerprint, changes, detected_at) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) \
                 ON CONFLICT (upstream, kind, tool) DO UPDATE SET fingerprint = excluded.fingerprint, \
                 field_digests = excluded.field_digests, definition = excluded.definition, \
                 effective_hints = excluded.effective_hints, pinned_fingerprint = excluded.pinned_fingerprint, \
                 changes = excluded.changes, detected_at = excluded.detected_at"
            ))
            .bind(&snapshot.upstream)
            .bind(snapshot.kind.as_str())
            .bind(&snapshot.tool)
            .bind(&snapshot.fingerprint.whole)
            .bind(json_text(&snapshot.fingerprint.fields)?)
            .bind(snapshot.definition.to_string())
            .bind(snapshot.effective_hints.to_string())
            .bind(&change.pinned_fingerprint)
            .bind(Value::Array(changes).to_string())
            .bind(&change.detected_at)
            .execute(&mut *transaction)
            .await?;
            transaction.commit().await?;
            self.announce(&snapshot.upstream).await;
            Ok(true)
        })
    }

    /// The pending change of one tool.
    pub async fn pending(&self, upstream: &str, tool: &str) -> Result<Option<PendingPinChange>, StoreError> {
        self.pending_of(upstream, PinKind::Tool, tool).await
    }

    /// The pending change of one definition of any kind.
    pub async fn pending_of(
        &self,
        upstream: &str,
        kind: PinKind,
        name: &str,
    ) -> Result<Option<PendingPinChange>, StoreError> {
        self.row_of::<PinChanges>(upstream, kind, name).await
    }

    /// Every pending change, by upstream, kind, then name.
    pub async fn list_pending(&self) -> Result<Vec<PendingPinChange>, StoreError> {
        self.rows_of::<PinChanges>().await
    }

    /// Pins the pending change of a tool, only if its fingerprint is the one the approver saw.
    pub async fn approve_pending(
        &self,
        upstream: &str,
        tool: &str,
        fingerprint: &str,
        approved_by: &str,
    ) -> Result<PinnedTool, StoreError> {
        self.approve_pending_of(upstream, PinKind::Tool, tool, fingerprint, approved_by).await
    }

    /// Pins the pending change of a definition of any kind, only if its fingerprint is the one the approver saw.
    pub async fn approve_pending_of(
        &self,
        upstream: &str,
        kind: PinKind,
        name: &str,
        fingerprint: &str,
        approved_by: &str,
    ) -> Result<PinnedTool, StoreError> {
        let pending = self.pending_of(upstream, kind, name).await?;
        let Some(pending) = pending.filter(|pending| pending.proposed.fingerprint.whole == fingerprint) else {
            return Err(not_pending(upstream, kind, name, fingerprint));
        };
        // Checked again where it is pinned: a change the upstream sent since it was read replaced it, and that
        // change is neither approved nor dropped from review.
        self.pin(&pending.proposed, approved_by, true).await
    }

    /// Drops the pending change of a tool (the pin stays as it was); returns what was dropped.
    pub async fn reject_pending(&self, upstream: &str, tool: &str) -> Result<PendingPinChange, StoreError> {
        self.reject_pending_of(upstream, PinKind::Tool, tool).await
    }

    /// Drops the pending change of a definition of any kind (the pin stays as it was); returns what was dropped.
    pub async fn reject_pending_of(
        &self,
        upstream: &str,
        kind: PinKind,
        name: &str,
    ) -> Result<PendingPinChange, StoreError> {
        let Some(pending) = self.pending_of(upstream, kind, name).await? else {
            return Err(StoreError::NotFound(format!("no pending change for {} {upstream}/{name}", kind.as_str())));
        };
        on_backend!(&self.backend, |pool| {
            sqlx::query("DELETE FROM pin_changes WHERE upstream = $1 AND kind = $2 AND tool = $3 AND fingerprint = $4")
                .bind(upstream)
                .bind(kind.as_str())
                .bind(name)
                .bind(&pending.proposed.fingerprint.whole)
                .execute(pool)
                .await?;
            self.announce(upstream).await;
            Ok(pending)
        })
    }
}

/// The error for an approval of `fingerprint` when it is not the definition's pending change (any more).
fn not_pending(upstream: &str, kind: PinKind, name: &str, fingerprint: &str) -> StoreError {
    StoreError::NotFound(format!("no pending change {fingerprint} for {} {upstream}/{name}", kind.as_str()))
}

/// The PostgreSQL advisory lock key of one definition (64 bits of a labelled digest, apart from the store's other
/// keys): what [`PinStore::upsert`] and a pending change's write take in turn.
fn definition_lock(upstream: &str, kind: PinKind, name: &str) -> i64 {
    let digest = digest_parts(&[
        b"toolgate pin\0",
        upstream.as_bytes(),
        b"\0",
        kind.as_str().as_bytes(),
        b"\0",
        name.as_bytes(),
    ]);
    let hex = digest.strip_prefix("sha256:").and_then(|hex| hex.get(..16)).unwrap_or_default();
    u64::from_str_radix(hex, 16).map_or(0, |bits| i64::from_ne_bytes(bits.to_ne_bytes()))
}

fn json_text(fields: &BTreeMap<String, String>) -> Result<String, StoreError> {
    serde_json::to_string(fields).map_err(|source| StoreError::Json { what: "field digests", source })
}

fn parse_json<T: serde::de::DeserializeOwned>(row: &impl Columns, column: &'static str) -> Result<T, StoreError> {
    let text: String = row.column(column)?;
    serde_json::from_str(&text).map_err(|source| StoreError::Json { what: column, source })
}

fn decode_snapshot(row: &impl Columns) -> Result<ToolSnapshot, StoreError> {
    let kind: String = row.column("kind")?;
    Ok(ToolSnapshot {
        upstream: row.column("upstream")?,
        kind: PinKind::parse(&kind).ok_or(StoreError::Corrupt { what: "pin kind", detail: kind })?,
        tool: row.column("tool")?,
        fingerprint: ToolFingerprint { whole: row.column("fingerprint")?, fields: parse_json(row, "field_digests")? },
        definition: parse_json(row, "definition")?,
        effective_hints: parse_json(row, "effective_hints")?,
    })
}

fn decode_pin(row: &impl Columns) -> Result<PinnedTool, StoreError> {
    Ok(PinnedTool {
        snapshot: decode_snapshot(row)?,
        approved_at: row.column("approved_at")?,
        approved_by: row.column("approved_by")?,
    })
}

fn decode_pending(row: &impl Columns) -> Result<PendingPinChange, StoreError> {
    let listed: Vec<BTreeMap<String, String>> = parse_json(row, "changes")?;
    let changes = listed
        .iter()
        .map(|change| {
            let field = change.get("field").cloned().unwrap_or_default();
            let kind = change.get("change").and_then(|name| parse_field_change(name)).ok_or_else(|| {
                StoreError::Corrupt { what: "pin change", detail: format!("unknown field change {change:?}") }
            })?;
            Ok((field, kind))
        })
        .collect::<Result<Vec<_>, StoreError>>()?;
    Ok(PendingPinChange {
        proposed: decode_snapshot(row)?,
        pinned_fingerprint: row.column("pinned_fingerprint")?,
        changes,
        detected_at: row.column("detected_at")?,
    })
}

fn field_change_name(change: FieldChange) -> &'static str {
    match change {
        FieldChange::Added => "added",
        FieldChange::Removed => "removed",
        FieldChange::Changed => "changed",
    }
}

fn parse_field_change(name: &str) -> Option<FieldChange> {
    [FieldChange::Added, FieldChange::Removed, FieldChange::Changed]
        .into_iter()
        .find(|change| field_change_name(*change) == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The shared readers must send the statements each table had before they were shared.
    #[test]
    fn definition_tables_read_their_own_columns_by_key_and_in_key_order() {
        let pins = "SELECT upstream, kind, tool, fingerprint, field_digests, definition, effective_hints, \
                    approved_at, approved_by FROM pins";
        assert_eq!(Pins::BY_KEY, format!("{pins} WHERE upstream = $1 AND kind = $2 AND tool = $3"));
        assert_eq!(Pins::ALL, format!("{pins} ORDER BY upstream, kind, tool"));
        let changes = "SELECT upstream, kind, tool, fingerprint, field_digests, definition, effective_hints, \
                       pinned_fingerprint, changes, detected_at FROM pin_changes";
        assert_eq!(PinChanges::BY_KEY, format!("{changes} WHERE upstream = $1 AND kind = $2 AND tool = $3"));
        assert_eq!(PinChanges::ALL, format!("{changes} ORDER BY upstream, kind, tool"));
    }
}
