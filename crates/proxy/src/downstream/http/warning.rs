//! A warning that is logged at most once per interval, so a flood of refused sessions or connections cannot flood
//! the operator's log; what was held back is counted into the next warning.
//!
//! It only decides whether to log now; it formats nothing and never blocks (one short lock, never across an
//! `.await`).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use tokio::time::Instant;

/// One rate-limited warning.
pub(crate) struct RateLimitedWarning {
    interval: Duration,
    last: Mutex<Option<Instant>>,
    suppressed: AtomicU64,
}

impl RateLimitedWarning {
    pub(crate) fn new(interval: Duration) -> Self {
        RateLimitedWarning { interval, last: Mutex::new(None), suppressed: AtomicU64::new(0) }
    }

    /// Calls `log` with the number of warnings held back since the last one, unless one was logged within the
    /// interval (then this one is only counted).
    pub(crate) fn warn(&self, log: impl FnOnce(u64)) {
        let now = Instant::now();
        let mut last = self.last.lock().unwrap_or_else(PoisonError::into_inner);
        if last.is_some_and(|at| now.duration_since(at) < self.interval) {
            self.suppressed.fetch_add(1, Ordering::Relaxed);
            return;
        }
        *last = Some(now);
        drop(last);
        log(self.suppressed.swap(0, Ordering::Relaxed));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_first_warning_of_an_interval_is_logged_and_the_rest_are_counted() {
        let warning = RateLimitedWarning::new(Duration::from_secs(3600));
        let mut logged = Vec::new();
        for _ in 0..5 {
            warning.warn(|suppressed| logged.push(suppressed));
        }
        assert_eq!(logged, vec![0]);
        assert_eq!(warning.suppressed.load(Ordering::Relaxed), 4);
    }
}
