//! How many audit rows requests refused at authentication may write: at most one per reason and remote address
//! per second. The rows share the bounded audit queue with listings, decisions and calls, so without a bound a flood
//! of bad tokens would fill it and crowd those out. A refusal that writes no row is still counted in `/metrics`
//! (`toolgate_authentication_rows_suppressed_total`), and the next row written for the same reason and address says
//! how many were left out before it.
//!
//! Memory is bounded too: at most [`MAX_KEYS`] reason-and-address windows are kept; past that, lapsed windows are
//! forgotten first, and refusals from further addresses share one window per reason. This module writes nothing
//! itself and never sees a token.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long one written row stands for every refusal of its reason and address.
const WINDOW: Duration = Duration::from_secs(1);
/// Most reason-and-address windows kept at once.
const MAX_KEYS: usize = 1024;

type Key = (&'static str, Option<IpAddr>);

/// Whether a refusal gets its own audit row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RefusalRow {
    /// Write it, saying how many refusals of the same reason and address were left out since the last row.
    Write {
        /// Refusals without a row since the previous row of this reason and address.
        suppressed_before: u64,
    },
    /// Leave it out: a row of the same reason and address was written less than a second ago.
    Suppress,
}

#[derive(Debug)]
struct Window {
    started: Instant,
    suppressed: u64,
}

/// The windows of recent refusal rows, by reason and remote address.
#[derive(Debug, Default)]
pub(crate) struct RefusalRows {
    windows: Mutex<HashMap<Key, Window>>,
}

impl RefusalRows {
    /// Whether a refusal for `reason` from `remote` at `now` gets a row.
    pub(crate) fn admit(&self, reason: &'static str, remote: Option<IpAddr>, now: Instant) -> RefusalRow {
        let mut windows = self.windows.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut key = (reason, remote);
        if !windows.contains_key(&key) && windows.len() >= MAX_KEYS {
            windows.retain(|_, window| now.duration_since(window.started) < WINDOW);
            if windows.len() >= MAX_KEYS {
                // Too many addresses at once: they share one window per reason, so the rows stay bounded.
                key = (reason, None);
            }
        }
        match windows.get_mut(&key) {
            Some(window) if now.duration_since(window.started) < WINDOW => {
                window.suppressed += 1;
                RefusalRow::Suppress
            }
            Some(window) => {
                let suppressed_before = std::mem::take(&mut window.suppressed);
                window.started = now;
                RefusalRow::Write { suppressed_before }
            }
            None => {
                windows.insert(key, Window { started: now, suppressed: 0 });
                RefusalRow::Write { suppressed_before: 0 }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_row_per_reason_and_address_per_second_and_the_next_row_counts_the_rest() {
        let rows = RefusalRows::default();
        let start = Instant::now();
        let here = Some(IpAddr::from([127, 0, 0, 1]));
        let there = Some(IpAddr::from([127, 0, 0, 2]));
        assert_eq!(rows.admit("expired", here, start), RefusalRow::Write { suppressed_before: 0 });
        for _ in 0..5 {
            assert_eq!(rows.admit("expired", here, start), RefusalRow::Suppress);
        }
        assert_eq!(rows.admit("malformed", here, start), RefusalRow::Write { suppressed_before: 0 }, "another reason");
        assert_eq!(rows.admit("expired", there, start), RefusalRow::Write { suppressed_before: 0 }, "another address");
        let later = start + WINDOW;
        assert_eq!(rows.admit("expired", here, later), RefusalRow::Write { suppressed_before: 5 });
        assert_eq!(rows.admit("expired", here, later + WINDOW), RefusalRow::Write { suppressed_before: 0 });
    }

    #[test]
    fn a_flood_from_many_addresses_stays_bounded() {
        let rows = RefusalRows::default();
        let now = Instant::now();
        let mut written = 0;
        for index in 0..(MAX_KEYS as u32 + 500) {
            let address = Some(IpAddr::from(std::net::Ipv4Addr::from(0x0a00_0000 + index)));
            if matches!(rows.admit("malformed", address, now), RefusalRow::Write { .. }) {
                written += 1;
            }
        }
        assert_eq!(written, MAX_KEYS + 1, "one row per address up to the bound, then one for all the others");
        assert!(rows.windows.lock().map(|windows| windows.len()).unwrap_or_default() <= MAX_KEYS + 1);
    }
}
