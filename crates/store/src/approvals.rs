//! The approvals queue: confirmations that wait for a person when the client cannot ask (no elicitation).
//!
//! The gateway creates a [`PendingApproval`] and [`ApprovalStore::wait`]s; `toolgate approvals approve ID` — another
//! process on the same database — [`ApprovalStore::decide`]s. SQLite has no LISTEN, so `wait` polls (100 ms by
//! default) within a bounded timeout; PostgreSQL can use LISTEN/NOTIFY behind the same call. An approval is used at
//! most once, only for the tool fingerprint and argument digest it was granted for, only before it expires:
//! [`ApprovalStore::consume`] is one conditional `UPDATE`, so two racing uses cannot both succeed.
//!
//! The queue shows only calls that still wait: when a call stops waiting (its timeout, a cancel, its client gone,
//! the gateway stopping) the gateway [`ApprovalStore::lapse`]s its approval with the reason, so a person who tries
//! to decide it is told that nothing waits instead of approving what will never run.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use serde::Serialize;

use crate::approval_state::{ApprovalState, ConsumeRefusal};
use crate::backend::{Backend, Columns, Dialect, on_backend};
use crate::error::StoreError;
use crate::feed::{Feed, StoreChange};
use crate::time::{format_rfc3339, from_micros, to_micros};

/// An approval's id: 122 random bits from the operating system's generator (UUID v4), so it cannot be guessed.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub struct ApprovalId(String);

impl ApprovalId {
    /// A fresh random id.
    pub fn generate() -> ApprovalId {
        ApprovalId(uuid::Uuid::new_v4().simple().to_string())
    }

    /// An id as typed by a person or read back from the store.
    pub fn from_text(text: &str) -> ApprovalId {
        ApprovalId(text.trim().to_owned())
    }

    /// The id's text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ApprovalId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A confirmation waiting for a person.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PendingApproval {
    /// Random and unguessable ([`ApprovalId::generate`]).
    pub id: ApprovalId,
    /// The downstream session whose call waits.
    pub session: String,
    /// The upstream.
    pub upstream: String,
    /// The tool's exposed name.
    pub tool: String,
    /// What a person reads as the tool's title.
    pub title: String,
    /// The action phrase ("delete a file").
    pub action: String,
    /// The tool's risk class when the approval was asked (`None` for approvals queued by an older gateway).
    pub risk: Option<ToolRisk>,
    /// The arguments, summarized for display (never the only record of them: see `args_digest`).
    pub args_summary: String,
    /// The tool definition's fingerprint the approval is for.
    pub tool_fingerprint: String,
    /// `sha256:` of the canonical arguments the approval is for ([`crate::digest_arguments`]).
    pub args_digest: String,
    /// When it was asked.
    #[serde(serialize_with = "serialize_time")]
    pub created: SystemTime,
    /// After this it can be neither decided nor used.
    #[serde(serialize_with = "serialize_time")]
    pub expires: SystemTime,
    /// The identity of the caller whose call waits, as its audit row names it (`caller.identity`), so the console
    /// can refuse a person approving their own call; `None` for approvals queued by an older gateway.
    pub caller: Option<String>,
}

fn serialize_time<S: serde::Serializer>(time: &SystemTime, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(&format_rfc3339(*time))
}

/// A tool's risk class as core's facts state it: the level and the category it comes from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ToolRisk {
    /// 0 (reads a closed domain) to 4 (may destroy data): `toolgate_core::facts::risk_level`.
    pub level: u8,
    /// `read`, `write`, `external` or `destructive`: `toolgate_core::facts::Category::as_str`.
    pub category: String,
}

impl ToolRisk {
    /// The risk class of a tool with these facts.
    pub fn from_facts(facts: &toolgate_core::facts::ToolFacts) -> ToolRisk {
        ToolRisk { level: facts.risk_level, category: facts.category.as_str().to_owned() }
    }
}

/// A person's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ApprovalDecision {
    /// Let the call go ahead (once).
    Approve,
    /// Refuse it.
    Deny,
}

