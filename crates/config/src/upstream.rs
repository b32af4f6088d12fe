//! Lowering one `[[upstream]]` table into an `UpstreamSpec`: endpoint, credentials, prefix, timeouts, overrides.
//!
//! The bearer token is read from the environment here and goes straight into the endpoint's headers; it never
//! appears in a problem, a warning or a summary (only the variable's name does). The command is exactly what the
//! file says (relative paths anchored at the config file's directory); no shell, no expansion.

use std::collections::BTreeMap;
use std::time::Duration;

use toml::Spanned;
use toolgate_core::HintOverrides;
use toolgate_spec::{
    DEFAULT_INITIALIZE_TIMEOUT, DEFAULT_MAX_IN_FLIGHT, DEFAULT_REQUEST_TIMEOUT, Endpoint, Prefix, UpstreamEra,
    UpstreamSpec,
};

use crate::context::{Context, anchor};
use crate::raw::{PrefixSetting, RawToolOverride, RawUpstream};
use crate::rules;

/// Longest accepted timeout (a day).
const MAX_TIMEOUT_SECONDS: u64 = 24 * 60 * 60;

/// Largest accepted `max_in_flight`: far beyond any server's concurrency, still a bound.
const MAX_IN_FLIGHT: u64 = 65_536;

/// Longest tool name an override may name (the MCP limit).
const MAX_TOOL_NAME_CHARS: usize = 128;

/// An upstream after lowering, with what the summary and the cross-upstream checks need.
#[derive(Debug)]
pub(crate) struct LoweredUpstream {
    pub(crate) spec: UpstreamSpec,
    /// The variable the bearer token came from.
    pub(crate) bearer_token_env: Option<String>,
    /// Where the prefix was decided (the `prefix` key, else the `name`), for collision messages.
    pub(crate) prefix_offset: usize,
    /// Where `kind = "token_exchange"` is, for the rule that needs OAuth callers (`crate::lower`).
    pub(crate) token_exchange_offset: Option<usize>,
}

/// Lowers one upstream; `None` when it had problems (already recorded in `cx`).
pub(crate) fn lower_upstream(
    raw: Spanned<RawUpstream>,
    prefix_by_default: bool,
    cx: &mut Context<'_>,
) -> Option<LoweredUpstream> {
    let table_offset = raw.span().start;
    let raw = raw.into_inner();
    let name = raw.name.get_ref().clone();
    let label = format!("upstream \"{name}\"");
    let problems_before = cx.problem_count();

    if let Err(message) = rules::check_name("upstream name", &name) {
        cx.error(raw.name.span().start, message);
    }
    let (endpoint, bearer_token_env) = lower_endpoint(&raw, table_offset, &label, cx);
    let (prefix, prefix_offset) = lower_prefix(&raw, &name, prefix_by_default, &label, cx);
    let request_timeout = lower_timeout(raw.timeout_seconds.as_ref(), DEFAULT_REQUEST_TIMEOUT, &label, cx);
    let initialize_timeout =
        lower_timeout(raw.initialize_timeout_seconds.as_ref(), DEFAULT_INITIALIZE_TIMEOUT, &label, cx);
    let max_in_flight = lower_max_in_flight(raw.max_in_flight.as_ref(), DEFAULT_MAX_IN_FLIGHT, &label, cx);
    let trust = crate::trust::lower_trust(&raw, &label, cx);
    let credentials = lower_upstream_credentials(&raw, &label, cx);
    let token_exchange_offset = raw
        .credentials
        .as_ref()
        .map(|credentials| &credentials.get_ref().kind)
        .filter(|kind| kind.get_ref() == "token_exchange")
        .map(|kind| kind.span().start);
    if let (Some(sandbox), Some(_)) = (&raw.sandbox, &raw.url) {
        cx.error(sandbox.span().start, format!("{label}: `[upstream.sandbox]` applies only to `command` upstreams"));
    }
    let sandbox = crate::sandbox::lower_sandbox(raw.sandbox.as_ref(), &label, cx);
    let overrides = lower_overrides(raw.tools.unwrap_or_default(), &label, cx);
    let era = lower_era(raw.era.as_ref(), &label, cx);

    if cx.problem_count() > problems_before {
        return None;
    }
    let spec = UpstreamSpec {
        name,
        endpoint: endpoint?,
        prefix,
        overrides,
        initialize_timeout,
        request_timeout,
        max_in_flight,
        trust,
        sandbox,
        era,
        credentials,
    };
    Some(LoweredUpstream { spec, bearer_token_env, prefix_offset, token_exchange_offset })
}

