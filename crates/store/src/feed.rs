//! The change feed: what another handle or process changed in the shared state (an approval decided, lapsed or
//! used; an upstream's pins or quarantine), so a waiting call or a quarantined tool learns it at once.
//!
//! Every change this process makes is published locally. On PostgreSQL it is also sent with `pg_notify`, and one
//! listening connection per store publishes what other processes sent. That connection is its own, made with the
//! pool's options but outside the pool (a `LISTEN` holds its connection for good, which would leave a small pool
//! one short for every statement); it is reconnected when it drops, with a backoff from one second up to
//! [`RECONNECT_MAX`] while it cannot connect. Notifications are hints, never the truth: they are lost while the
//! listener is down, so every waiter re-reads the database on a bounded interval as well (`ApprovalStore::wait`).
//! SQLite has no notifications between processes; there the re-read interval is what exists. Nothing here writes
//! state or decides anything.

use std::sync::{Arc, Weak};
use std::time::Duration;

use sqlx::postgres::{PgListener, PgPool, PgPoolOptions};
use tokio::sync::broadcast;

use crate::backend::Backend;

/// The channel approval changes are sent on (payload: the approval id).
const APPROVALS_CHANNEL: &str = "toolgate_approvals";
/// The channel pin and quarantine changes are sent on (payload: the upstream's name).
const PINS_CHANNEL: &str = "toolgate_pins";

/// Changes waiting for a slow subscriber before it starts missing some (it then re-reads the database).
const FEED_CAPACITY: usize = 1024;

/// How long the listener waits before connecting again after it could not, at first; and the bounded wait for a
/// notification after which it checks that the store is still open.
const RECONNECT_DELAY: Duration = Duration::from_secs(1);
/// The longest wait between two connection attempts of the listener.
const RECONNECT_MAX: Duration = Duration::from_secs(16);

/// Something in the shared state changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreChange {
    /// An approval was decided, lapsed or used: re-read it.
    Approval {
        /// The approval's id.
        id: String,
    },
    /// An upstream's pins or pending changes changed: re-check its listing.
    Pins {
        /// The upstream's configured name.
        upstream: String,
    },
}

/// The store's feed, shared by its handles.
#[derive(Debug)]
pub(crate) struct Feed {
    sender: broadcast::Sender<StoreChange>,
}

impl Feed {
    pub(crate) fn new() -> Arc<Feed> {
        Arc::new(Feed { sender: broadcast::channel(FEED_CAPACITY).0 })
    }

    /// A receiver of every change published from now on.
    pub(crate) fn subscribe(&self) -> broadcast::Receiver<StoreChange> {
        self.sender.subscribe()
    }

    /// Publishes a change locally and, on PostgreSQL, to every other process. Best effort: a notification that
    /// cannot be sent is logged, and the others see the change at their next re-read.
    pub(crate) async fn announce(&self, backend: &Backend, change: StoreChange) {
        if let Backend::Postgres(pool) = backend {
            let (channel, payload) = match &change {
                StoreChange::Approval { id } => (APPROVALS_CHANNEL, id.as_str()),
                StoreChange::Pins { upstream } => (PINS_CHANNEL, upstream.as_str()),
            };
            if let Err(error) = sqlx::query("SELECT pg_notify($1, $2)").bind(channel).bind(payload).execute(pool).await
            {
                tracing::warn!(%error, channel, "a store change could not be sent to other processes");
            }
        }
        // No receiver is not an error: nobody waits.
        let _ = self.sender.send(change);
    }

    /// Starts the listener of a PostgreSQL store; it stops once every handle of the store is gone or its pool closed.
    pub(crate) fn listen(feed: &Arc<Feed>, pool: PgPool) {
        let feed = Arc::downgrade(feed);
        tokio::spawn(listen_loop(feed, pool));
    }
}

async fn listen_loop(feed: Weak<Feed>, pool: PgPool) {
    // A pool of one, for this listener only: sqlx's listener reconnects through it when its connection drops.
    let own = PgPoolOptions::new()
        .max_connections(1)
        .max_lifetime(None)
        .idle_timeout(None)
        .connect_lazy_with((*pool.connect_options()).clone());
    let mut delay = RECONNECT_DELAY;
    while !pool.is_closed() && feed.strong_count() > 0 {
        let mut listener = match PgListener::connect_with(&own).await {
            Ok(listener) => listener,
            Err(error) => {
                tracing::debug!(%error, "the store's change listener cannot connect; retrying");
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(RECONNECT_MAX);
                continue;
            }
        };
        if let Err(error) = listener.listen_all([APPROVALS_CHANNEL, PINS_CHANNEL]).await {
            tracing::debug!(%error, "the store's change listener cannot listen; retrying");
            tokio::time::sleep(delay).await;
            delay = (delay * 2).min(RECONNECT_MAX);
            continue;
        }
        delay = RECONNECT_DELAY;
        loop {
            // A bounded wait, so a store that was dropped or closed is noticed without a notification.
            let received = tokio::time::timeout(RECONNECT_DELAY, listener.try_recv()).await;
            let Some(feed) = feed.upgrade() else { break };
            if pool.is_closed() {
                break;
            }
            match received {
                Err(_elapsed) => continue,
                Ok(Ok(Some(notification))) => {
                    let payload = notification.payload().to_owned();
                    let change = match notification.channel() {
                        APPROVALS_CHANNEL => StoreChange::Approval { id: payload },
                        PINS_CHANNEL => StoreChange::Pins { upstream: payload },
                        _ => continue,
                    };
                    let _ = feed.sender.send(change);
                }
                // The connection was lost (notifications meanwhile are gone: waiters re-read), or failed.
                Ok(Ok(None)) => continue,
                Ok(Err(error)) => {
                    tracing::debug!(%error, "the store's change listener failed; reconnecting");
                    break;
                }
            }
        }
        drop(listener);
        if pool.is_closed() || feed.strong_count() == 0 {
            break;
        }
        tokio::time::sleep(RECONNECT_DELAY).await;
    }
    own.close().await;
}
