//! Validation and lowering: from the raw sections to a `GatewaySpec`, applying the documented defaults.
//!
//! Rules that span upstreams live here (unique names, colliding prefixes, the prefix default that depends on how
//! many upstreams there are), as do the listener and limit rules; the guardrail sections lower in
//! [`crate::guardrails`], and whether callers are configured decides the warning for a public HTTP listener.
//! Problems and warnings are collected, never returned early, so one run reports everything. The result is
//! all-or-nothing: a spec is only produced when there were no problems. Environment lookups go through
//! `Context::env` (`context`) so tests need not touch the process.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use toml::Spanned;
use toolgate_spec::{
    DEFAULT_BIND, DEFAULT_HTTP_PATH, GatewaySpec, HttpListenerSpec, Limits, Prefix, StdioListenerSpec,
};

use crate::context::Context;
use crate::guardrails::{self, callers};
use crate::parse::{RawConfig, RawListen};
use crate::raw::{RawHttpListener, RawLimits, RawStdioListener};
use crate::rules;
use crate::upstream::{LoweredUpstream, lower_upstream};

const MAX_MESSAGE_MIB: u64 = 1024;
const MAX_SESSIONS: u64 = 100_000;
const MAX_SESSION_IDLE_MINUTES: u64 = 7 * 24 * 60;
const MAX_TOOLS_PER_UPSTREAM: u64 = 100_000;
const MAX_LIST_ITEMS_PER_UPSTREAM: u64 = 1_000_000;
const MAX_RELAYED_REQUESTS: u64 = 10_000;
const MAX_CONNECTIONS: u64 = 1_000_000;
const MAX_HEADER_READ_TIMEOUT_SECONDS: u64 = 3600;
const MAX_PENDING_APPROVALS: u64 = 10_000;
const MAX_HELD_CALL_TIMEOUT_SECONDS: u64 = 3600;

/// A lowered configuration with what the summary shows beyond the spec.
#[derive(Debug)]
pub(crate) struct Lowered {
    pub(crate) spec: GatewaySpec,
    /// Per upstream, in spec order: the variable its bearer token came from.
    pub(crate) bearer_token_envs: Vec<Option<String>>,
    /// Who may log in to the console with a token of their own.
    pub(crate) console: crate::console::ConsoleSpec,
    /// Where the state lives.
    pub(crate) store: crate::store::StoreSpec,
}

/// Lowers `raw`; the spec is `None` when any problem was recorded.
pub(crate) fn lower(raw: RawConfig, origin: &Path, cx: &mut Context<'_>) -> Option<Lowered> {
    if raw.upstream_tables == 0 && !raw.upstream_key_seen {
        cx.error(0, "no upstream servers: add an `[[upstream]]` table with a `name` and a `command` or `url`");
    }
    check_unique_names(&raw, cx);
    // Every name in the file, lowered or not, so a policy rule for a broken upstream is not also warned about.
    let raw_names: Vec<String> =
        raw.upstreams.iter().map(|upstream| upstream.get_ref().name.get_ref().clone()).collect();
    let first_caller_offset = raw.guardrails.callers.first().map_or(0, |caller| caller.span().start);
    let prefix_by_default = raw.upstream_tables > 1;
    let lowered: Vec<LoweredUpstream> =
        raw.upstreams.into_iter().filter_map(|upstream| lower_upstream(upstream, prefix_by_default, cx)).collect();
    check_prefixes(&lowered, cx);
    check_passthrough(&lowered, raw.upstream_tables, cx);
    let guardrails = guardrails::lower_guardrails(raw.guardrails, &raw_names, cx);
    let console = crate::console::lower_console(raw.console, &guardrails.callers, cx);
    let store = crate::store::lower_store(raw.store, cx);
    let (http, stdio) = lower_listeners(raw.listen, !guardrails.callers.is_empty(), cx);
    if http.is_none() && !guardrails.callers.is_empty() {
        let message = "[[caller]] tokens authenticate HTTP clients, but there is no `[listen.http]`; stdio clients \
                       get `[listen.stdio]` `scopes`";
        cx.warn(first_caller_offset, message);
    }
    check_token_exchange(&lowered, http.as_ref(), stdio.is_some(), !guardrails.callers.is_empty(), cx);
    let authenticated = !guardrails.callers.is_empty() || http.as_ref().is_some_and(|http| http.oauth.is_some());
    let limits = lower_limits(raw.limits, authenticated, cx);
    if !cx.problems.is_empty() {
        return None;
    }
    let bearer_token_envs = lowered.iter().map(|upstream| upstream.bearer_token_env.clone()).collect();
    let upstreams = lowered.into_iter().map(|upstream| upstream.spec).collect();
    // No sandbox may read the config (it names callers' token digests and upstreams' env) or reach the listener.
    let sandbox = toolgate_spec::SandboxEnvironment {
        hidden_paths: vec![origin.to_path_buf()],
        own_ports: http.iter().map(|http| http.bind.port()).filter(|port| *port != 0).collect(),
        port_guard: None,
    };
    let spec = GatewaySpec { upstreams, stdio, http, limits, guardrails, source: Some(origin.to_path_buf()), sandbox };
    Some(Lowered { spec, bearer_token_envs, console, store })
}

