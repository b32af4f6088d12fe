//! Failed console logins, limited per client address: after [`MAX_FAILURES`] refused logins from one address
//! within [`WINDOW`] of its first, every login from that address is refused (429) until the window ends, a correct
//! token included, so guessing in parallel or on several connections gains nothing.
//!
//! An attempt is charged when it is admitted, before any token is compared, and refunded when it logs in: parallel
//! guesses cannot all slip in before the first failure is counted, and successful logins never count. The table is
//! bounded: at most [`MAX_TRACKED`] addresses; when it is full, expired entries are dropped, and addresses that
//! still find no room share one budget ([`Client::Overflow`]), so a flood from many addresses neither grows the
//! table nor gets a budget per address. This module sees addresses only, never a token; it does no IO besides one
//! warning per lockout, and takes the time from its caller (tests pass their own instants).

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Refused logins from one address that start a lockout.
pub(crate) const MAX_FAILURES: u32 = 5;
/// How long failures are counted from an address's first one, and so how long a lockout lasts at most.
pub(crate) const WINDOW: Duration = Duration::from_secs(60);
/// Most addresses tracked at once.
pub(crate) const MAX_TRACKED: usize = 1024;

/// Whose login attempts are counted together.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Client {
    /// An IPv4 address (an IPv4-mapped IPv6 address counts as its IPv4 address).
    V4(Ipv4Addr),
    /// The first 64 bits of an IPv6 address: one host commonly holds a whole /64, and counting single addresses
    /// would give it 2^64 fresh budgets.
    V6Prefix(u64),
    /// Connections whose peer address the server did not record (a router served without connect info): counted
    /// together, so the limit still holds.
    Unrecorded,
    /// Addresses that arrived while the table was full of live entries: counted together.
    Overflow,
}

impl Client {
    /// The key for a connection's peer address (`None` when the server did not record it).
    pub(crate) fn of(peer: Option<IpAddr>) -> Client {
        match peer {
            None => Client::Unrecorded,
            Some(IpAddr::V4(address)) => Client::V4(address),
            Some(IpAddr::V6(address)) => match address.to_ipv4_mapped() {
                Some(address) => Client::V4(address),
                None => Client::V6Prefix((address.to_bits() >> 64) as u64),
            },
        }
    }

    /// One address among many sharing a key? Such keys never take a place of their own in the table's cap.
    fn is_shared(self) -> bool {
        matches!(self, Client::Unrecorded | Client::Overflow)
    }
}

impl std::fmt::Display for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Client::V4(address) => write!(f, "{address}"),
            Client::V6Prefix(prefix) => {
                let address = std::net::Ipv6Addr::from_bits(u128::from(*prefix) << 64);
                write!(f, "{address}/64")
            }
            Client::Unrecorded => f.write_str("unrecorded (the server keeps no peer addresses)"),
            Client::Overflow => f.write_str("overflow (more addresses than the table holds)"),
        }
    }
}

/// The limits; [`Limits::CONSOLE`] in the console, smaller in tests.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    pub(crate) max_failures: u32,
    pub(crate) window: Duration,
    pub(crate) max_tracked: usize,
}

impl Limits {
    pub(crate) const CONSOLE: Limits = Limits { max_failures: MAX_FAILURES, window: WINDOW, max_tracked: MAX_TRACKED };
}

/// One client's window.
#[derive(Debug)]
struct Entry {
    /// When the window began (the client's first counted attempt).
    started: Instant,
    /// Attempts admitted in this window and not refunded: failures, and attempts still being checked.
    charged: u32,
    /// Attempts known to have failed in this window.
    failed: u32,
}

/// An admitted login attempt, charged to its client until [`LoginLimiter::refund`] or [`LoginLimiter::failed`].
#[derive(Debug)]
#[must_use = "an attempt is either refunded or counted as failed"]
pub(crate) struct Attempt {
    client: Client,
    started: Instant,
}

/// Too many failed logins from this client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct LockedOut {
    /// Until the window ends.
    pub(crate) retry_after: Duration,
}

impl LockedOut {
    /// Whole seconds for `Retry-After`, rounded up and at least 1, so a client that waits as told is admitted.
    pub(crate) fn retry_after_seconds(&self) -> u64 {
        let seconds = self.retry_after.as_secs() + u64::from(self.retry_after.subsec_nanos() > 0);
        seconds.max(1)
    }
}

