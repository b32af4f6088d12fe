//! Upstream- and model-controlled text made safe to show a person: on a terminal, in a log line, in HTML and in
//! toolgate's own questions (elicitation text). The one place where such text is escaped; every human-facing
//! output goes through it.
//!
//! Tool names, titles, descriptions, argument keys and values, schema property names, upstream names and stderr
//! lines are data chosen by someone else. Shown raw, a carriage return or an escape sequence rewrites what the
//! person reads (`\r`, `\x1b[2K`), a bidi control reorders it (U+202E), an invisible character hides a difference,
//! and a newline forges a line of its own. [`escape`] makes every such character visible as an escape, so what is
//! shown is one line of printable text and two different inputs never look the same:
//!
//! - `\` becomes `\\`, so every backslash in escaped text starts an escape and none can be forged;
//! - `\n`, `\r`, `\t` become those two-character escapes; every other control character (C0, DEL, C1), bidi
//!   control (U+061C, U+200E/F, U+202A–202E, U+2066–2069) and invisible or format character (zero-width
//!   characters, U+2028/2029, soft hyphen, BOM, tags, variation selectors, fillers) becomes `\u{hex}`;
//! - a view that shows only part of a text ends it with the cut marker `\[N more characters]` ([`bounded`]),
//!   which escaped text cannot contain (its backslash would have been doubled);
//! - [`quoted`] wraps the escaped text in `"` with `"` escaped as `\"`, so a text cannot close its own quotes.
//!
//! Pure functions of their input; nothing here decides whether a text is shown, only how. It must never pass a
//! character from [`must_escape`] through raw, and must stay injective (property-tested below).

use std::fmt::Write as _;

/// Whether `character` is shown as an escape rather than as itself: control characters (C0, DEL, C1), bidi
/// controls, and invisible or format characters that change how neighbouring text looks or hide a difference.
pub fn must_escape(character: char) -> bool {
    character.is_control() || is_bidi_control(character) || is_invisible(character)
}

/// The Unicode bidirectional controls: embeddings, overrides, isolates and marks.
pub fn is_bidi_control(character: char) -> bool {
    matches!(character, '\u{061C}' | '\u{200E}' | '\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}')
}

/// Characters that draw nothing (or only change their neighbours) yet make two texts differ: zero-width
/// characters, separators, the soft hyphen, fillers, invisible operators, tags and variation selectors.
pub fn is_invisible(character: char) -> bool {
    matches!(
        character,
        '\u{00AD}'
            | '\u{034F}'
            | '\u{115F}'
            | '\u{1160}'
            | '\u{17B4}'
            | '\u{17B5}'
            | '\u{180B}'..='\u{180F}'
            | '\u{200B}'..='\u{200D}'
            | '\u{2028}'
            | '\u{2029}'
            | '\u{2060}'..='\u{2065}'
            | '\u{206A}'..='\u{206F}'
            | '\u{3164}'
            | '\u{FE00}'..='\u{FE0F}'
            | '\u{FEFF}'
            | '\u{FFA0}'
            | '\u{FFF9}'..='\u{FFFB}'
            | '\u{1BCA0}'..='\u{1BCA3}'
            | '\u{1D173}'..='\u{1D17A}'
            | '\u{E0000}'..='\u{E0FFF}'
    )
}

/// `text` as one line of printable text: see the module documentation for the escapes.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    escape_into(&mut out, text);
    out
}

/// [`escape`], appended to `out`.
pub fn escape_into(out: &mut String, text: &str) {
    for character in text.chars() {
        push_escaped(out, character, false);
    }
}

/// At most `max_chars` characters of `text`, escaped; when more follow, the cut marker `\[N more characters]`
/// says how many were left out, so a view never hides that it shows only part.
pub fn bounded(text: &str, max_chars: usize) -> String {
    let mut out = String::with_capacity(text.len().min(max_chars.saturating_mul(2)));
    bounded_into(&mut out, text, max_chars, false);
    out
}

/// `text` escaped, bounded as [`bounded`] does and in double quotes (`"` inside escaped as `\"`): how toolgate's
/// own sentences show a part chosen by someone else, which can then neither end its quotes nor start a line.
pub fn quoted(text: &str, max_chars: usize) -> String {
    let mut out = String::with_capacity(text.len().min(max_chars.saturating_mul(2)) + 2);
    out.push('"');
    bounded_into(&mut out, text, max_chars, true);
    // The marker, when there is one, stands inside the quotes: it is toolgate's, and the quotes end the value.
    out.push('"');
    out
}

