//! What sealed request states (2026-07-28 MRTR confirmations) need from the store: one sealing secret shared by
//! every gateway process that opens this database, so a client's retry may reach any of them, and the nonces
//! already used, so a state opens once whichever process it reaches.
//!
//! The console's single sign-on sessions keep their ID token here too, by session id until the session expires, so a
//! logout on any process can hint the provider with it (`id_token_hint`).
//!
//! The secret is created on first use (random, 32 bytes, from the OS generator through `uuid` v4) and never leaves
//! the database (the file is the owner's only: see `permissions`). This module seals nothing and decides nothing:
//! the proxy's `guard::request_state` seals and opens, and says which nonce to use.

use std::time::SystemTime;

use crate::backend::Backend;
use crate::backend::on_backend;
use crate::error::StoreError;
use crate::time::to_micros;

/// The purpose the confirmation states' secret is stored under.
const CONFIRMATION_PURPOSE: &str = "request-state";
/// The purpose the console's session cookies' secret is stored under (another secret, so neither kind of sealed
/// value can pass for the other).
const CONSOLE_SESSION_PURPOSE: &str = "console-session";

/// Sealing secret and used nonces for request states.
#[derive(Debug, Clone)]
pub struct RequestStateStore {
    backend: Backend,
}

impl RequestStateStore {
    pub(crate) fn new(backend: Backend) -> RequestStateStore {
        RequestStateStore { backend }
    }

    /// The secret request states are sealed with, created by whichever process asks first (the others read the
    /// same one: the insert is ignored when a secret is already stored).
    pub async fn sealing_key(&self) -> Result<Vec<u8>, StoreError> {
        self.sealing_key_for(CONFIRMATION_PURPOSE).await
    }

    /// The secret the console seals its session cookies with, shared like [`RequestStateStore::sealing_key`] so a
    /// session opened on one process is accepted by every process on this store.
    pub async fn console_session_key(&self) -> Result<Vec<u8>, StoreError> {
        self.sealing_key_for(CONSOLE_SESSION_PURPOSE).await
    }

    async fn sealing_key_for(&self, purpose: &str) -> Result<Vec<u8>, StoreError> {
        let fresh: Vec<u8> =
            [uuid::Uuid::new_v4(), uuid::Uuid::new_v4()].iter().flat_map(|uuid| uuid.as_bytes().to_vec()).collect();
        let secret: Vec<u8> = on_backend!(&self.backend, |pool| {
            sqlx::query(
                "INSERT INTO sealing_keys (purpose, secret, created_us) VALUES ($1, $2, $3) \
                 ON CONFLICT (purpose) DO NOTHING",
            )
            .bind(purpose)
            .bind(&fresh)
            .bind(to_micros(SystemTime::now()))
            .execute(pool)
            .await?;
            sqlx::query_scalar("SELECT secret FROM sealing_keys WHERE purpose = $1")
                .bind(purpose)
                .fetch_one(pool)
                .await?
        });
        Ok(secret)
    }

    /// Marks `nonce` used; true the first time, false when it was used already (a replay). It is remembered until
    /// `expires` (the state's own expiry, after which the state is refused anyway), and used nonces past their
    /// expiry are forgotten here.
    pub async fn use_nonce(&self, nonce: &str, expires: SystemTime) -> Result<bool, StoreError> {
        let inserted = on_backend!(&self.backend, |pool| {
            sqlx::query("DELETE FROM used_request_states WHERE expires_us <= $1")
                .bind(to_micros(SystemTime::now()))
                .execute(pool)
                .await?;
            sqlx::query(
                "INSERT INTO used_request_states (nonce, expires_us) VALUES ($1, $2) ON CONFLICT (nonce) DO NOTHING",
            )
            .bind(nonce)
            .bind(to_micros(expires))
            .execute(pool)
            .await?
            .rows_affected()
        });
        Ok(inserted == 1)
    }

    /// Keeps the ID token a console single sign-on session was opened with until `expires` (the session's own
    /// expiry), for the logout's `id_token_hint` on whichever process the person logs out on; ID tokens past their
    /// expiry are forgotten here.
    pub async fn remember_id_token(
        &self,
        session: &str,
        id_token: &str,
        expires: SystemTime,
    ) -> Result<(), StoreError> {
        on_backend!(&self.backend, |pool| {
            sqlx::query("DELETE FROM console_id_tokens WHERE expires_us <= $1")
                .bind(to_micros(SystemTime::now()))
                .execute(pool)
                .await?;
            sqlx::query(
                "INSERT INTO console_id_tokens (session, id_token, expires_us) VALUES ($1, $2, $3) \
                 ON CONFLICT (session) DO UPDATE SET id_token = excluded.id_token, expires_us = excluded.expires_us",
            )
            .bind(session)
            .bind(id_token)
            .bind(to_micros(expires))
            .execute(pool)
            .await?;
        });
        Ok(())
    }

    /// The ID token kept for a console session, while the session has not expired.
    pub async fn id_token(&self, session: &str) -> Result<Option<String>, StoreError> {
        let found: Option<String> = on_backend!(&self.backend, |pool| {
            sqlx::query_scalar("SELECT id_token FROM console_id_tokens WHERE session = $1 AND expires_us > $2")
                .bind(session)
                .bind(to_micros(SystemTime::now()))
                .fetch_optional(pool)
                .await?
        });
        Ok(found)
    }

    /// Forgets the ID token of a console session (its logout).
    pub async fn forget_id_token(&self, session: &str) -> Result<(), StoreError> {
        on_backend!(&self.backend, |pool| {
            sqlx::query("DELETE FROM console_id_tokens WHERE session = $1").bind(session).execute(pool).await?;
        });
        Ok(())
    }

    /// Whether `nonce` was marked used and is still remembered (its expiry has not passed). Marks nothing: the
    /// console asks this of every request's session, which [`RequestStateStore::use_nonce`] ended at logout.
    pub async fn is_used(&self, nonce: &str) -> Result<bool, StoreError> {
        let found: Option<i64> = on_backend!(&self.backend, |pool| {
            sqlx::query_scalar("SELECT expires_us FROM used_request_states WHERE nonce = $1 AND expires_us > $2")
                .bind(nonce)
                .bind(to_micros(SystemTime::now()))
                .fetch_optional(pool)
                .await?
        });
        Ok(found.is_some())
    }
}
