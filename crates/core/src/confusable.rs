//! Names that look like other names: letters of other scripts or forms that look like Latin ones (`dеlete_file`
//! with a Cyrillic `е` reads as `delete_file`, so does `ｄｅｌｅｔｅ_file` in fullwidth forms), and invisible
//! characters inside a name.
//!
//! [`skeleton`] maps a name to the form a person sees: every look-alike becomes its Latin twin and invisible
//! characters are dropped. The policy matches refusing and confirming rules on the skeleton as well as on the name,
//! so a look-alike cannot slip past a name-based rule; lint (`TG310`) and the views flag such names. Covered: the
//! Cyrillic, Greek, Armenian and Cherokee letters in [`LOOKALIKES`] that are commonly drawn like a Latin letter or
//! digit (after Unicode's confusables data, the entries that map to one ASCII letter or digit), the letterlike
//! symbols used as mathematical letters, every fullwidth ASCII form and every mathematical alphanumeric letter and
//! digit (mapped by arithmetic over their blocks), plus the characters [`crate::display::is_invisible`] and the
//! bidi controls. Mixed scripts are told by each letter's script (Latin, Cyrillic, Greek, Armenian, Cherokee, by
//! the Unicode blocks that hold them). Not covered: look-alikes in other scripts and multi-character confusables
//! (`rn` for `m`); a name holding those is not flagged. Pure and allocation-free for ASCII names.

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
    // Armenian.
    ('օ', 'o'),
    ('ս', 'u'),
    ('ց', 'g'),
    ('հ', 'h'),
    ('ո', 'n'),
    ('զ', 'q'),
    ('Օ', 'O'),
    ('Ս', 'U'),
    ('Լ', 'L'),
    ('Տ', 'S'),
    // Cherokee (capital forms, drawn like Latin capitals).
    ('Ꭺ', 'A'),
    ('Ᏼ', 'B'),
    ('Ꮯ', 'C'),
    ('Ꭰ', 'D'),
    ('Ꭼ', 'E'),
    ('Ꮐ', 'G'),
    ('Ꮋ', 'H'),
    ('Ꭻ', 'J'),
    ('Ꮶ', 'K'),
    ('Ꮮ', 'L'),
    ('Ꮇ', 'M'),
    ('Ꮲ', 'P'),
    ('Ꮢ', 'R'),
    ('Ꮪ', 'S'),
    ('Ꭲ', 'T'),
    ('Ꮩ', 'V'),
    ('Ꮃ', 'W'),
    ('Ꮓ', 'Z'),
    // Letterlike symbols that stand in for mathematical letters (the holes of the mathematical alphanumerics).
    ('ℎ', 'h'),
    ('ℯ', 'e'),
    ('ℊ', 'g'),
    ('ℴ', 'o'),
    ('ℓ', 'l'),
    ('ℂ', 'C'),
    ('ℍ', 'H'),
    ('ℕ', 'N'),
    ('ℙ', 'P'),
    ('ℚ', 'Q'),
    ('ℝ', 'R'),
    ('ℤ', 'Z'),
    ('ℬ', 'B'),
    ('ℰ', 'E'),
    ('ℱ', 'F'),
    ('ℋ', 'H'),
    ('ℐ', 'I'),
    ('ℒ', 'L'),
    ('ℳ', 'M'),
    ('ℛ', 'R'),
    ('ℭ', 'C'),
    ('ℌ', 'H'),
    ('ℑ', 'I'),
    ('ℜ', 'R'),
    ('ℨ', 'Z'),
];

/// The first and last mathematical alphanumeric letters (13 styles of `A`-`Z` then `a`-`z`).
const MATH_LETTERS: (u32, u32) = (0x1D400, 0x1D6A3);
/// The first and last mathematical digits (5 styles of `0`-`9`).
const MATH_DIGITS: (u32, u32) = (0x1D7CE, 0x1D7FF);
/// The fullwidth forms of `!` to `~`, at a fixed distance from ASCII.
const FULLWIDTH: (u32, u32) = (0xFF01, 0xFF5E);
const FULLWIDTH_OFFSET: u32 = 0xFEE0;