/// The cut marker for `left_out` characters not shown.
pub fn cut_marker(left_out: usize) -> String {
    format!("\\[{left_out} more characters]")
}

/// [`escape`] for HTML text or a quoted attribute: markup characters become entities as well.
pub fn escape_html(text: &str) -> String {
    escape_markup(&escape(text))
}

/// HTML markup characters as entities, nothing else: for text [`escape`] already made safe.
pub fn escape_markup(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for character in text.chars() {
        match markup_entity(character) {
            Some(entity) => out.push_str(entity),
            None => out.push(character),
        }
    }
    out
}

/// The entity that stands for an HTML markup character in text or a quoted attribute.
pub fn markup_entity(character: char) -> Option<&'static str> {
    match character {
        '&' => Some("&amp;"),
        '<' => Some("&lt;"),
        '>' => Some("&gt;"),
        '"' => Some("&quot;"),
        '\'' => Some("&#39;"),
        _ => None,
    }
}

/// `value` as one-line JSON that is safe to print: JSON already escapes quotes, backslashes and C0 controls; every
/// other character from [`must_escape`] becomes a JSON `\uXXXX` escape too, so the text stays valid JSON. At most
/// `max_chars` characters of it, then the cut marker (which JSON text cannot contain: `\[` is no JSON escape).
pub fn json_text(value: &serde_json::Value, max_chars: usize) -> String {
    let text = json_safe(&value.to_string());
    let total = text.chars().count();
    if total <= max_chars {
        return text;
    }
    // Never cut inside an escape: the kept part ends before an escape that would not fit.
    let mut keep_bytes = 0;
    let mut kept_chars = 0;
    let mut characters = text.char_indices().peekable();
    while let Some((_, character)) = characters.next() {
        let length = match character {
            '\\' if characters.peek().is_some_and(|(_, next)| *next == 'u') => 6,
            '\\' => 2,
            _ => 1,
        };
        if kept_chars + length > max_chars {
            break;
        }
        for _ in 1..length {
            characters.next();
        }
        kept_chars += length;
        keep_bytes = characters.peek().map(|(next, _)| *next).unwrap_or(text.len());
    }
    let mut out = text[..keep_bytes].to_owned();
    out.push_str(&cut_marker(total - kept_chars));
    out
}

/// JSON text as serde_json writes it (compact or pretty), with every character from [`must_escape`] inside its
/// strings written as a JSON `\uXXXX` escape: the same JSON value, safe to print. serde_json already escapes C0
/// controls inside strings, so a raw line break is layout and stays.
pub fn json_safe(json: &str) -> String {
    let mut text = String::with_capacity(json.len());
    for character in json.chars() {
        if character != '\n' && must_escape(character) {
            let mut units = [0u16; 2];
            for unit in character.encode_utf16(&mut units) {
                let _ = write!(text, "\\u{unit:04x}");
            }
        } else {
            text.push(character);
        }
    }
    text
}

fn bounded_into(out: &mut String, text: &str, max_chars: usize, in_quotes: bool) {
    let mut characters = text.chars();
    for character in characters.by_ref().take(max_chars) {
        push_escaped(out, character, in_quotes);
    }
    let left_out = characters.count();
    if left_out > 0 {
        out.push_str(&cut_marker(left_out));
    }
}