fn check_unique_names(raw: &RawConfig, cx: &mut Context<'_>) {
    let mut first_offsets: BTreeMap<String, usize> = BTreeMap::new();
    for upstream in &raw.upstreams {
        let name = &upstream.get_ref().name;
        if let Some(first) = first_offsets.get(name.get_ref()) {
            let message =
                format!("upstream name \"{}\" is already used on line {}", name.get_ref(), cx.line_of(*first));
            cx.error(name.span().start, message);
        } else {
            first_offsets.insert(name.get_ref().clone(), name.span().start);
        }
    }
}

/// `passthrough = true` serves one upstream as it is: beside any other upstream (lowered or not) its names could
/// not stay the upstream's own, so the file is refused at the `passthrough` key.
fn check_passthrough(upstreams: &[LoweredUpstream], upstream_tables: usize, cx: &mut Context<'_>) {
    if upstream_tables < 2 {
        return;
    }
    for upstream in upstreams.iter().filter(|upstream| upstream.spec.prefix == Prefix::Passthrough) {
        let message = format!(
            "upstream \"{}\": `passthrough = true` serves a single upstream as it is, but this file configures \
             {upstream_tables} upstreams (remove the others, or the `passthrough` key)",
            upstream.spec.name
        );
        cx.error(upstream.prefix_offset, message);
    }
}

/// A token exchange upstream acts with each caller's own OAuth access token: without `[listen.http.oauth]` no
/// caller has one, so every call would fail; callers that present none beside OAuth ones (stdio, `[[caller]]`
/// tokens) are warned about, since their calls to it fail closed.
fn check_token_exchange(
    upstreams: &[LoweredUpstream],
    http: Option<&HttpListenerSpec>,
    has_stdio: bool,
    has_static_callers: bool,
    cx: &mut Context<'_>,
) {
    let oauth = http.is_some_and(|http| http.oauth.is_some());
    for upstream in upstreams {
        let Some(offset) = upstream.token_exchange_offset else { continue };
        let name = &upstream.spec.name;
        if !oauth {
            let message = format!(
                "upstream \"{name}\": credentials kind `token_exchange` trades each caller's OAuth access token, but \
                 the HTTP listener does not authenticate callers by OAuth: add `[listen.http.oauth]`, or use kind = \
                 \"client_credentials\" for toolgate's own token"
            );
            cx.error(offset, message);
            continue;
        }
        if has_stdio {
            let message = format!(
                "upstream \"{name}\": stdio clients present no OAuth access token, so their calls to this token \
                 exchange upstream fail"
            );
            cx.warn(offset, message);
        }
        if has_static_callers {
            let message = format!(
                "upstream \"{name}\": `[[caller]]` tokens are not OAuth access tokens, so those callers' calls to \
                 this token exchange upstream fail"
            );
            cx.warn(offset, message);
        }
    }
}

/// Two upstreams exposing the same prefix would make their tool names collide; several unprefixed ones might.
fn check_prefixes(upstreams: &[LoweredUpstream], cx: &mut Context<'_>) {
    let mut owners: BTreeMap<&str, &LoweredUpstream> = BTreeMap::new();
    let mut collisions = Vec::new();
    for upstream in upstreams {
        let Prefix::With(prefix) = &upstream.spec.prefix else { continue };
        match owners.get(prefix.as_str()) {
            // Same name twice is already reported as a duplicate name.
            Some(first) if first.spec.name == upstream.spec.name => {}
            Some(first) => collisions.push((upstream.prefix_offset, prefix.clone(), first.spec.name.clone())),
            None => {
                owners.insert(prefix, upstream);
            }
        }
    }
    for (offset, prefix, first) in collisions {
        let message =
            format!("prefix \"{prefix}\" is already used by upstream \"{first}\"; their tool names would collide");
        cx.error(offset, message);
    }
    let unprefixed: Vec<&LoweredUpstream> = upstreams
        .iter()
        .filter(|upstream| matches!(upstream.spec.prefix, Prefix::None | Prefix::Passthrough))
        .collect();
    if unprefixed.len() > 1 {
        let names: Vec<String> = unprefixed.iter().map(|upstream| format!("\"{}\"", upstream.spec.name)).collect();
        let message = format!(
            "upstreams {} expose unprefixed tool names; when two offer the same name, the first in file order wins",
            names.join(", ")
        );
        cx.warn(unprefixed[1].prefix_offset, message);
    }
}