/// An approval with its state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ApprovalRecord {
    /// What was asked.
    #[serde(flatten)]
    pub approval: PendingApproval,
    /// Where it stands (a pending approval past `expires` stays `Pending` here: compare with the clock).
    pub state: ApprovalState,
    /// Who decided.
    pub decided_by: Option<String>,
    /// Why its call stopped waiting, when it lapsed ([`ApprovalState::Lapsed`]).
    pub lapsed_why: Option<String>,
    /// No call waits on it: its client was answered at once and retries the call itself once a person decided
    /// ([`ApprovalStore::create_detached`]).
    pub detached: bool,
}

/// How [`ApprovalStore::wait`] ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApprovalWait {
    /// Approved; now `consume` it.
    Approved {
        /// Who approved.
        by: String,
    },
    /// Denied.
    Denied {
        /// Who denied.
        by: String,
    },
    /// Nobody decided before the approval expired.
    Expired,
    /// Nobody decided within the wait's timeout (the approval may still be decided later).
    TimedOut,
    /// It was already approved and used.
    AlreadyConsumed,
    /// It lapsed (another process, or an earlier run of this one, said its call no longer waits).
    Lapsed,
}

/// The approvals queue.
#[derive(Debug, Clone)]
pub struct ApprovalStore {
    backend: Backend,
    poll_interval: Duration,
    /// Erase the argument summary of every approval that is settled (decided, used, expired or withdrawn): the
    /// store keeps arguments only as digests (`ArgumentRedaction::Digest`), so the clear summary lives only while a
    /// person may still need to read it.
    erase_settled: bool,
    /// The instance id recorded with each approval this handle queues.
    instance: Option<Arc<str>>,
    /// Where decisions are announced and waiters hear of them.
    feed: Arc<Feed>,
}

/// How often a waiting call re-reads its approval on PostgreSQL, where a decision also arrives as a notification:
/// the fallback for a notification lost while the listener reconnects, not a polling loop.
const POSTGRES_RECHECK: Duration = Duration::from_secs(1);

/// Why an approval lapses when the gateway process that queued it starts again.
const RESTARTED: &str = "the gateway process that held its call restarted";

macro_rules! approval_columns {
    () => {
        "id, session, upstream, tool, title, action, args_summary, tool_fingerprint, args_digest, \
     created_us, expires_us, state, decided_by, risk_level, risk_category, lapsed_why, caller, detached"
    };
}

impl ApprovalStore {
    pub(crate) fn new(
        backend: Backend,
        poll_interval: Duration,
        erase_settled: bool,
        instance: Option<Arc<str>>,
        feed: Arc<Feed>,
    ) -> ApprovalStore {
        ApprovalStore { backend, poll_interval, erase_settled, instance, feed }
    }

    /// Lapses every approval this instance queued that a call could still use: run when a gateway process starts,
    /// since the calls its previous run held (killed, say, with `kill -9`) wait no more. Another instance's
    /// approvals are its own; an approval whose process never comes back stops being decidable at its expiry.
    /// Logged, not returned: a failure leaves the approvals to expire.
    pub(crate) async fn lapse_orphaned(&self) {
        let Some(instance) = self.instance.as_deref() else { return };
        let lapsed = on_backend!(&self.backend, |pool| {
            sqlx::query(
                "UPDATE approvals SET expires_us = CASE WHEN expires_us < $1 THEN expires_us ELSE $1 END, \
                 lapsed_why = $2 WHERE instance = $3 AND state IN ('pending', 'approved') AND lapsed_why IS NULL \
                 AND expires_us > $1 AND NOT detached",
            )
            .bind(to_micros(SystemTime::now()))
            .bind(RESTARTED)
            .bind(instance)
            .execute(pool)
            .await
            .map(|done| done.rows_affected())
        });
        match lapsed {
            Ok(lapsed) if lapsed > 0 => {
                tracing::info!(approvals = lapsed, "approvals of this instance's previous run lapsed");
            }
            Ok(_) => {}
            Err(error) => tracing::warn!(%error, "approvals of this instance's previous run could not be lapsed"),
        }
    }

    async fn announce(&self, id: &ApprovalId) {
        self.feed.announce(&self.backend, StoreChange::Approval { id: id.as_str().to_owned() }).await;
    }

