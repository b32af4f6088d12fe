//! The claim a gateway process holds on its instance id in a shared PostgreSQL database, so that two processes on
//! two machines told the same `[store] instance_id` (or started from a copied state directory) cannot both run as
//! one instance: each would take the other's waiting approvals for its own previous run's and lapse them, and the
//! audit could not tell their rows apart. The state directory's file lock ([`crate::instance`]) only sees one
//! machine.
//!
//! The claim is a session-level advisory lock keyed by a digest of the id, held on a connection of its own (outside
//! the pool) for the life of the store: PostgreSQL releases it when the process's connection ends, however the
//! process ended, and the connection's TCP keepalives are shortened so a machine that vanished releases it within
//! about a minute. At start the claim is asked for again for a few seconds (a supervisor restarting a killed
//! process can be faster than the server noticing the old connection closed), then refused with the id named. At
//! every heartbeat the claim's connection is checked and, after a database restart, taken again; a claim another
//! process took meanwhile is reported loudly at each beat. This module decides nothing about calls.

use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgConnection};
use sqlx::{ConnectOptions as _, Connection as _};
use tokio::sync::Mutex;
use toolgate_core::fingerprint::digest_parts;

use crate::error::StoreError;

/// How long a start asks for a claim held by another connection before it is refused.
const START_PATIENCE: Duration = Duration::from_secs(10);
/// Between two asks at start.
const START_RETRY: Duration = Duration::from_millis(250);

/// A gateway's claim on its instance id in a PostgreSQL database; released when dropped.
pub(crate) struct InstanceClaim {
    id: String,
    key: i64,
    options: PgConnectOptions,
    /// The connection holding the lock; `None` after it broke and could not be made again yet.
    connection: Mutex<Option<PgConnection>>,
}

impl std::fmt::Debug for InstanceClaim {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.debug_struct("InstanceClaim").field("id", &self.id).finish_non_exhaustive()
    }
}

/// The advisory lock key of instance `id`: 64 bits of a labelled digest, apart from the store's other keys.
fn key_of(id: &str) -> i64 {
    // `sha256:` then 64 hex digits: the first 16 digits are 64 bits of the digest.
    let digest = digest_parts(&[b"toolgate instance claim\0", id.as_bytes()]);
    let hex = digest.strip_prefix("sha256:").and_then(|hex| hex.get(..16)).unwrap_or_default();
    u64::from_str_radix(hex, 16).map_or(0, |bits| i64::from_ne_bytes(bits.to_ne_bytes()))
}

/// A connection for the claim, with keepalives short enough that the server lets go of a vanished machine's lock.
async fn connect(options: &PgConnectOptions) -> Result<PgConnection, sqlx::Error> {
    let mut connection = options.clone().application_name("toolgate-instance-claim").connect().await?;
    sqlx::query(
        "SELECT set_config('tcp_keepalives_idle', '15', false), set_config('tcp_keepalives_interval', '5', false), \
         set_config('tcp_keepalives_count', '6', false)",
    )
    .execute(&mut connection)
    .await?;
    Ok(connection)
}

/// Whether this connection got the lock of `key`.
async fn try_lock(connection: &mut PgConnection, key: i64) -> Result<bool, sqlx::Error> {
    sqlx::query_scalar("SELECT pg_try_advisory_lock($1)").bind(key).fetch_one(connection).await
}

impl InstanceClaim {
    /// Claims `id`, asking again for [`START_PATIENCE`] while another connection holds it; then refuses.
    pub(crate) async fn take(options: &PgConnectOptions, id: &str) -> Result<InstanceClaim, StoreError> {
        let key = key_of(id);
        let mut connection = connect(options).await?;
        let started = tokio::time::Instant::now();
        while !try_lock(&mut connection, key).await? {
            if started.elapsed() >= START_PATIENCE {
                return Err(StoreError::InstanceClaimed { id: id.to_owned() });
            }
            tokio::time::sleep(START_RETRY).await;
        }
        Ok(InstanceClaim { id: id.to_owned(), key, options: options.clone(), connection: Mutex::new(Some(connection)) })
    }

    /// Checks that the claim's connection still holds it, and takes it again on a new connection when the old one
    /// broke (a database restart ends every session and every session lock). Err when it cannot be held now.
    pub(crate) async fn keep(&self) -> Result<(), StoreError> {
        let mut slot = self.connection.lock().await;
        if let Some(connection) = slot.as_mut()
            && connection.ping().await.is_ok()
        {
            return Ok(());
        }
        *slot = None;
        let mut connection = connect(&self.options).await?;
        if !try_lock(&mut connection, self.key).await? {
            return Err(StoreError::InstanceClaimed { id: self.id.clone() });
        }
        *slot = Some(connection);
        tracing::info!(instance = %self.id, "the instance id's claim was taken again after its connection broke");
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::key_of;

    #[test]
    fn keys_differ_by_id_and_are_stable() {
        assert_eq!(key_of("eu-1"), key_of("eu-1"));
        assert_ne!(key_of("eu-1"), key_of("eu-2"));
    }
}
