//! Names that look like other names: Cyrillic and Greek letters that look like Latin ones (`dеlete_file` with a
//! Cyrillic `е` reads as `delete_file`), and invisible characters inside a name.
//!
//! [`skeleton`] maps a name to the form a person sees: every look-alike letter in [`LOOKALIKES`] becomes its Latin
//! twin and invisible characters are dropped. The policy matches refusing and confirming rules on the skeleton as
//! well as on the name, so a look-alike cannot slip past a name-based rule; lint (`TG310`) and the views flag such
//! names. Covered: the Cyrillic and Greek letters (lower and upper case) that are commonly drawn like a Latin letter
//! or digit, plus the characters [`crate::display::is_invisible`] and the bidi controls. Not covered: other scripts,
//! fullwidth forms, mathematical alphanumerics (a later, larger table). Pure and allocation-free for ASCII names.

use std::borrow::Cow;

use crate::display::must_escape;

/// Cyrillic and Greek letters that are drawn like a Latin letter or digit, with that Latin twin.
pub const LOOKALIKES: &[(char, char)] = &[
    // Cyrillic lower case.
    ('а', 'a'),
    ('в', 'b'),
    ('с', 'c'),
    ('ԁ', 'd'),
    ('е', 'e'),
    ('һ', 'h'),
    ('і', 'i'),
    ('ј', 'j'),
    ('к', 'k'),
    ('ӏ', 'l'),
    ('м', 'm'),
    ('о', 'o'),
    ('р', 'p'),
    ('ԛ', 'q'),
    ('ѕ', 's'),
    ('т', 't'),
    ('ѵ', 'v'),
    ('ԝ', 'w'),
    ('х', 'x'),
    ('у', 'y'),
    ('ё', 'e'),
    ('ї', 'i'),
    // Cyrillic upper case.
    ('А', 'A'),
    ('В', 'B'),
    ('С', 'C'),
    ('Е', 'E'),
    ('Н', 'H'),
    ('І', 'I'),
    ('Ј', 'J'),
    ('К', 'K'),
    ('М', 'M'),
    ('О', 'O'),
    ('Р', 'P'),
    ('Ѕ', 'S'),
    ('Т', 'T'),
    ('Х', 'X'),
    ('У', 'Y'),
    ('Ԝ', 'W'),
    ('З', '3'),
    // Greek lower case.
    ('α', 'a'),
    ('ε', 'e'),
    ('ι', 'i'),
    ('κ', 'k'),
    ('ν', 'v'),
    ('ο', 'o'),
    ('ρ', 'p'),
    ('τ', 't'),
    ('υ', 'u'),
    ('χ', 'x'),
    ('γ', 'y'),
    // Greek upper case.
    ('Α', 'A'),
    ('Β', 'B'),
    ('Ε', 'E'),
    ('Ζ', 'Z'),
    ('Η', 'H'),
    ('Ι', 'I'),
    ('Κ', 'K'),
    ('Μ', 'M'),
    ('Ν', 'N'),
    ('Ο', 'O'),
    ('Ρ', 'P'),
    ('Τ', 'T'),
    ('Υ', 'Y'),
    ('Χ', 'X'),
];

/// The Latin twin of a look-alike letter.
fn latin_twin(character: char) -> Option<char> {
    LOOKALIKES.iter().find(|(lookalike, _)| *lookalike == character).map(|(_, latin)| *latin)
}

/// The name as a person sees it: look-alike letters replaced by their Latin twins; control characters, bidi
/// controls and invisible characters dropped. Borrowed (no work) for printable ASCII names.
pub fn skeleton(name: &str) -> Cow<'_, str> {
    if is_printable_ascii(name) {
        return Cow::Borrowed(name);
    }
    let mut out = String::with_capacity(name.len());
    for character in name.chars() {
        if must_escape(character) {
            continue;
        }
        out.push(latin_twin(character).unwrap_or(character));
    }
    if out == name { Cow::Borrowed(name) } else { Cow::Owned(out) }
}

/// What makes a name confusable, when something does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Confusable {
    /// The name as a person sees it ([`skeleton`]).
    pub looks_like: String,
    /// Latin letters are mixed with Cyrillic or Greek ones.
    pub mixed_scripts: bool,
}

/// Whether `name` may be mistaken for another name: it holds a look-alike letter next to Latin text, mixes Latin
/// with Cyrillic or Greek letters, is wholly made of look-alikes, or holds a control, bidi or invisible character.
/// `None` for printable ASCII names and for names wholly in one non-Latin script (`поиск` is a Russian word, not a
/// disguise).
pub fn confusable(name: &str) -> Option<Confusable> {
    if is_printable_ascii(name) {
        return None;
    }
    let latin = name.chars().any(|character| character.is_ascii_alphabetic());
    let other = name.chars().any(is_cyrillic_or_greek);
    let hidden = name.chars().any(must_escape);
    let mixed_scripts = latin && other;
    let looks_like = skeleton(name);
    let disguised = looks_like != name && (mixed_scripts || hidden || looks_like.is_ascii());
    disguised.then(|| Confusable { looks_like: looks_like.into_owned(), mixed_scripts })
}

fn is_printable_ascii(name: &str) -> bool {
    name.bytes().all(|byte| (0x20..0x7f).contains(&byte))
}

fn is_cyrillic_or_greek(character: char) -> bool {
    matches!(character, '\u{0370}'..='\u{03FF}' | '\u{0400}'..='\u{052F}' | '\u{1F00}'..='\u{1FFF}')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lookalikes_map_to_what_a_person_reads() {
        assert_eq!(skeleton("d\u{0435}lete_file"), "delete_file");
        assert_eq!(skeleton("\u{0440}urge_\u{03bf}ld"), "purge_old");
        assert_eq!(skeleton("delete\u{200b}_file"), "delete_file");
        assert_eq!(skeleton("delete\r\x1b_file"), "delete_file");
        assert!(matches!(skeleton("read_file"), Cow::Borrowed(_)));
        assert_eq!(skeleton("поиск"), "пoиck", "a Russian word keeps its non-look-alike letters");
    }

    #[test]
    fn confusable_names_are_flagged_and_plain_ones_are_not() {
        let found = confusable("d\u{0435}lete_file");
        assert_eq!(found, Some(Confusable { looks_like: "delete_file".into(), mixed_scripts: true }));
        assert_eq!(confusable("delete\u{200b}_file").map(|found| found.looks_like), Some("delete_file".into()));
        assert_eq!(confusable("\u{0441}\u{0430}\u{0445}").map(|found| found.looks_like), Some("cax".into()));
        assert_eq!(confusable("read_file"), None);
        assert_eq!(confusable("поиск"), None);
        assert_eq!(confusable("café_menu"), None);
    }
}
