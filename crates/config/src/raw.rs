//! The configuration file's syntax as serde types: every key the file may contain, with its position.
//!
//! These types exist only between the TOML text and [`crate::lower`]; they are never handed to the runtime.
//! Every table denies unknown keys, so a typo or a key from a later version is an error rather than silently
//! ignored. No defaults are applied here: `None` means "not in the file". The guardrail sections' types are in
//! [`crate::guardrails::raw`]; `[policy]` is deserialized straight into the core's `PolicySpec`.

use std::collections::BTreeMap;
use std::fmt;

use serde::Deserialize;
use serde::de::{self, Deserializer, Visitor};
use toml::Spanned;
use toolgate_core::trust::TrustLevel;

/// The keys allowed at the top level, in documentation order.
pub(crate) const TOP_LEVEL_KEYS: [&str; 13] = [
    "upstream",
    "listen",
    "limits",
    "policy",
    "confirmation",
    "pins",
    "results",
    "retries",
    "audit",
    "caller",
    "selection",
    "console",
    "store",
];

/// Keys of `[[upstream]]` people put at the top level; they get a friendlier error than a plain typo.
pub(crate) const UPSTREAM_ONLY_KEYS: [&str; 4] = ["trust", "min_confidence", "manifest", "open_world_content"];

/// One `[[upstream]]` table.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawUpstream {
    pub(crate) name: Spanned<String>,
    pub(crate) command: Option<Spanned<String>>,
    pub(crate) args: Option<Spanned<Vec<Spanned<String>>>>,
    pub(crate) env: Option<BTreeMap<Spanned<String>, Spanned<String>>>,
    pub(crate) cwd: Option<Spanned<String>>,
    pub(crate) url: Option<Spanned<String>>,
    pub(crate) headers: Option<BTreeMap<Spanned<String>, Spanned<String>>>,
    pub(crate) bearer_token_env: Option<Spanned<String>>,
    pub(crate) prefix: Option<Spanned<PrefixSetting>>,
    pub(crate) passthrough: Option<Spanned<bool>>,
    pub(crate) timeout_seconds: Option<Spanned<u64>>,
    pub(crate) initialize_timeout_seconds: Option<Spanned<u64>>,
    pub(crate) max_in_flight: Option<Spanned<u64>>,
    pub(crate) trust: Option<Spanned<TrustLevel>>,
    pub(crate) min_confidence: Option<Spanned<f64>>,
    pub(crate) manifest: Option<Spanned<RawManifest>>,
    pub(crate) open_world_content: Option<Spanned<bool>>,
    pub(crate) tools: Option<BTreeMap<Spanned<String>, Spanned<RawToolOverride>>>,
    pub(crate) sandbox: Option<Spanned<crate::sandbox::RawSandbox>>,
    pub(crate) era: Option<Spanned<String>>,
    pub(crate) credentials: Option<Spanned<crate::credentials::RawCredentials>>,
}

/// `[upstream.manifest]`: a verified upstream's signed manifest and its signers.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawManifest {
    pub(crate) path: Spanned<String>,
    pub(crate) public_keys: Spanned<Vec<Spanned<String>>>,
}

/// `prefix = true | false | "text"`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum PrefixSetting {
    Enabled(bool),
    Text(String),
}

impl<'de> Deserialize<'de> for PrefixSetting {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct PrefixVisitor;

        impl Visitor<'_> for PrefixVisitor {
            type Value = PrefixSetting;

            fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
                formatter.write_str("true, false or a prefix string")
            }

            fn visit_bool<E: de::Error>(self, value: bool) -> Result<PrefixSetting, E> {
                Ok(PrefixSetting::Enabled(value))
            }

            fn visit_str<E: de::Error>(self, value: &str) -> Result<PrefixSetting, E> {
                Ok(PrefixSetting::Text(value.to_owned()))
            }
        }

        deserializer.deserialize_any(PrefixVisitor)
    }
}

/// `[upstream.tools.NAME]`: hint overrides for one tool, field by field, spelled as on the wire.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawToolOverride {
    #[serde(rename = "readOnlyHint")]
    pub(crate) read_only: Option<bool>,
    #[serde(rename = "destructiveHint")]
    pub(crate) destructive: Option<bool>,
    #[serde(rename = "idempotentHint")]
    pub(crate) idempotent: Option<bool>,
    #[serde(rename = "openWorldHint")]
    pub(crate) open_world: Option<bool>,
    pub(crate) title: Option<Spanned<String>>,
}

/// `[listen.http]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawHttpListener {
    pub(crate) bind: Option<Spanned<String>>,
    pub(crate) path: Option<Spanned<String>>,
    pub(crate) allowed_origins: Option<Vec<Spanned<String>>>,
    pub(crate) allowed_hosts: Option<Vec<Spanned<String>>>,
    pub(crate) oauth: Option<Spanned<crate::oauth::RawOAuth>>,
}

/// `[listen.stdio]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawStdioListener {
    pub(crate) identity: Option<Spanned<String>>,
    pub(crate) scopes: Option<Spanned<Vec<Spanned<String>>>>,
}

/// `[limits]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawLimits {
    pub(crate) max_message_mib: Option<Spanned<u64>>,
    pub(crate) max_sessions: Option<Spanned<u64>>,
    pub(crate) session_idle_minutes: Option<Spanned<u64>>,
    pub(crate) max_tools_per_upstream: Option<Spanned<u64>>,
    pub(crate) max_list_items_per_upstream: Option<Spanned<u64>>,
    pub(crate) max_listing_mib_per_upstream: Option<Spanned<u64>>,
    pub(crate) max_sessions_per_caller: Option<Spanned<u64>>,
    pub(crate) max_connections: Option<Spanned<u64>>,
    pub(crate) header_read_timeout_seconds: Option<Spanned<u64>>,
    pub(crate) max_pending_approvals_per_session: Option<Spanned<u64>>,
    pub(crate) max_pending_approvals_per_caller: Option<Spanned<u64>>,
    pub(crate) max_relayed_requests_per_session: Option<Spanned<u64>>,
    pub(crate) max_relayed_requests_per_upstream: Option<Spanned<u64>>,
    pub(crate) held_call_timeout_seconds: Option<Spanned<u64>>,
}
