//! An upstream's `[upstream.credentials]` table: OAuth credentials toolgate obtains for an HTTP upstream
//! (docs/config.md, "Upstream credentials").
//!
//! Shapes are checked here with file:line, and the client id and secret are read from the environment variables
//! the table names; the secret goes straight into a [`Secret`] and never into a problem, warning or summary (only
//! the variable's name does). Whether the issuer answers is the runtime's question: it is asked at the first call.

use serde::Deserialize;
use toml::Spanned;
use toolgate_spec::{ClientCredentialsSpec, Secret, UpstreamCredentials};

use crate::lower::Context;
use crate::rules;

/// `[upstream.credentials]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawCredentials {
    pub(crate) kind: Spanned<String>,
    pub(crate) issuer: Option<Spanned<String>>,
    pub(crate) client_id_env: Option<Spanned<String>>,
    pub(crate) client_secret_env: Option<Spanned<String>>,
    pub(crate) scope: Option<Spanned<String>>,
    pub(crate) resource: Option<Spanned<String>>,
}

/// Lowers the table of an upstream at `url`; `None` when it had problems (recorded in `cx`).
pub(crate) fn lower_credentials(
    raw: &Spanned<RawCredentials>,
    url: &str,
    label: &str,
    cx: &mut Context<'_>,
) -> Option<UpstreamCredentials> {
    let table_offset = raw.span().start;
    let raw = raw.get_ref();
    let before = cx.problem_count();
    match raw.kind.get_ref().as_str() {
        "client_credentials" => {}
        "static" => {
            let message = format!("{label}: a static token is `bearer_token_env`, not a `[upstream.credentials]` kind");
            cx.error(raw.kind.span().start, message);
            return None;
        }
        other => {
            let message = format!("{label}: credentials kind `{other}` is not supported (expected client_credentials)");
            cx.error(raw.kind.span().start, message);
            return None;
        }
    }
    let issuer = required(raw.issuer.as_ref(), "issuer", table_offset, label, cx);
    if let Some(issuer) = raw.issuer.as_ref() {
        match rules::check_url(issuer.get_ref()) {
            Ok(host) => {
                let cleartext = issuer.get_ref().get(..7).is_some_and(|scheme| scheme.eq_ignore_ascii_case("http://"));
                if cleartext && !rules::is_loopback_host(host) {
                    let message = format!("{label}: the client secret is sent to {host} over plain http; use https");
                    cx.warn(issuer.span().start, message);
                }
            }
            Err(message) => cx.error(issuer.span().start, format!("{label}: `issuer`: {message}")),
        }
    }
    let client_id = from_env(raw.client_id_env.as_ref(), "client_id_env", table_offset, label, cx);
    let client_secret = from_env(raw.client_secret_env.as_ref(), "client_secret_env", table_offset, label, cx);
    for (key, value) in [("scope", raw.scope.as_ref()), ("resource", raw.resource.as_ref())] {
        if let Some(value) = value.filter(|value| value.get_ref().trim().is_empty()) {
            cx.error(value.span().start, format!("{label}: `{key}` is empty; leave it out instead"));
        }
    }
    if let Some(resource) = raw.resource.as_ref()
        && let Err(message) = rules::check_url(resource.get_ref())
    {
        cx.error(resource.span().start, format!("{label}: `resource`: {message}"));
    }
    if cx.problem_count() > before {
        return None;
    }
    Some(UpstreamCredentials::ClientCredentials(ClientCredentialsSpec {
        issuer: issuer?,
        client_id: client_id?,
        client_secret: Secret::new(client_secret?),
        scope: raw.scope.as_ref().map(|scope| scope.get_ref().trim().to_owned()),
        // RFC 8707: the resource is the upstream itself unless the operator names another identifier.
        resource: Some(raw.resource.as_ref().map_or_else(|| url.to_owned(), |resource| resource.get_ref().clone())),
    }))
}

fn required(
    value: Option<&Spanned<String>>,
    key: &str,
    table_offset: usize,
    label: &str,
    cx: &mut Context<'_>,
) -> Option<String> {
    match value {
        Some(value) => Some(value.get_ref().clone()),
        None => {
            cx.error(table_offset, format!("{label}: `[upstream.credentials]` needs `{key}`"));
            None
        }
    }
}

/// The value of the environment variable named by `key`, checked as the bearer token's is.
fn from_env(
    variable: Option<&Spanned<String>>,
    key: &str,
    table_offset: usize,
    label: &str,
    cx: &mut Context<'_>,
) -> Option<String> {
    let variable = required(variable, key, table_offset, label, cx).zip(variable.map(|value| value.span().start));
    let (name, offset) = variable?;
    if let Err(message) = rules::check_env_var_name(&name) {
        cx.error(offset, format!("{label}: `{key}`: {message}"));
        return None;
    }
    match (cx.env)(&name).as_deref().map(str::trim) {
        None => cx.error(offset, format!("{label}: environment variable `{name}` ({key}) is not set")),
        Some("") => cx.error(offset, format!("{label}: environment variable `{name}` ({key}) is empty")),
        Some(value) if !rules::is_header_value(value) => cx.error(
            offset,
            format!("{label}: environment variable `{name}` ({key}) has characters not allowed in an HTTP header"),
        ),
        Some(value) => return Some(value.to_owned()),
    }
    None
}
