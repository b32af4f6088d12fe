//! The gateway-wide book of `subscriptions/listen`: how many listens each caller holds and all callers together
//! (each bounded, so one caller cannot hold every connection with listens), and, per resource URI, how many
//! listens want its updates and what toolgate last asked the owning upstream for it.
//!
//! The count and the decision to subscribe or unsubscribe upstream are taken under one lock, and one task per URI
//! at a time (its *converger*) brings the upstream to what the count says: it asks, waits for the answer, and looks
//! again, so two listens opening and closing the same URI at once can never leave it unsubscribed upstream while a
//! listener still wants it (a subscribe and an unsubscribe sent by two tasks could arrive in either order). The
//! converger itself is `crate::listen`'s; this file only keeps the book: it never holds its lock across an
//! `.await`, never talks to an upstream and never sends anything to a client.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Mutex, MutexGuard, PoisonError};

/// Listens one authenticated caller may hold open at once (every session of the caller together).
pub(crate) const MAX_LISTENS_PER_CALLER: usize = 64;
/// Listens the gateway holds open at once, every caller together.
pub(crate) const MAX_LISTENS: usize = 1024;

/// Why a listen got no place.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ListenRefused {
    /// The caller already holds [`MAX_LISTENS_PER_CALLER`] listens.
    Caller,
    /// The gateway already holds [`MAX_LISTENS`] listens.
    Gateway,
}

impl std::fmt::Display for ListenRefused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ListenRefused::Caller => write!(
                f,
                "too many listens: this caller already holds {MAX_LISTENS_PER_CALLER} open subscriptions/listen \
                 requests; end one before opening another"
            ),
            ListenRefused::Gateway => write!(
                f,
                "too many listens: the gateway already holds {MAX_LISTENS} open subscriptions/listen requests; \
                 try again later"
            ),
        }
    }
}

/// The book; one per gateway.
#[derive(Default)]
pub(crate) struct ListenRegistry {
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    per_caller: HashMap<String, usize>,
    total: usize,
    uris: HashMap<String, UriState>,
}

/// One URI some listen wants, or that toolgate still has to unsubscribe upstream.
#[derive(Default)]
struct UriState {
    /// Open listens that want its updates.
    listens: usize,
    /// What toolgate last asked the upstream (true: subscribed).
    subscribed: bool,
    /// A converger runs for it (it alone talks to the upstream about this URI).
    converging: bool,
}

impl ListenRegistry {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Takes a place for a listen of `caller` that wants `uris`; returns the URIs whose converger must start now.
    pub(crate) fn open(&self, caller: &str, uris: &BTreeSet<String>) -> Result<Vec<String>, ListenRefused> {
        let mut state = self.lock();
        if state.total >= MAX_LISTENS {
            return Err(ListenRefused::Gateway);
        }
        let held = state.per_caller.entry(caller.to_owned()).or_default();
        if *held >= MAX_LISTENS_PER_CALLER {
            return Err(ListenRefused::Caller);
        }
        *held += 1;
        state.total += 1;
        let mut start = Vec::new();
        for uri in uris {
            let entry = state.uris.entry(uri.clone()).or_default();
            entry.listens += 1;
            if needs_converger(entry) {
                entry.converging = true;
                start.push(uri.clone());
            }
        }
        Ok(start)
    }

    /// Gives back the place of a listen of `caller` that wanted `uris`; returns the URIs whose converger must
    /// start now.
    pub(crate) fn close(&self, caller: &str, uris: &BTreeSet<String>) -> Vec<String> {
        let mut state = self.lock();
        if let Some(held) = state.per_caller.get_mut(caller) {
            *held = held.saturating_sub(1);
            if *held == 0 {
                state.per_caller.remove(caller);
            }
        }
        state.total = state.total.saturating_sub(1);
        let mut start = Vec::new();
        for uri in uris {
            let Some(entry) = state.uris.get_mut(uri) else { continue };
            entry.listens = entry.listens.saturating_sub(1);
            if needs_converger(entry) {
                entry.converging = true;
                start.push(uri.clone());
            }
            if !entry.converging && entry.listens == 0 && !entry.subscribed {
                state.uris.remove(uri);
            }
        }
        start
    }

