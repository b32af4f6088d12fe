//! The guardrail settings: `[policy]`, `[confirmation]`, `[pins]`, `[results]`, `[retries]`, `[audit]`,
//! `[[caller]]` and `[selection]`, from their raw sections to a [`GuardrailSpec`] with the documented defaults.
//!
//! Each section is optional and lowers on its own; a section that is absent gets [`GuardrailSpec::default`]'s
//! values, which are the defaults `docs/config.md` documents. The policy is validated by compiling it with the
//! core's compiler ([`policy`]); callers' secrets are hashed as soon as they are read ([`callers`]). Problems and
//! warnings go to the lowering [`Context`], never returned early.

pub(crate) mod callers;
pub(crate) mod policy;
pub(crate) mod raw;

use std::time::Duration;

use toml::Spanned;
use toolgate_core::policy::glob::Glob;
use toolgate_spec::{
    AuditSpec, ConfirmVia, ConfirmationSpec, GuardrailSpec, ModernConfirm, PinSpec, Quarantine, ResultSpec, RetrySpec,
    SelectionSpec,
};

use crate::context::Context;
use raw::{
    RawAudit, RawAuditArguments, RawConfirmVia, RawConfirmation, RawGuardrails, RawModernConfirm, RawQuarantine,
    RawResults, RawRetries, RawSelection,
};

/// Longest confirmation wait and approval lifetime (a day).
const MAX_CONFIRMATION_SECONDS: u64 = 24 * 60 * 60;
/// Shortest and longest `max_text_chars`: below this a result is unreadable, above it no model reads it whole.
const MIN_TEXT_CHARS: u64 = 100;
const MAX_TEXT_CHARS: u64 = 10_000_000;
/// Most attempts of one call.
const MAX_ATTEMPTS: u64 = 10;
/// Longest first backoff: the runtime caps every later one at 10 s, so a longer first wait would make no sense.
const MAX_BACKOFF_MS: u64 = 10_000;
/// Most tools a selection may list.
const MAX_TOOLS: u64 = 10_000;

/// Lowers every guardrail section; `upstream_names` are the configured upstreams (for policy warnings).
pub(crate) fn lower_guardrails(raw: RawGuardrails, upstream_names: &[String], cx: &mut Context<'_>) -> GuardrailSpec {
    GuardrailSpec {
        policy: policy::lower_policy(raw.policy, upstream_names, cx),
        confirmation: lower_confirmation(raw.confirmation, cx),
        pins: PinSpec {
            quarantine: match raw.pins.and_then(|pins| pins.into_inner().quarantine) {
                None | Some(RawQuarantine::Hide) => Quarantine::Hide,
                Some(RawQuarantine::Confirm) => Quarantine::ConfirmOnly,
            },
        },
        results: lower_results(raw.results, cx),
        retries: lower_retries(raw.retries, cx),
        audit: lower_audit(raw.audit, cx),
        callers: callers::lower_callers(raw.callers, cx),
        selection: lower_selection(raw.selection, cx),
    }
}

/// `value` when it lies in `min..=max`, else an error at its position and `None`.
fn bounded(
    value: Option<Spanned<u64>>,
    section: &str,
    key: &str,
    min: u64,
    max: u64,
    cx: &mut Context<'_>,
) -> Option<u64> {
    let value = value?;
    if (min..=max).contains(value.get_ref()) {
        Some(value.into_inner())
    } else {
        cx.error(value.span().start, format!("[{section}]: `{key}` must be between {min} and {max}"));
        None
    }
}

fn lower_confirmation(raw: Option<Spanned<RawConfirmation>>, cx: &mut Context<'_>) -> ConfirmationSpec {
    let defaults = ConfirmationSpec::default();
    let Some(raw) = raw else { return defaults };
    let raw = raw.into_inner();
    let seconds = |value, key, cx: &mut Context<'_>| {
        bounded(value, "confirmation", key, 1, MAX_CONFIRMATION_SECONDS, cx).map(Duration::from_secs)
    };
    let timeout = seconds(raw.timeout_seconds, "timeout_seconds", cx).unwrap_or(defaults.timeout);
    let approval_ttl = seconds(raw.approval_ttl_seconds, "approval_ttl_seconds", cx).unwrap_or(defaults.approval_ttl);
    let console_url = lower_console_url(raw.console_url, raw.modern.as_ref(), cx);
    let modern = match raw.modern.map(Spanned::into_inner) {
        None => defaults.modern,
        Some(RawModernConfirm::Auto) => ModernConfirm::Auto,
        Some(RawModernConfirm::Form) => ModernConfirm::Form,
        Some(RawModernConfirm::Console) => ModernConfirm::Console,
    };
    ConfirmationSpec {
        via: match raw.via.map(Spanned::into_inner) {
            None => defaults.via,
            Some(RawConfirmVia::Elicitation) => ConfirmVia::ElicitationWhenAvailable,
            Some(RawConfirmVia::Queue) => ConfirmVia::Queue,
        },
        timeout,
        approval_ttl,
        remember_for_session: raw.remember_for_session.unwrap_or(defaults.remember_for_session),
        modern,
        console_url,
    }
}