fn lower_listeners(
    listen: Option<RawListen>,
    has_callers: bool,
    cx: &mut Context<'_>,
) -> (Option<HttpListenerSpec>, Option<StdioListenerSpec>) {
    let Some(listen) = listen else {
        // No `[listen]` at all: the documented default, Streamable HTTP on loopback.
        return (Some(HttpListenerSpec::default()), None);
    };
    if listen.keys == 0 {
        let message = "[listen] has no listener: add `[listen.http]` or `[listen.stdio]` (or remove [listen] for \
                       HTTP on 127.0.0.1:8765)";
        cx.error(listen.offset, message);
    }
    let http = listen.http.map(|http| lower_http_listener(http, has_callers, cx));
    let stdio = listen.stdio.map(|stdio| lower_stdio_listener(stdio, cx));
    (http, stdio)
}

fn lower_http_listener(raw: Spanned<RawHttpListener>, has_callers: bool, cx: &mut Context<'_>) -> HttpListenerSpec {
    let raw = raw.into_inner();
    // OAuth access tokens authenticate callers as much as `[[caller]]` tokens do.
    let has_callers = has_callers || raw.oauth.is_some();
    let bind = match &raw.bind {
        None => DEFAULT_BIND,
        Some(bind) => match rules::parse_bind(bind.get_ref()) {
            Ok(address) => {
                if !address.ip().is_loopback() {
                    let message = if has_callers {
                        format!(
                            "[listen.http]: `bind` {address} is reachable from other machines over plain http: \
                             callers' tokens cross the network unencrypted unless TLS is terminated in front"
                        )
                    } else {
                        format!(
                            "[listen.http]: `bind` {address} is reachable from other machines and no `[[caller]]` is \
                             configured: anyone who can reach it can call tools"
                        )
                    };
                    cx.warn(bind.span().start, message);
                }
                address
            }
            Err(message) => {
                cx.error(bind.span().start, format!("[listen.http]: {message}"));
                DEFAULT_BIND
            }
        },
    };
    let path = match raw.path {
        None => DEFAULT_HTTP_PATH.to_owned(),
        Some(path) => {
            if let Err(message) = rules::check_endpoint_path(path.get_ref()) {
                cx.error(path.span().start, format!("[listen.http]: {message}"));
            }
            path.into_inner()
        }
    };
    let allowed_origins = checked_list(raw.allowed_origins, rules::check_origin, cx);
    let allowed_hosts = checked_list(raw.allowed_hosts, rules::check_host, cx);
    let oauth = raw.oauth.and_then(|oauth| crate::oauth::lower_oauth(oauth, cx));
    HttpListenerSpec { bind, path, allowed_origins, allowed_hosts, oauth }
}

fn checked_list(
    values: Option<Vec<Spanned<String>>>,
    check: fn(&str) -> Result<(), String>,
    cx: &mut Context<'_>,
) -> Vec<String> {
    let mut accepted = Vec::new();
    for value in values.unwrap_or_default() {
        if let Err(message) = check(value.get_ref()) {
            cx.error(value.span().start, format!("[listen.http]: {message}"));
        }
        accepted.push(value.into_inner());
    }
    accepted
}

fn lower_stdio_listener(raw: Spanned<RawStdioListener>, cx: &mut Context<'_>) -> StdioListenerSpec {
    let raw = raw.into_inner();
    let scopes = callers::lower_scopes(raw.scopes, "[listen.stdio]", cx);
    let Some(identity) = raw.identity else {
        return StdioListenerSpec { scopes, ..StdioListenerSpec::default() };
    };
    let valid = identity.get_ref().chars().all(|character| character.is_ascii_graphic());
    if identity.get_ref().is_empty() || identity.get_ref().chars().count() > 64 || !valid {
        let message = "[listen.stdio]: `identity` must be 1 to 64 visible ASCII characters without spaces";
        cx.error(identity.span().start, message);
    }
    StdioListenerSpec { identity: identity.into_inner(), scopes }
}