fn push_escaped(out: &mut String, character: char, in_quotes: bool) {
    match character {
        '\\' => out.push_str("\\\\"),
        '\n' => out.push_str("\\n"),
        '\r' => out.push_str("\\r"),
        '\t' => out.push_str("\\t"),
        '"' if in_quotes => out.push_str("\\\""),
        other if must_escape(other) => {
            let _ = write!(out, "\\u{{{:x}}}", u32::from(other));
        }
        other => out.push(other),
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    /// Reads escaped text back; `None` when it holds something [`escape`] never writes (a forged marker, say).
    fn unescape(text: &str) -> Option<String> {
        let mut out = String::new();
        let mut characters = text.chars();
        while let Some(character) = characters.next() {
            if character != '\\' {
                out.push(character);
                continue;
            }
            match characters.next()? {
                '\\' => out.push('\\'),
                'n' => out.push('\n'),
                'r' => out.push('\r'),
                't' => out.push('\t'),
                '"' => out.push('"'),
                'u' => {
                    if characters.next()? != '{' {
                        return None;
                    }
                    let hex: String = characters.by_ref().take_while(|character| *character != '}').collect();
                    out.push(char::from_u32(u32::from_str_radix(&hex, 16).ok()?)?);
                }
                _ => return None,
            }
        }
        Some(out)
    }

    fn hostile_text() -> impl Strategy<Value = String> {
        let pieces = prop::collection::vec(
            prop_oneof![
                Just("\r".to_owned()),
                Just("\n".to_owned()),
                Just("\x1b[2K".to_owned()),
                Just("\u{202e}".to_owned()),
                Just("\u{2066}".to_owned()),
                Just("\u{200b}".to_owned()),
                Just("\u{85}".to_owned()),
                Just("\u{7f}".to_owned()),
                Just("\\".to_owned()),
                Just("\"".to_owned()),
                Just("\\[3 more characters]".to_owned()),
                Just("\\u{1b}".to_owned()),
                "[a-z ]{0,8}",
                any::<char>().prop_map(String::from),
            ],
            0..40,
        );
        pieces.prop_map(|pieces| pieces.concat())
    }

    #[test]
    fn controls_bidi_and_invisibles_are_shown_as_escapes() {
        assert_eq!(escape("a\rb\nc\td"), "a\\rb\\nc\\td");
        assert_eq!(escape("\x1b[2Kok"), "\\u{1b}[2Kok");
        assert_eq!(escape("abc\u{202e}txt.exe"), "abc\\u{202e}txt.exe");
        assert_eq!(escape("x\u{200b}y\u{feff}"), "x\\u{200b}y\\u{feff}");
        assert_eq!(escape("C:\\dir"), "C:\\\\dir");
        assert_eq!(escape("naïve — ok, документ"), "naïve — ok, документ", "printable text is kept");
        assert_eq!(escape_html("<b>\u{202e}</b>"), "&lt;b&gt;\\u{202e}&lt;/b&gt;");
        let value = serde_json::json!({"k\u{202e}": "a\u{85}\n\u{e0001}"});
        assert_eq!(json_text(&value, 100), r#"{"k\u202e":"a\u0085\n\udb40\udc01"}"#);
        assert_eq!(json_text(&serde_json::json!("\n\nabc"), 3), r#""\n\[6 more characters]"#);
    }

    #[test]
    fn bounded_and_quoted_say_what_they_leave_out() {
        assert_eq!(bounded("abcdef", 3), "abc\\[3 more characters]");
        assert_eq!(bounded("abc", 3), "abc");
        assert_eq!(quoted("Read note\" … safe\n", 100), "\"Read note\\\" … safe\\n\"");
        assert_eq!(quoted("abcdef", 2), "\"ab\\[4 more characters]\"");
    }

    proptest! {
        #[test]
        fn escaped_text_holds_no_raw_control_bidi_or_invisible(text in hostile_text()) {
            for shown in [escape(&text), bounded(&text, 7), quoted(&text, 11), escape_html(&text)] {
                prop_assert!(!shown.chars().any(must_escape), "{shown:?}");
            }
        }

        #[test]
        fn escaping_is_injective_and_reads_back(text in hostile_text(), other in hostile_text()) {
            prop_assert_eq!(unescape(&escape(&text)), Some(text.clone()));
            if text != other {
                prop_assert_ne!(escape(&text), escape(&other));
                prop_assert_ne!(quoted(&text, usize::MAX), quoted(&other, usize::MAX));
            }
        }

        #[test]
        fn a_text_cannot_forge_the_cut_marker_or_end_its_quotes(text in hostile_text()) {
            // Whole text: no marker, whatever the text says. Cut text: exactly one, at the end.
            let whole = escape(&text);
            prop_assert!(unescape(&whole).is_some(), "{whole:?}");
            let shown = bounded(&text, 5);
            let left_out = text.chars().count().saturating_sub(5);
            if left_out > 0 {
                let marker = cut_marker(left_out);
                prop_assert!(shown.ends_with(&marker));
                let body = &shown[..shown.len() - marker.len()];
                prop_assert_eq!(unescape(body), Some(text.chars().take(5).collect::<String>()));
            }
            let inside = quoted(&text, usize::MAX);
            let inner = &inside[1..inside.len() - 1];
            prop_assert!(!inner.replace("\\\\", "").replace("\\\"", "").contains('"'), "{inside:?}");
        }

        #[test]
        fn very_long_text_is_bounded(length in 1_000usize..20_000, limit in 1usize..300) {
            let text = "\u{202e}x\r".repeat(length / 3 + 1);
            let shown = bounded(&text, limit);
            prop_assert!(shown.chars().count() <= limit * 8 + 32, "{}", shown.len());
            prop_assert!(shown.ends_with(" more characters]"));
        }
    }
}
