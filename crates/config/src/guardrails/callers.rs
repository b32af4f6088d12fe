//! `[[caller]]` tables and scope lists: who may call over HTTP, identified by the SHA-256 of a bearer token.
//!
//! A caller's token is given either as `token_sha256` (the secret never sits in the file) or as `token_env`, read
//! when the configuration is loaded and hashed at once with `fingerprint::digest_bytes`; the clear token is
//! dropped right there and never appears in a problem, a warning, the spec or the summary. Hashes are not shown
//! either: a caller is named by its `name`.

use std::collections::BTreeMap;

use toml::Spanned;
use toml::de::DeValue;
use toolgate_core::fingerprint::digest_bytes;
use toolgate_spec::CallerSpec;

use crate::context::Context;
use crate::error::{Locator, Problem};
use crate::rules;
use crate::tables::{array_of_tables, deserialize_section};

use super::raw::{RawCaller, RawGuardrails};

/// Longest caller name and scope.
const MAX_NAME_CHARS: usize = 64;

/// Parses the `caller` key: an array of `[[caller]]` tables, each deserialized on its own.
pub(crate) fn parse_callers(
    value: Spanned<DeValue<'_>>,
    guardrails: &mut RawGuardrails,
    locator: &Locator<'_>,
    problems: &mut Vec<Problem>,
) {
    let Some(items) = array_of_tables(value, "caller", locator, problems) else { return };
    for (index, item) in items.into_iter().enumerate() {
        let context = match item.get_ref() {
            DeValue::Table(table) => match table.get("name").map(|name| name.get_ref()) {
                Some(DeValue::String(name)) => format!("caller \"{name}\""),
                _ => format!("caller #{}", index + 1),
            },
            other => {
                let message = format!("caller #{} must be a table, not {}", index + 1, other.type_str());
                problems.push(locator.problem(item.span().start, message));
                continue;
            }
        };
        if let Some(caller) = deserialize_section(item, &context, locator, problems) {
            guardrails.callers.push(caller);
        }
    }
}

/// The names already given in one list of tables (`[[caller]]`, `[[console.user]]`), with where each was first.
#[derive(Debug, Default)]
pub(crate) struct UniqueNames(BTreeMap<String, usize>);

impl UniqueNames {
    /// Checks that `name` is visible and not given earlier in this list, reporting a problem at it otherwise.
    pub(crate) fn claim(&mut self, what: &str, name: &Spanned<String>, cx: &mut Context<'_>) {
        let (text, offset) = (name.get_ref(), name.span().start);
        if let Err(message) = check_visible_name(&format!("{what} name"), text) {
            cx.error(offset, message);
        } else if let Some(first) = self.0.get(text) {
            cx.error(offset, format!("{what} name \"{text}\" is already used on line {}", cx.line_of(*first)));
        } else {
            self.0.insert(text.clone(), offset);
        }
    }
}

/// Lowers every caller, checking names and hashes for uniqueness.
pub(crate) fn lower_callers(raw: Vec<Spanned<RawCaller>>, cx: &mut Context<'_>) -> Vec<CallerSpec> {
    let mut names = UniqueNames::default();
    let mut hashes: BTreeMap<String, String> = BTreeMap::new();
    let mut callers = Vec::new();
    for caller in raw {
        let table_offset = caller.span().start;
        let caller = caller.into_inner();
        let name = caller.name.get_ref().clone();
        let label = format!("caller \"{name}\"");
        let before = cx.problem_count();
        names.claim("caller", &caller.name, cx);
        let token = lower_token(&caller, table_offset, &label, cx);
        let scopes = lower_scopes(caller.scopes, &label, cx);
        let Some((token_sha256, token_offset)) = token else { continue };
        if let Some(first) = hashes.get(&token_sha256) {
            cx.error(
                token_offset,
                format!("{label}: has the same token as caller \"{first}\"; tokens identify callers"),
            );
            continue;
        }
        hashes.insert(token_sha256.clone(), name.clone());
        if cx.problem_count() == before {
            callers.push(CallerSpec { name, token_sha256, scopes });
        }
    }
    callers
}

/// The caller's `sha256:<hex>` token digest and where it was given, or `None` after recording why not.
pub(crate) fn lower_token(
    caller: &RawCaller,
    table_offset: usize,
    label: &str,
    cx: &mut Context<'_>,
) -> Option<(String, usize)> {
    match (&caller.token_sha256, &caller.token_env) {
        (Some(_), Some(variable)) => {
            cx.error(variable.span().start, format!("{label}: set either `token_sha256` or `token_env`, not both"));
            None
        }
        (None, None) => {
            let message = format!(
                "{label}: missing `token_sha256` (the token's SHA-256, preferred) or `token_env` (a variable holding \
                 the token)"
            );
            cx.error(table_offset, message);
            None
        }
        (Some(digest), None) => {
            let offset = digest.span().start;
            if is_sha256_digest(digest.get_ref()) {
                Some((digest.get_ref().clone(), offset))
            } else {
                let message = format!(
                    "{label}: `token_sha256` must be \"sha256:\" followed by 64 lowercase hex digits (the output of \
                     `printf %s \"$TOKEN\" | sha256sum`)"
                );
                cx.error(offset, message);
                None
            }
        }
        (None, Some(variable)) => {
            let offset = variable.span().start;
            let variable = variable.get_ref();
            if let Err(message) = rules::check_env_var_name(variable) {
                cx.error(offset, format!("{label}: `token_env`: {message}"));
                return None;
            }
            // Hashed immediately: the clear token lives only inside this match arm.
            match (cx.env)(variable).as_deref().map(str::trim) {
                None => {
                    cx.error(offset, format!("{label}: environment variable `{variable}` (token_env) is not set"));
                    None
                }
                Some("") => {
                    cx.error(offset, format!("{label}: environment variable `{variable}` (token_env) is empty"));
                    None
                }
                Some(token) => Some((digest_bytes(token.as_bytes()), offset)),
            }
        }
    }
}

/// True for `sha256:` and 64 lowercase hex digits.
fn is_sha256_digest(value: &str) -> bool {
    value.strip_prefix("sha256:").is_some_and(|hex| {
        hex.len() == 64 && hex.chars().all(|character| character.is_ascii_digit() || ('a'..='f').contains(&character))
    })
}

/// A caller name or scope: 1 to 64 visible ASCII characters, no spaces.
pub(crate) fn check_visible_name(what: &str, value: &str) -> Result<(), String> {
    let visible = value.chars().all(|character| character.is_ascii_graphic());
    if value.is_empty() || value.chars().count() > MAX_NAME_CHARS || !visible {
        return Err(format!(
            "{what} \"{value}\" must be 1 to {MAX_NAME_CHARS} visible ASCII characters without spaces"
        ));
    }
    Ok(())
}

/// A `scopes` list (a caller's or the stdio listener's): valid names, none twice.
pub(crate) fn lower_scopes(
    scopes: Option<Spanned<Vec<Spanned<String>>>>,
    label: &str,
    cx: &mut Context<'_>,
) -> Vec<String> {
    let mut lowered: Vec<String> = Vec::new();
    for scope in scopes.map(Spanned::into_inner).unwrap_or_default() {
        if let Err(message) = check_visible_name("scope", scope.get_ref()) {
            cx.error(scope.span().start, format!("{label}: {message}"));
        } else if lowered.contains(scope.get_ref()) {
            cx.error(scope.span().start, format!("{label}: scope \"{}\" is listed twice", scope.get_ref()));
        }
        lowered.push(scope.into_inner());
    }
    lowered
}
