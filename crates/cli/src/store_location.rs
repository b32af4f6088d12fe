//! Where a command's state store is: the state directory, and the `[store]` section of `--config FILE` when one is
//! given (SQLite in the state directory by default, or a shared PostgreSQL database), so `serve` and the state
//! commands (`approvals`, `pins`, `audit`) reach the same store from the same file.
//!
//! Opening only: this module neither reads nor writes rows, and it never prints a URL's password (messages name the
//! database with `PostgresTarget::redacted`).

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use toolgate_config::StoreSpec;
use toolgate_store::{DATABASE_FILE, PostgresTarget, Store, StoreOptions};

/// A resolved store location.
#[derive(Debug, Clone)]
pub(crate) struct StoreLocation {
    /// The state directory (the SQLite database, the instance id, journals, run files).
    pub(crate) state: PathBuf,
    /// `[store]` of the config file (the default without one).
    pub(crate) spec: StoreSpec,
}

impl StoreLocation {
    /// The store of `--state-dir` (or the default state directory) and of `--config FILE`'s `[store]`.
    pub(crate) fn resolve(state_dir: Option<&Path>, config: Option<&Path>) -> Result<StoreLocation> {
        let state = crate::state::state_dir(state_dir)?;
        let spec = match config {
            Some(path) => toolgate_config::load_store_config(path).map_err(|error| anyhow::anyhow!("{error}"))?,
            None => StoreSpec::default(),
        };
        Ok(StoreLocation { state, spec })
    }

    /// The PostgreSQL database, when `[store]` names one.
    pub(crate) fn postgres(&self) -> Option<PostgresTarget> {
        self.spec.postgres.as_ref().map(|postgres| PostgresTarget {
            url: postgres.url.clone(),
            max_connections: postgres.max_connections,
            acquire_timeout: postgres.acquire_timeout,
        })
    }

    /// The SQLite database file of the state directory.
    pub(crate) fn database(&self) -> PathBuf {
        self.state.join(DATABASE_FILE)
    }

    /// What messages call this store.
    pub(crate) fn describe(&self) -> String {
        match self.postgres() {
            Some(target) => target.redacted(),
            None => self.database().display().to_string(),
        }
    }

    /// Opens the store for writing with `options` (the configured instance id added), creating it as needed.
    pub(crate) async fn open(&self, options: StoreOptions) -> Result<Store> {
        let options = StoreOptions { instance_id: self.spec.instance_id.clone().or(options.instance_id), ..options };
        let opened = match self.postgres() {
            Some(target) => Store::open_postgres(&target, &self.state, options).await,
            None => Store::open_file(&self.database(), options).await,
        };
        opened.with_context(|| format!("cannot open the state store {}", self.describe()))
    }

    /// Opens a store a gateway has created already (a SQLite file that does not exist is an error, never created by
    /// a command that only reads or decides).
    pub(crate) async fn open_existing(&self) -> Result<Store> {
        self.require_database()?;
        self.open(StoreOptions::default()).await
    }

    /// Opens the store only to read it.
    pub(crate) async fn open_read_only(&self) -> Result<Store> {
        let opened = match self.postgres() {
            Some(target) => Store::open_postgres_read_only(&target, &self.state).await,
            None => {
                self.require_database()?;
                Store::open_read_only(&self.database()).await
            }
        };
        opened.with_context(|| format!("cannot open {}", self.describe()))
    }

    /// Fails when the store is SQLite and no gateway has created its database yet.
    pub(crate) fn require_database(&self) -> Result<()> {
        if self.postgres().is_none() && !self.database().is_file() {
            bail!(
                "no toolgate database at {} (run `toolgate serve` with this state directory first, or pass --state-dir \
                 or --config)",
                self.database().display()
            );
        }
        Ok(())
    }
}
