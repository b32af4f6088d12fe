//! `[listen.http.oauth]`: the HTTP listener as an OAuth 2.1 resource server. Lowers the table into
//! `toolgate_spec::OAuthSpec`: issuer and resource identifier (`https://`, or `http://` on loopback only), required
//! and advertised scopes, the algorithm allow-list (asymmetric by default; `none` never; an HMAC algorithm only when
//! listed, with a warning), whether a JWT must be typed `at+jwt`, clock skew, group and display claims, key refresh
//! intervals, and introspection's client named by environment variables (checked to be set now, read when used:
//! never a secret in the file) with how long its answers are reused.

use std::time::Duration;

use serde::Deserialize;
use toml::Spanned;
use toolgate_spec::{IntrospectionSpec, OAuthSpec};

use crate::context::Context;

/// Longest accepted clock skew: more would make `exp` meaningless.
const MAX_CLOCK_SKEW_SECONDS: u64 = 300;
/// Longest accepted reuse of an introspection answer: it bounds how long a revoked token is still accepted.
const MAX_INTROSPECTION_CACHE_SECONDS: u64 = 300;

/// `[listen.http.oauth]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawOAuth {
    pub(crate) issuer: Option<Spanned<String>>,
    pub(crate) resource: Option<Spanned<String>>,
    pub(crate) required_scopes: Option<Vec<String>>,
    pub(crate) scopes_supported: Option<Vec<String>>,
    pub(crate) algorithms: Option<Spanned<Vec<String>>>,
    pub(crate) clock_skew_seconds: Option<Spanned<u64>>,
    pub(crate) group_claims: Option<Vec<String>>,
    pub(crate) display_claims: Option<Vec<String>>,
    pub(crate) jwks_refresh_seconds: Option<Spanned<u64>>,
    pub(crate) jwks_min_refetch_seconds: Option<Spanned<u64>>,
    pub(crate) introspection_client_id_env: Option<Spanned<String>>,
    pub(crate) introspection_client_secret_env: Option<Spanned<String>>,
    pub(crate) introspection_cache_seconds: Option<Spanned<u64>>,
    pub(crate) require_at_jwt: Option<bool>,
}

/// Lowers the table; problems go to `cx` (the returned spec is then discarded with the rest).
pub(crate) fn lower_oauth(raw: Spanned<RawOAuth>, cx: &mut Context<'_>) -> Option<OAuthSpec> {
    let table_offset = raw.span().start;
    let raw = raw.into_inner();
    let url = |value: Option<Spanned<String>>, key: &str, cx: &mut Context<'_>| -> Option<String> {
        let Some(value) = value else {
            cx.error(table_offset, format!("[listen.http.oauth] needs `{key}`"));
            return None;
        };
        if let Err(why) = crate::rules::check_secure_url(value.get_ref()) {
            cx.error(value.span().start, format!("[listen.http.oauth]: `{key}` {why}"));
        }
        Some(value.into_inner())
    };
    let issuer = url(raw.issuer, "issuer", cx);
    let resource = url(raw.resource, "resource", cx);
    let (issuer, resource) = (issuer?, resource?);
    let mut spec = OAuthSpec::new(issuer, resource);
    spec.required_scopes = raw.required_scopes.unwrap_or_default();
    spec.scopes_supported = raw.scopes_supported.unwrap_or_default();
    if let Some(algorithms) = raw.algorithms {
        let offset = algorithms.span().start;
        for alg in algorithms.get_ref() {
            if alg.eq_ignore_ascii_case("none") {
                cx.error(offset, "[listen.http.oauth]: `algorithms` may never contain `none` (unsigned tokens)");
            } else if alg.starts_with("HS") {
                cx.warn(
                    offset,
                    format!(
                        "[listen.http.oauth]: `algorithms` allows {alg}: a shared-secret algorithm means whoever \
                         holds the secret can mint tokens toolgate accepts"
                    ),
                );
            } else if !toolgate_spec::DEFAULT_OAUTH_ALGORITHMS.contains(&alg.as_str()) {
                cx.error(offset, format!("[listen.http.oauth]: unknown algorithm `{alg}`"));
            }
        }
        spec.algorithms = algorithms.into_inner();
    }
    if let Some(skew) = raw.clock_skew_seconds {
        if *skew.get_ref() > MAX_CLOCK_SKEW_SECONDS {
            cx.error(
                skew.span().start,
                format!("[listen.http.oauth]: `clock_skew_seconds` is at most {MAX_CLOCK_SKEW_SECONDS}"),
            );
        }
        spec.clock_skew = Duration::from_secs(skew.into_inner());
    }
    if let Some(claims) = raw.group_claims {
        spec.group_claims = claims;
    }
    if let Some(claims) = raw.display_claims {
        spec.display_claims = claims;
    }
    if let Some(seconds) = raw.jwks_refresh_seconds {
        spec.jwks_refresh = Duration::from_secs(seconds.into_inner().max(1));
    }
    if let Some(seconds) = raw.jwks_min_refetch_seconds {
        spec.jwks_min_refetch = Duration::from_secs(seconds.into_inner());
    }
    if let Some(required) = raw.require_at_jwt {
        spec.require_at_jwt = required;
    }
    let cache = raw.introspection_cache_seconds.map(|seconds| {
        if *seconds.get_ref() > MAX_INTROSPECTION_CACHE_SECONDS {
            cx.error(
                seconds.span().start,
                format!(
                    "[listen.http.oauth]: `introspection_cache_seconds` is at most {MAX_INTROSPECTION_CACHE_SECONDS} \
                     (a revoked token stays accepted that long)"
                ),
            );
        }
        Duration::from_secs(seconds.into_inner())
    });
    match (raw.introspection_client_id_env, raw.introspection_client_secret_env) {
        (None, None) => {
            if cache.is_some() {
                cx.warn(
                    table_offset,
                    "[listen.http.oauth]: `introspection_cache_seconds` has no effect without an introspection client",
                );
            }
        }
        (Some(id), Some(secret)) => {
            for variable in [&id, &secret] {
                if (cx.env)(variable.get_ref()).is_none() {
                    let message =
                        format!("[listen.http.oauth]: environment variable `{}` is not set", variable.get_ref());
                    cx.error(variable.span().start, message);
                }
            }
            spec.introspection = Some(IntrospectionSpec {
                client_id_env: id.into_inner(),
                client_secret_env: secret.into_inner(),
                cache: cache.unwrap_or(toolgate_spec::DEFAULT_INTROSPECTION_CACHE),
            });
        }
        _ => cx.error(
            table_offset,
            "[listen.http.oauth]: set both `introspection_client_id_env` and `introspection_client_secret_env`, or \
             neither",
        ),
    }
    Some(spec)
}
