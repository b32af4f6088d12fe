//! toolgate's configuration file: TOML in, a validated [`GatewaySpec`] out, with compiler-style errors.
//!
//! - [`load_config`] / [`parse_config`]: read, parse, validate and lower a `gateway.toml` into the
//!   [`GatewaySpec`] the runtime runs from. Every problem carries file, line and column ([`ConfigError`],
//!   [`Problem`]); as many are reported at once as can be found.
//! - [`load_config_with_console`]: the same, with the console's users ([`ConsoleSpec`]), which stay out of the
//!   runtime's spec.
//! - [`load_store_config`]: where the state lives (`[store]`: SQLite by default, or a shared PostgreSQL), for
//!   `serve` and the state commands (`approvals`, `pins`, `audit`, `status`) given `--config FILE`.
//! - [`check_config`]: the same, returning a [`ConfigSummary`] of what would run (for `toolgate check-config`).
//! - [`import_config`]: turns a Claude Desktop `claude_desktop_config.json` or a VS Code `mcp.json` into
//!   toolgate TOML text that [`parse_config`] accepts.
//!
//! The format is documented in `docs/config.md`. This crate does no network IO and spawns nothing; its only
//! side effects are reading the named file and looking up the environment variables named by
//! `bearer_token_env`, `token_env` (a caller's token, hashed at once) and `[store]`'s `url_env`. Syntax stays here: the runtime only ever
//! sees the lowered spec, guardrails included (`[policy]` is validated by compiling it with the core's compiler).
//!
//! ```
//! use std::path::Path;
//!
//! let text = r#"
//! [[upstream]]
//! name = "time"
//! command = "uvx"
//! args = ["mcp-server-time"]
//! "#;
//! let spec = toolgate_config::parse_config(text, Path::new("gateway.toml")).unwrap();
//! assert_eq!(spec.upstreams[0].name, "time");
//! assert!(spec.http.is_some()); // no [listen]: Streamable HTTP on 127.0.0.1:8765
//!
//! let error = toolgate_config::parse_config("[[upstream]]\nname = \"x\"\ncomand = \"y\"\n", Path::new("g.toml"));
//! assert!(error.unwrap_err().to_string().starts_with("g.toml:3:1: upstream \"x\": unknown key `comand`"));
//! ```

mod console;
mod context;
mod credentials;
mod error;
mod guardrails;
mod import;
mod lower;
mod oauth;
mod parse;
mod raw;
mod rules;
mod sandbox;
mod store;
mod summary;
mod tables;
mod trust;
mod upstream;

#[cfg(test)]
mod tests;

use std::path::Path;

pub use console::{ConsoleSpec, ConsoleUserSpec};
pub use error::{ConfigError, Problem};
pub use store::{DEFAULT_ACQUIRE_TIMEOUT, DEFAULT_MAX_CONNECTIONS, PostgresSpec, StoreSpec};
pub use summary::{
    CallerSummary, ConfigSummary, CredentialsKind, CredentialsSummary, ListenerSummary, OAuthSummary, PolicySummary,
    Transport, UpstreamSummary,
};
pub use toolgate_spec::GatewaySpec;
pub use toolgate_spec::SsoSpec;

use crate::context::Context;
use crate::error::{Locator, invalid};
use crate::lower::Lowered;

/// Reads, parses, validates and lowers the configuration file at `path`.
pub fn load_config(path: &Path) -> Result<GatewaySpec, ConfigError> {
    let text = read_text(path)?;
    parse_config(&text, path)
}

/// Parses, validates and lowers configuration `text`; `origin` names the file in messages and anchors relative
/// `command`, `cwd` and manifest paths. Reads the process environment for `bearer_token_env` and `token_env`,
/// nothing else.
pub fn parse_config(text: &str, origin: &Path) -> Result<GatewaySpec, ConfigError> {
    parse_config_with_env(text, origin, &|name| std::env::var(name).ok())
}

/// [`parse_config`] with environment lookups answered by `env` (for tests and embedders).
pub fn parse_config_with_env(
    text: &str,
    origin: &Path,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<GatewaySpec, ConfigError> {
    lower_text(text, origin, env).map(|(lowered, _)| lowered.spec)
}

/// [`load_config`], and the console's users (`[[console.user]]`), which the relay never sees.
pub fn load_config_with_console(path: &Path) -> Result<(GatewaySpec, ConsoleSpec), ConfigError> {
    let text = read_text(path)?;
    parse_config_with_console(&text, path, &|name| std::env::var(name).ok())
}

/// [`parse_config_with_env`], and the console's users.
pub fn parse_config_with_console(
    text: &str,
    origin: &Path,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<(GatewaySpec, ConsoleSpec), ConfigError> {
    lower_text(text, origin, env).map(|(lowered, _)| (lowered.spec, lowered.console))
}

/// The `[store]` section of the configuration at `path` (the whole file is checked: a state command given a
/// broken config refuses it as `serve` would). Reads the variable `url_env` names.
pub fn load_store_config(path: &Path) -> Result<StoreSpec, ConfigError> {
    let text = read_text(path)?;
    parse_store_config(&text, path, &|name| std::env::var(name).ok())
}

/// [`load_store_config`] on text already read, with environment lookups answered by `env`.
pub fn parse_store_config(
    text: &str,
    origin: &Path,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<StoreSpec, ConfigError> {
    lower_text(text, origin, env).map(|(lowered, _)| lowered.store)
}

/// Loads the configuration at `path` and summarizes what would run, warnings included.
pub fn check_config(path: &Path) -> Result<ConfigSummary, ConfigError> {
    let text = read_text(path)?;
    check_config_text(&text, path, &|name| std::env::var(name).ok())
}

/// [`check_config`] on text already read, with environment lookups answered by `env`.
pub fn check_config_text(
    text: &str,
    origin: &Path,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<ConfigSummary, ConfigError> {
    let (lowered, warnings) = lower_text(text, origin, env)?;
    Ok(summary::summarize(&lowered.spec, &lowered.bearer_token_envs, warnings))
}

/// Converts a Claude Desktop or VS Code MCP configuration (JSON, comments allowed) into toolgate TOML text.
pub fn import_config(path: &Path) -> Result<String, ConfigError> {
    let text = read_text(path)?;
    import::import_text(&text, path)
}

fn read_text(path: &Path) -> Result<String, ConfigError> {
    std::fs::read_to_string(path).map_err(|source| ConfigError::Read { path: path.to_path_buf(), source })
}

fn lower_text(
    text: &str,
    origin: &Path,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<(Lowered, Vec<Problem>), ConfigError> {
    let locator = Locator::new(origin, text);
    let mut problems = Vec::new();
    let Some(raw) = parse::parse_document(text, &locator, &mut problems) else {
        return Err(invalid(problems));
    };
    let base_dir = origin.parent().unwrap_or(Path::new(""));
    let mut cx = Context { locator: &locator, base_dir, env, problems, warnings: Vec::new() };
    match lower::lower(raw, origin, &mut cx) {
        Some(lowered) if cx.problems.is_empty() => {
            let mut warnings = cx.warnings;
            warnings.sort_by_key(|warning| (warning.line, warning.column));
            Ok((lowered, warnings))
        }
        _ => Err(invalid(cx.problems)),
    }
}
