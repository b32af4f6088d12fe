//! Which gateway processes sharing a store are alive: each gateway's store writes a heartbeat row for its instance
//! every [`HEARTBEAT_INTERVAL`], and an instance whose row is older than [`HEARTBEAT_STALE`] counts as gone.
//!
//! Two things read it. The merged inventory counts only instances seen alive within the bound (a decommissioned
//! process's tools leave the view). And every live gateway, at each beat, lapses the waiting approvals of gone
//! instances (a process that died and never restarts would otherwise leave them decidable until their expiry):
//! one conditional update per approval, so when several live processes sweep at once each approval lapses once and
//! gets exactly one audit row, naming the dead instance. An instance that never wrote a heartbeat (rows older than
//! this table) is never taken for dead, and a process whose own previous beat is late (it slept or starved: a
//! suspended laptop wakes every gateway at once) judges nobody until it has beaten on time again. This module
//! decides nothing about calls; it only tells live from gone.
//!
//! Beats are written and judged on the database's clock ([`database_now`]), never on each host's: with
//! PostgreSQL the processes run on several machines, and a host whose clock runs a minute ahead would otherwise
//! take every other process for dead and lapse their waiting approvals (or, behind, keep a dead one alive).

use std::sync::{Arc, Weak};
use std::time::{Duration, SystemTime};

use serde_json::json;

use crate::approvals::{ApprovalId, ApprovalStore};
use crate::audit::{AuditEntry, AuditKind};
use crate::backend::{Backend, Columns, on_backend};
use crate::claim::InstanceClaim;
use crate::error::StoreError;
use crate::feed::Feed;
use crate::time::to_micros;
use crate::{AuditWriter, Store};

/// How often a gateway's store says it is alive.
pub const HEARTBEAT_INTERVAL: Duration = Duration::from_secs(10);

/// A heartbeat older than this means its process is gone: six missed beats, so a slow database or a paused
/// process is not taken for dead.
pub const HEARTBEAT_STALE: Duration = Duration::from_secs(60);

/// Why an approval lapses when its process stopped beating.
const INSTANCE_GONE: &str = "the gateway process that held its call stopped (its heartbeat went stale)";

/// The database's clock, in microseconds since the Unix epoch: PostgreSQL's `clock_timestamp()`, the one clock
/// every process sharing it reads alike. An SQLite file lives on one host, whose clock is the database's.
pub(crate) async fn database_now(backend: &Backend) -> Result<i64, StoreError> {
    match backend {
        Backend::Sqlite(_) => Ok(to_micros(SystemTime::now())),
        Backend::Postgres(pool) => {
            let now: i64 = sqlx::query_scalar("SELECT (EXTRACT(EPOCH FROM clock_timestamp()) * 1000000)::BIGINT")
                .fetch_one(pool)
                .await?;
            Ok(now)
        }
    }
}

/// Records that `instance` is alive now, on the database's clock.
pub(crate) async fn beat(backend: &Backend, instance: &str) -> Result<(), StoreError> {
    let now = database_now(backend).await?;
    on_backend!(backend, |pool| {
        sqlx::query(
            "INSERT INTO instance_heartbeats (instance, seen_us) VALUES ($1, $2) \
             ON CONFLICT (instance) DO UPDATE SET seen_us = excluded.seen_us",
        )
        .bind(instance)
        .bind(now)
        .execute(pool)
        .await?;
        Ok(())
    })
}

/// The oldest heartbeat (microseconds, database clock) that still counts as alive at the database's `now`.
pub(crate) fn alive_cutoff(now_us: i64, stale: Duration) -> i64 {
    now_us.saturating_sub(i64::try_from(stale.as_micros()).unwrap_or(i64::MAX))
}

/// A waiting approval of a gone instance.
struct Orphan {
    id: String,
    upstream: String,
    tool: String,
    instance: String,
}