/// The Latin twin of a look-alike letter, digit or fullwidth form.
fn latin_twin(character: char) -> Option<char> {
    let code = u32::from(character);
    let ascii = |code: u32| u8::try_from(code).ok().map(char::from);
    if (FULLWIDTH.0..=FULLWIDTH.1).contains(&code) {
        return ascii(code - FULLWIDTH_OFFSET);
    }
    if (MATH_LETTERS.0..=MATH_LETTERS.1).contains(&code) {
        let letter = (code - MATH_LETTERS.0) % 52;
        return if letter < 26 { ascii(u32::from(b'A') + letter) } else { ascii(u32::from(b'a') + letter - 26) };
    }
    if (MATH_DIGITS.0..=MATH_DIGITS.1).contains(&code) {
        return ascii(u32::from(b'0') + (code - MATH_DIGITS.0) % 10);
    }
    LOOKALIKES.iter().find(|(lookalike, _)| *lookalike == character).map(|(_, latin)| *latin)
}

/// The scripts whose letters are told apart for mixed-script detection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Script {
    Latin,
    Cyrillic,
    Greek,
    Armenian,
    Cherokee,
}

/// The script of a letter, by the Unicode blocks of the scripts toolgate tells apart; `None` for digits,
/// punctuation, symbols (the mathematical alphanumerics are script Common) and letters of other scripts.
fn script_of(character: char) -> Option<Script> {
    match character {
        'a'..='z' | 'A'..='Z' | 'ａ'..='ｚ' | 'Ａ'..='Ｚ' => Some(Script::Latin),
        '\u{00C0}'..='\u{024F}' | '\u{1E00}'..='\u{1EFF}' if character.is_alphabetic() => Some(Script::Latin),
        '\u{0370}'..='\u{03FF}' | '\u{1F00}'..='\u{1FFF}' => Some(Script::Greek),
        '\u{0400}'..='\u{052F}' | '\u{1C80}'..='\u{1C8F}' | '\u{2DE0}'..='\u{2DFF}' | '\u{A640}'..='\u{A69F}' => {
            Some(Script::Cyrillic)
        }
        '\u{0531}'..='\u{058F}' | '\u{FB13}'..='\u{FB17}' => Some(Script::Armenian),
        '\u{13A0}'..='\u{13FF}' | '\u{AB70}'..='\u{ABBF}' => Some(Script::Cherokee),
        _ => None,
    }
}

/// Whether `name` holds letters of more than one of the scripts [`script_of`] tells apart.
fn mixes_scripts(name: &str) -> bool {
    let mut scripts = name.chars().filter_map(script_of);
    let Some(first) = scripts.next() else { return false };
    scripts.any(|script| script != first)
}

/// The name as a person sees it: look-alike letters replaced by their Latin twins; control characters, bidi
/// controls and invisible characters dropped. Borrowed (no work) for printable ASCII names.
pub fn skeleton(name: &str) -> Cow<'_, str> {
    if is_printable_ascii(name) {
        return Cow::Borrowed(name);
    }
    let out: String = name.chars().filter_map(seen_as).collect();
    if out == name { Cow::Borrowed(name) } else { Cow::Owned(out) }
}

/// One character as [`skeleton`] shows it: its Latin twin, itself, or nothing (a control, bidi or invisible
/// character). Its own function so that inference can fold a long text character by character exactly as
/// `skeleton` folds a name.
pub(crate) fn seen_as(character: char) -> Option<char> {
    if must_escape(character) { None } else { Some(latin_twin(character).unwrap_or(character)) }
}

/// What makes a name confusable, when something does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Confusable {
    /// The name as a person sees it ([`skeleton`]).
    pub looks_like: String,
    /// Letters of more than one script (Latin, Cyrillic, Greek, Armenian, Cherokee) are mixed.
    pub mixed_scripts: bool,
}