    /// Erases the argument summaries of settled approvals (not pending, or expired), when the store keeps
    /// arguments as digests only; returns how many were erased. Every write to the queue runs it, so a summary
    /// outlives its decision or expiry only until the queue is next written (or the store next opened).
    pub async fn erase_settled_summaries(&self) -> Result<u64, StoreError> {
        if !self.erase_settled {
            return Ok(0);
        }
        on_backend!(&self.backend, |pool| {
            let erased = sqlx::query(
                "UPDATE approvals SET args_summary = '' WHERE args_summary <> '' AND (state <> 'pending' OR expires_us <= $1)",
            )
            .bind(to_micros(SystemTime::now()))
            .execute(pool)
            .await?;
            Ok(erased.rows_affected())
        })
    }

    /// Runs [`Self::erase_settled_summaries`] after a write that has already succeeded: a failed erase (a full
    /// disk) is logged, not returned, because refusing the call or reporting the decision as failed would
    /// misreport a write that stands. Nothing is lost by waiting: the erase sweeps every settled approval, so the
    /// next write to the queue (or the gateway's next start) retries it.
    pub(crate) async fn erase_after_write(&self) {
        if let Err(error) = self.erase_settled_summaries().await {
            tracing::warn!(
                %error,
                "settled approvals' argument summaries could not be erased; the next write to the approvals queue \
                 retries"
            );
        }
    }

    /// Lapses an approval whose call no longer waits (`why`: it timed out, was cancelled, its client went away):
    /// it expires now, so it leaves the queue and nobody approves what nothing will use, and it keeps `why` for
    /// whoever tries to decide it. An approval approved but not yet used lapses too (its call ended between the
    /// decision and the use); a consumed or denied one is left as it is. Its summary is erased as for any settled
    /// approval. Returns whether it lapsed.
    pub async fn lapse(&self, id: &ApprovalId, why: &str) -> Result<bool, StoreError> {
        on_backend!(&self.backend, |pool| {
            let updated = sqlx::query(
                "UPDATE approvals SET expires_us = CASE WHEN expires_us < $1 THEN expires_us ELSE $1 END, lapsed_why = $2 \
                 WHERE id = $3 AND state IN ('pending', 'approved') AND lapsed_why IS NULL",
            )
            .bind(to_micros(SystemTime::now()))
            .bind(why)
            .bind(id.as_str())
            .execute(pool)
            .await?;
            self.erase_after_write().await;
            let lapsed = updated.rows_affected() == 1;
            if lapsed {
                self.announce(id).await;
            }
            Ok(lapsed)
        })
    }

    /// Records a new pending approval, which a call of this process waits on.
    pub async fn create(&self, pending: &PendingApproval) -> Result<(), StoreError> {
        self.insert(pending, false).await
    }

    /// Records a new pending approval that no call waits on: a 2026-07-28 client confirmed in URL mode was answered
    /// at once and retries the call once a person decided, on whichever process its retry reaches. Neither a
    /// restart of this process (`lapse_orphaned`) nor its heartbeat going stale lapses it: it lapses at its
    /// expiry, or when a retry finds the tool changed.
    pub async fn create_detached(&self, pending: &PendingApproval) -> Result<(), StoreError> {
        self.insert(pending, true).await
    }

    async fn insert(&self, pending: &PendingApproval, detached: bool) -> Result<(), StoreError> {
        on_backend!(&self.backend, |pool| {
            sqlx::query(concat!(
                "INSERT INTO approvals (",
                approval_columns!(),
                ", instance) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, 'pending', NULL, $12, $13, NULL, $14, \
                 $15, $16)"
            ))
            .bind(pending.id.as_str())
            .bind(&pending.session)
            .bind(&pending.upstream)
            .bind(&pending.tool)
            .bind(&pending.title)
            .bind(&pending.action)
            .bind(&pending.args_summary)
            .bind(&pending.tool_fingerprint)
            .bind(&pending.args_digest)
            .bind(to_micros(pending.created))
            .bind(to_micros(pending.expires))
            .bind(pending.risk.as_ref().map(|risk| i64::from(risk.level)))
            .bind(pending.risk.as_ref().map(|risk| risk.category.as_str()))
            .bind(pending.caller.as_deref())
            .bind(detached)
            .bind(self.instance.as_deref())
            .execute(pool)
            .await?;
            self.erase_after_write().await;
            Ok(())
        })
    }

