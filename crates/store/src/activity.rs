//! Calls by verdict over time, for the console's chart: one `GROUP BY` over the audit rows of a bounded window
//! (the last hour by minute, or the last day by hour), with every bucket of the window present, empty or not.
//!
//! What each call counts as, read from the rows the pipeline writes:
//! - `allow`: a `call` row with verdict `allow` (an allowed call has no `decision` row of its own);
//! - `deny`, `hidden`: a `decision` row with verdict `deny` / `hide`;
//! - a `decision` row with verdict `confirm` is `confirm-approved` when a `call` row with verdict `confirm` for the
//!   same session, tool and argument digest follows it (before the next such decision), `confirm-waiting` when an
//!   approval for it is still pending or approved but unused, else `confirm-refused` (denied, declined, expired or
//!   never answered);
//! - `unknown`: a `call` or `decision` row whose verdict this version does not know (or lacks).
//!
//! A call counts once, in the bucket of its first row. Calls to tool names that do not exist write no audit row,
//! so they are not in the chart. Buckets are UTC, taken from the fixed-width RFC 3339 text, so the queries need no
//! date functions. Reads only: one `GROUP BY` for everything but confirmations, and one pass over the window's
//! confirmation rows (a confirmed call's row follows its decision, so both are in the window), both through the
//! `time` index; nothing outside the window is read.

use std::collections::{HashMap, HashSet};
use std::time::SystemTime;

use serde::Serialize;
use sqlx::Row;

use crate::error::StoreError;
use crate::time::{format_rfc3339, from_micros, to_micros};
use crate::{Backend, Store};

/// The window a chart covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ActivitySpan {
    /// The last 60 minutes, one bucket per minute.
    LastHour,
    /// The last 24 hours, one bucket per hour.
    LastDay,
}

impl ActivitySpan {
    /// Seconds per bucket.
    pub fn bucket_seconds(self) -> i64 {
        match self {
            ActivitySpan::LastHour => 60,
            ActivitySpan::LastDay => 3600,
        }
    }

    /// Buckets in the window.
    pub fn buckets(self) -> usize {
        match self {
            ActivitySpan::LastHour => 60,
            ActivitySpan::LastDay => 24,
        }
    }

    /// Characters of the RFC 3339 text that name a bucket (`2026-11-25T10:05` or `2026-11-25T10`).
    fn prefix(self) -> usize {
        match self {
            ActivitySpan::LastHour => 16,
            ActivitySpan::LastDay => 13,
        }
    }
}

/// What a call came to, as the chart counts it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ActivityVerdict {
    /// Allowed by policy.
    Allow,
    /// Confirmed by a person, then forwarded.
    ConfirmApproved,
    /// Waiting for a person (or approved and about to be forwarded).
    ConfirmWaiting,
    /// Needed a person and was not forwarded: denied, declined, expired or unanswered.
    ConfirmRefused,
    /// Denied by policy.
    Deny,
    /// Hidden by policy (answered as an unknown tool).
    Hidden,
    /// A row whose verdict this version does not know.
    Unknown,
}

impl ActivityVerdict {
    /// Every verdict, in the order a chart stacks them.
    pub const ALL: [ActivityVerdict; 7] = [
        ActivityVerdict::Allow,
        ActivityVerdict::ConfirmApproved,
        ActivityVerdict::ConfirmWaiting,
        ActivityVerdict::ConfirmRefused,
        ActivityVerdict::Deny,
        ActivityVerdict::Hidden,
        ActivityVerdict::Unknown,
    ];

    /// The stable name (also the SQL query's category).
    pub fn as_str(self) -> &'static str {
        match self {
            ActivityVerdict::Allow => "allow",
            ActivityVerdict::ConfirmApproved => "confirm-approved",
            ActivityVerdict::ConfirmWaiting => "confirm-waiting",
            ActivityVerdict::ConfirmRefused => "confirm-refused",
            ActivityVerdict::Deny => "deny",
            ActivityVerdict::Hidden => "hidden",
            ActivityVerdict::Unknown => "unknown",
        }
    }

    fn index(self) -> usize {
        ActivityVerdict::ALL.iter().position(|verdict| *verdict == self).unwrap_or(ActivityVerdict::ALL.len() - 1)
    }

    fn from_name(name: &str) -> ActivityVerdict {
        ActivityVerdict::ALL.into_iter().find(|verdict| verdict.as_str() == name).unwrap_or(ActivityVerdict::Unknown)
    }
}