/// Failed logins per client.
#[derive(Debug)]
pub(crate) struct LoginLimiter {
    limits: Limits,
    entries: Mutex<HashMap<Client, Entry>>,
}

impl LoginLimiter {
    pub(crate) fn new(limits: Limits) -> LoginLimiter {
        LoginLimiter { limits, entries: Mutex::new(HashMap::new()) }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Client, Entry>> {
        self.entries.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Admits a login attempt from `client` at `now` and charges it, or refuses it while the client is locked out.
    pub(crate) fn admit(&self, client: Client, now: Instant) -> Result<Attempt, LockedOut> {
        let window = self.limits.window;
        let mut entries = self.lock();
        let client = if client.is_shared() || entries.contains_key(&client) {
            client
        } else {
            let tracked = |entries: &HashMap<Client, Entry>| entries.keys().filter(|key| !key.is_shared()).count();
            if tracked(&entries) >= self.limits.max_tracked {
                entries.retain(|_, entry| now < entry.started + window);
            }
            if tracked(&entries) >= self.limits.max_tracked { Client::Overflow } else { client }
        };
        let entry = entries.entry(client).or_insert(Entry { started: now, charged: 0, failed: 0 });
        if now >= entry.started + window {
            *entry = Entry { started: now, charged: 0, failed: 0 };
        }
        if entry.charged >= self.limits.max_failures {
            return Err(LockedOut { retry_after: entry.started + window - now });
        }
        entry.charged += 1;
        Ok(Attempt { client, started: entry.started })
    }

    /// The attempt does not count: it logged in (or toolgate, not the token, failed).
    pub(crate) fn refund(&self, attempt: Attempt) {
        let mut entries = self.lock();
        if let Some(entry) = entries.get_mut(&attempt.client)
            && entry.started == attempt.started
        {
            entry.charged = entry.charged.saturating_sub(1);
            if entry.charged == 0 {
                entries.remove(&attempt.client);
            }
        }
    }

    /// The attempt was refused: it stays charged. The failure that uses up the client's budget is logged, once per
    /// lockout, with the address (never the token).
    pub(crate) fn failed(&self, attempt: Attempt) {
        let mut entries = self.lock();
        let Some(entry) = entries.get_mut(&attempt.client).filter(|entry| entry.started == attempt.started) else {
            return;
        };
        entry.failed += 1;
        if entry.failed == self.limits.max_failures {
            tracing::warn!(
                client = %attempt.client,
                failures = entry.failed,
                window_seconds = self.limits.window.as_secs(),
                "console: too many failed logins; refusing every login from this address until the window ends"
            );
        }
    }

    /// How many clients have an entry (for the bound's tests).
    #[cfg(test)]
    fn tracked(&self) -> usize {
        self.lock().len()
    }
}

#[cfg(test)]
mod tests {
    use std::net::Ipv6Addr;

    use super::*;

    const LIMITS: Limits = Limits { max_failures: 3, window: Duration::from_secs(60), max_tracked: 4 };

    fn v4(last: u8) -> Client {
        Client::V4(Ipv4Addr::new(192, 0, 2, last))
    }

    fn fail(limiter: &LoginLimiter, client: Client, now: Instant) -> Result<(), LockedOut> {
        limiter.admit(client, now).map(|attempt| limiter.failed(attempt))
    }

    #[test]
    fn failures_within_the_window_lock_the_address_out_until_it_ends() {
        let limiter = LoginLimiter::new(LIMITS);
        let start = Instant::now();
        for second in 0..3 {
            assert_eq!(fail(&limiter, v4(1), start + Duration::from_secs(second)), Ok(()));
        }
        // Locked out: even an attempt that would have succeeded is not admitted.
        let at = start + Duration::from_secs(20);
        assert_eq!(limiter.admit(v4(1), at).err(), Some(LockedOut { retry_after: Duration::from_secs(40) }));
        let almost = start + Duration::from_millis(59_500);
        let locked = limiter.admit(v4(1), almost).err();
        assert_eq!(locked.map(|locked| locked.retry_after_seconds()), Some(1), "rounded up, never 0");
        // The window that began with the first failure has passed: a fresh budget.
        let after = start + Duration::from_secs(60);
        for _ in 0..3 {
            assert_eq!(fail(&limiter, v4(1), after), Ok(()));
        }
        assert!(limiter.admit(v4(1), after).is_err());
    }

    #[test]
    fn another_address_is_unaffected() {
        let limiter = LoginLimiter::new(LIMITS);
        let now = Instant::now();
        for _ in 0..3 {
            fail(&limiter, v4(1), now).ok();
        }
        assert!(limiter.admit(v4(1), now).is_err());
        let other = limiter.admit(v4(2), now);
        assert!(other.is_ok());
        if let Ok(attempt) = other {
            limiter.refund(attempt);
        }
        // One IPv6 host is its /64; another /64 is another client; a mapped IPv4 address is that IPv4 address.
        let host = |last: u16| Client::of(Some(IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0, 1, 0, 0, 0, last))));
        for last in 0..3 {
            fail(&limiter, host(last), now).ok();
        }
        assert!(limiter.admit(host(99), now).is_err(), "the same /64");
        let next = Client::of(Some(IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0, 2, 0, 0, 0, 1))));
        assert!(limiter.admit(next, now).is_ok(), "another /64");
        let mapped = Client::of(Some(IpAddr::V6(Ipv4Addr::new(192, 0, 2, 1).to_ipv6_mapped())));
        assert_eq!(mapped, v4(1));
        assert_eq!(host(7).to_string(), "2001:db8:0:1::/64");
    }

    #[test]
    fn successful_logins_do_not_count() {
        let limiter = LoginLimiter::new(LIMITS);
        let now = Instant::now();
        for _ in 0..10 {
            let attempt = limiter.admit(v4(1), now);
            assert!(attempt.is_ok());
            if let Ok(attempt) = attempt {
                limiter.refund(attempt);
            }
        }
        assert_eq!(limiter.tracked(), 0, "a refunded entry is dropped");
        fail(&limiter, v4(1), now).ok();
        fail(&limiter, v4(1), now).ok();
        if let Ok(attempt) = limiter.admit(v4(1), now) {
            limiter.refund(attempt);
        }
        assert_eq!(fail(&limiter, v4(1), now), Ok(()), "two failures and a success leave one try");
        assert!(limiter.admit(v4(1), now).is_err());
    }

    #[test]
    fn parallel_attempts_are_charged_before_they_are_checked() {
        let limiter = LoginLimiter::new(LIMITS);
        let now = Instant::now();
        let in_flight: Vec<_> = (0..3).filter_map(|_| limiter.admit(v4(1), now).ok()).collect();
        assert_eq!(in_flight.len(), 3);
        assert!(limiter.admit(v4(1), now).is_err(), "a fourth guess waits for none of the three to fail");
        for attempt in in_flight {
            limiter.failed(attempt);
        }
        assert!(limiter.admit(v4(1), now).is_err());
    }

    #[test]
    fn the_table_stays_bounded_and_a_flood_shares_one_budget() {
        let limiter = LoginLimiter::new(LIMITS);
        let start = Instant::now();
        for last in 0..=200 {
            fail(&limiter, v4(last), start).ok();
        }
        // Four addresses fit; every later one counted in the overflow entry, which has long been locked out.
        assert_eq!(limiter.tracked(), LIMITS.max_tracked + 1);
        assert!(limiter.admit(v4(250), start).is_err(), "an untracked address shares the exhausted budget");
        assert!(limiter.admit(v4(0), start).is_ok(), "a tracked address keeps its own");
        // Once the entries expire, a new address gets a place of its own again.
        let later = start + Duration::from_secs(61);
        assert!(limiter.admit(v4(250), later).is_ok());
        assert!(limiter.tracked() <= LIMITS.max_tracked + 1);
    }

    #[test]
    fn connections_without_a_recorded_address_share_one_budget() {
        let limiter = LoginLimiter::new(LIMITS);
        let now = Instant::now();
        for _ in 0..3 {
            fail(&limiter, Client::of(None), now).ok();
        }
        assert!(limiter.admit(Client::of(None), now).is_err());
    }
}
