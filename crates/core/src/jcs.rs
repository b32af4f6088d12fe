//! RFC 8785 (JCS) canonical JSON, written straight into a `String`.
//!
//! Every fingerprint, argument digest and audit-row hash goes through here, and the audit hash runs once per
//! row on the call path's budget, so the writer avoids what a general serializer pays for: no intermediate
//! `Value`s, no per-property allocations, object keys sorted by reference. The rules it implements:
//!
//! - object members sorted by their names as UTF-16 code units (byte order is the same for ASCII names, which
//!   are compared directly);
//! - strings with only `"`, `\` and the control characters below U+0020 escaped (`\b \t \n \f \r` by name, the
//!   rest as `\u00xx` in lower-case hex), everything else written as is;
//! - integers in plain decimal; other numbers as ECMAScript's `Number.prototype.toString` prints them, which is
//!   delegated to `serde_json_canonicalizer` (the reference this module is tested against, value by value);
//! - no whitespace.
//!
//! serde_json keeps every number's text as it was sent (`arbitrary_precision`), so an integer beyond what a double
//! holds exactly (say `18446744073709551616123`) reaches this module whole. RFC 8785 prints it as the double it
//! rounds to, which is right for fingerprints (every pin and manifest was made that way) but would make two
//! different integers one value. [`to_string_exact`] is the same canonical form except that an integer keeps its
//! own digits; it is for what toolgate records or binds about a call's arguments (the audit log's JSON columns, an
//! approval's argument digest), where the person must see, and the approval must cover, exactly what was sent. For
//! every number a double holds exactly, and for every text [`to_string`] writes, the two agree, so rows written
//! before still verify.
//!
//! A number no double holds (`1e400`, which `arbitrary_precision` lets through) has no RFC 8785 text; both forms
//! write it as the text it was sent with, so canonicalization is total: every value has one text, and two values
//! that differ there never share a fingerprint. Every number a double holds prints as RFC 8785 says, as before.

use std::cmp::Ordering;
use std::fmt::Write as _;

use serde_json::{Map, Number, Value};

/// Why a value could not be canonicalized (RFC 8785 forbids some numbers, e.g. ones outside IEEE 754 range).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("cannot canonicalize JSON for fingerprinting: {reason}")]
pub struct FingerprintError {
    reason: String,
}

impl FingerprintError {
    pub(crate) fn new(reason: String) -> FingerprintError {
        FingerprintError { reason }
    }
}

/// How numbers are printed: as RFC 8785 says, or with integers kept exact (see the module's documentation).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Numbers {
    Rfc8785,
    ExactIntegers,
}

/// Appends the canonical JSON text of `value` to `out`.
pub fn write_value(value: &Value, out: &mut String) -> Result<(), FingerprintError> {
    write_with(value, out, Numbers::Rfc8785)
}

/// The canonical JSON text of `value`.
pub fn to_string(value: &Value) -> Result<String, FingerprintError> {
    let mut out = String::with_capacity(128);
    write_with(value, &mut out, Numbers::Rfc8785)?;
    Ok(out)
}

/// The canonical JSON text of `value`, with every integer printed as its own digits rather than as the double it
/// rounds to; otherwise identical to [`to_string`].
pub fn to_string_exact(value: &Value) -> Result<String, FingerprintError> {
    let mut out = String::with_capacity(128);
    write_with(value, &mut out, Numbers::ExactIntegers)?;
    Ok(out)
}

fn write_with(value: &Value, out: &mut String, numbers: Numbers) -> Result<(), FingerprintError> {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(true) => out.push_str("true"),
        Value::Bool(false) => out.push_str("false"),
        Value::Number(number) => write_number(number, out, numbers)?,
        Value::String(text) => write_str(text, out),
        Value::Array(items) => {
            out.push('[');
            for (index, item) in items.iter().enumerate() {
                if index > 0 {
                    out.push(',');
                }
                write_with(item, out, numbers)?;
            }
            out.push(']');
        }
        Value::Object(members) => write_object(members, out, numbers)?,
    }
    Ok(())
}