/// The console's base URL for URL-mode confirmations: `https://` (or `http://` on loopback), no query or fragment,
/// nothing a client could not open as it is; a trailing `/` is dropped so pages are `{url}/approvals/{id}`.
/// `modern = "console"` without it is an error: toolgate would have nowhere to send the person.
fn lower_console_url(
    url: Option<Spanned<String>>,
    modern: Option<&Spanned<RawModernConfirm>>,
    cx: &mut Context<'_>,
) -> Option<String> {
    let Some(url) = url else {
        if let Some(modern) = modern.filter(|modern| *modern.get_ref() == RawModernConfirm::Console) {
            let message = "[confirmation]: `modern = \"console\"` needs `console_url`, the console's address as a \
                           person's browser reaches it (e.g. \"https://toolgate.example.com/console\"); the listen \
                           address is not always what a browser sees";
            cx.error(modern.span().start, message);
        }
        return None;
    };
    let text = url.get_ref().trim();
    let problem = if text.chars().any(|character| character.is_whitespace() || character.is_control()) {
        Some("holds a space or a control character")
    } else if text.contains(['?', '#']) {
        Some("must not have a query or a fragment (pages are found under it)")
    } else if crate::rules::check_secure_url(text).is_err() {
        Some("must be an https:// URL (http:// only on loopback: a person's console session would travel in the clear)")
    } else {
        None
    };
    if let Some(problem) = problem {
        cx.error(url.span().start, format!("[confirmation]: `console_url` {problem}"));
        return None;
    }
    Some(text.trim_end_matches('/').to_owned())
}

fn lower_results(raw: Option<Spanned<RawResults>>, cx: &mut Context<'_>) -> ResultSpec {
    let defaults = ResultSpec::default();
    let Some(raw) = raw else { return defaults };
    let raw = raw.into_inner();
    let max_text_chars = bounded(raw.max_text_chars, "results", "max_text_chars", MIN_TEXT_CHARS, MAX_TEXT_CHARS, cx)
        .and_then(|chars| usize::try_from(chars).ok())
        .unwrap_or(defaults.max_text_chars);
    ResultSpec {
        max_text_chars,
        strip_undeclared_structured: raw.strip_undeclared_structured.unwrap_or(defaults.strip_undeclared_structured),
    }
}

fn lower_retries(raw: Option<Spanned<RawRetries>>, cx: &mut Context<'_>) -> RetrySpec {
    let defaults = RetrySpec::default();
    let Some(raw) = raw else { return defaults };
    let raw = raw.into_inner();
    let max_attempts = bounded(raw.max_attempts, "retries", "max_attempts", 1, MAX_ATTEMPTS, cx)
        .and_then(|attempts| u32::try_from(attempts).ok())
        .unwrap_or(defaults.max_attempts);
    let initial_backoff = bounded(raw.initial_backoff_ms, "retries", "initial_backoff_ms", 1, MAX_BACKOFF_MS, cx)
        .map(Duration::from_millis)
        .unwrap_or(defaults.initial_backoff);
    RetrySpec { max_attempts, initial_backoff }
}

fn lower_audit(raw: Option<Spanned<RawAudit>>, cx: &mut Context<'_>) -> AuditSpec {
    let Some(raw) = raw else { return AuditSpec::default() };
    let raw = raw.into_inner();
    let arguments_in_clear =
        raw.arguments.as_ref().is_some_and(|arguments| *arguments.get_ref() == RawAuditArguments::Clear);
    if let Some(arguments) = raw.arguments.as_ref().filter(|_| arguments_in_clear) {
        let message = "[audit]: `arguments = \"clear\"` writes every call's arguments to the audit log as they are, \
                       secrets and personal data included; the default \"digest\" stores only their SHA-256";
        cx.warn(arguments.span().start, message);
    }
    let keep_days = bounded(raw.keep_days, "audit", "keep_days", 1, MAX_KEEP_DAYS, cx);
    let max_bytes = bounded(raw.max_bytes, "audit", "max_bytes", MIN_AUDIT_BYTES, u64::MAX, cx);
    let export_dir = raw.export_dir.map(|dir| crate::context::anchor(cx.base_dir, &dir.into_inner()));
    AuditSpec { arguments_in_clear, keep_days, max_bytes, export_dir }
}

/// The longest `keep_days` (100 years: beyond it, keeping everything is what is meant).
const MAX_KEEP_DAYS: u64 = 36_500;

/// The smallest `max_bytes`: below 64 KiB the schema and a few rows alone would exceed it.
const MIN_AUDIT_BYTES: u64 = 64 * 1024;

fn lower_selection(raw: Option<Spanned<RawSelection>>, cx: &mut Context<'_>) -> SelectionSpec {
    let Some(raw) = raw else { return SelectionSpec::default() };
    let raw = raw.into_inner();
    let max_tools = bounded(raw.max_tools, "selection", "max_tools", 1, MAX_TOOLS, cx)
        .and_then(|count| usize::try_from(count).ok());
    let mut always_include = Vec::new();
    for pattern in raw.always_include.unwrap_or_default() {
        if let Err(error) = Glob::new(pattern.get_ref()) {
            let message = format!("[selection]: `always_include` has a bad pattern `{}`: {error}", pattern.get_ref());
            cx.error(pattern.span().start, message);
        }
        always_include.push(pattern.into_inner());
    }
    SelectionSpec { max_tools, exclude_destructive: raw.exclude_destructive.unwrap_or(false), always_include }
}