/// `[limits]`. Without `max_sessions_per_caller`, one caller may hold a quarter of `max_sessions` when callers are
/// configured (so one of them cannot lock the others out), and all of them otherwise (the only caller is everyone).
fn lower_limits(raw: Option<Spanned<RawLimits>>, has_callers: bool, cx: &mut Context<'_>) -> Limits {
    let defaults = Limits::default();
    let Some(raw) = raw else {
        let per_caller = default_per_caller(defaults.max_sessions, has_callers);
        return Limits { max_sessions_per_caller: per_caller, ..defaults };
    };
    let raw = raw.into_inner();
    let mut bounded = |value: Option<Spanned<u64>>, key: &str, max: u64| -> Option<u64> {
        let value = value?;
        if (1..=max).contains(value.get_ref()) {
            Some(value.into_inner())
        } else {
            cx.error(value.span().start, format!("[limits]: `{key}` must be between 1 and {max}"));
            None
        }
    };
    let count =
        |value: Option<u64>, default: usize| value.and_then(|count| usize::try_from(count).ok()).unwrap_or(default);
    let max_message_mib = bounded(raw.max_message_mib, "max_message_mib", MAX_MESSAGE_MIB);
    let max_sessions = bounded(raw.max_sessions, "max_sessions", MAX_SESSIONS);
    let idle_minutes = bounded(raw.session_idle_minutes, "session_idle_minutes", MAX_SESSION_IDLE_MINUTES);
    let max_tools = bounded(raw.max_tools_per_upstream, "max_tools_per_upstream", MAX_TOOLS_PER_UPSTREAM);
    let max_items =
        bounded(raw.max_list_items_per_upstream, "max_list_items_per_upstream", MAX_LIST_ITEMS_PER_UPSTREAM);
    let listing_mib = bounded(raw.max_listing_mib_per_upstream, "max_listing_mib_per_upstream", MAX_MESSAGE_MIB);
    let per_caller = bounded(raw.max_sessions_per_caller, "max_sessions_per_caller", MAX_SESSIONS);
    let max_connections = bounded(raw.max_connections, "max_connections", MAX_CONNECTIONS);
    let header_seconds =
        bounded(raw.header_read_timeout_seconds, "header_read_timeout_seconds", MAX_HEADER_READ_TIMEOUT_SECONDS);
    let pending_session =
        bounded(raw.max_pending_approvals_per_session, "max_pending_approvals_per_session", MAX_PENDING_APPROVALS);
    let pending_caller =
        bounded(raw.max_pending_approvals_per_caller, "max_pending_approvals_per_caller", MAX_PENDING_APPROVALS);
    let relayed_session =
        bounded(raw.max_relayed_requests_per_session, "max_relayed_requests_per_session", MAX_RELAYED_REQUESTS);
    let relayed_upstream =
        bounded(raw.max_relayed_requests_per_upstream, "max_relayed_requests_per_upstream", MAX_RELAYED_REQUESTS);
    let held_seconds =
        bounded(raw.held_call_timeout_seconds, "held_call_timeout_seconds", MAX_HELD_CALL_TIMEOUT_SECONDS);
    let max_sessions = count(max_sessions, defaults.max_sessions);
    Limits {
        max_message_bytes: max_message_mib
            .and_then(|mib| usize::try_from(mib * 1024 * 1024).ok())
            .unwrap_or(defaults.max_message_bytes),
        max_sessions,
        max_sessions_per_caller: count(per_caller, default_per_caller(max_sessions, has_callers)),
        session_idle_timeout: idle_minutes
            .map(|minutes| Duration::from_secs(minutes * 60))
            .unwrap_or(defaults.session_idle_timeout),
        max_tools_per_upstream: max_tools
            .and_then(|count| usize::try_from(count).ok())
            .unwrap_or(defaults.max_tools_per_upstream),
        max_list_items_per_upstream: count(max_items, defaults.max_list_items_per_upstream),
        max_listing_bytes_per_upstream: listing_mib
            .and_then(|mib| usize::try_from(mib * 1024 * 1024).ok())
            .unwrap_or(defaults.max_listing_bytes_per_upstream),
        max_connections: count(max_connections, defaults.max_connections),
        header_read_timeout: header_seconds.map(Duration::from_secs).unwrap_or(defaults.header_read_timeout),
        max_pending_approvals_per_session: count(pending_session, defaults.max_pending_approvals_per_session),
        max_pending_approvals_per_caller: count(pending_caller, defaults.max_pending_approvals_per_caller),
        max_client_queue_bytes: defaults.max_client_queue_bytes,
        max_relayed_requests_per_session: count(relayed_session, defaults.max_relayed_requests_per_session),
        max_relayed_requests_per_upstream: count(relayed_upstream, defaults.max_relayed_requests_per_upstream),
        held_call_timeout: held_seconds.map(Duration::from_secs).unwrap_or(defaults.held_call_timeout),
    }
}

fn default_per_caller(max_sessions: usize, has_callers: bool) -> usize {
    if has_callers { (max_sessions / 4).max(1) } else { max_sessions }
}
