//! `[store]`: where the gateway's state lives. Absent, it is SQLite in the state directory, with no set-up; with
//! `url` or `url_env`, a PostgreSQL database that several gateway processes share, with its pool settings and this
//! process's instance id.
//!
//! A password never sits in the file: a `url` that holds one is refused with its position, and the password comes
//! from the environment (`PGPASSWORD`, `~/.pgpass`, or the whole URL in the variable `url_env` names, read at load).
//! The lowered [`StoreSpec`] stays out of the runtime's `GatewaySpec` (the relay never opens the store itself); its
//! `Debug` never prints the URL's password. This module connects to nothing.

use std::time::Duration;

use serde::Deserialize;
use toml::Spanned;

use crate::context::Context;

/// `[store]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawStore {
    pub(crate) url: Option<Spanned<String>>,
    pub(crate) url_env: Option<Spanned<String>>,
    pub(crate) max_connections: Option<Spanned<u64>>,
    pub(crate) acquire_timeout_ms: Option<Spanned<u64>>,
    pub(crate) instance_id: Option<Spanned<String>>,
}

/// Default pool size.
pub const DEFAULT_MAX_CONNECTIONS: u32 = 10;
/// Default wait for a pooled connection.
pub const DEFAULT_ACQUIRE_TIMEOUT: Duration = Duration::from_secs(5);

const MAX_CONNECTIONS: std::ops::RangeInclusive<u64> = 1..=1000;
const ACQUIRE_TIMEOUT_MS: std::ops::RangeInclusive<u64> = 100..=600_000;

/// Where the state lives.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct StoreSpec {
    /// The shared PostgreSQL database; `None` is SQLite in the state directory.
    pub postgres: Option<PostgresSpec>,
    /// This process's instance id (`None`: generated once and kept in the state directory).
    pub instance_id: Option<String>,
}

/// A PostgreSQL store.
#[derive(Clone, PartialEq, Eq)]
pub struct PostgresSpec {
    /// The connection URL, password included when it came from the environment.
    pub url: String,
    /// The variable the URL came from, when `url_env` gave it.
    pub url_env: Option<String>,
    /// Most pooled connections.
    pub max_connections: u32,
    /// How long a statement waits for a pooled connection before it fails.
    pub acquire_timeout: Duration,
}

impl std::fmt::Debug for StoreSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoreSpec").field("postgres", &self.postgres).field("instance_id", &self.instance_id).finish()
    }
}

// Hand-written so a debug print never shows a password.
impl std::fmt::Debug for PostgresSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresSpec")
            .field("url", &without_password(&self.url))
            .field("url_env", &self.url_env)
            .field("max_connections", &self.max_connections)
            .field("acquire_timeout", &self.acquire_timeout)
            .finish()
    }
}