/// `[upstream.credentials]`, for a `url` upstream that sends no other `Authorization`.
fn lower_upstream_credentials(
    raw: &RawUpstream,
    label: &str,
    cx: &mut Context<'_>,
) -> Option<toolgate_spec::UpstreamCredentials> {
    let credentials = raw.credentials.as_ref()?;
    let offset = credentials.span().start;
    let Some(url) = &raw.url else {
        cx.error(offset, format!("{label}: `[upstream.credentials]` applies only to `url` upstreams"));
        return None;
    };
    let has_authorization =
        raw.headers.iter().flatten().any(|(name, _)| name.get_ref().eq_ignore_ascii_case("authorization"));
    if raw.bearer_token_env.is_some() || has_authorization {
        let message =
            format!("{label}: set `[upstream.credentials]`, `bearer_token_env` or an `Authorization` header, not two");
        cx.error(offset, message);
        return None;
    }
    crate::credentials::lower_credentials(credentials, url.get_ref(), label, cx)
}

fn lower_endpoint(
    raw: &RawUpstream,
    table_offset: usize,
    label: &str,
    cx: &mut Context<'_>,
) -> (Option<Endpoint>, Option<String>) {
    match (&raw.command, &raw.url) {
        (Some(_), Some(url)) => {
            let message = format!("{label}: set either `command` (stdio) or `url` (Streamable HTTP), not both");
            cx.error(url.span().start, message);
            (None, None)
        }
        (None, None) => {
            let message = format!("{label}: missing `command` (a stdio server) or `url` (a Streamable HTTP server)");
            cx.error(table_offset, message);
            (None, None)
        }
        (Some(command), None) => {
            for (key, offset) in [
                ("url", None),
                ("headers", raw.headers.as_ref().and_then(|headers| headers.keys().next()).map(|key| key.span().start)),
                ("bearer_token_env", raw.bearer_token_env.as_ref().map(|value| value.span().start)),
            ] {
                if let Some(offset) = offset {
                    cx.error(offset, format!("{label}: `{key}` applies only to `url` upstreams, not `command`"));
                }
            }
            (lower_stdio(raw, command, label, cx), None)
        }
        (None, Some(url)) => {
            for (key, offset) in [
                ("args", raw.args.as_ref().map(|args| args.span().start)),
                ("env", raw.env.as_ref().and_then(|env| env.keys().next()).map(|key| key.span().start)),
                ("cwd", raw.cwd.as_ref().map(|cwd| cwd.span().start)),
            ] {
                if let Some(offset) = offset {
                    cx.error(offset, format!("{label}: `{key}` applies only to `command` upstreams, not `url`"));
                }
            }
            lower_http(raw, url, label, cx)
        }
    }
}

fn lower_stdio(raw: &RawUpstream, command: &Spanned<String>, label: &str, cx: &mut Context<'_>) -> Option<Endpoint> {
    let before = cx.problem_count();
    if let Err(message) = rules::check_command(command.get_ref(), raw.args.is_some()) {
        cx.error(command.span().start, format!("{label}: {message}"));
    }
    check_no_tilde(command, "command", label, cx);
    let args: Vec<String> = raw
        .args
        .as_ref()
        .map(|args| args.get_ref().iter().map(|arg| arg.get_ref().clone()).collect())
        .unwrap_or_default();
    let mut env = Vec::new();
    for (key, value) in raw.env.iter().flatten() {
        if key.get_ref().is_empty() || key.get_ref().contains(['=', '\0']) {
            cx.error(
                key.span().start,
                format!("{label}: env name \"{}\" may not be empty or contain `=`", key.get_ref()),
            );
        } else if value.get_ref().contains('\0') {
            cx.error(value.span().start, format!("{label}: env `{}` contains a NUL character", key.get_ref()));
        }
        env.push((key.get_ref().clone(), value.get_ref().clone()));
    }
    let cwd = raw.cwd.as_ref().map(|cwd| {
        if cwd.get_ref().is_empty() {
            cx.error(cwd.span().start, format!("{label}: `cwd` is empty"));
        }
        check_no_tilde(cwd, "cwd", label, cx);
        anchor(cx.base_dir, cwd.get_ref())
    });
    if cx.problem_count() > before {
        return None;
    }
    let program = if command.get_ref().contains('/') {
        anchor(cx.base_dir, command.get_ref()).to_string_lossy().into_owned()
    } else {
        command.get_ref().clone()
    };
    Some(Endpoint::Stdio { program, args, env, cwd })
}