fn write_object(members: &Map<String, Value>, out: &mut String, numbers: Numbers) -> Result<(), FingerprintError> {
    let mut sorted: Vec<(&String, &Value)> = members.iter().collect();
    sorted.sort_unstable_by(|(left, _), (right, _)| compare_names(left, right));
    out.push('{');
    for (index, (name, value)) in sorted.into_iter().enumerate() {
        if index > 0 {
            out.push(',');
        }
        write_str(name, out);
        out.push(':');
        write_with(value, out, numbers)?;
    }
    out.push('}');
    Ok(())
}

/// Orders member names as RFC 8785 does: by UTF-16 code units.
pub fn compare_names(left: &str, right: &str) -> Ordering {
    if left.is_ascii() && right.is_ascii() {
        left.as_bytes().cmp(right.as_bytes())
    } else {
        left.encode_utf16().cmp(right.encode_utf16())
    }
}

/// Appends `text` as a canonical JSON string literal.
pub fn write_str(text: &str, out: &mut String) {
    out.reserve(text.len() + 2);
    out.push('"');
    let mut start = 0;
    for (index, byte) in text.bytes().enumerate() {
        let escape = match byte {
            b'"' => "\\\"",
            b'\\' => "\\\\",
            0x08 => "\\b",
            b'\t' => "\\t",
            b'\n' => "\\n",
            0x0c => "\\f",
            b'\r' => "\\r",
            0x00..=0x1f => "",
            _ => continue,
        };
        out.push_str(text.get(start..index).unwrap_or_default());
        if escape.is_empty() {
            let _ = write!(out, "\\u{byte:04x}");
        } else {
            out.push_str(escape);
        }
        start = index + 1;
    }
    out.push_str(text.get(start..).unwrap_or_default());
    out.push('"');
}

fn write_number(number: &Number, out: &mut String, numbers: Numbers) -> Result<(), FingerprintError> {
    // Integers a double holds exactly print as themselves.
    if let Some(integer) = number.as_i64().filter(|integer| integer.unsigned_abs() <= 1 << 53) {
        let _ = write!(out, "{integer}");
    } else if let Some(digits) = (numbers == Numbers::ExactIntegers).then(|| integer_text(number)).flatten() {
        out.push_str(&digits);
    } else if number.as_f64().is_none() {
        // Beyond what a double holds (`1e400`): RFC 8785 has no text for it, and serde_json keeps it because of
        // `arbitrary_precision`. It is written as its own text, which is deterministic, distinct for every text
        // (two definitions never share a fingerprint) and never one RFC 8785 writes for a finite double.
        out.push_str(&number.to_string());
    } else {
        // Fractions, exponents and integers beyond 2^53 print as the IEEE 754 double ECMAScript would hold.
        let text = serde_json_canonicalizer::to_string(&Value::Number(number.clone()))
            .map_err(|error| FingerprintError::new(error.to_string()))?;
        out.push_str(&text);
    }
    Ok(())
}

