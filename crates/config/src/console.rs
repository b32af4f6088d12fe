//! `[console]` and its `[[console.user]]` tables: the people who may log in to the approval console with a token of
//! their own, so each decision records who made it (`decided_by = "console:alice"`).
//!
//! A user's token is given like a caller's: `token_sha256` (the secret never sits in the file) or `token_env`
//! (read at load and hashed at once); neither the clear token nor its hash appears in a problem, a warning or the
//! summary. A console token must differ from every caller's: a token that calls tools must not also approve them.
//! The lowered [`ConsoleSpec`] is not part of the runtime's `GatewaySpec` (the relay never sees it); `toolgate
//! serve` hands it to the console.

use std::collections::BTreeMap;

use serde::Deserialize;
use toml::Spanned;
use toolgate_spec::CallerSpec;

use crate::guardrails::callers::{UniqueNames, lower_token};
use crate::guardrails::raw::RawCaller;
use crate::lower::Context;

/// `[console]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawConsole {
    pub(crate) user: Option<Vec<Spanned<RawConsoleUser>>>,
}

/// One `[[console.user]]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawConsoleUser {
    pub(crate) name: Spanned<String>,
    pub(crate) token_sha256: Option<Spanned<String>>,
    pub(crate) token_env: Option<Spanned<String>>,
}

/// Who may log in to the console besides the one-time link `toolgate serve` prints.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct ConsoleSpec {
    /// The configured users, in file order.
    pub users: Vec<ConsoleUserSpec>,
}

/// A console user.
#[derive(Clone, PartialEq, Eq)]
pub struct ConsoleUserSpec {
    /// The name decisions record, as `console:NAME`.
    pub name: String,
    /// `sha256:<hex>` of the user's token; the token itself is never kept.
    pub token_sha256: String,
}

// Hand-written so a debug print never shows a token's hash.
impl std::fmt::Debug for ConsoleUserSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConsoleUserSpec").field("name", &self.name).finish_non_exhaustive()
    }
}

impl std::fmt::Debug for ConsoleSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConsoleSpec").field("users", &self.users).finish()
    }
}

/// Lowers `[console]`, checking names, tokens and that no token is also a caller's.
pub(crate) fn lower_console(
    raw: Option<Spanned<RawConsole>>,
    callers: &[CallerSpec],
    cx: &mut Context<'_>,
) -> ConsoleSpec {
    let Some(raw) = raw else { return ConsoleSpec::default() };
    let mut names = UniqueNames::default();
    let mut hashes: BTreeMap<String, String> = BTreeMap::new();
    let mut users = Vec::new();
    for user in raw.into_inner().user.unwrap_or_default() {
        let table_offset = user.span().start;
        let user = user.into_inner();
        let name = user.name.get_ref().clone();
        let label = format!("console user \"{name}\"");
        let before = cx.problem_count();
        names.claim("console user", &user.name, cx);
        let as_caller =
            RawCaller { name: user.name, token_sha256: user.token_sha256, token_env: user.token_env, scopes: None };
        let Some((token_sha256, token_offset)) = lower_token(&as_caller, table_offset, &label, cx) else { continue };
        if let Some(caller) = callers.iter().find(|caller| caller.token_sha256 == token_sha256) {
            let message = format!(
                "{label}: has the same token as caller \"{}\"; give the console a token of its own (a token that \
                 calls tools must not also approve them)",
                caller.name
            );
            cx.error(token_offset, message);
            continue;
        }
        if let Some(first) = hashes.get(&token_sha256) {
            cx.error(token_offset, format!("{label}: has the same token as console user \"{first}\""));
            continue;
        }
        hashes.insert(token_sha256.clone(), name.clone());
        if cx.problem_count() == before {
            users.push(ConsoleUserSpec { name, token_sha256 });
        }
    }
    ConsoleSpec { users }
}