/// One bucket of the window.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ActivityBucket {
    /// The bucket's start, RFC 3339 UTC.
    pub start: String,
    /// Calls per verdict, in [`ActivityVerdict::ALL`] order.
    pub counts: [u64; 7],
}

impl ActivityBucket {
    /// The calls of one verdict.
    pub fn count(&self, verdict: ActivityVerdict) -> u64 {
        self.counts.get(verdict.index()).copied().unwrap_or_default()
    }

    /// Every call in the bucket.
    pub fn total(&self) -> u64 {
        self.counts.iter().sum()
    }
}

/// Calls by verdict over a window, oldest bucket first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Activity {
    /// The window.
    pub span: ActivitySpan,
    /// Every bucket of the window, empty ones included.
    pub buckets: Vec<ActivityBucket>,
}

/// Counts every call that is not a confirmation per bucket and category. `?1` is the window's start (RFC 3339),
/// `?2` the length of a bucket's name. Uses the `time` index; confirmations are matched in [`confirmations`].
const COUNTS_SQL: &str = "\
SELECT substr(time, 1, ?2) AS bucket, \
  CASE \
    WHEN kind = 'call' AND verdict = 'allow' THEN 'allow' \
    WHEN kind = 'decision' AND verdict = 'deny' THEN 'deny' \
    WHEN kind = 'decision' AND verdict = 'hide' THEN 'hidden' \
    ELSE 'unknown' \
  END AS category, \
  COUNT(*) AS calls \
FROM audit_log \
WHERE time >= ?1 AND (kind = 'call' OR kind = 'decision') AND verdict IS NOT 'confirm' \
  AND NOT (kind = 'decision' AND verdict IS 'allow') \
GROUP BY bucket, category";

/// The confirmation rows of the window, in chain order: each `confirm` decision and each call forwarded after one.
const CONFIRMATIONS_SQL: &str = "\
SELECT seq, time, kind, session, tool, args_digest FROM audit_log \
WHERE time >= ?1 AND verdict = 'confirm' AND (kind = 'decision' OR kind = 'call') ORDER BY seq";

/// Approvals a waiting call can still use; `?1` is now in microseconds.
const LIVE_APPROVALS_SQL: &str =
    "SELECT session, tool, args_digest FROM approvals WHERE state IN ('pending', 'approved') AND expires_us > ?1";

/// What identifies one confirmation's rows: session, tool and argument digest.
type CallKey = (Option<String>, Option<String>, Option<String>);

/// Each `confirm` decision's bucket name and what came of it. A decision is approved when a confirmed call with its
/// key follows before the next decision with that key; otherwise the latest decision of its key waits while a usable
/// approval has that key, and any other was refused. One pass over the window's confirmation rows (bounded by the window), one over live approvals.
async fn confirmations(
    pool: &sqlx::SqlitePool,
    since: &str,
    prefix: usize,
    now_micros: i64,
) -> Result<Vec<(String, ActivityVerdict)>, StoreError> {
    let rows = sqlx::query(CONFIRMATIONS_SQL).bind(since).fetch_all(pool).await?;
    let mut decisions: Vec<(String, CallKey, bool)> = Vec::new();
    let mut open: HashMap<CallKey, usize> = HashMap::new();
    for row in rows {
        let time: String = row.try_get("time")?;
        let kind: String = row.try_get("kind")?;
        let key: CallKey = (row.try_get("session")?, row.try_get("tool")?, row.try_get("args_digest")?);
        if kind == "decision" {
            open.insert(key.clone(), decisions.len());
            decisions.push((time.get(..prefix).unwrap_or(&time).to_owned(), key, false));
        } else if let Some(index) = open.remove(&key)
            && let Some(decision) = decisions.get_mut(index)
        {
            decision.2 = true;
        }
    }
    let live: HashSet<CallKey> = sqlx::query(LIVE_APPROVALS_SQL)
        .bind(now_micros)
        .fetch_all(pool)
        .await?
        .iter()
        .map(|row| Ok((row.try_get("session")?, row.try_get("tool")?, row.try_get("args_digest")?)))
        .collect::<Result<_, sqlx::Error>>()?;
    // Only the latest decision of a key can still be waiting: an earlier one was followed by another ask.
    let latest: HashSet<usize> = open.into_values().collect();
    Ok(decisions
        .into_iter()
        .enumerate()
        .map(|(index, (bucket, key, approved))| {
            let verdict = if approved {
                ActivityVerdict::ConfirmApproved
            } else if latest.contains(&index) && live.contains(&key) {
                ActivityVerdict::ConfirmWaiting
            } else {
                ActivityVerdict::ConfirmRefused
            };
            (bucket, verdict)
        })
        .collect())
}

