//! File descriptors for `toolgate serve`: raises the soft open-files limit to the hard limit at start, and sizes the
//! HTTP listener's connection and session limits from what is then available, so the configured limits are ones
//! the process can actually reach (connections past them get a clear 503 rather than hanging on `EMFILE`).
//!
//! It only reads and sets `RLIMIT_NOFILE` (through `nix`, no `unsafe` here) and adjusts `Limits`; it opens nothing.

use toolgate_spec::Limits;

/// Descriptors kept for everything but client connections: stdio, the runtime, the SQLite pools (each connection
/// holds the database and its WAL, and they share the memory file), the journal and its lock, the listener and the
/// console's and metrics' sockets, the reserve the listener frees when descriptors run out, and run files. Measured:
/// `toolgate serve` on its defaults holds 31 once started with three of its six pooled SQLite connections open, so
/// 37 with all six, and transient ones (a temporary file, a spawn's pipes) come on top; 32 let a burst of
/// connections under load meet `EMFILE` before the sized connection limit.
const RESERVED_BASE: u64 = 44;
/// Descriptors kept per upstream (a stdio child's three pipes, an HTTP upstream's pooled sockets).
const RESERVED_PER_UPSTREAM: u64 = 8;
/// The soft limit is never raised past this (a hard limit of "unlimited" would otherwise ask for billions).
const RAISE_CEILING: u64 = 1 << 20;

/// The open-files limit before and after [`raise_soft_limit`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct DescriptorLimit {
    /// The soft limit found at start.
    pub(crate) before: u64,
    /// The soft limit now in force.
    pub(crate) now: u64,
}

/// Raises the soft `RLIMIT_NOFILE` to the hard limit (at most [`RAISE_CEILING`]); `None` where the limit cannot be
/// read. A refusal to raise leaves the soft limit as it was, which is then what the limits are sized from.
pub(crate) fn raise_soft_limit() -> Option<DescriptorLimit> {
    #[cfg(unix)]
    {
        use nix::sys::resource::{Resource, getrlimit, setrlimit};
        // `rlim_t` is a u64 on Linux and macOS.
        let (soft, hard): (u64, u64) = getrlimit(Resource::RLIMIT_NOFILE).ok()?;
        let target = hard.min(RAISE_CEILING).max(soft);
        if target > soft
            && let Err(error) = setrlimit(Resource::RLIMIT_NOFILE, target, hard)
        {
            tracing::warn!(%error, soft, hard, "could not raise the open-files limit");
            return Some(DescriptorLimit { before: soft, now: soft });
        }
        Some(DescriptorLimit { before: soft, now: target })
    }
    #[cfg(not(unix))]
    {
        None
    }
}

/// Lowers `limits` to what `descriptors` allows with `upstreams` upstreams: connections to the descriptors left
/// after the reserve, sessions (each may hold a GET stream open) to the connections, and, with `callers_configured`,
/// one caller's sessions to a quarter of the sessions left (as `[limits]` defaults it), so that under a low
/// open-files limit one caller still cannot fill the table. Returns whether anything was lowered.
pub(crate) fn fit_limits(limits: &mut Limits, descriptors: u64, upstreams: usize, callers_configured: bool) -> bool {
    let reserved = RESERVED_BASE + RESERVED_PER_UPSTREAM * upstreams as u64;
    let available = usize::try_from(descriptors.saturating_sub(reserved).max(1)).unwrap_or(usize::MAX);
    let before = (limits.max_connections, limits.max_sessions, limits.max_sessions_per_caller);
    limits.max_connections = limits.max_connections.min(available);
    limits.max_sessions = limits.max_sessions.min(limits.max_connections);
    let per_caller_ceiling = if callers_configured { (limits.max_sessions / 4).max(1) } else { limits.max_sessions };
    if limits.max_sessions < before.1 {
        limits.max_sessions_per_caller = limits.max_sessions_per_caller.min(per_caller_ceiling);
    }
    limits.max_sessions_per_caller = limits.max_sessions_per_caller.min(limits.max_sessions);
    before != (limits.max_connections, limits.max_sessions, limits.max_sessions_per_caller)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_are_lowered_to_the_descriptors_left_after_the_reserve() {
        let mut limits = Limits::default();
        assert!(fit_limits(&mut limits, 64, 1, false));
        assert_eq!((limits.max_connections, limits.max_sessions, limits.max_sessions_per_caller), (12, 12, 12));
        let mut shared = Limits::default();
        assert!(fit_limits(&mut shared, 64, 1, true));
        assert_eq!((shared.max_sessions, shared.max_sessions_per_caller), (12, 3), "a quarter with callers");
        let mut roomy = Limits::default();
        assert!(!fit_limits(&mut roomy, 1 << 20, 3, true));
        assert_eq!(roomy, Limits::default());
        let mut starved = Limits::default();
        fit_limits(&mut starved, 10, 4, true);
        assert_eq!(starved.max_connections, 1, "never zero");
    }
}
