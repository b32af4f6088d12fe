//! An upstream's `[upstream.credentials]` table: OAuth credentials toolgate obtains for an HTTP upstream, its own
//! (client credentials) or each caller's (RFC 8693 token exchange) (docs/config.md, "Upstream credentials").
//!
//! Shapes are checked here with file:line, and the client id and secret are read from the environment variables
//! the table names; the secret goes straight into a [`Secret`] and never into a problem, warning or summary (only
//! the variable's name does). Whether the issuer answers is the runtime's question: it is asked at the first call.
//! Whether the listener has callers with tokens to exchange is a rule across sections, checked in `crate::lower`.

use serde::Deserialize;
use toml::Spanned;
use toolgate_spec::{
    ACCESS_TOKEN_TYPE, ClientCredentialsSpec, JWT_TOKEN_TYPE, Secret, TokenExchangeSpec, UpstreamCredentials,
};

use crate::context::Context;
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
    pub(crate) token_endpoint: Option<Spanned<String>>,
    pub(crate) audience: Option<Spanned<String>>,
    pub(crate) requested_token_type: Option<Spanned<String>>,
}

/// The kinds a table may name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    ClientCredentials,
    TokenExchange,
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
    let kind = match raw.kind.get_ref().as_str() {
        "client_credentials" => Kind::ClientCredentials,
        "token_exchange" => Kind::TokenExchange,
        "static" => {
            let message = format!("{label}: a static token is `bearer_token_env`, not a `[upstream.credentials]` kind");
            cx.error(raw.kind.span().start, message);
            return None;
        }
        other => {
            let message = format!(
                "{label}: credentials kind `{other}` is not supported (expected client_credentials or token_exchange)"
            );
            cx.error(raw.kind.span().start, message);
            return None;
        }
    };
    if kind == Kind::ClientCredentials {
        // Keys of the exchange only: silently ignoring one would ask the issuer for something else than meant.
        let exchange_only = [
            ("token_endpoint", raw.token_endpoint.as_ref()),
            ("audience", raw.audience.as_ref()),
            ("requested_token_type", raw.requested_token_type.as_ref()),
        ];
        for (key, value) in exchange_only {
            if let Some(value) = value {
                cx.error(value.span().start, format!("{label}: `{key}` applies only to kind = \"token_exchange\""));
            }
        }
    }
    let issuer = lower_issuer(raw, kind, table_offset, label, cx);
    let client_id = from_env(raw.client_id_env.as_ref(), "client_id_env", table_offset, label, cx);
    let client_secret = from_env(raw.client_secret_env.as_ref(), "client_secret_env", table_offset, label, cx);
    for (key, value) in
        [("scope", raw.scope.as_ref()), ("resource", raw.resource.as_ref()), ("audience", raw.audience.as_ref())]
    {
        if let Some(value) = value.filter(|value| value.get_ref().trim().is_empty()) {
            cx.error(value.span().start, format!("{label}: `{key}` is empty; leave it out instead"));
        }
    }
    if let Some(resource) = raw.resource.as_ref()
        && let Err(message) = rules::check_url(resource.get_ref())
    {
        cx.error(resource.span().start, format!("{label}: `resource`: {message}"));
    }
    let requested_token_type = match raw.requested_token_type.as_ref() {
        None => ACCESS_TOKEN_TYPE.to_owned(),
        Some(value) if [ACCESS_TOKEN_TYPE, JWT_TOKEN_TYPE].contains(&value.get_ref().as_str()) => {
            value.get_ref().clone()
        }
        Some(value) => {
            // The exchanged token is sent as a bearer: only the two RFC 8693 types that are one are accepted.
            let message = format!(
                "{label}: `requested_token_type` `{}` is not a token toolgate can send as a bearer (expected \
                 {ACCESS_TOKEN_TYPE} or {JWT_TOKEN_TYPE})",
                value.get_ref()
            );
            cx.error(value.span().start, message);
            String::new()
        }
    };
    if cx.problem_count() > before {
        return None;
    }
    let (issuer, token_endpoint) = issuer?;
    let scope = raw.scope.as_ref().map(|scope| scope.get_ref().trim().to_owned());
    // RFC 8707: the resource is the upstream itself unless the operator names another identifier.
    let resource = Some(raw.resource.as_ref().map_or_else(|| url.to_owned(), |resource| resource.get_ref().clone()));
    let (client_id, client_secret) = (client_id?, Secret::new(client_secret?));
    Some(match kind {
        Kind::ClientCredentials => UpstreamCredentials::ClientCredentials(ClientCredentialsSpec {
            issuer,
            client_id,
            client_secret,
            scope,
            resource,
        }),
        Kind::TokenExchange => UpstreamCredentials::TokenExchange(TokenExchangeSpec {
            issuer,
            token_endpoint,
            client_id,
            client_secret,
            scope,
            resource,
            audience: raw.audience.as_ref().map(|audience| audience.get_ref().trim().to_owned()),
            requested_token_type,
        }),
    })
}

/// The issuer (and, for an exchange, the token endpoint configured instead of or besides it): the issuer named in
/// messages, and the endpoint used without discovery.
fn lower_issuer(
    raw: &RawCredentials,
    kind: Kind,
    table_offset: usize,
    label: &str,
    cx: &mut Context<'_>,
) -> Option<(String, Option<String>)> {
    for (key, value) in [("issuer", raw.issuer.as_ref()), ("token_endpoint", raw.token_endpoint.as_ref())] {
        let Some(value) = value else { continue };
        match rules::check_url(value.get_ref()) {
            Ok(host) => {
                let cleartext = value.get_ref().get(..7).is_some_and(|scheme| scheme.eq_ignore_ascii_case("http://"));
                if cleartext && !rules::is_loopback_host(host) {
                    let message = format!("{label}: the client secret is sent to {host} over plain http; use https");
                    cx.warn(value.span().start, message);
                }
            }
            Err(message) => cx.error(value.span().start, format!("{label}: `{key}`: {message}")),
        }
    }
    let token_endpoint = raw.token_endpoint.as_ref().map(|endpoint| endpoint.get_ref().clone());
    match (raw.issuer.as_ref(), token_endpoint) {
        (Some(issuer), token_endpoint) => Some((issuer.get_ref().clone(), token_endpoint)),
        (None, Some(token_endpoint)) => Some((token_endpoint.clone(), Some(token_endpoint))),
        (None, None) => {
            let needs = if kind == Kind::TokenExchange { "`issuer` or `token_endpoint`" } else { "`issuer`" };
            cx.error(table_offset, format!("{label}: `[upstream.credentials]` needs {needs}"));
            None
        }
    }
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