    /// How many detached approvals of `caller` a person could still decide or a retry still use (pending or
    /// approved, not lapsed, not expired): what caps a caller's URL-mode confirmations, which hold no place in any
    /// process's queue count because no call waits on them.
    pub async fn count_detached_open(&self, caller: &str) -> Result<u64, StoreError> {
        on_backend!(&self.backend, |pool| {
            let count: i64 = sqlx::query_scalar(
                "SELECT count(*) FROM approvals WHERE detached AND caller = $1 AND state IN ('pending', 'approved') \
                 AND lapsed_why IS NULL AND expires_us > $2",
            )
            .bind(caller)
            .bind(to_micros(SystemTime::now()))
            .fetch_one(pool)
            .await?;
            Ok(u64::try_from(count).unwrap_or_default())
        })
    }

    /// One approval, in whatever state.
    pub async fn get(&self, id: &ApprovalId) -> Result<Option<ApprovalRecord>, StoreError> {
        on_backend!(&self.backend, |pool| {
            let row = sqlx::query(concat!("SELECT ", approval_columns!(), " FROM approvals WHERE id = $1"))
                .bind(id.as_str())
                .fetch_optional(pool)
                .await?;
            row.as_ref().map(decode).transpose()
        })
    }

    /// Approvals still waiting for a decision and not expired, oldest first.
    pub async fn list_pending(&self) -> Result<Vec<ApprovalRecord>, StoreError> {
        on_backend!(&self.backend, |pool| {
            let rows = sqlx::query(concat!(
                "SELECT ",
                approval_columns!(),
                " FROM approvals WHERE state = 'pending' AND expires_us > $1 ORDER BY created_us, id"
            ))
            .bind(to_micros(SystemTime::now()))
            .fetch_all(pool)
            .await?;
            rows.iter().map(decode).collect()
        })
    }

    /// Approves or denies a pending, unexpired approval.
    pub async fn decide(&self, id: &ApprovalId, decision: ApprovalDecision, by: &str) -> Result<(), StoreError> {
        on_backend!(&self.backend, |pool| {
            let state = match decision {
                ApprovalDecision::Approve => ApprovalState::Approved,
                ApprovalDecision::Deny => ApprovalState::Denied,
            };
            let now = to_micros(SystemTime::now());
            let updated = sqlx::query(
                "UPDATE approvals SET state = $1, decided_by = $2, decided_us = $3 \
                 WHERE id = $4 AND state = 'pending' AND expires_us > $5",
            )
            .bind(state.as_str())
            .bind(by)
            .bind(now)
            .bind(id.as_str())
            .bind(now)
            .execute(pool)
            .await?;
            if updated.rows_affected() == 1 {
                self.erase_after_write().await;
                self.announce(id).await;
                return Ok(());
            }
            match self.get(id).await? {
                None => Err(StoreError::NotFound(format!("approval {id}"))),
                Some(ApprovalRecord { lapsed_why: Some(why), .. }) => {
                    Err(StoreError::Lapsed { id: id.to_string(), why })
                }
                Some(record) if record.state != ApprovalState::Pending => {
                    Err(StoreError::AlreadyDecided { id: id.to_string(), state: record.state.as_str().to_owned() })
                }
                Some(_) => Err(StoreError::Expired(id.to_string())),
            }
        })
    }

    /// Waits for a decision (possibly written by another process), polling, for at most `timeout` and never past
    /// the approval's expiry.
    pub async fn wait(&self, id: &ApprovalId, timeout: Duration) -> Result<ApprovalWait, StoreError> {
        let deadline = tokio::time::Instant::now() + timeout;
        // Subscribed before the first read, so a decision made between the read and the wait is not missed.
        let mut changes = self.feed.subscribe();
        let recheck = match self.backend.dialect() {
            Dialect::Sqlite => self.poll_interval,
            Dialect::Postgres => self.poll_interval.max(POSTGRES_RECHECK),
        };
        loop {
            let Some(record) = self.get(id).await? else {
                return Err(StoreError::NotFound(format!("approval {id}")));
            };
            let by = record.decided_by.unwrap_or_default();
            match record.state {
                ApprovalState::Approved => return Ok(ApprovalWait::Approved { by }),
                ApprovalState::Denied => return Ok(ApprovalWait::Denied { by }),
                ApprovalState::Consumed => return Ok(ApprovalWait::AlreadyConsumed),
                ApprovalState::Lapsed => return Ok(ApprovalWait::Lapsed),
                ApprovalState::Pending => {}
            }
            let until_expiry = record.approval.expires.duration_since(SystemTime::now()).unwrap_or_default();
            if until_expiry.is_zero() {
                return Ok(ApprovalWait::Expired);
            }
            let now = tokio::time::Instant::now();
            if now >= deadline {
                return Ok(ApprovalWait::TimedOut);
            }
            let pause = recheck.min(deadline - now).min(until_expiry);
            // Woken by a change to this approval (or any, after a lagging receiver missed some), else re-read.
            let _ = tokio::time::timeout(pause, async {
                loop {
                    match changes.recv().await {
                        Ok(StoreChange::Approval { id: changed }) if changed == id.as_str() => return,
                        Ok(_) => {}
                        Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => return,
                        Err(tokio::sync::broadcast::error::RecvError::Closed) => std::future::pending::<()>().await,
                    }
                }
            })
            .await;
        }
    }

