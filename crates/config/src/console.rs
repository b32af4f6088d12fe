//! `[console]` and its `[[console.user]]` tables: the people who may log in to the approval console with a token of
//! their own, so each decision records who made it (`decided_by = "console:alice"`).
//!
//! A user's token is given like a caller's: `token_sha256` (the secret never sits in the file) or `token_env`
//! (read at load and hashed at once); neither the clear token nor its hash appears in a problem, a warning or the
//! summary. A console token must differ from every caller's: a token that calls tools must not also approve them.
//! The lowered [`ConsoleSpec`] is not part of the runtime's `GatewaySpec` (the relay never sees it); `toolgate
//! serve` hands it to the console.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Deserialize;
use toml::Spanned;
use toolgate_spec::{CallerSpec, DEFAULT_SSO_SCOPES, SsoSpec};

use crate::context::Context;
use crate::guardrails::callers::{UniqueNames, lower_token};
use crate::guardrails::raw::RawCaller;
use crate::rules;

/// `[console]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawConsole {
    pub(crate) user: Option<Vec<Spanned<RawConsoleUser>>>,
    /// Refuse a person's approval of their own call.
    pub(crate) forbid_self_approval: Option<bool>,
    /// `[console.sso]`: single sign-on with an OpenID provider.
    pub(crate) sso: Option<Spanned<RawSso>>,
}

/// `[console.sso]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawSso {
    pub(crate) issuer: Spanned<String>,
    pub(crate) client_id: Spanned<String>,
    pub(crate) client_secret_env: Option<Spanned<String>>,
    pub(crate) redirect_uri: Spanned<String>,
    pub(crate) scopes: Option<Spanned<Vec<String>>>,
    pub(crate) groups_claim: Option<Spanned<String>>,
    pub(crate) approver_group: Option<Spanned<String>>,
    pub(crate) max_session_seconds: Option<Spanned<u64>>,
    pub(crate) post_logout_redirect_uri: Option<Spanned<String>>,
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
    /// `forbid_self_approval`: refuse a person's approval of a call whose caller is themselves.
    pub forbid_self_approval: bool,
    /// `[console.sso]`, when single sign-on is configured.
    pub sso: Option<SsoSpec>,
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
        f.debug_struct("ConsoleSpec")
            .field("users", &self.users)
            .field("forbid_self_approval", &self.forbid_self_approval)
            .field("sso", &self.sso)
            .finish()
    }
}

/// Lowers `[console]`, checking names, tokens and that no token is also a caller's.
pub(crate) fn lower_console(
    raw: Option<Spanned<RawConsole>>,
    callers: &[CallerSpec],
    cx: &mut Context<'_>,
) -> ConsoleSpec {
    let Some(raw) = raw else { return ConsoleSpec::default() };
    let raw = raw.into_inner();
    let sso = raw.sso.and_then(|sso| lower_sso(sso, cx));
    let forbid_self_approval = raw.forbid_self_approval.unwrap_or(false);
    let mut names = UniqueNames::default();
    let mut hashes: BTreeMap<String, String> = BTreeMap::new();
    let mut users = Vec::new();
    for user in raw.user.unwrap_or_default() {
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
    ConsoleSpec { users, forbid_self_approval, sso }
}

/// Lowers `[console.sso]`: URLs (`http://` only on loopback), the client id, the secret's variable (read now).
fn lower_sso(raw: Spanned<RawSso>, cx: &mut Context<'_>) -> Option<SsoSpec> {
    let raw = raw.into_inner();
    let before = cx.problem_count();
    let urls = [("issuer", Some(&raw.issuer)), ("redirect_uri", Some(&raw.redirect_uri))]
        .into_iter()
        .chain([("post_logout_redirect_uri", raw.post_logout_redirect_uri.as_ref())]);
    for (key, url) in urls.filter_map(|(key, url)| url.map(|url| (key, url))) {
        if let Err(problem) = rules::check_secure_url(url.get_ref()) {
            cx.error(url.span().start, format!("[console.sso]: `{key}` {problem}"));
        }
    }
    if raw.redirect_uri.get_ref().split('?').next().is_some_and(|path| !path.ends_with("/console/sso/callback")) {
        let message = "[console.sso]: `redirect_uri` must be the console's `/console/sso/callback` URL as browsers \
                       reach it";
        cx.error(raw.redirect_uri.span().start, message);
    }
    if raw.client_id.get_ref().trim().is_empty() {
        cx.error(raw.client_id.span().start, "[console.sso]: `client_id` is empty");
    }
    let client_secret = raw.client_secret_env.as_ref().and_then(|variable| {
        match (cx.env)(variable.get_ref()).map(|secret| secret.trim().to_owned()) {
            Some(secret) if !secret.is_empty() => Some(secret),
            Some(_) => {
                let message = format!(
                    "[console.sso]: environment variable `{}` (client_secret_env) is empty",
                    variable.get_ref()
                );
                cx.error(variable.span().start, message);
                None
            }
            None => {
                let message = format!(
                    "[console.sso]: environment variable `{}` (client_secret_env) is not set",
                    variable.get_ref()
                );
                cx.error(variable.span().start, message);
                None
            }
        }
    });
    let mut scopes = match raw.scopes {
        Some(scopes) => scopes.into_inner(),
        None => DEFAULT_SSO_SCOPES.iter().map(|scope| (*scope).to_owned()).collect(),
    };
    if !scopes.iter().any(|scope| scope == "openid") {
        scopes.insert(0, "openid".into());
    }
    if let Some(group) = raw.approver_group.as_ref().filter(|group| group.get_ref().trim().is_empty()) {
        cx.error(group.span().start, "[console.sso]: `approver_group` is empty");
    }
    if let Some(seconds) = raw.max_session_seconds.as_ref().filter(|seconds| *seconds.get_ref() == 0) {
        cx.error(seconds.span().start, "[console.sso]: `max_session_seconds` must be at least 1");
    }
    (cx.problem_count() == before).then(|| {
        let defaults = SsoSpec::new(raw.issuer.into_inner(), raw.client_id.into_inner(), raw.redirect_uri.into_inner());
        SsoSpec {
            client_secret,
            scopes,
            groups_claim: raw.groups_claim.map_or(defaults.groups_claim.clone(), Spanned::into_inner),
            approver_group: raw.approver_group.map(Spanned::into_inner),
            max_session: raw
                .max_session_seconds
                .map_or(defaults.max_session, |seconds| Duration::from_secs(seconds.into_inner())),
            post_logout_redirect_uri: raw.post_logout_redirect_uri.map(Spanned::into_inner),
            ..defaults
        }
    })
}