    /// True when an open listen wants `uri`'s updates (legacy subscriptions count apart, on their sessions).
    pub(crate) fn wanted(&self, uri: &str) -> bool {
        self.lock().uris.get(uri).is_some_and(|entry| entry.listens > 0)
    }

    /// Every URI an open listen wants (to subscribe again upstream after a reconnect).
    pub(crate) fn wanted_uris(&self) -> Vec<String> {
        self.lock().uris.iter().filter(|(_, entry)| entry.listens > 0).map(|(uri, _)| uri.clone()).collect()
    }

    /// The converger's next step for `uri`: `Some(true)` to subscribe, `Some(false)` to unsubscribe; `None` when
    /// the upstream already agrees with the count (the converger then ends, under the same lock that a new
    /// listen would start another one under).
    pub(crate) fn next_step(&self, uri: &str) -> Option<bool> {
        let mut state = self.lock();
        let entry = state.uris.get_mut(uri)?;
        let wanted = entry.listens > 0;
        if wanted != entry.subscribed {
            return Some(wanted);
        }
        entry.converging = false;
        if entry.listens == 0 {
            state.uris.remove(uri);
        }
        None
    }

    /// The converger asked the upstream to be `subscribed` (or found nobody to ask).
    pub(crate) fn step_done(&self, uri: &str, subscribed: bool) {
        if let Some(entry) = self.lock().uris.get_mut(uri) {
            entry.subscribed = subscribed;
        }
    }

    /// Open listens: (this caller's, all of them).
    #[cfg(test)]
    fn held(&self, caller: &str) -> (usize, usize) {
        let state = self.lock();
        (state.per_caller.get(caller).copied().unwrap_or(0), state.total)
    }
}

fn needs_converger(entry: &UriState) -> bool {
    !entry.converging && (entry.listens > 0) != entry.subscribed
}

#[cfg(test)]
mod tests {
    use super::*;

    fn uris(names: &[&str]) -> BTreeSet<String> {
        names.iter().map(|name| (*name).to_owned()).collect()
    }

    #[test]
    fn a_caller_past_its_cap_is_refused_and_a_closed_listen_frees_its_place() {
        let registry = ListenRegistry::default();
        for _ in 0..MAX_LISTENS_PER_CALLER {
            assert!(registry.open("alice", &uris(&[])).is_ok());
        }
        assert_eq!(registry.open("alice", &uris(&[])), Err(ListenRefused::Caller));
        assert!(registry.open("bob", &uris(&[])).is_ok(), "another caller still gets a place");
        registry.close("alice", &uris(&[]));
        assert!(registry.open("alice", &uris(&[])).is_ok());
        assert_eq!(registry.held("alice"), (MAX_LISTENS_PER_CALLER, MAX_LISTENS_PER_CALLER + 1));
    }

    #[test]
    fn one_converger_per_uri_follows_the_count_until_it_agrees() {
        let registry = ListenRegistry::default();
        assert_eq!(registry.open("a", &uris(&["u"])), Ok(vec!["u".to_owned()]));
        // A second listen while the first converger runs starts none; the running one sees the count.
        assert_eq!(registry.open("a", &uris(&["u"])), Ok(Vec::new()));
        assert_eq!(registry.next_step("u"), Some(true));
        // Both close before the subscribe is answered: the same converger then unsubscribes.
        assert!(registry.close("a", &uris(&["u"])).is_empty());
        assert!(registry.close("a", &uris(&["u"])).is_empty());
        registry.step_done("u", true);
        assert_eq!(registry.next_step("u"), Some(false));
        // A listen opens while the unsubscribe is in flight: still the same converger, which subscribes again.
        assert!(registry.open("a", &uris(&["u"])).is_ok_and(|start| start.is_empty()));
        registry.step_done("u", false);
        assert_eq!(registry.next_step("u"), Some(true));
        registry.step_done("u", true);
        assert_eq!(registry.next_step("u"), None);
        assert!(registry.wanted("u"));
    }
}