/// Lowers `[store]`.
pub(crate) fn lower_store(raw: Option<Spanned<RawStore>>, cx: &mut Context<'_>) -> StoreSpec {
    let Some(raw) = raw else { return StoreSpec::default() };
    let raw = raw.into_inner();
    let url = match (&raw.url, &raw.url_env) {
        (Some(_), Some(variable)) => {
            cx.error(variable.span().start, "[store]: set either `url` or `url_env`, not both");
            None
        }
        (Some(url), None) => {
            let text = url.get_ref();
            if !is_postgres_url(text) {
                cx.error(url.span().start, "[store]: `url` must be a postgres:// URL (SQLite needs no `[store]` url)");
                None
            } else if has_password(text) {
                cx.error(
                    url.span().start,
                    "[store]: `url` holds a password: a password never sits in the config file; remove it and give it \
                     in PGPASSWORD or ~/.pgpass, or put the whole URL in an environment variable named by `url_env`",
                );
                None
            } else {
                Some((text.clone(), None))
            }
        }
        (None, Some(variable)) => {
            let name = variable.get_ref();
            match (cx.env)(name).filter(|value| !value.is_empty()) {
                None => {
                    cx.error(variable.span().start, format!("[store]: `url_env`: the variable {name} is not set"));
                    None
                }
                Some(value) if !is_postgres_url(&value) => {
                    // The value may hold a password: it is not quoted.
                    cx.error(
                        variable.span().start,
                        format!("[store]: `url_env`: {name} does not hold a postgres:// URL"),
                    );
                    None
                }
                Some(value) => Some((value, Some(name.clone()))),
            }
        }
        (None, None) => None,
    };
    let max_connections = cx.in_range(raw.max_connections.as_ref(), MAX_CONNECTIONS, "[store]: `max_connections`");
    let acquire_timeout_ms =
        cx.in_range(raw.acquire_timeout_ms.as_ref(), ACQUIRE_TIMEOUT_MS, "[store]: `acquire_timeout_ms`");
    if raw.url.is_none() && raw.url_env.is_none() {
        for (key, value) in [("max_connections", &raw.max_connections), ("acquire_timeout_ms", &raw.acquire_timeout_ms)]
        {
            if let Some(value) = value {
                cx.warn(
                    value.span().start,
                    format!("[store]: `{key}` applies to PostgreSQL only (no `url` or `url_env`)"),
                );
            }
        }
    }
    let instance_id = raw.instance_id.and_then(|id| {
        if valid_instance_id(id.get_ref()) {
            Some(id.into_inner())
        } else {
            cx.error(id.span().start, "[store]: `instance_id` must be 1 to 64 letters, digits, '-', '_' or '.'");
            None
        }
    });
    StoreSpec {
        postgres: url.map(|(url, url_env)| PostgresSpec {
            url,
            url_env,
            max_connections: max_connections.map_or(DEFAULT_MAX_CONNECTIONS, |count| count as u32),
            acquire_timeout: acquire_timeout_ms.map_or(DEFAULT_ACQUIRE_TIMEOUT, Duration::from_millis),
        }),
        instance_id,
    }
}

/// The rule the store applies to instance ids (kept here too: the config crate does not depend on the store).
fn valid_instance_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 64
        && id.bytes().all(|byte| byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'_' | b'.'))
}

fn is_postgres_url(url: &str) -> bool {
    url.starts_with("postgres://") || url.starts_with("postgresql://")
}

/// The user-information part of a URL's authority (`user:password` in `postgres://user:password@host/db`).
fn user_info(url: &str) -> Option<&str> {
    let rest = url.split_once("://")?.1;
    let authority = rest.split(['/', '?', '#']).next().unwrap_or(rest);
    authority.rsplit_once('@').map(|(user_info, _)| user_info)
}

/// Whether the URL carries a password (`user:password@`, even an empty one), or a `password=` query parameter.
fn has_password(url: &str) -> bool {
    let in_user_info = user_info(url).is_some_and(|user_info| user_info.contains(':'));
    let query = url.split_once('?').map_or("", |(_, query)| query);
    in_user_info || query.split('&').any(|pair| pair.split('=').next() == Some("password"))
}

/// The URL with any password replaced by `***`, for debug output.
fn without_password(url: &str) -> String {
    let mut shown = match (url.split_once("://"), user_info(url)) {
        (Some((scheme, rest)), Some(user_info)) if user_info.contains(':') => {
            let user = user_info.split(':').next().unwrap_or_default();
            let after = rest.get(user_info.len()..).unwrap_or_default();
            format!("{scheme}://{user}:***{after}")
        }
        _ => url.to_owned(),
    };
    if let Some((base, query)) = shown.clone().split_once('?') {
        let pairs: Vec<String> = query
            .split('&')
            .map(|pair| if pair.starts_with("password=") { "password=***".to_owned() } else { pair.to_owned() })
            .collect();
        shown = format!("{base}?{}", pairs.join("&"));
    }
    shown
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_are_found_and_never_shown() {
        for (url, password) in [
            ("postgres://toolgate@db:5432/toolgate", false),
            ("postgres://db/toolgate", false),
            ("postgres://toolgate:s3cret@db/toolgate", true),
            ("postgresql://toolgate:@db/toolgate", true),
            ("postgres://toolgate@db/toolgate?sslmode=require&password=s3cret", true),
            ("postgres://toolgate@db/x?application_name=a:b@c", false),
        ] {
            assert_eq!(has_password(url), password, "{url}");
            assert!(!without_password(url).contains("s3cret"), "{url}");
        }
        assert_eq!(without_password("postgres://u:p@h/d?password=q"), "postgres://u:***@h/d?password=***");
    }
}