/// Whether `name` may be mistaken for another name: it holds a look-alike next to Latin text, mixes the letters of
/// two scripts, is wholly made of look-alikes, or holds a control, bidi or invisible character.
/// `None` for printable ASCII names and for names wholly in one non-Latin script (`поиск` is a Russian word, not a
/// disguise).
pub fn confusable(name: &str) -> Option<Confusable> {
    if is_printable_ascii(name) {
        return None;
    }
    let hidden = name.chars().any(must_escape);
    let mixed_scripts = mixes_scripts(name);
    let looks_like = skeleton(name);
    let disguised = looks_like != name && (mixed_scripts || hidden || looks_like.is_ascii());
    disguised.then(|| Confusable { looks_like: looks_like.into_owned(), mixed_scripts })
}

fn is_printable_ascii(name: &str) -> bool {
    name.bytes().all(|byte| (0x20..0x7f).contains(&byte))
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

    #[test]
    fn fullwidth_mathematical_armenian_and_cherokee_lookalikes_are_read_as_latin() {
        assert_eq!(skeleton("ｄｅｌｅｔｅ＿ｆｉｌｅ"), "delete_file");
        assert_eq!(skeleton("\u{1D41D}\u{1D41E}\u{1D425}ete_file"), "delete_file", "mathematical bold d, e, l");
        assert_eq!(skeleton("\u{1D5BD}\u{1D7E2}"), "d0", "sans-serif d, sans-serif digit zero");
        assert_eq!(skeleton("ℎttp_get"), "http_get");
        assert_eq!(skeleton("Ꭰrop_table"), "Drop_table", "Cherokee A drawn like D");
        assert_eq!(skeleton("sհell_exec"), "shell_exec", "Armenian ho");
        for name in ["ｄｅｌｅｔｅ_file", "\u{1D41D}elete_file", "sհell_exec", "ᎠROP_TABLE"] {
            assert!(confusable(name).is_some(), "{name} is not flagged");
        }
        assert_eq!(confusable("sհell_exec").map(|found| found.mixed_scripts), Some(true));
        assert_eq!(
            confusable("ｄｅｌｅｔｅ").map(|found| found.mixed_scripts),
            Some(false),
            "fullwidth Latin is Latin"
        );
        assert_eq!(confusable("բարեւ"), None, "an Armenian word is no disguise");
    }

    /// Look-alikes for an ASCII letter or digit: the table's, its fullwidth form and its mathematical bold form.
    fn disguises(ascii: char) -> Vec<char> {
        let code = u32::from(ascii);
        let mut found: Vec<char> =
            LOOKALIKES.iter().filter(|(_, latin)| *latin == ascii).map(|(lookalike, _)| *lookalike).collect();
        found.extend(char::from_u32(code + FULLWIDTH_OFFSET));
        let bold = match ascii {
            'A'..='Z' => char::from_u32(MATH_LETTERS.0 + code - u32::from(b'A')),
            'a'..='z' => char::from_u32(MATH_LETTERS.0 + 26 + code - u32::from(b'a')),
            '0'..='9' => char::from_u32(MATH_DIGITS.0 + code - u32::from(b'0')),
            _ => None,
        };
        found.extend(bold);
        found
    }

    proptest::proptest! {
        #[test]
        fn a_disguised_ascii_name_is_read_back_and_flagged(
            name in "[a-zA-Z0-9_]{1,24}",
            picks in proptest::collection::vec(proptest::prelude::any::<proptest::sample::Index>(), 24),
            disguise in proptest::collection::vec(proptest::prelude::any::<bool>(), 24),
        ) {
            let disguised: String = name
                .chars()
                .zip(picks.iter().zip(&disguise))
                .map(|(character, (pick, swap))| {
                    let options = disguises(character);
                    if *swap && !options.is_empty() { options[pick.index(options.len())] } else { character }
                })
                .collect();
            proptest::prop_assert_eq!(skeleton(&disguised), name.as_str());
            if disguised != name {
                let found = confusable(&disguised);
                proptest::prop_assert_eq!(found.map(|found| found.looks_like), Some(name.clone()));
            }
        }

        #[test]
        fn the_skeleton_is_a_fixed_point(name in "\\PC{0,24}") {
            let once = skeleton(&name).into_owned();
            proptest::prop_assert_eq!(skeleton(&once), once.as_str());
        }
    }
}
