//! From TOML text to the raw serde types, collecting every problem it can instead of stopping at the first.
//!
//! The document is parsed once into toml's spanned tree (recovering from syntax errors to report several), then
//! each section and each `[[upstream]]` is deserialized on its own, so one bad upstream does not hide another's
//! mistakes. Serde's messages are reworded into the configuration's vocabulary ("key", "table", "array") and
//! prefixed with where they are (`upstream "git": `). This module applies no defaults and checks no meaning.

use toml::Spanned;
use toml::de::{DeTable, DeValue};

use crate::error::{Locator, Problem};
use crate::guardrails::raw::RawGuardrails;
use crate::guardrails::{callers, policy};
use crate::raw::{RawHttpListener, RawLimits, RawStdioListener, RawUpstream, TOP_LEVEL_KEYS, UPSTREAM_ONLY_KEYS};
use crate::tables::{array_of_tables, deserialize_section};

/// What the file says, section by section; sections that failed to deserialize are absent (their problems are
/// reported alongside).
#[derive(Debug, Default)]
pub(crate) struct RawConfig {
    pub(crate) upstreams: Vec<Spanned<RawUpstream>>,
    /// Number of `[[upstream]]` tables in the file, including those that failed to deserialize.
    pub(crate) upstream_tables: usize,
    /// Whether the file tried to declare upstreams at all (an `upstream` key, or a typo reported already).
    pub(crate) upstream_key_seen: bool,
    pub(crate) listen: Option<RawListen>,
    pub(crate) limits: Option<Spanned<RawLimits>>,
    /// `[policy]`, `[confirmation]`, `[pins]`, `[results]`, `[retries]`, `[audit]`, `[[caller]]`, `[selection]`.
    pub(crate) guardrails: RawGuardrails,
    /// `[console]` with its `[[console.user]]` tables.
    pub(crate) console: Option<Spanned<crate::console::RawConsole>>,
    /// `[store]`.
    pub(crate) store: Option<Spanned<crate::store::RawStore>>,
}

/// `[listen]`, whose two subtables are deserialized separately.
#[derive(Debug)]
pub(crate) struct RawListen {
    /// Where `[listen]` starts, for "no listener" problems.
    pub(crate) offset: usize,
    /// Number of keys in `[listen]`, valid or not.
    pub(crate) keys: usize,
    pub(crate) http: Option<Spanned<RawHttpListener>>,
    pub(crate) stdio: Option<Spanned<RawStdioListener>>,
}

/// Parses `text` into raw sections, pushing every syntax and shape problem onto `problems`; `None` after a syntax
/// error, when checking what the text means would only report noise.
pub(crate) fn parse_document(text: &str, locator: &Locator<'_>, problems: &mut Vec<Problem>) -> Option<RawConfig> {
    let (root, syntax_errors) = DeTable::parse_recoverable(text);
    if !syntax_errors.is_empty() {
        for error in syntax_errors {
            let offset = error.span().map_or(0, |span| span.start);
            problems.push(locator.problem(offset, format!("invalid TOML: {}", error.message())));
        }
        return None;
    }
    let mut config = RawConfig::default();
    for (key, value) in root.into_inner() {
        let key_offset = key.span().start;
        match key.get_ref().as_ref() {
            "upstream" => {
                config.upstream_key_seen = true;
                parse_upstreams(value, &mut config, locator, problems);
            }
            "listen" => config.listen = parse_listen(value, locator, problems),
            "limits" => config.limits = deserialize_section(value, "[limits]", locator, problems),
            "policy" => config.guardrails.policy = policy::parse_policy(value, locator, problems),
            "confirmation" => {
                config.guardrails.confirmation = deserialize_section(value, "[confirmation]", locator, problems);
            }
            "pins" => config.guardrails.pins = deserialize_section(value, "[pins]", locator, problems),
            "results" => config.guardrails.results = deserialize_section(value, "[results]", locator, problems),
            "retries" => config.guardrails.retries = deserialize_section(value, "[retries]", locator, problems),
            "audit" => config.guardrails.audit = deserialize_section(value, "[audit]", locator, problems),
            "caller" => callers::parse_callers(value, &mut config.guardrails, locator, problems),
            "selection" => {
                config.guardrails.selection = deserialize_section(value, "[selection]", locator, problems);
            }
            "console" => config.console = deserialize_section(value, "[console]", locator, problems),
            "store" => config.store = deserialize_section(value, "[store]", locator, problems),
            other => {
                config.upstream_key_seen |= UPSTREAM_TYPOS.contains(&other);
                problems.push(locator.problem(key_offset, unknown_top_level_key(other)));
            }
        }
    }
    Some(config)
}

/// Top-level keys people write for upstreams (other formats, a plural).
const UPSTREAM_TYPOS: [&str; 4] = ["upstreams", "servers", "mcpServers", "server"];

fn unknown_top_level_key(key: &str) -> String {
    let expected = TOP_LEVEL_KEYS.join(", ");
    if UPSTREAM_ONLY_KEYS.contains(&key) {
        format!("unknown key `{key}` (expected one of {expected}; `{key}` is set per `[[upstream]]`)")
    } else if matches!(key, "callers" | "clients" | "tokens") {
        format!("unknown key `{key}` (expected one of {expected}; callers are `[[caller]]` tables)")
    } else if UPSTREAM_TYPOS.contains(&key) {
        format!("unknown key `{key}` (expected one of {expected}; upstream servers are `[[upstream]]` tables)")
    } else {
        format!("unknown key `{key}` (expected one of {expected})")
    }
}

fn parse_upstreams(
    value: Spanned<DeValue<'_>>,
    config: &mut RawConfig,
    locator: &Locator<'_>,
    problems: &mut Vec<Problem>,
) {
    let Some(items) = array_of_tables(value, "upstream", locator, problems) else { return };
    for (index, item) in items.into_iter().enumerate() {
        config.upstream_tables += 1;
        let context = match item.get_ref() {
            DeValue::Table(table) => match table.get("name").map(|name| name.get_ref()) {
                Some(DeValue::String(name)) => format!("upstream \"{name}\""),
                _ => format!("upstream #{}", index + 1),
            },
            other => {
                let message = format!("upstream #{} must be a table, not {}", index + 1, other.type_str());
                problems.push(locator.problem(item.span().start, message));
                continue;
            }
        };
        if let Some(upstream) = deserialize_section(item, &context, locator, problems) {
            config.upstreams.push(upstream);
        }
    }
}

fn parse_listen(value: Spanned<DeValue<'_>>, locator: &Locator<'_>, problems: &mut Vec<Problem>) -> Option<RawListen> {
    let offset = value.span().start;
    let DeValue::Table(table) = value.into_inner() else {
        problems.push(locator.problem(offset, "`listen` must be a table (`[listen.http]`, `[listen.stdio]`)"));
        return None;
    };
    let mut listen = RawListen { offset, keys: table.len(), http: None, stdio: None };
    for (key, value) in table {
        match key.get_ref().as_ref() {
            "http" => listen.http = deserialize_section(value, "[listen.http]", locator, problems),
            "stdio" => listen.stdio = deserialize_section(value, "[listen.stdio]", locator, problems),
            other => {
                let message = format!("[listen]: unknown key `{other}` (expected one of http, stdio)");
                problems.push(locator.problem(key.span().start, message));
            }
        }
    }
    Some(listen)
}