/// Lapses the waiting approvals of every instance but `own` whose heartbeat is older than `stale`, writing one
/// audit row per approval this call lapsed; returns how many it lapsed.
async fn lapse_gone(
    backend: &Backend,
    approvals: &ApprovalStore,
    audit: &AuditWriter,
    own: &str,
    stale: Duration,
) -> Result<u64, StoreError> {
    // Heartbeats are judged on the database's clock; an approval's expiry was written on its holder's clock.
    let cutoff = alive_cutoff(database_now(backend).await?, stale);
    let now = SystemTime::now();
    let orphans: Vec<Orphan> = on_backend!(backend, |pool| {
        let rows = sqlx::query(
            "SELECT a.id, a.upstream, a.tool, a.instance FROM approvals a \
             JOIN instance_heartbeats h ON h.instance = a.instance \
             WHERE h.seen_us < $1 AND a.instance <> $2 AND a.state IN ('pending', 'approved') \
             AND a.lapsed_why IS NULL AND a.expires_us > $3 AND NOT a.detached",
        )
        .bind(cutoff)
        .bind(own)
        .bind(to_micros(now))
        .fetch_all(pool)
        .await?;
        rows.iter()
            .map(|row| {
                Ok::<_, StoreError>(Orphan {
                    id: row.column("id")?,
                    upstream: row.column("upstream")?,
                    tool: row.column("tool")?,
                    instance: row.column("instance")?,
                })
            })
            .collect::<Result<_, _>>()?
    });
    let mut lapsed = 0;
    for orphan in orphans {
        // Conditional: an approval decided, used or lapsed by another process meanwhile is left as it is.
        if !approvals.lapse(&ApprovalId::from_text(&orphan.id), INSTANCE_GONE).await? {
            continue;
        }
        lapsed += 1;
        let mut entry = AuditEntry::new(AuditKind::Confirmation);
        entry.upstream = Some(orphan.upstream);
        entry.tool = Some(orphan.tool);
        entry.approval_id = Some(orphan.id);
        entry.outcome = Some("lapsed".to_owned());
        entry.detail = Some(json!({"lapsed_why": INSTANCE_GONE, "instance": orphan.instance, "lapsed_by": own}));
        audit.record_durable(entry).await?;
    }
    if lapsed > 0 {
        tracing::info!(approvals = lapsed, "waiting approvals of gateway processes that stopped lapsed");
    }
    Ok(lapsed)
}

impl Store {
    /// Records that this process is alive now (the gateway's store does it every [`HEARTBEAT_INTERVAL`] by itself).
    pub async fn heartbeat(&self) -> Result<(), StoreError> {
        let Some(instance) = self.instance.as_deref() else { return Ok(()) };
        beat(&self.backend, instance).await
    }

    /// Lapses the waiting approvals of every other instance whose heartbeat is older than `stale` (one audit row per
    /// approval lapsed here, naming the dead instance); returns how many this call lapsed. The gateway's store runs
    /// it with [`HEARTBEAT_STALE`] at every beat.
    pub async fn lapse_gone_instances(&self, stale: Duration) -> Result<u64, StoreError> {
        let own = self.instance.as_deref().unwrap_or_default();
        lapse_gone(&self.backend, &self.approvals(), &self.audit, own, stale).await
    }
}

/// What the beating task needs; it stops once every handle of the store is gone (its feed with them) or the pool
/// is closed.
pub(crate) struct Beating {
    pub(crate) backend: Backend,
    pub(crate) audit: AuditWriter,
    pub(crate) instance: Arc<str>,
    /// The instance id's claim on a shared database, checked (and taken again after a restart) at every beat.
    pub(crate) claim: Option<Weak<InstanceClaim>>,
    pub(crate) feed: Weak<Feed>,
    pub(crate) poll_interval: Duration,
    pub(crate) erase_settled: bool,
}

impl Beating {
    pub(crate) fn spawn(self) {
        tokio::spawn(async move {
            // When this process last wrote its heartbeat (wall clock: it advances while a machine sleeps).
            let mut last_beat: Option<SystemTime> = None;
            loop {
                let Some(feed) = self.feed.upgrade() else { return };
                if self.backend.is_closed() {
                    return;
                }
                let now = SystemTime::now();
                // A process that was itself asleep or starved (its own beat is late) cannot tell a dead peer from one
                // that slept with it (two gateways on a laptop that was suspended): it judges nobody this round.
                let awake =
                    last_beat.is_some_and(|last| now.duration_since(last).is_ok_and(|gap| gap < HEARTBEAT_STALE / 2));
                if let Some(claim) = self.claim.as_ref().and_then(Weak::upgrade)
                    && let Err(error) = claim.keep().await
                {
                    tracing::error!(%error, "this process's instance id is not held on the database");
                }
                match beat(&self.backend, &self.instance).await {
                    Ok(()) => last_beat = Some(now),
                    Err(error) => {
                        last_beat = None;
                        tracing::warn!(%error, "this process's heartbeat could not be written");
                    }
                }
                if !awake {
                    tokio::time::sleep(HEARTBEAT_INTERVAL).await;
                    continue;
                }
                let approvals = ApprovalStore::new(
                    self.backend.clone(),
                    self.poll_interval,
                    self.erase_settled,
                    Some(Arc::clone(&self.instance)),
                    feed,
                );
                if let Err(error) =
                    lapse_gone(&self.backend, &approvals, &self.audit, &self.instance, HEARTBEAT_STALE).await
                {
                    tracing::warn!(%error, "approvals of stopped gateway processes could not be lapsed");
                }
                drop(approvals);
                tokio::time::sleep(HEARTBEAT_INTERVAL).await;
            }
        });
    }
}
