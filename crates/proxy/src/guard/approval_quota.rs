//! How many approvals each session and each caller has waiting in the queue, so a flood of decoy calls cannot
//! bury a real one in front of the person who decides (issue 10): past `max_pending_approvals_per_session` or
//! `max_pending_approvals_per_caller` a call that needs a person is refused instead of queued.
//!
//! The count is kept here, in the gateway that waits on the approvals, rather than counted in the store: checking
//! and taking a place must be one step (a store count followed by an insert lets a burst of parallel calls all
//! pass the check), and an approval left by a session of an earlier run waits for nobody. A place is held by a
//! [`QueueSlot`] for as long as its call waits, and given back when it is dropped, however the wait ends. No IO.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use toolgate_spec::Limits;

/// The places in the approval queue, per session and per caller.
#[derive(Debug)]
pub(crate) struct ApprovalQuota {
    per_session: usize,
    per_caller: usize,
    counts: Mutex<Counts>,
}

#[derive(Debug, Default)]
struct Counts {
    sessions: HashMap<String, usize>,
    callers: HashMap<String, usize>,
}

/// Which cap a call met.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum QuotaExceeded {
    /// The session already has this many approvals waiting.
    Session(usize),
    /// The caller already has this many approvals waiting, over all its sessions.
    Caller(usize),
}

impl QuotaExceeded {
    /// The scope the cap applies to (`session` or `caller`), the cap, and the setting that raises it.
    pub(crate) fn setting(self) -> (&'static str, usize, &'static str) {
        match self {
            QuotaExceeded::Session(limit) => ("session", limit, "max_pending_approvals_per_session"),
            QuotaExceeded::Caller(limit) => ("caller", limit, "max_pending_approvals_per_caller"),
        }
    }
}

impl ApprovalQuota {
    pub(crate) fn new(limits: &Limits) -> ApprovalQuota {
        ApprovalQuota {
            per_session: limits.max_pending_approvals_per_session.max(1),
            per_caller: limits.max_pending_approvals_per_caller.max(1),
            counts: Mutex::new(Counts::default()),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Counts> {
        self.counts.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Takes a place for one more approval of `session` (opened by `caller`), or says which cap is reached.
    pub(crate) fn reserve(self: &Arc<Self>, session: &str, caller: &str) -> Result<QueueSlot, QuotaExceeded> {
        let mut counts = self.lock();
        if counts.sessions.get(session).copied().unwrap_or(0) >= self.per_session {
            return Err(QuotaExceeded::Session(self.per_session));
        }
        if counts.callers.get(caller).copied().unwrap_or(0) >= self.per_caller {
            return Err(QuotaExceeded::Caller(self.per_caller));
        }
        *counts.sessions.entry(session.to_owned()).or_default() += 1;
        *counts.callers.entry(caller.to_owned()).or_default() += 1;
        Ok(QueueSlot { quota: Arc::clone(self), session: session.to_owned(), caller: caller.to_owned() })
    }
}

/// One approval's place in the queue; given back when dropped.
#[derive(Debug)]
pub(crate) struct QueueSlot {
    quota: Arc<ApprovalQuota>,
    session: String,
    caller: String,
}

impl Drop for QueueSlot {
    fn drop(&mut self) {
        let mut counts = self.quota.lock();
        let Counts { sessions, callers } = &mut *counts;
        give_back(sessions, &self.session);
        give_back(callers, &self.caller);
    }
}

fn give_back(counts: &mut HashMap<String, usize>, key: &str) {
    if let Some(count) = counts.get_mut(key) {
        *count = count.saturating_sub(1);
        if *count == 0 {
            counts.remove(key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn places_are_capped_per_session_and_per_caller_and_given_back_on_drop() {
        let limits =
            Limits { max_pending_approvals_per_session: 2, max_pending_approvals_per_caller: 3, ..Limits::default() };
        let quota = Arc::new(ApprovalQuota::new(&limits));
        let first = quota.reserve("s1", "alice");
        let second = quota.reserve("s1", "alice");
        assert!(first.is_ok() && second.is_ok());
        assert_eq!(quota.reserve("s1", "alice").err(), Some(QuotaExceeded::Session(2)));
        let third = quota.reserve("s2", "alice");
        assert!(third.is_ok());
        assert_eq!(quota.reserve("s3", "alice").err(), Some(QuotaExceeded::Caller(3)));
        assert!(quota.reserve("s4", "bob").is_ok(), "another caller has places of its own");
        drop(first);
        assert!(quota.reserve("s1", "alice").is_ok(), "a place given back can be taken again");
    }
}