/// The number's text when it is an integer literal (an optional minus and digits, as JSON writes them: no leading
/// zeros, no exponent). `-0` never gets here: it is the `i64` zero above.
fn integer_text(number: &Number) -> Option<String> {
    let text = number.to_string();
    let digits = text.strip_prefix('-').unwrap_or(&text);
    (!digits.is_empty() && digits.bytes().all(|byte| byte.is_ascii_digit())).then_some(text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    fn reference(value: &Value) -> String {
        serde_json_canonicalizer::to_string(value).unwrap_or_else(|error| unreachable!("reference failed: {error}"))
    }

    fn canonical(value: &Value) -> String {
        to_string(value).unwrap_or_else(|error| unreachable!("canonical failed: {error}"))
    }

    #[test]
    #[allow(clippy::excessive_precision, reason = "the RFC 8785 example numbers, written as the RFC writes them")]
    fn the_rfc_8785_examples_and_edges() {
        let value = json!({
            "numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001, 0, -0.0, 9007199254740993u64],
            "string": "\u{20ac}$\u{000F}\u{000a}A'\u{0042}\u{0022}\u{005c}\\\"/",
            "literals": [null, true, false],
            "\u{20ac}": 1, "\r": 2, "\u{1f600}": 3, "\u{e000}": 4, "a": 5, "ab": 6, "": 7
        });
        assert_eq!(canonical(&value), reference(&value));
    }

    #[test]
    fn supplementary_names_sort_before_private_use_ones() {
        // U+1F600 is D83D DE00 in UTF-16, so it sorts before U+E000 although its UTF-8 bytes sort after.
        assert_eq!(canonical(&json!({"\u{e000}": 1, "\u{1f600}": 2})), "{\"\u{1f600}\":2,\"\u{e000}\":1}");
    }

    fn any_json() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            any::<u64>().prop_map(Value::from),
            any::<f64>().prop_filter("finite", |number| number.is_finite()).prop_map(Value::from),
            "\\PC{0,12}|[\\x00-\\x20\"\\\\]{0,6}".prop_map(Value::String),
        ];
        leaf.prop_recursive(4, 48, 6, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
                prop::collection::vec(("\\PC{0,6}|[a-z]{1,3}", inner), 0..6)
                    .prop_map(|members| Value::Object(members.into_iter().collect())),
            ]
        })
    }

    proptest! {
        #[test]
        fn equals_the_reference_canonicalizer(value in any_json()) {
            prop_assert_eq!(canonical(&value), reference(&value));
        }
    }

    fn exact(value: &Value) -> String {
        to_string_exact(value).unwrap_or_else(|error| unreachable!("exact failed: {error}"))
    }

    fn parsed(text: &str) -> Value {
        serde_json::from_str(text).unwrap_or_else(|error| unreachable!("test JSON parses: {error}"))
    }

    #[test]
    fn exact_keeps_an_integers_digits_and_prints_the_rest_as_rfc_8785() {
        let value = parsed(
            r#"{"big": 18446744073709551616123, "neg": -18446744073709551616123, "u64": 18446744073709551615,
                "odd": 9007199254740993, "zero": -0, "fraction": 1.50, "exponent": 1e2, "huge": 1E30}"#,
        );
        assert_eq!(
            exact(&value),
            concat!(
                r#"{"big":18446744073709551616123,"exponent":100,"fraction":1.5,"huge":1e+30,"#,
                r#""neg":-18446744073709551616123,"odd":9007199254740993,"u64":18446744073709551615,"zero":0}"#
            )
        );
        assert_eq!(canonical(&value), reference(&value), "the RFC 8785 writer is unchanged");
    }

    #[test]
    fn numbers_no_double_holds_print_as_their_own_text() {
        let value = parsed(r#"{"a": 1e400, "b": -1E+400, "c": 1.5e309, "d": 1e-400, "e": 1.5}"#);
        // serde_json keeps the text in its own spelling (lower-case `e`, signed exponent); 1e-400 rounds to 0.
        let expected = r#"{"a":1e+400,"b":-1e+400,"c":1.5e+309,"d":0,"e":1.5}"#;
        assert_eq!(canonical(&value), expected);
        assert_eq!(exact(&value), expected);
        // Two such numbers never print alike, so two definitions that differ there never share a fingerprint.
        assert_ne!(canonical(&parsed("1e400")), canonical(&parsed("2e400")));
        let digits = format!("1{}", "0".repeat(400));
        assert_eq!(canonical(&parsed(&digits)), digits);
    }

    proptest! {
        /// The audit log re-canonicalizes rows written before integers were kept exact: RFC 8785 text read back must
        /// print the same, or old rows would stop verifying.
        #[test]
        fn exact_reprints_rfc_8785_text_unchanged(value in any_json()) {
            let rfc = canonical(&value);
            prop_assert_eq!(exact(&parsed(&rfc)), rfc);
        }
    }
}
