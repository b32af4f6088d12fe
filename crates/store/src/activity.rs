//! Calls by verdict over time, for the console's chart: one `GROUP BY` over the audit rows of a bounded window
//! (the last hour by minute, or the last day by hour), with every bucket of the window present, empty or not.
//!
//! What each call counts as, read from the one row the pipeline writes per call:
//! - `allow`: a `call` row with verdict `allow`;
//! - a `call` row with verdict `confirm` is `confirm-approved` when it was forwarded (its outcome is a forwarded
//!   call's), else `confirm-refused` (declined, denied, timed out, lapsed, withdrawn, tool changed, ...);
//!   `confirm-waiting` are the calls waiting in the approval queue now (an approval still pending, or approved and
//!   unused), in the bucket where they were asked: a waiting call's row is committed only when it ends (a call
//!   waiting on the client's own form is counted once it ends);
//! - `deny`, `hidden`: a `decision` row with verdict `deny` / `hide`;
//! - `unknown`: a `call` or `decision` row whose verdict this version does not know (or lacks: a name that leads
//!   to no tool, a malformed call).
//!
//! A call counts once, in the bucket of its row's time (when it was journaled: forwarded or asked). Logs written
//! by older versions also hold a `decision` row per confirmed call, written as the person was asked: those are left
//! out, so a confirmed call of an older log counts once, by its `call` row when it was forwarded. Buckets are UTC,
//! taken from the fixed-width RFC 3339 text, so the queries need no date functions. Reads only: one `GROUP BY`
//! through the `time` index, and the live approvals of the window; nothing outside the window is read.

use std::time::SystemTime;

use serde::Serialize;

use crate::Store;
use crate::backend::{Columns as _, on_backend};
use crate::error::StoreError;
use crate::time::{format_rfc3339, from_micros, to_micros};

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

/// Counts every call per bucket and category, from its one row. `$1` is the window's start (RFC 3339), `$2` the
/// length of a bucket's name. Uses the `time` index. A confirmed call's row was forwarded when its outcome is one
/// of a forwarded call's (or absent: a row of the older two-row form); any other outcome says why it was not.
/// `decision` rows with verdict `allow` or `confirm` are a call's only when its upstream was reconnecting
/// (`upstream_unavailable`; counted for `confirm`, as before for `allow`): older versions also wrote one before
/// asking a person, and those are not calls of their own.
const COUNTS_SQL: &str = "\
SELECT substr(time, 1, CAST($2 AS INTEGER)) AS bucket, \
  CASE \
    WHEN kind = 'call' AND verdict = 'allow' THEN 'allow' \
    WHEN kind = 'call' AND verdict = 'confirm' \
      AND (outcome IS NULL OR outcome IN ('ok', 'is_error', 'jsonrpc_error', 'cancelled', 'abandoned', \
        'not_recorded')) THEN 'confirm-approved' \
    WHEN verdict = 'confirm' THEN 'confirm-refused' \
    WHEN kind = 'decision' AND verdict = 'deny' THEN 'deny' \
    WHEN kind = 'decision' AND verdict = 'hide' THEN 'hidden' \
    ELSE 'unknown' \
  END AS category, \
  COUNT(*) AS calls \
FROM audit_log \
WHERE time >= $1 AND (kind = 'call' OR kind = 'decision') \
  AND NOT (kind = 'decision' AND verdict IS NOT DISTINCT FROM 'allow') \
  AND NOT (kind = 'decision' AND verdict IS NOT DISTINCT FROM 'confirm' AND outcome IS DISTINCT FROM 'upstream_unavailable') \
GROUP BY bucket, category";

