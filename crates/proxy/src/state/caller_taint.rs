//! The taint of each authenticated caller's 2026-07-28 requests: a modern HTTP request runs in a session of its
//! own that ends with its answer, so the taint an open-world answer leaves must outlive that session, or a caller
//! could read outside text in one request and write it out in the next without a person. It belongs to the caller
//! (the token's caller name; `anonymous` for an HTTP listener without configured callers, the one client it serves).
//!
//! [`CallerTaints`] keeps one [`CallerTaint`] cell per caller name, bounded: a cell unused for the session idle
//! timeout is dropped (a legacy session's taint ends when the idle session is closed; this is the same lifetime),
//! and at most [`MAX_CALLERS`] cells are kept (the least recently used idle one goes first, an untainted one before
//! a tainted one). Caller names come from the configuration, so the bound is a backstop, not a working limit. A
//! cell some request still holds is never dropped. Lapsed cells are swept only when a new cell is made, so a request
//! of a known caller costs one map lookup. Legacy sessions keep their own taint and never take a cell. This
//! file holds state only: it decides nothing (the policy reads the taint through the session's viewer).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// At most this many callers' cells are kept.
pub(crate) const MAX_CALLERS: usize = 4096;

/// One caller's taint, shared by the sessions of its modern requests.
#[derive(Debug)]
pub(crate) struct CallerTaint {
    tainted: AtomicBool,
    /// When a request last took or tainted this cell, in milliseconds since the map's epoch.
    last_used_ms: AtomicU64,
    epoch: Instant,
}

impl CallerTaint {
    fn new(epoch: Instant) -> CallerTaint {
        let cell = CallerTaint { tainted: AtomicBool::new(false), last_used_ms: AtomicU64::new(0), epoch };
        cell.touch();
        cell
    }

    /// Text from an open-world source reached one of this caller's requests.
    pub(crate) fn taint(&self) {
        self.tainted.store(true, Ordering::Release);
        self.touch();
    }

    pub(crate) fn is_tainted(&self) -> bool {
        self.tainted.load(Ordering::Acquire)
    }

    fn touch(&self) {
        let elapsed = u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.last_used_ms.store(elapsed, Ordering::Release);
    }

    fn idle_for(&self, now_ms: u64) -> u64 {
        now_ms.saturating_sub(self.last_used_ms.load(Ordering::Acquire))
    }
}

/// Every caller's taint cell (see the module documentation for the bounds).
#[derive(Debug)]
pub(crate) struct CallerTaints {
    cells: Mutex<HashMap<String, Arc<CallerTaint>>>,
    idle_timeout: Duration,
    capacity: usize,
    epoch: Instant,
}

impl CallerTaints {
    /// Cells that lapse after `idle_timeout` unused (the session idle timeout), at most `capacity` of them.
    pub(crate) fn new(idle_timeout: Duration, capacity: usize) -> CallerTaints {
        CallerTaints {
            cells: Mutex::new(HashMap::new()),
            idle_timeout,
            capacity: capacity.max(1),
            epoch: Instant::now(),
        }
    }

    /// The taint cell of `caller` for one of its requests, made clean when the caller has none (or its old one
    /// lapsed). A poisoned lock is taken over (the cells are atomics a panic cannot leave half-written): falling
    /// back to a request-local taint would let every later request of every caller forget its taint.
    pub(crate) fn cell(&self, caller: &str) -> Option<Arc<CallerTaint>> {
        let mut cells = self.cells.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let now_ms = u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX);
        let idle_ms = u64::try_from(self.idle_timeout.as_millis()).unwrap_or(u64::MAX);
        // Held only by the map and unused for the idle timeout: that taint ended as an idle session's does.
        let lapsed = |cell: &Arc<CallerTaint>| Arc::strong_count(cell) == 1 && cell.idle_for(now_ms) >= idle_ms;
        if let Some(cell) = cells.get(caller).filter(|cell| !lapsed(cell)) {
            cell.touch();
            return Some(Arc::clone(cell));
        }
        // A new cell: only now sweep the lapsed ones (a request of a known caller never walks the whole map).
        cells.retain(|_, cell| !lapsed(cell));
        if cells.len() >= self.capacity {
            // The least recently used cell no request holds, an untainted one first.
            let victim = cells
                .iter()
                .filter(|(_, cell)| Arc::strong_count(cell) == 1)
                .max_by_key(|(_, cell)| (!cell.is_tainted(), cell.idle_for(now_ms)))
                .map(|(name, _)| name.clone());
            if let Some(victim) = victim {
                cells.remove(&victim);
            }
        }
        let cell = Arc::new(CallerTaint::new(self.epoch));
        cells.insert(caller.to_owned(), Arc::clone(&cell));
        Some(cell)
    }

    /// How many callers' cells are kept now.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.cells.lock().map(|cells| cells.len()).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    #[test]
    fn a_callers_taint_is_shared_by_its_requests_and_not_by_another_callers() {
        let taints = CallerTaints::new(Duration::from_secs(60), 8);
        taints.cell("alice").unwrap().taint();
        assert!(taints.cell("alice").unwrap().is_tainted());
        assert!(!taints.cell("bob").unwrap().is_tainted());
    }

    #[test]
    fn an_unused_cell_lapses_after_the_idle_timeout_but_a_held_one_never_does() {
        let taints = CallerTaints::new(Duration::ZERO, 8);
        let held = taints.cell("alice").unwrap();
        held.taint();
        assert!(taints.cell("alice").unwrap().is_tainted(), "a cell a request holds is kept");
        drop(held);
        assert!(!taints.cell("alice").unwrap().is_tainted(), "an unused cell lapsed");
    }

    #[test]
    fn lapsed_cells_of_other_callers_are_swept_when_a_new_cell_is_made() {
        let taints = CallerTaints::new(Duration::ZERO, 8);
        for name in ["a", "b", "c"] {
            taints.cell(name).unwrap().taint();
        }
        let _ = taints.cell("d").unwrap();
        assert_eq!(taints.len(), 1, "the unused, lapsed cells went when d's was made");
    }

    #[test]
    fn the_map_is_bounded_and_evicts_an_untainted_cell_before_a_tainted_one() {
        let taints = CallerTaints::new(Duration::from_secs(60), 2);
        taints.cell("tainted").unwrap().taint();
        let _ = taints.cell("clean").unwrap();
        for name in ["a", "b", "c"] {
            let _ = taints.cell(name).unwrap();
            assert!(taints.len() <= 2);
        }
        assert!(taints.cell("tainted").unwrap().is_tainted(), "the tainted cell outlived the clean ones");
    }
}
