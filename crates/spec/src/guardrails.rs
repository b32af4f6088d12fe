//! The guardrails as configured: policy, confirmation, pins, results, retries, audit, callers and selection.

use std::path::PathBuf;
use std::time::Duration;

use toolgate_core::policy::PolicySpec;

/// Everything the guardrails need, lowered from config.
#[derive(Debug, Clone, Default)]
pub struct GuardrailSpec {
    /// Rules, mode, default profile and session taint (compiled once by the gateway).
    pub policy: PolicySpec,
    /// How a person confirms a call.
    pub confirmation: ConfirmationSpec,
    /// What happens to a pinned tool whose definition changed.
    pub pins: PinSpec,
    /// Post-processing of results.
    pub results: ResultSpec,
    /// Retries of safe calls after transport failures.
    pub retries: RetrySpec,
    /// The audit log.
    pub audit: AuditSpec,
    /// HTTP callers: bearer tokens or API keys (stored as SHA-256) and their scopes.
    pub callers: Vec<CallerSpec>,
    /// Which tools a client sees at most.
    pub selection: SelectionSpec,
}

/// How confirmations are asked.
#[derive(Debug, Clone, PartialEq)]
pub struct ConfirmationSpec {
    /// Ask by elicitation when the client declared it (else the approval queue), or always use the queue.
    pub via: ConfirmVia,
    /// How long a call waits for a person.
    pub timeout: Duration,
    /// How long an approval stays usable.
    pub approval_ttl: Duration,
    /// Offer "remember for this session" (same tool and argument shape).
    pub remember_for_session: bool,
    /// How a 2026-07-28 request that may be asked is asked: a form, or a link to the console's approval page.
    pub modern: ModernConfirm,
    /// The console's base URL as a person's browser reaches it (`https://host/console`, no trailing slash): the
    /// listen address is not always what a browser sees (a proxy, a name), so it is configured, never guessed.
    pub console_url: Option<String>,
}

impl Default for ConfirmationSpec {
    fn default() -> Self {
        ConfirmationSpec {
            via: ConfirmVia::ElicitationWhenAvailable,
            timeout: Duration::from_secs(120),
            approval_ttl: Duration::from_secs(300),
            remember_for_session: true,
            modern: ModernConfirm::Auto,
            console_url: None,
        }
    }
}

/// How toolgate asks the person behind a 2026-07-28 request (MRTR `input_required`) to confirm a call. Whatever the
/// choice, a request is only asked in a mode it declared in its own `_meta`; one that declared no usable mode waits
/// in the approval queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ModernConfirm {
    /// Toolgate's form (`approve` box) when the request declared form elicitation; the console link when it
    /// declared only URL mode and a console URL is configured.
    Auto,
    /// The form only, as before URL mode existed: a request that declared only URL mode waits in the queue.
    Form,
    /// The console link whenever the request declared URL mode (a person decides in the console, signed in, under
    /// its approver rules), else the form. Needs `console_url`.
    Console,
}

impl ModernConfirm {
    /// The config file's word for it.
    pub fn as_str(self) -> &'static str {
        match self {
            ModernConfirm::Auto => "auto",
            ModernConfirm::Form => "form",
            ModernConfirm::Console => "console",
        }
    }
}

/// The channel for confirmations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfirmVia {
    /// `elicitation/create` when the client declared form elicitation, else the approval queue.
    ElicitationWhenAvailable,
    /// Always the approval queue (`toolgate approvals`, the console).
    Queue,
}

/// Pinning behaviour.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PinSpec {
    /// A quarantined tool is hidden (default) or listed but confirm-only.
    pub quarantine: Quarantine,
}

/// What a quarantined tool looks like to clients.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Quarantine {
    /// Not listed; calling it looks like an unknown tool.
    #[default]
    Hide,
    /// Listed, but every call needs confirmation.
    ConfirmOnly,
}

/// Result post-processing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResultSpec {
    /// Text content beyond this many characters is truncated (with a flag in `_meta`).
    pub max_text_chars: usize,
    /// Remove `structuredContent` fields that the tool's `outputSchema` does not declare.
    pub strip_undeclared_structured: bool,
}

impl Default for ResultSpec {
    fn default() -> Self {
        ResultSpec { max_text_chars: 25_000, strip_undeclared_structured: false }
    }
}

/// Retries of calls that are safe to repeat.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetrySpec {
    /// Attempts in all (1 = no retry).
    pub max_attempts: u32,
    /// First backoff; doubles each time.
    pub initial_backoff: Duration,
}

impl Default for RetrySpec {
    fn default() -> Self {
        RetrySpec { max_attempts: 3, initial_backoff: Duration::from_millis(200) }
    }
}

/// The audit log.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AuditSpec {
    /// Store call arguments in clear instead of as digests.
    pub arguments_in_clear: bool,
    /// Prune rows older than this many days (`None`: keep them).
    pub keep_days: Option<u64>,
    /// Prune the oldest rows while the database uses more than this many bytes (`None`: no limit).
    pub max_bytes: Option<u64>,
    /// Export rows here (JSON lines) before they are pruned.
    pub export_dir: Option<PathBuf>,
}

/// One HTTP caller identity.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallerSpec {
    /// Its name (in the audit log).
    pub name: String,
    /// `sha256:<hex>` of its bearer token or API key; the secret itself is never stored.
    pub token_sha256: String,
    /// Its scopes.
    pub scopes: Vec<String>,
}

/// Tool-selection profile.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SelectionSpec {
    /// At most this many tools are listed.
    pub max_tools: Option<usize>,
    /// Destructive tools are not listed.
    pub exclude_destructive: bool,
    /// Tool name globs always listed (before the maximum applies).
    pub always_include: Vec<String>,
}
