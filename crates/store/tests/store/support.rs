//! Helpers shared by the store tests: the backend matrix (each test body runs once on SQLite and once on a real
//! PostgreSQL, through [`matrix!`]), a fresh store on either, another handle on the same store, and a raw connection
//! for tampering.

use std::path::{Path, PathBuf};

use sqlx::postgres::PgPool;
use sqlx::sqlite::{SqliteConnectOptions, SqlitePool};
use toolgate_store::{AuditEntry, AuditKind, PostgresTarget, Store, StoreOptions};
use toolgate_test_support::postgres::PostgresCluster;

/// Which backend a test body runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Sqlite,
    Postgres,
}

/// Runs a test body once per backend: `matrix! { #[tokio::test] async fn name(kind) { ... } }` makes the tests
/// `name::sqlite` and `name::postgres`, so each backend passes or fails on its own.
macro_rules! matrix {
    ($(#[$meta:meta])* async fn $name:ident($kind:ident) $body:block) => {
        mod $name {
            #[allow(unused_imports)]
            use super::*;
            #[allow(unused_imports)]
            use crate::support::Kind;

            async fn body($kind: Kind) $body

            $(#[$meta])*
            async fn sqlite() {
                body(Kind::Sqlite).await
            }

            $(#[$meta])*
            async fn postgres() {
                body(Kind::Postgres).await
            }
        }
    };
}
pub(crate) use matrix;

/// Where a test's store lives: a temporary state directory, and the database in it or a fresh PostgreSQL database.
pub(crate) struct Fresh {
    pub(crate) directory: tempfile::TempDir,
    pub(crate) postgres: Option<PostgresTarget>,
}

impl Fresh {
    pub(crate) fn new(kind: Kind) -> Fresh {
        let directory = tempfile::tempdir().expect("tempdir");
        let postgres = match kind {
            Kind::Sqlite => None,
            Kind::Postgres => Some(PostgresTarget::new(PostgresCluster::shared().fresh_database())),
        };
        Fresh { directory, postgres }
    }

    /// The SQLite database file (also where the state directory's journals are named from).
    pub(crate) fn database(&self) -> PathBuf {
        self.directory.path().join("toolgate.db")
    }

    /// Opens a handle on this store (the first, or another one beside it).
    pub(crate) async fn open(&self, options: StoreOptions) -> Store {
        self.try_open(options).await.expect("open store")
    }

    pub(crate) async fn try_open(&self, options: StoreOptions) -> Result<Store, toolgate_store::StoreError> {
        match &self.postgres {
            None => Store::open_file(&self.database(), options).await,
            Some(target) => Store::open_postgres(target, self.directory.path(), options).await,
        }
    }

    /// The prefix of this store's journals in the state directory (`<prefix>.journal-<pid>`).
    pub(crate) fn journal_base(&self) -> PathBuf {
        match &self.postgres {
            None => self.database(),
            Some(_) => self.directory.path().join(toolgate_store::POSTGRES_JOURNAL_BASE),
        }
    }

    /// A second, raw connection to the same database: what someone editing it by hand would use.
    pub(crate) async fn raw(&self) -> Raw {
        match &self.postgres {
            None => Raw::Sqlite(raw_connection(&self.database()).await),
            Some(target) => Raw::Postgres(PgPool::connect(&target.url).await.expect("raw connection")),
        }
    }
}

/// A fresh store on `kind`, with its place (kept alive by the returned guard).
pub(crate) async fn fresh_store(kind: Kind, options: StoreOptions) -> (Fresh, Store) {
    let fresh = Fresh::new(kind);
    let store = fresh.open(options).await;
    (fresh, store)
}

/// A raw connection of either backend.
pub(crate) enum Raw {
    Sqlite(SqlitePool),
    Postgres(PgPool),
}

impl Raw {
    /// The one integer a statement selects.
    pub(crate) async fn count(&self, statement: &'static str) -> i64 {
        match self {
            Raw::Sqlite(pool) => sqlx::query_scalar(statement).fetch_one(pool).await.expect(statement),
            Raw::Postgres(pool) => sqlx::query_scalar(statement).fetch_one(pool).await.expect(statement),
        }
    }
}

/// A raw connection to a SQLite file.
pub(crate) async fn raw_connection(path: &Path) -> SqlitePool {
    SqlitePool::connect_with(SqliteConnectOptions::new().filename(path)).await.expect("raw connection")
}

/// Runs a statement on a raw connection.
pub(crate) async fn tamper(raw: &Raw, statement: &'static str) {
    match raw {
        Raw::Sqlite(pool) => {
            sqlx::query(statement).execute(pool).await.expect(statement);
        }
        Raw::Postgres(pool) => {
            sqlx::query(statement).execute(pool).await.expect(statement);
        }
    }
}

/// A call entry for tool `tool` with some arguments.
pub(crate) fn call_entry(tool: &str, n: u64) -> AuditEntry {
    AuditEntry {
        session: Some("session-1".into()),
        upstream: Some("files".into()),
        tool: Some(tool.into()),
        args: Some(serde_json::json!({"path": format!("/tmp/{n}"), "n": n})),
        ..AuditEntry::new(AuditKind::Call)
    }
}