fn check_no_tilde(value: &Spanned<String>, key: &str, label: &str, cx: &mut Context<'_>) {
    if value.get_ref().starts_with('~') {
        cx.error(
            value.span().start,
            format!("{label}: `{key}` starts with `~`, which only a shell expands: write the full path"),
        );
    }
}

fn lower_http(
    raw: &RawUpstream,
    url: &Spanned<String>,
    label: &str,
    cx: &mut Context<'_>,
) -> (Option<Endpoint>, Option<String>) {
    let before = cx.problem_count();
    let host = match rules::check_url(url.get_ref()) {
        Ok(host) => Some(host.to_owned()),
        Err(message) => {
            cx.error(url.span().start, format!("{label}: {message}"));
            None
        }
    };
    let mut headers = Vec::new();
    for (name, value) in raw.headers.iter().flatten() {
        if let Err(message) = rules::check_header_name(name.get_ref()) {
            cx.error(name.span().start, format!("{label}: {message}"));
        } else if !rules::is_header_value(value.get_ref()) {
            let message = format!("{label}: header `{}` has characters not allowed in HTTP headers", name.get_ref());
            cx.error(value.span().start, message);
        }
        headers.push((name.get_ref().clone(), value.get_ref().clone()));
    }
    let has_authorization = headers.iter().any(|(name, _)| name.eq_ignore_ascii_case("authorization"));
    let mut bearer_token_env = None;
    if let Some(variable) = &raw.bearer_token_env {
        let offset = variable.span().start;
        let variable = variable.get_ref();
        if has_authorization {
            cx.error(offset, format!("{label}: set `bearer_token_env` or an `Authorization` header, not both"));
        } else if let Err(message) = rules::check_env_var_name(variable) {
            cx.error(offset, format!("{label}: `bearer_token_env`: {message}"));
        } else {
            match (cx.env)(variable).as_deref().map(str::trim) {
                None => cx
                    .error(offset, format!("{label}: environment variable `{variable}` (bearer_token_env) is not set")),
                Some("") => {
                    cx.error(offset, format!("{label}: environment variable `{variable}` (bearer_token_env) is empty"));
                }
                Some(token) if !rules::is_header_value(token) => {
                    let message = format!(
                        "{label}: environment variable `{variable}` (bearer_token_env) has characters not allowed in \
                         an HTTP header"
                    );
                    cx.error(offset, message);
                }
                Some(token) => headers.push(("Authorization".to_owned(), format!("Bearer {token}"))),
            }
            bearer_token_env = Some(variable.clone());
        }
    }
    let sends_credentials = raw.bearer_token_env.is_some() || has_authorization;
    let cleartext = url.get_ref().get(..7).is_some_and(|scheme| scheme.eq_ignore_ascii_case("http://"));
    if let Some(host) = host.filter(|host| sends_credentials && cleartext && !rules::is_loopback_host(host)) {
        let message = format!("{label}: credentials are sent to {host} over plain http; use https");
        cx.warn(url.span().start, message);
    }
    if cx.problem_count() > before {
        return (None, None);
    }
    (Some(Endpoint::Http { url: url.get_ref().clone(), headers }), bearer_token_env)
}

