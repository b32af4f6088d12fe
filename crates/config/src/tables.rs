//! Reading one piece of the TOML tree into a raw serde type: a section ([`deserialize_section`]), an array of
//! tables ([`array_of_tables`]), with serde's messages reworded into the configuration's vocabulary ("key",
//! "table", "array") and prefixed with where they are (`upstream "git": `).
//!
//! Below the document parser (`parse`) and the sections that read their own tables (`guardrails::callers`,
//! `guardrails::policy`), so neither names the other for it. It records problems; it applies no defaults and checks
//! no meaning.

use serde::de::DeserializeOwned;
use toml::Spanned;
use toml::de::{DeValue, ValueDeserializer};

use crate::error::{Locator, Problem};

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