/// When each call still waiting in the approval queue was asked (microseconds): approvals a call can still use,
/// asked within the window. `$1` is now, `$2` the window's start, both in microseconds.
const WAITING_SQL: &str = "SELECT created_us FROM approvals WHERE state IN ('pending', 'approved') \
                           AND expires_us > $1 AND created_us >= $2";

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
        on_backend!(&self.backend, |pool| {
            let mut counted: Vec<(String, ActivityVerdict, u64)> = Vec::new();
            for row in sqlx::query(COUNTS_SQL).bind(&since).bind(prefix as i64).fetch_all(pool).await? {
                let category: String = row.column("category")?;
                let calls: i64 = row.column("calls")?;
                let verdict = ActivityVerdict::from_name(&category);
                counted.push((row.column("bucket")?, verdict, u64::try_from(calls).unwrap_or_default()));
            }
            // A call waiting for a person has no row yet (it is journaled, and committed when it ends): the queue says.
            for row in sqlx::query(WAITING_SQL).bind(now_micros).bind(first).fetch_all(pool).await? {
                let created: i64 = row.column("created_us")?;
                let asked = format_rfc3339(from_micros(created));
                counted.push((asked.get(..prefix).unwrap_or(&asked).to_owned(), ActivityVerdict::ConfirmWaiting, 1));
            }
            for (name, verdict, calls) in counted {
                // Rows stamped after `now` (another process's clock) fall outside the window's buckets.
                if let Some(bucket) =
                    buckets.iter_mut().find(|bucket| bucket.start.get(..prefix) == Some(name.as_str()))
                    && let Some(count) = bucket.counts.get_mut(verdict.index())
                {
                    *count += calls;
                }
            }
            Ok(Activity { span, buckets })
        })
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

    fn ended(outcome: &str, entry: AuditEntry) -> AuditEntry {
        AuditEntry { outcome: Some(outcome.into()), ..entry }
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
            // A confirmed call, approved and forwarded: its one row, counted once.
            ended("ok", entry(AuditKind::Call, "2026-11-25T10:10:00Z", Verdict::Confirm, "s1", json!({"id": 5}))),
            // The same arguments asked again and declined.
            ended("declined", entry(AuditKind::Call, "2026-11-25T10:12:00Z", Verdict::Confirm, "s1", json!({"id": 5}))),
            // An older log's confirmed call: the decision row written as the person was asked, then the call row
            // (without an outcome: its result row followed). Counted once, as approved.
            entry(AuditKind::Decision, "2026-11-25T10:14:00Z", Verdict::Confirm, "s1", json!({"id": 9})),
            entry(AuditKind::Call, "2026-11-25T10:14:30Z", Verdict::Confirm, "s1", json!({"id": 9})),
            ended("ok", AuditEntry { time: Some(at("2026-11-25T10:14:31Z")), ..AuditEntry::new(AuditKind::Result) }),
            // Denied, hidden.
            entry(AuditKind::Decision, "2026-11-25T10:20:00Z", Verdict::Deny, "s1", json!({"id": 6})),
            entry(AuditKind::Decision, "2026-11-25T10:20:30Z", Verdict::Hide, "s1", json!({"id": 7})),
            // Needed a person while its upstream was reconnecting: refused at once.
            ended(
                "upstream_unavailable",
                entry(AuditKind::Decision, "2026-11-25T10:28:00Z", Verdict::Confirm, "s3", json!({"id": 8})),
            ),
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
            // Asked at 10:29; its call has no row until it ends.
            created: at("2026-11-25T10:29:00Z"),
            // Decidable today (the store refuses to decide an expired approval) and still usable at `now`.
            expires: SystemTime::now().max(now) + Duration::from_secs(600),
            caller: None,
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
        let twelve = bucket(&hour, "2026-11-25T10:12:00.000000Z");
        assert_eq!((twelve.count(ActivityVerdict::ConfirmRefused), twelve.total()), (1, 1));
        let older = bucket(&hour, "2026-11-25T10:14:00.000000Z");
        assert_eq!((older.count(ActivityVerdict::ConfirmApproved), older.total()), (1, 1), "an older log's call");
        let twenty = bucket(&hour, "2026-11-25T10:20:00.000000Z");
        assert_eq!((twenty.count(ActivityVerdict::Deny), twenty.count(ActivityVerdict::Hidden)), (1, 1));
        assert_eq!(bucket(&hour, "2026-11-25T10:28:00.000000Z").count(ActivityVerdict::ConfirmRefused), 1);
        assert_eq!(bucket(&hour, "2026-11-25T10:29:00.000000Z").count(ActivityVerdict::ConfirmWaiting), 1);
        assert_eq!(bucket(&hour, "2026-11-25T10:30:00.000000Z").count(ActivityVerdict::Allow), 1);
        assert_eq!(hour.buckets.iter().map(ActivityBucket::total).sum::<u64>(), 10, "the 08:00 call is outside");

        // Once the waiting approval is denied, the call waits no more (its row, when it ends, says why).
        store.approvals().decide(&waiting.id, ApprovalDecision::Deny, "alice").await?;
        let hour = store.activity(ActivitySpan::LastHour, now).await?;
        assert_eq!(bucket(&hour, "2026-11-25T10:29:00.000000Z").total(), 0);

        let day = store.activity(ActivitySpan::LastDay, now).await?;
        assert_eq!(day.buckets.len(), 24);
        assert_eq!(day.buckets[23].start, "2026-11-25T10:00:00.000000Z");
        let ten = bucket(&day, "2026-11-25T10:00:00.000000Z");
        assert_eq!(ten.count(ActivityVerdict::Allow), 3);
        assert_eq!(ten.count(ActivityVerdict::ConfirmApproved), 2);
        assert_eq!(ten.count(ActivityVerdict::ConfirmRefused), 2);
        assert_eq!(ten.total(), 9);
        assert_eq!(bucket(&day, "2026-11-25T08:00:00.000000Z").count(ActivityVerdict::Allow), 1);
        Ok(())
    }
}