    /// Uses an approved approval for a call with this tool fingerprint and argument digest: succeeds once.
    pub async fn consume(&self, id: &ApprovalId, tool_fingerprint: &str, args_digest: &str) -> Result<(), StoreError> {
        on_backend!(&self.backend, |pool| {
            let now = to_micros(SystemTime::now());
            let updated = sqlx::query(
                "UPDATE approvals SET state = 'consumed', consumed_us = $1 \
                 WHERE id = $2 AND state = 'approved' AND tool_fingerprint = $3 AND args_digest = $4 AND expires_us > $5",
            )
            .bind(now)
            .bind(id.as_str())
            .bind(tool_fingerprint)
            .bind(args_digest)
            .bind(now)
            .execute(pool)
            .await?;
            if updated.rows_affected() == 1 {
                self.erase_after_write().await;
                self.announce(id).await;
                return Ok(());
            }
            let refusal = match self.get(id).await? {
                None => ConsumeRefusal::NotFound,
                Some(record) => match record.state {
                    ApprovalState::Consumed => ConsumeRefusal::AlreadyUsed,
                    ApprovalState::Lapsed => ConsumeRefusal::Expired,
                    ApprovalState::Pending | ApprovalState::Denied => ConsumeRefusal::NotApproved(record.state),
                    ApprovalState::Approved if record.approval.tool_fingerprint != tool_fingerprint => {
                        ConsumeRefusal::FingerprintMismatch
                    }
                    ApprovalState::Approved if record.approval.args_digest != args_digest => {
                        ConsumeRefusal::ArgsMismatch
                    }
                    ApprovalState::Approved => ConsumeRefusal::Expired,
                },
            };
            Err(StoreError::ApprovalRefused { id: id.to_string(), refusal })
        })
    }
}

fn decode(row: &impl Columns) -> Result<ApprovalRecord, StoreError> {
    let id: String = row.column("id")?;
    let state: String = row.column("state")?;
    let risk_level: Option<i64> = row.column("risk_level")?;
    let risk_category: Option<String> = row.column("risk_category")?;
    let lapsed_why: Option<String> = row.column("lapsed_why")?;
    let mut state = ApprovalState::parse(&state)
        .ok_or_else(|| StoreError::Corrupt { what: "approval state", detail: state.clone() })?;
    if lapsed_why.is_some() && matches!(state, ApprovalState::Pending | ApprovalState::Approved) {
        state = ApprovalState::Lapsed;
    }
    let risk = match (risk_level, risk_category) {
        (Some(level), Some(category)) => Some(ToolRisk {
            level: u8::try_from(level)
                .map_err(|_| StoreError::Corrupt { what: "approval risk level", detail: level.to_string() })?,
            category,
        }),
        _ => None,
    };
    Ok(ApprovalRecord {
        approval: PendingApproval {
            id: ApprovalId(id),
            session: row.column("session")?,
            upstream: row.column("upstream")?,
            tool: row.column("tool")?,
            title: row.column("title")?,
            action: row.column("action")?,
            risk,
            args_summary: row.column("args_summary")?,
            tool_fingerprint: row.column("tool_fingerprint")?,
            args_digest: row.column("args_digest")?,
            created: from_micros(row.column("created_us")?),
            expires: from_micros(row.column("expires_us")?),
            caller: row.column("caller")?,
        },
        state,
        decided_by: row.column("decided_by")?,
        lapsed_why,
        detached: row.column("detached")?,
    })
}
