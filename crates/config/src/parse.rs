//! From TOML text to the raw serde types, collecting every problem it can instead of stopping at the first.
//!
//! The document is parsed once into toml's spanned tree (recovering from syntax errors to report several), then
//! each section and each `[[upstream]]` is deserialized on its own, so one bad upstream does not hide another's
//! mistakes. Serde's messages are reworded into the configuration's vocabulary ("key", "table", "array") and
//! prefixed with where they are (`upstream "git": `). This module applies no defaults and checks no meaning.

use serde::de::DeserializeOwned;
use toml::Spanned;
use toml::de::{DeTable, DeValue, ValueDeserializer};

use crate::error::{Locator, Problem};
use crate::guardrails::{RawGuardrails, callers, policy};
use crate::raw::{RawHttpListener, RawLimits, RawStdioListener, RawUpstream, TOP_LEVEL_KEYS, UPSTREAM_ONLY_KEYS};

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

/// The items of an array of tables at `key` (`upstream`, `policy.rule`), or why it is not one.
pub(crate) fn array_of_tables<'i>(
    value: Spanned<DeValue<'i>>,
    key: &str,
    locator: &Locator<'_>,
    problems: &mut Vec<Problem>,
) -> Option<Vec<Spanned<DeValue<'i>>>> {
    let offset = value.span().start;
    match value.into_inner() {
        DeValue::Array(items) => Some(items.into_iter().collect()),
        DeValue::Table(_) => {
            let message = format!("`{key}` must be an array of tables: write `[[{key}]]` (double brackets)");
            problems.push(locator.problem(offset, message));
            None
        }
        other => {
            let message = format!("`{key}` must be an array of tables, not {}", other.type_str());
            problems.push(locator.problem(offset, message));
            None
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

/// Deserializes one section, or records why not (with `context` in front of the reworded serde message).
pub(crate) fn deserialize_section<T: DeserializeOwned>(
    value: Spanned<DeValue<'_>>,
    context: &str,
    locator: &Locator<'_>,
    problems: &mut Vec<Problem>,
) -> Option<Spanned<T>> {
    let fallback = value.span().start;
    match serde::Deserialize::deserialize(ValueDeserializer::from(value)) {
        Ok(section) => Some(section),
        Err(error) => {
            let offset = error.span().map_or(fallback, |span| span.start);
            let message = format!("{context}: {}", reword_serde_message(error.message()));
            problems.push(locator.problem(offset, message));
            None
        }
    }
}

/// Rewrites serde's derive messages ("unknown field", "expected u64") into configuration words.
pub(crate) fn reword_serde_message(message: &str) -> String {
    if let Some(rest) = message.strip_prefix("unknown field ") {
        return match rest.split_once(", expected ") {
            Some((key, expected)) => format!("unknown key {key} (expected {})", expected.replace('`', "")),
            None => match rest.split_once(", there are no fields") {
                Some((key, _)) => format!("unknown key {key} (this table takes no keys)"),
                None => format!("unknown key {rest}"),
            },
        };
    }
    if let Some(rest) = message.strip_prefix("missing field ") {
        return format!("missing key {rest}");
    }
    if let Some(rest) = message.strip_prefix("unknown variant ") {
        return match rest.split_once(", expected ") {
            Some((value, expected)) => format!("unknown value {value} (expected {})", expected.replace('`', "")),
            None => format!("unknown value {rest}"),
        };
    }
    let mut reworded = message.to_owned();
    for (from, to) in [
        ("expected u64", "expected a whole number of at least 0"),
        ("expected a sequence", "expected an array"),
        ("expected a map", "expected a table"),
        ("invalid type: map", "invalid type: table"),
        ("invalid type: sequence", "invalid type: array"),
    ] {
        reworded = reworded.replace(from, to);
    }
    if let Some(index) = reworded.find("expected struct ") {
        reworded.replace_range(index.., "expected a table");
    }
    reworded
}

#[cfg(test)]
mod tests {
    use super::reword_serde_message;

    #[test]
    fn serde_messages_speak_of_keys() {
        let check = |input: &str, expected: &str| assert_eq!(reword_serde_message(input), expected);
        check(
            "unknown field `comand`, expected one of `command`, `args`",
            "unknown key `comand` (expected one of command, args)",
        );
        check("unknown field `x`, expected `title`", "unknown key `x` (expected title)");
        check("missing field `name`", "missing key `name`");
        check(
            "invalid type: string \"a\", expected u64",
            "invalid type: string \"a\", expected a whole number of at least 0",
        );
        check("invalid type: integer `1`, expected struct RawLimits", "invalid type: integer `1`, expected a table");
        check(
            "unknown variant `mail`, expected `elicitation` or `queue`",
            "unknown value `mail` (expected elicitation or queue)",
        );
        check(
            "unknown variant `x`, expected one of `untrusted`, `pinned`, `verified`",
            "unknown value `x` (expected one of untrusted, pinned, verified)",
        );
    }
}