impl Store {
    /// Calls by verdict in the window of `span` that ends with the bucket holding `now`.
    pub async fn activity(&self, span: ActivitySpan, now: SystemTime) -> Result<Activity, StoreError> {
        let step = span.bucket_seconds() * 1_000_000;
        let now_micros = to_micros(now);
        let current = now_micros - now_micros.rem_euclid(step);
        let first = current - step * (span.buckets() as i64 - 1);
        let prefix = span.prefix();
        let since = format_rfc3339(from_micros(first));
        let mut buckets: Vec<ActivityBucket> = (0..span.buckets() as i64)
            .map(|index| ActivityBucket { start: format_rfc3339(from_micros(first + index * step)), counts: [0; 7] })
            .collect();
        let Backend::Sqlite(pool) = &self.backend;
        let mut counted: Vec<(String, ActivityVerdict, u64)> = Vec::new();
        for row in sqlx::query(COUNTS_SQL).bind(&since).bind(prefix as i64).fetch_all(pool).await? {
            let category: String = row.try_get("category")?;
            let calls: i64 = row.try_get("calls")?;
            let verdict = ActivityVerdict::from_name(&category);
            counted.push((row.try_get("bucket")?, verdict, u64::try_from(calls).unwrap_or_default()));
        }
        let confirmed = confirmations(pool, &since, prefix, now_micros).await?;
        counted.extend(confirmed.into_iter().map(|(bucket, verdict)| (bucket, verdict, 1)));
        for (name, verdict, calls) in counted {
            // Rows stamped after `now` (another process's clock) fall outside the window's buckets.
            if let Some(bucket) = buckets.iter_mut().find(|bucket| bucket.start.get(..prefix) == Some(name.as_str()))
                && let Some(count) = bucket.counts.get_mut(verdict.index())
            {
                *count += calls;
            }
        }
        Ok(Activity { span, buckets })
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use serde_json::json;
    use toolgate_core::decision::Verdict;

    use super::*;
    use crate::{ApprovalDecision, ApprovalId, AuditEntry, AuditKind, PendingApproval, parse_rfc3339};

    fn at(text: &str) -> SystemTime {
        parse_rfc3339(text).unwrap_or(SystemTime::UNIX_EPOCH)
    }

    fn entry(kind: AuditKind, time: &str, verdict: Verdict, session: &str, args: serde_json::Value) -> AuditEntry {
        AuditEntry {
            time: Some(at(time)),
            session: Some(session.into()),
            tool: Some("delete_note".into()),
            verdict: Some(verdict),
            args: Some(args),
            ..AuditEntry::new(kind)
        }
    }

    fn bucket<'a>(activity: &'a Activity, start: &str) -> &'a ActivityBucket {
        let found = activity.buckets.iter().find(|bucket| bucket.start == start);
        assert!(found.is_some(), "no bucket {start} in {:?}", activity.buckets.first());
        found.unwrap_or(&activity.buckets[0])
    }

    #[tokio::test]
    async fn counts_calls_by_verdict_per_minute_and_per_hour() -> Result<(), StoreError> {
        let dir = tempfile::tempdir().map_err(|source| StoreError::StateDir { path: "tmp".into(), source })?;
        let store = Store::open(dir.path()).await?;
        let audit = store.audit();
        let now = at("2026-11-25T10:30:20Z");
        let rows = [
            // Two allowed calls at 10:05, one at 10:30; one long before the window.
            entry(AuditKind::Call, "2026-11-25T10:05:01Z", Verdict::Allow, "s1", json!({"id": 1})),
            entry(AuditKind::Call, "2026-11-25T10:05:59.999999Z", Verdict::Allow, "s1", json!({"id": 2})),
            entry(AuditKind::Call, "2026-11-25T10:30:00Z", Verdict::Allow, "s2", json!({"id": 3})),
            entry(AuditKind::Call, "2026-11-25T08:00:00Z", Verdict::Allow, "s1", json!({"id": 4})),
            // A confirmed call (decision, then its call row a minute later): counted once, at the decision.
            entry(AuditKind::Decision, "2026-11-25T10:10:00Z", Verdict::Confirm, "s1", json!({"id": 5})),
            entry(AuditKind::Call, "2026-11-25T10:11:00Z", Verdict::Confirm, "s1", json!({"id": 5})),
            // The same arguments asked again and refused: the earlier call row is not this one's.
            entry(AuditKind::Decision, "2026-11-25T10:12:00Z", Verdict::Confirm, "s1", json!({"id": 5})),
            // Denied, hidden.
            entry(AuditKind::Decision, "2026-11-25T10:20:00Z", Verdict::Deny, "s1", json!({"id": 6})),
            entry(AuditKind::Decision, "2026-11-25T10:20:30Z", Verdict::Hide, "s1", json!({"id": 7})),
            // Asked, not answered, asked again: the first ask was refused, the second waits in the approval queue.
            entry(AuditKind::Decision, "2026-11-25T10:28:00Z", Verdict::Confirm, "s3", json!({"id": 8})),
            entry(AuditKind::Decision, "2026-11-25T10:29:00Z", Verdict::Confirm, "s3", json!({"id": 8})),
        ];
        for row in rows {
            audit.record_durable(row).await?;
        }
        // Rows that are not calls count for nothing.
        audit
            .record_durable(AuditEntry {
                time: Some(at("2026-11-25T10:05:30Z")),
                ..AuditEntry::new(AuditKind::Listing)
            })
            .await?;
        store.record_pin_decision("demo", "delete_note", "sha256:ab", crate::PinDecision::Approved, "alice").await?;
        let waiting = PendingApproval {
            id: ApprovalId::generate(),
            session: "s3".into(),
            upstream: "demo".into(),
            tool: "delete_note".into(),
            title: "Delete note".into(),
            action: "delete a note".into(),
            risk: None,
            args_summary: "{}".into(),
            tool_fingerprint: "sha256:ab".into(),
            args_digest: crate::digest_arguments(&json!({"id": 8})),
            created: now,
            // Decidable today (the store refuses to decide an expired approval) and still usable at `now`.
            expires: SystemTime::now().max(now) + Duration::from_secs(600),
        };
        store.approvals().create(&waiting).await?;

        let hour = store.activity(ActivitySpan::LastHour, now).await?;
        assert_eq!(hour.buckets.len(), 60);
        assert_eq!(hour.buckets[0].start, "2026-11-25T09:31:00.000000Z");
        assert_eq!(hour.buckets[59].start, "2026-11-25T10:30:00.000000Z");
        let five = bucket(&hour, "2026-11-25T10:05:00.000000Z");
        assert_eq!((five.count(ActivityVerdict::Allow), five.total()), (2, 2));
        let ten = bucket(&hour, "2026-11-25T10:10:00.000000Z");
        assert_eq!((ten.count(ActivityVerdict::ConfirmApproved), ten.total()), (1, 1));
        assert_eq!(
            bucket(&hour, "2026-11-25T10:11:00.000000Z").total(),
            0,
            "the confirmed call row is not counted again"
        );
        let twelve = bucket(&hour, "2026-11-25T10:12:00.000000Z");
        assert_eq!((twelve.count(ActivityVerdict::ConfirmRefused), twelve.total()), (1, 1));
        let twenty = bucket(&hour, "2026-11-25T10:20:00.000000Z");
        assert_eq!((twenty.count(ActivityVerdict::Deny), twenty.count(ActivityVerdict::Hidden)), (1, 1));
        assert_eq!(bucket(&hour, "2026-11-25T10:28:00.000000Z").count(ActivityVerdict::ConfirmRefused), 1);
        assert_eq!(bucket(&hour, "2026-11-25T10:29:00.000000Z").count(ActivityVerdict::ConfirmWaiting), 1);
        assert_eq!(bucket(&hour, "2026-11-25T10:30:00.000000Z").count(ActivityVerdict::Allow), 1);
        assert_eq!(hour.buckets.iter().map(ActivityBucket::total).sum::<u64>(), 9, "the 08:00 call is outside");

        // Once the waiting approval is denied, the call counts as refused.
        store.approvals().decide(&waiting.id, ApprovalDecision::Deny, "alice").await?;
        let hour = store.activity(ActivitySpan::LastHour, now).await?;
        assert_eq!(bucket(&hour, "2026-11-25T10:29:00.000000Z").count(ActivityVerdict::ConfirmRefused), 1);

        let day = store.activity(ActivitySpan::LastDay, now).await?;
        assert_eq!(day.buckets.len(), 24);
        assert_eq!(day.buckets[23].start, "2026-11-25T10:00:00.000000Z");
        let ten = bucket(&day, "2026-11-25T10:00:00.000000Z");
        assert_eq!(ten.count(ActivityVerdict::Allow), 3);
        assert_eq!(ten.count(ActivityVerdict::ConfirmRefused), 3);
        assert_eq!(ten.total(), 9);
        assert_eq!(bucket(&day, "2026-11-25T08:00:00.000000Z").count(ActivityVerdict::Allow), 1);
        Ok(())
    }
}