fn lower_prefix(
    raw: &RawUpstream,
    name: &str,
    prefix_by_default: bool,
    label: &str,
    cx: &mut Context<'_>,
) -> (Prefix, usize) {
    if let Some(passthrough) = raw.passthrough.as_ref().filter(|passthrough| *passthrough.get_ref()) {
        if let Some(setting) = &raw.prefix {
            let message = format!(
                "{label}: `prefix` cannot be set with `passthrough = true` (a passed-through upstream's names are \
                 exposed as it gives them)"
            );
            cx.error(setting.span().start, message);
        }
        return (Prefix::Passthrough, passthrough.span().start);
    }
    let Some(setting) = &raw.prefix else {
        let prefix = if prefix_by_default { Prefix::With(name.to_owned()) } else { Prefix::None };
        return (prefix, raw.name.span().start);
    };
    let offset = setting.span().start;
    let prefix = match setting.get_ref() {
        PrefixSetting::Enabled(true) => Prefix::With(name.to_owned()),
        PrefixSetting::Enabled(false) => Prefix::None,
        PrefixSetting::Text(text) => {
            // toolgate adds the `_` separator itself; "gh_" and "gh" mean the same prefix.
            let trimmed = text.trim_end_matches('_');
            if trimmed.is_empty() {
                cx.error(offset, format!("{label}: `prefix` \"{text}\" is empty: write prefix = false for no prefix"));
            } else if let Err(message) = rules::check_name("prefix", trimmed) {
                cx.error(offset, format!("{label}: {message}"));
            }
            Prefix::With(trimmed.to_owned())
        }
    };
    (prefix, offset)
}

fn lower_timeout(value: Option<&Spanned<u64>>, default: Duration, label: &str, cx: &mut Context<'_>) -> Duration {
    let Some(value) = value else { return default };
    let seconds = *value.get_ref();
    if !(1..=MAX_TIMEOUT_SECONDS).contains(&seconds) {
        cx.error(value.span().start, format!("{label}: timeout must be between 1 and {MAX_TIMEOUT_SECONDS} seconds"));
    }
    Duration::from_secs(seconds)
}

/// `era = "auto" | "modern" | "legacy"`; absent means the spec's default.
fn lower_era(value: Option<&Spanned<String>>, label: &str, cx: &mut Context<'_>) -> UpstreamEra {
    let Some(value) = value else { return UpstreamEra::default() };
    match value.get_ref().as_str() {
        "auto" => UpstreamEra::Auto,
        "modern" => UpstreamEra::Modern,
        "legacy" => UpstreamEra::Legacy,
        other => {
            let message = format!("{label}: `era` must be \"auto\", \"modern\" or \"legacy\", not {other:?}");
            cx.error(value.span().start, message);
            UpstreamEra::default()
        }
    }
}

fn lower_max_in_flight(value: Option<&Spanned<u64>>, default: usize, label: &str, cx: &mut Context<'_>) -> usize {
    let Some(value) = value else { return default };
    let count = *value.get_ref();
    if !(1..=MAX_IN_FLIGHT).contains(&count) {
        cx.error(value.span().start, format!("{label}: `max_in_flight` must be between 1 and {MAX_IN_FLIGHT}"));
    }
    usize::try_from(count).unwrap_or(default)
}

fn lower_overrides(
    tools: BTreeMap<Spanned<String>, Spanned<RawToolOverride>>,
    label: &str,
    cx: &mut Context<'_>,
) -> BTreeMap<String, HintOverrides> {
    let mut overrides = BTreeMap::new();
    for (tool, raw) in tools {
        let offset = tool.span().start;
        let tool = tool.into_inner();
        if tool.is_empty() || tool.chars().count() > MAX_TOOL_NAME_CHARS || tool.contains(char::is_control) {
            let message =
                format!("{label}: tool name \"{tool}\" must be 1 to {MAX_TOOL_NAME_CHARS} printable characters");
            cx.error(offset, message);
            continue;
        }
        let raw = raw.into_inner();
        if let Some(title) = raw.title.as_ref().filter(|title| title.get_ref().trim().is_empty()) {
            cx.error(title.span().start, format!("{label}: tool \"{tool}\": `title` is empty"));
        }
        let hints = HintOverrides {
            title: raw.title.map(Spanned::into_inner),
            read_only: raw.read_only,
            destructive: raw.destructive,
            idempotent: raw.idempotent,
            open_world: raw.open_world,
        };
        if hints == HintOverrides::default() {
            let message = format!(
                "{label}: tool \"{tool}\" overrides nothing (set readOnlyHint, destructiveHint, idempotentHint, \
                 openWorldHint or title)"
            );
            cx.error(offset, message);
            continue;
        }
        overrides.insert(tool, hints);
    }
    overrides
}
