//! The guardrail sections' syntax as serde types: `[confirmation]`, `[pins]`, `[results]`, `[retries]`,
//! `[audit]`, `[[caller]]` and `[selection]`, every key with its position, and all of them together as the file has
//! them ([`RawGuardrails`], `[policy]` as `policy` reads it).
//!
//! Like [`crate::raw`], these types only carry what the file says (no defaults, every table denies unknown keys);
//! [`super`] checks ranges and lowers them. Closed sets of names are enums here, so a misspelt value is reported by
//! serde at its position with the accepted names.

use serde::Deserialize;
use toml::Spanned;

use super::policy::RawPolicy;

/// The guardrail sections as the file has them; absent sections are `None` (or empty).
#[derive(Debug, Default)]
pub(crate) struct RawGuardrails {
    pub(crate) policy: Option<RawPolicy>,
    pub(crate) confirmation: Option<Spanned<RawConfirmation>>,
    pub(crate) pins: Option<Spanned<RawPins>>,
    pub(crate) results: Option<Spanned<RawResults>>,
    pub(crate) retries: Option<Spanned<RawRetries>>,
    pub(crate) audit: Option<Spanned<RawAudit>>,
    pub(crate) callers: Vec<Spanned<RawCaller>>,
    pub(crate) selection: Option<Spanned<RawSelection>>,
}

/// `[confirmation]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawConfirmation {
    pub(crate) via: Option<Spanned<RawConfirmVia>>,
    pub(crate) timeout_seconds: Option<Spanned<u64>>,
    pub(crate) approval_ttl_seconds: Option<Spanned<u64>>,
    pub(crate) remember_for_session: Option<bool>,
    pub(crate) modern: Option<Spanned<RawModernConfirm>>,
    pub(crate) console_url: Option<Spanned<String>>,
}

/// `modern = "auto" | "form" | "console"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum RawModernConfirm {
    Auto,
    Form,
    Console,
}

/// `via = "elicitation" | "queue"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum RawConfirmVia {
    Elicitation,
    Queue,
}

/// `[pins]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawPins {
    pub(crate) quarantine: Option<RawQuarantine>,
}

/// `quarantine = "hide" | "confirm"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum RawQuarantine {
    Hide,
    Confirm,
}

/// `[results]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawResults {
    pub(crate) max_text_chars: Option<Spanned<u64>>,
    pub(crate) strip_undeclared_structured: Option<bool>,
}

/// `[retries]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawRetries {
    pub(crate) max_attempts: Option<Spanned<u64>>,
    pub(crate) initial_backoff_ms: Option<Spanned<u64>>,
}

/// `[audit]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawAudit {
    pub(crate) arguments: Option<Spanned<RawAuditArguments>>,
    pub(crate) keep_days: Option<Spanned<u64>>,
    pub(crate) max_bytes: Option<Spanned<u64>>,
    pub(crate) export_dir: Option<Spanned<String>>,
}

/// `arguments = "digest" | "clear"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum RawAuditArguments {
    Digest,
    Clear,
}

/// One `[[caller]]` table.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawCaller {
    pub(crate) name: Spanned<String>,
    pub(crate) token_sha256: Option<Spanned<String>>,
    pub(crate) token_env: Option<Spanned<String>>,
    pub(crate) scopes: Option<Spanned<Vec<Spanned<String>>>>,
}

/// `[selection]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawSelection {
    pub(crate) max_tools: Option<Spanned<u64>>,
    pub(crate) exclude_destructive: Option<bool>,
    pub(crate) always_include: Option<Vec<Spanned<String>>>,
}
