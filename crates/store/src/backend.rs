//! The database behind a [`crate::Store`]: an embedded SQLite file or a shared PostgreSQL, and the few tools that let
//! one statement serve both.
//!
//! Every statement is written once, with `$1`-style parameters (both drivers bind them by number) and SQL both
//! dialects accept; [`on_backend!`] expands the statement's code once per variant, so each is type-checked against
//! its driver, and hands it a [`Dialect`] for the few places where the two must differ (GLOB, JSON paths, sizes,
//! `BEGIN IMMEDIATE`). Rows are read through [`Columns`], implemented for both drivers' rows. This module decides
//! nothing about what is stored; it holds no SQL of its own beyond the dialect fragments.

use sqlx::postgres::{PgPool, PgRow};
use sqlx::sqlite::{SqlitePool, SqliteRow};
use sqlx::{Decode, Postgres, Row as _, Sqlite, Type};

/// The database behind the store.
#[derive(Debug, Clone)]
pub(crate) enum Backend {
    /// An embedded SQLite file in WAL mode: one host, the default.
    Sqlite(SqlitePool),
    /// A PostgreSQL database shared by several gateway processes.
    Postgres(PgPool),
}

impl Backend {
    /// Which dialect this backend speaks.
    pub(crate) fn dialect(&self) -> Dialect {
        match self {
            Backend::Sqlite(_) => Dialect::Sqlite,
            Backend::Postgres(_) => Dialect::Postgres,
        }
    }

    /// Whether the pool was closed ([`Backend::close`]).
    pub(crate) fn is_closed(&self) -> bool {
        match self {
            Backend::Sqlite(pool) => pool.is_closed(),
            Backend::Postgres(pool) => pool.is_closed(),
        }
    }

    /// Closes every connection (clones of the store stop working).
    pub(crate) async fn close(&self) {
        match self {
            Backend::Sqlite(pool) => pool.close().await,
            Backend::Postgres(pool) => pool.close().await,
        }
    }
}

/// The SQL dialect of a backend, for the statements that cannot be the same text on both.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Dialect {
    /// SQLite.
    Sqlite,
    /// PostgreSQL.
    Postgres,
}

impl Dialect {
    /// `sqlite` on SQLite, `postgres` on PostgreSQL.
    pub(crate) const fn pick(self, sqlite: &'static str, postgres: &'static str) -> &'static str {
        match self {
            Dialect::Sqlite => sqlite,
            Dialect::Postgres => postgres,
        }
    }

    /// How a transaction that will write begins. SQLite takes its write lock at once (`BEGIN IMMEDIATE`), so a
    /// transaction never fails half-way on a lock another connection took after it read; PostgreSQL locks rows as
    /// they are written, and the audit chain takes its own lock ([`crate::audit::append`]).
    pub(crate) const fn begin_write(self) -> &'static str {
        self.pick("BEGIN IMMEDIATE", "BEGIN")
    }
}

/// Runs `$body` with `$pool` bound to the backend's pool and `$dialect` to its [`Dialect`]; the body is compiled once
/// per backend, so a statement that one driver cannot bind or decode fails to build rather than at run time.
macro_rules! on_backend {
    ($backend:expr, |$pool:ident, $dialect:ident| $body:expr) => {
        match $backend {
            $crate::backend::Backend::Sqlite($pool) => {
                #[allow(unused_variables)]
                let $dialect = $crate::backend::Dialect::Sqlite;
                $body
            }
            $crate::backend::Backend::Postgres($pool) => {
                #[allow(unused_variables)]
                let $dialect = $crate::backend::Dialect::Postgres;
                $body
            }
        }
    };
    ($backend:expr, |$pool:ident| $body:expr) => {
        match $backend {
            $crate::backend::Backend::Sqlite($pool) => $body,
            $crate::backend::Backend::Postgres($pool) => $body,
        }
    };
}
pub(crate) use on_backend;

/// A value both drivers can decode.
pub(crate) trait Column:
    for<'r> Decode<'r, Sqlite> + Type<Sqlite> + for<'r> Decode<'r, Postgres> + Type<Postgres>
{
}

impl<T> Column for T where T: for<'r> Decode<'r, Sqlite> + Type<Sqlite> + for<'r> Decode<'r, Postgres> + Type<Postgres> {}

/// A result row of either driver, read by column name.
pub(crate) trait Columns {
    /// The column `name`, decoded as `T`.
    fn column<T: Column>(&self, name: &str) -> Result<T, sqlx::Error>;
}

impl Columns for SqliteRow {
    fn column<T: Column>(&self, name: &str) -> Result<T, sqlx::Error> {
        self.try_get(name)
    }
}

impl Columns for PgRow {
    fn column<T: Column>(&self, name: &str) -> Result<T, sqlx::Error> {
        self.try_get(name)
    }
}

/// A shell-style glob (`*`, `?`, `[...]`, case-sensitive, as SQLite's GLOB) as an anchored POSIX regular expression
/// for PostgreSQL's `~`; every other character is matched literally.
pub(crate) fn glob_to_regex(glob: &str) -> String {
    let mut regex = String::with_capacity(glob.len() + 8);
    regex.push('^');
    let mut chars = glob.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '*' => regex.push_str(".*"),
            '?' => regex.push('.'),
            '[' => {
                // A class runs to the next `]` (a `]` right after `[` or `[^` is a member); without one, `[` is literal.
                let rest: String = chars.clone().collect();
                let negated = rest.starts_with('^');
                let body_start = usize::from(negated);
                let search_from = body_start + usize::from(rest[body_start..].starts_with(']'));
                match rest.get(search_from..).and_then(|tail| tail.find(']')) {
                    Some(end) => {
                        let end = search_from + end;
                        regex.push('[');
                        if negated {
                            regex.push('^');
                        }
                        for member in rest[body_start..end].chars() {
                            if member == '\\' || member == '[' {
                                regex.push('\\');
                            }
                            regex.push(member);
                        }
                        regex.push(']');
                        for _ in 0..rest[..=end].chars().count() {
                            chars.next();
                        }
                    }
                    None => regex.push_str("\\["),
                }
            }
            c if c.is_ascii_alphanumeric() || c == '_' || !c.is_ascii() => regex.push(c),
            c => {
                regex.push('\\');
                regex.push(c);
            }
        }
    }
    regex.push('$');
    regex
}

#[cfg(test)]
mod tests {
    use super::glob_to_regex;

    #[test]
    fn globs_become_anchored_regexes_with_everything_else_literal() {
        for (glob, regex) in [
            ("git_*", "^git_.*$"),
            ("read_?", "^read_.$"),
            ("[ab]*", "^[ab].*$"),
            ("[^x]y", "^[^x]y$"),
            ("a.b(c)", "^a\\.b\\(c\\)$"),
            ("[unclosed", "^\\[unclosed$"),
            ("[]]x", "^[]]x$"),
        ] {
            assert_eq!(glob_to_regex(glob), regex, "{glob}");
        }
    }
}
