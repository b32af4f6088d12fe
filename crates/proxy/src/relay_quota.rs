//! How many requests from upstreams (sampling, elicitation, roots) are relayed to clients and not answered yet,
//! per session and per upstream, so an upstream that floods a client with questions is refused past a bound instead
//! of holding a task, a waiting answer and a place in the client's queue for each.
//!
//! A place is taken when a request is relayed and given back when its [`RelaySlot`] drops, however the relay ends
//! (answered, withdrawn, timed out, session closed, task dropped); checking and taking are one step under one lock,
//! so a burst cannot pass the bound. It counts only; refusing and routing are `routing`'s.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

/// Which bound refused a relayed request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RelayRefusal {
    /// The session already had `max_relayed_requests_per_session` waiting.
    PerSession,
    /// The upstream already had `max_relayed_requests_per_upstream` waiting.
    PerUpstream,
}

impl RelayRefusal {
    /// The metric label and the setting to name.
    pub(crate) fn label(self) -> &'static str {
        match self {
            RelayRefusal::PerSession => "per_session",
            RelayRefusal::PerUpstream => "per_upstream",
        }
    }

    pub(crate) fn setting(self) -> &'static str {
        match self {
            RelayRefusal::PerSession => "max_relayed_requests_per_session",
            RelayRefusal::PerUpstream => "max_relayed_requests_per_upstream",
        }
    }
}

/// The places taken, by session id and by upstream index.
pub(crate) struct RelayQuota {
    max_per_session: usize,
    max_per_upstream: usize,
    taken: Arc<Mutex<Taken>>,
}

#[derive(Default)]
struct Taken {
    sessions: HashMap<String, usize>,
    upstreams: HashMap<usize, usize>,
}

impl RelayQuota {
    pub(crate) fn new(max_per_session: usize, max_per_upstream: usize) -> RelayQuota {
        RelayQuota { max_per_session, max_per_upstream, taken: Arc::default() }
    }

    /// Takes a place for a request from `upstream` relayed to `session`, or says which bound is full.
    pub(crate) fn take(&self, session: &str, upstream: usize) -> Result<RelaySlot, (RelayRefusal, usize)> {
        let mut taken = self.taken.lock().unwrap_or_else(PoisonError::into_inner);
        if taken.sessions.get(session).copied().unwrap_or(0) >= self.max_per_session {
            return Err((RelayRefusal::PerSession, self.max_per_session));
        }
        if taken.upstreams.get(&upstream).copied().unwrap_or(0) >= self.max_per_upstream {
            return Err((RelayRefusal::PerUpstream, self.max_per_upstream));
        }
        *taken.sessions.entry(session.to_owned()).or_default() += 1;
        *taken.upstreams.entry(upstream).or_default() += 1;
        Ok(RelaySlot { taken: Arc::clone(&self.taken), session: session.to_owned(), upstream })
    }
}

/// One relayed request's place; given back when dropped.
pub(crate) struct RelaySlot {
    taken: Arc<Mutex<Taken>>,
    session: String,
    upstream: usize,
}

impl Drop for RelaySlot {
    fn drop(&mut self) {
        let mut taken = self.taken.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(count) = taken.sessions.get_mut(&self.session) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                taken.sessions.remove(&self.session);
            }
        }
        if let Some(count) = taken.upstreams.get_mut(&self.upstream) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                taken.upstreams.remove(&self.upstream);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn places_are_bounded_per_session_and_per_upstream_and_given_back_on_drop() {
        let quota = RelayQuota::new(2, 3);
        let first = quota.take("a", 0).map_err(|refused| refused.0);
        let second = quota.take("a", 0).map_err(|refused| refused.0);
        assert!(first.is_ok() && second.is_ok());
        assert_eq!(quota.take("a", 0).err().map(|refused| refused.0), Some(RelayRefusal::PerSession));
        let third = quota.take("b", 0);
        assert!(third.is_ok());
        assert_eq!(quota.take("c", 0).err().map(|refused| refused.0), Some(RelayRefusal::PerUpstream));
        assert!(quota.take("c", 1).is_ok(), "another upstream has its own places");
        drop(first);
        assert!(quota.take("a", 0).is_ok(), "a place given back is free again");
    }
}
