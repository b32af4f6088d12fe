//! The raw material of inference: a tool's name, titles, description and schema, read once into plain text and
//! token lists that the cue rules search.
//!
//! This module only reads; it knows no cue and decides nothing. It never reads `annotations` hint values (only
//! `annotations.title`, which is a text like the top-level title), so inference stays independent of what the
//! server declared.

use serde_json::{Map, Value};

use std::borrow::Cow;

use crate::confusable::{seen_as, skeleton};
use crate::tool::ToolDefinition;
use crate::words::{TokenText, tokens};

/// How deep nested schemas are walked; deeper properties add little and cost time on hostile input.
const MAX_SCHEMA_DEPTH: usize = 4;
/// How many properties are kept; a schema with thousands of properties is read only in part.
const MAX_PROPERTIES: usize = 200;
/// How much description text is read (characters); cues live near the start.
const MAX_DESCRIPTION_CHARS: usize = 4_000;
/// How much description text is searched for stated side effects (characters): far more than the other cues read,
/// because a confession ("also deletes every file") may be appended after a long honest text. A longer
/// description is itself a cue (`Signals::effect_text_cut`).
const MAX_EFFECT_TEXT_CHARS: usize = 65_536;

/// One input-schema property, flattened.
#[derive(Debug, Clone, Default)]
pub(crate) struct Property {
    /// The property name as written (`filePath`, `dry_run`).
    pub(crate) name: String,
    /// The name split into lowercase tokens.
    pub(crate) tokens: Vec<String>,
    /// The name lowercased with `-`, `_` and every other non-alphanumeric character removed (`dry_run` ->
    /// `dryrun`): cues compare whole names this way many times per tool, so it is made once.
    pub(crate) flat_name: String,
    /// The JSON type(s), lowercase (`string`, `boolean`, ...), from `type` or `anyOf`/`oneOf` branches.
    pub(crate) types: Vec<String>,
    /// The lowercased description, when any.
    pub(crate) description: String,
    /// Lowercased `enum` values that are strings (also `const` values of `anyOf`/`oneOf` branches).
    pub(crate) enum_values: Vec<String>,
    /// True when the property is listed in its object's `required`.
    pub(crate) required: bool,
    /// True for properties of the top-level object (not nested).
    pub(crate) top_level: bool,
    /// `format`, lowercase (`uri`, `date-time`).
    pub(crate) format: String,
}

impl Property {
    /// True when the property has one of the given name tokens.
    pub(crate) fn has_token(&self, wanted: &[&str]) -> bool {
        self.tokens.iter().any(|token| wanted.contains(&token.as_str()))
    }
}

/// Everything inference reads from a tool.
#[derive(Debug, Clone, Default)]
pub(crate) struct Signals {
    /// Tokens of the tool name.
    pub(crate) name_tokens: Vec<String>,
    /// Tokens of the title (`title`, else `annotations.title`), with a leading `Namespace:` part removed.
    pub(crate) title_tokens: Vec<String>,
    /// The lowercased description (truncated).
    pub(crate) description: String,
    /// Where the words of `description` start, so [`Signals::description_phrase`] need not scan it per phrase.
    pub(crate) description_index: PhraseIndex,
    /// Tokens of the first sentence of the description.
    pub(crate) lead_tokens: Vec<String>,
    /// The lead tokens joined by single spaces, which several cues search for phrases (kept once, not re-joined).
    pub(crate) lead_text: String,
    /// Tokens of the whole (truncated) description.
    pub(crate) description_tokens: TokenText,
    /// How many sentences (or list items, lines) of at least three words the description has: a measure of how
    /// much it documents beyond restating the action.
    pub(crate) sentence_count: usize,
    /// Flattened input-schema properties, top level first.
    pub(crate) properties: Vec<Property>,
    /// The lowercased description searched for stated side effects (up to [`MAX_EFFECT_TEXT_CHARS`]).
    pub(crate) effect_text: String,
    /// True when the description is longer than [`MAX_EFFECT_TEXT_CHARS`], so part of it was not searched.
    pub(crate) effect_text_cut: bool,
}

impl Signals {
    /// Reads a tool.
    pub(crate) fn read(tool: &ToolDefinition) -> Signals {
        // Look-alike letters and invisible characters are read as a person sees them: `dеlete_file` with a
        // Cyrillic `е` is a delete to every cue, not an unknown word (`confusable::skeleton`).
        let title = as_seen(tool.title().or_else(|| tool.annotations_title()).unwrap_or_default());
        let title = title.as_ref();
        // "Pods: Delete" or "Tekton: Start Pipeline": the part before the colon names a namespace, not an action.
        let title = title.split_once(": ").map_or(title, |(_, rest)| rest);
        let full_description = as_seen(tool.description().unwrap_or_default());
        let full_description = full_description.as_ref();
        // Slices, not `chars().collect()`: the same characters, without building the strings char by char.
        let effect_text = char_prefix(full_description, MAX_EFFECT_TEXT_CHARS);
        let effect_text_cut = effect_text.len() < full_description.len();
        let effect_text_lower = effect_text.to_lowercase();
        // The description is the effect text's first characters, lowercased: for a text no longer than that (nearly
        // all), the very same string, which need not be lowercased twice.
        let description = if effect_text.len() <= MAX_DESCRIPTION_CHARS {
            effect_text_lower.clone()
        } else {
            char_prefix(effect_text, MAX_DESCRIPTION_CHARS).to_lowercase()
        };
        let lead = first_sentence(&description);
        let mut properties = Vec::new();
        if let Some(schema) = tool.input_schema() {
            collect_properties(schema, 0, &mut properties);
        }
        let lead_tokens = tokens(lead);
        Signals {
            name_tokens: tokens(&skeleton(tool.name())),
            title_tokens: tokens(title),
            lead_text: lead_tokens.join(" "),
            lead_tokens,
            description_tokens: TokenText::new(&description),
            sentence_count: count_sentences(&description),
            description_index: PhraseIndex::new(&description),
            description,
            properties,
            effect_text: effect_text_lower,
            effect_text_cut,
        }
    }

    /// The first of the phrases (lowercase) that the description contains.
    pub(crate) fn description_phrase<'a>(&self, phrases: &[&'a str]) -> Option<&'a str> {
        phrases.iter().copied().find(|phrase| self.description_index.contains(&self.description, phrase))
    }

    /// The first name or title token found among the words.
    pub(crate) fn name_or_title_word<'a>(&self, words: &[&'a str]) -> Option<&'a str> {
        words
            .iter()
            .copied()
            .find(|word| self.name_tokens.iter().chain(self.title_tokens.iter()).any(|token| token == word))
    }

    /// The first property whose whole name (lowercased, `-`/`_` removed) is one of the given names.
    pub(crate) fn property_named(&self, wanted: &[&str]) -> Option<&Property> {
        self.properties.iter().find(|property| wanted.contains(&property.flat_name.as_str()))
    }
}

/// A text as a person sees it, word by word ([`skeleton`]: look-alike letters folded, invisible characters
/// dropped), with its whitespace kept: line breaks end sentences and clauses, and `skeleton` alone would drop them
/// as control characters.
pub(crate) fn as_seen(text: &str) -> Cow<'_, str> {
    if text.is_ascii() {
        return Cow::Borrowed(text);
    }
    // `skeleton` folds character by character, so folding each word is folding each character that is not
    // whitespace: one pass and one string, not a `skeleton` call and its string per word of a long description.
    // Runs of printable ASCII and ASCII whitespace are copied whole (`skeleton` leaves printable ASCII as it is).
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while !rest.is_empty() {
        let run = rest.bytes().position(|byte| !matches!(byte, b'\t'..=b'\r' | b' '..=b'~')).unwrap_or(rest.len());
        out.push_str(&rest[..run]);
        rest = &rest[run..];
        let Some(character) = rest.chars().next() else { break };
        if character.is_whitespace() {
            out.push(character);
        } else if let Some(seen) = seen_as(character) {
            out.push(seen);
        }
        rest = &rest[character.len_utf8()..];
    }
    Cow::Owned(out)
}

/// The first `count` characters of `text` (all of it when shorter).
fn char_prefix(text: &str, count: usize) -> &str {
    // A text of at most `count` bytes has at most `count` characters: nearly every text, and no walk over its
    // characters needed.
    if text.len() <= count {
        return text;
    }
    text.char_indices().nth(count).map_or(text, |(end, _)| &text[..end])
}

/// True when `text` contains `phrase` as whole words (`repl` is not found in `replica`).
///
/// Only positions where a word starts are tried (a match must start there when the phrase starts with a letter or
/// digit), instead of a substring search per call: inference asks this of the same texts for many phrases.
pub(crate) fn contains_phrase(text: &str, phrase: &str) -> bool {
    if !starts_alphanumeric(phrase) {
        return contains_phrase_by_search(text, phrase);
    }
    let found = if text.is_ascii() {
        // In ASCII every byte is a character: a word start is a byte after a non-alphanumeric one.
        let bytes = text.as_bytes();
        let first = phrase.as_bytes()[0];
        (0..bytes.len()).any(|start| {
            bytes[start] == first
                && (start == 0 || !bytes[start - 1].is_ascii_alphanumeric())
                && phrase_at(text, start, phrase)
        })
    } else {
        word_starts(text).any(|start| phrase_at(text, start, phrase))
    };
    settle(found, text, phrase)
}

/// A word-start search's answer, made exact: a phrase found that overlaps itself is looked up again by the
/// substring search (when nothing was found, that search finds nothing either: its matches all start at a word).
fn settle(found: bool, text: &str, phrase: &str) -> bool {
    if found && overlaps_itself(phrase) { contains_phrase_by_search(text, phrase) } else { found }
}

/// The definition [`contains_phrase`] and [`PhraseIndex`] must agree with: the non-overlapping occurrences of
/// `phrase`, one of them with no letter or digit on either side. Used as it stands for the phrases the word-start
/// search cannot stand in for.
fn contains_phrase_by_search(text: &str, phrase: &str) -> bool {
    text.match_indices(phrase).any(|(index, found)| {
        let starts = text[..index].chars().next_back().is_none_or(|before| !before.is_alphanumeric());
        let ends = text[index + found.len()..].chars().next().is_none_or(|after| !after.is_alphanumeric());
        starts && ends
    })
}

fn starts_alphanumeric(phrase: &str) -> bool {
    phrase.chars().next().is_some_and(char::is_alphanumeric)
}

/// True when an occurrence of `phrase` could start at a word start inside another occurrence (`a b a`): the
/// non-overlapping search of [`contains_phrase_by_search`] would skip the second, so the word-start search, which
/// tries every word start, could disagree with it. No phrase inference uses is like that; this keeps it exact.
fn overlaps_itself(phrase: &str) -> bool {
    phrase.char_indices().any(|(index, character)| {
        let next = index + character.len_utf8();
        !character.is_alphanumeric() && next < phrase.len() && phrase.starts_with(&phrase[next..])
    })
}

/// The byte offsets where a run of letters and digits starts.
fn word_starts(text: &str) -> impl Iterator<Item = usize> + '_ {
    let mut previous_alphanumeric = false;
    text.char_indices().filter_map(move |(index, character)| {
        let alphanumeric = character.is_alphanumeric();
        let starts = alphanumeric && !previous_alphanumeric;
        previous_alphanumeric = alphanumeric;
        starts.then_some(index)
    })
}

/// True when `phrase` is written at `start` (a word start) and no letter or digit follows it.
fn phrase_at(text: &str, start: usize, phrase: &str) -> bool {
    text[start..].starts_with(phrase)
        && text[start + phrase.len()..].chars().next().is_none_or(|after| !after.is_alphanumeric())
}

/// The word starts of one text grouped by their first two bytes, so a phrase is tried only where a word begins
/// the way it does. Built once per description; [`PhraseIndex::contains`] answers as [`contains_phrase`] does.
#[derive(Debug, Clone)]
pub(crate) struct PhraseIndex {
    /// Word starts, grouped by bucket.
    starts: Vec<usize>,
    /// Where each bucket's group ends in `starts` (bucket `b` is `ends[b - 1]..ends[b]`).
    ends: Box<[usize; BUCKETS]>,
}

/// Buckets of [`PhraseIndex`]; words share one when their first two bytes hash alike, which costs a failed
/// comparison, never a wrong answer.
const BUCKETS: usize = 256;

impl Default for PhraseIndex {
    fn default() -> PhraseIndex {
        PhraseIndex { starts: Vec::new(), ends: Box::new([0; BUCKETS]) }
    }
}

impl PhraseIndex {
    /// Indexes the word starts of `text`.
    pub(crate) fn new(text: &str) -> PhraseIndex {
        let keyed: Vec<(usize, usize)> =
            word_starts(text).map(|start| (bucket(text.as_bytes(), start), start)).collect();
        let mut ends = Box::new([0usize; BUCKETS]);
        for (key, _) in &keyed {
            ends[*key] += 1;
        }
        let mut total = 0;
        for end in ends.iter_mut() {
            total += *end;
            *end = total;
        }
        // Fill each bucket from its end backwards, so starts stay in text order within a bucket.
        let mut starts = vec![0; keyed.len()];
        let mut next = ends.clone();
        for (key, start) in keyed.iter().rev() {
            next[*key] -= 1;
            starts[next[*key]] = *start;
        }
        PhraseIndex { starts, ends }
    }

    /// [`contains_phrase`] for the text this index was built from.
    pub(crate) fn contains(&self, text: &str, phrase: &str) -> bool {
        if phrase.len() < 2 || !starts_alphanumeric(phrase) {
            return contains_phrase(text, phrase);
        }
        let key = bucket(phrase.as_bytes(), 0);
        let begin = if key == 0 { 0 } else { self.ends[key - 1] };
        let found = self.starts[begin..self.ends[key]].iter().any(|start| phrase_at(text, *start, phrase));
        settle(found, text, phrase)
    }
}

/// The bucket of the two bytes at `start` (a missing second byte counts as zero).
fn bucket(bytes: &[u8], start: usize) -> usize {
    let first = usize::from(bytes[start]);
    let second = usize::from(bytes.get(start + 1).copied().unwrap_or(0));
    (first * 31 + second) % BUCKETS
}

fn first_sentence(description: &str) -> &str {
    let trimmed = description.trim_start();
    let end = trimmed
        .char_indices()
        .find(|&(index, character)| {
            character == '\n' && index > 0
                || (character == '.' && trimmed[index + 1..].starts_with(char::is_whitespace))
        })
        .map_or(trimmed.len(), |(index, _)| index);
    &trimmed[..end]
}

/// Words a segment needs to count as a sentence: `e.g.`, `v1.` or a bare `-` bullet do not count.
const MIN_SENTENCE_WORDS: usize = 3;

/// Sentences of a description: text ended by `.`, `!` or `?` before whitespace (or the end), or by a line break;
/// only segments of at least [`MIN_SENTENCE_WORDS`] words count.
pub(crate) fn count_sentences(description: &str) -> usize {
    let mut count = 0;
    let mut words = 0;
    let mut in_word = false;
    let mut characters = description.chars().peekable();
    while let Some(character) = characters.next() {
        if character.is_alphanumeric() {
            if !in_word {
                words += 1;
            }
            in_word = true;
            continue;
        }
        in_word = false;
        let ends = character == '\n'
            || matches!(character, '.' | '!' | '?') && characters.peek().is_none_or(|next| next.is_whitespace());
        if ends {
            count += usize::from(words >= MIN_SENTENCE_WORDS);
            words = 0;
        }
    }
    count + usize::from(words >= MIN_SENTENCE_WORDS)
}

fn collect_properties(schema: &Map<String, Value>, depth: usize, out: &mut Vec<Property>) {
    if depth > MAX_SCHEMA_DEPTH {
        return;
    }
    let required: Vec<&str> = field(schema, "required")
        .and_then(Value::as_array)
        .map_or_else(Vec::new, |list| list.iter().filter_map(Value::as_str).collect());
    let Some(properties) = field(schema, "properties").and_then(Value::as_object) else {
        return;
    };
    for (name, property) in properties {
        if out.len() >= MAX_PROPERTIES {
            return;
        }
        let Some(property) = property.as_object() else { continue };
        let mut entry = Property {
            name: name.clone(),
            tokens: tokens(name),
            flat_name: name.chars().filter(|character| character.is_alphanumeric()).collect::<String>().to_lowercase(),
            required: required.contains(&name.as_str()),
            top_level: depth == 0,
            ..Property::default()
        };
        read_property_shape(property, &mut entry, 0);
        out.push(entry);
        for nested in nested_objects(property) {
            collect_properties(nested, depth + 1, out);
        }
    }
}

/// Reads type, description, enum and format of a property, looking into `anyOf`/`oneOf` branches.
fn read_property_shape(property: &Map<String, Value>, entry: &mut Property, depth: usize) {
    match field(property, "type") {
        Some(Value::String(kind)) => entry.types.push(kind.to_lowercase()),
        Some(Value::Array(kinds)) => {
            entry.types.extend(kinds.iter().filter_map(Value::as_str).map(str::to_lowercase));
        }
        _ => {}
    }
    if entry.description.is_empty()
        && let Some(description) = field(property, "description").and_then(Value::as_str)
    {
        entry.description = char_prefix(description, 1_000).to_lowercase();
    }
    if let Some(values) = field(property, "enum").and_then(Value::as_array) {
        entry.enum_values.extend(values.iter().filter_map(Value::as_str).map(str::to_lowercase));
    }
    if let Some(value) = field(property, "const").and_then(Value::as_str) {
        entry.enum_values.push(value.to_lowercase());
    }
    if entry.format.is_empty()
        && let Some(format) = field(property, "format").and_then(Value::as_str)
    {
        entry.format = format.to_lowercase();
    }
    if depth >= 2 {
        return;
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(branches) = field(property, key).and_then(Value::as_array) {
            for branch in branches.iter().filter_map(Value::as_object) {
                read_property_shape(branch, entry, depth + 1);
            }
        }
    }
    if let Some(items) = field(property, "items").and_then(Value::as_object)
        && let Some(values) = field(items, "enum").and_then(Value::as_array)
    {
        entry.enum_values.extend(values.iter().filter_map(Value::as_str).map(str::to_lowercase));
    }
}

/// Object schemas nested in a property: the property itself, its `items`, and `anyOf`/`oneOf` branches.
fn nested_objects(property: &Map<String, Value>) -> Vec<&Map<String, Value>> {
    let mut nested = Vec::new();
    if field(property, "properties").is_some() {
        nested.push(property);
    }
    if let Some(items) = field(property, "items").and_then(Value::as_object)
        && field(items, "properties").is_some()
    {
        nested.push(items);
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(branches) = field(property, key).and_then(Value::as_array) {
            nested.extend(
                branches.iter().filter_map(Value::as_object).filter(|branch| field(branch, "properties").is_some()),
            );
        }
    }
    nested
}

/// `map.get(key)`, found by comparing the keys of a small map instead of hashing `key`: schema objects have a
/// handful of keys, and hashing (SipHash) cost more than the comparisons. Keys are unique, so both find the same.
fn field<'a>(map: &'a Map<String, Value>, key: &str) -> Option<&'a Value> {
    if map.len() > FIELD_SCAN_LIMIT {
        return map.get(key);
    }
    map.iter().find(|(name, _)| name.as_str() == key).map(|(_, value)| value)
}

/// Up to this many keys [`field`] compares keys; a larger map is looked up by hash.
const FIELD_SCAN_LIMIT: usize = 16;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_sentence_stops_at_a_period_or_line_break() {
        assert_eq!(first_sentence("  get a thing. then more"), "get a thing");
        assert_eq!(first_sentence("read file.txt now\nsecond"), "read file.txt now");
        assert_eq!(first_sentence(""), "");
    }

    #[test]
    fn sentences_are_counted_by_ending_and_length() {
        assert_eq!(count_sentences(""), 0);
        assert_eq!(count_sentences("delete a file share"), 1);
        assert_eq!(count_sentences("delete a share. it cannot be undone."), 2);
        // Versions do not end a sentence; fragments of fewer than three words do not count.
        assert_eq!(count_sentences("calls api v1.2 of the service"), 1);
        assert_eq!(count_sentences("set a value, e.g. a limit"), 1);
        // Each line is a segment; "required options:" and "- x" are too short to count.
        assert_eq!(count_sentences("update a thing.\nrequired options:\n- name: the name of the thing\n- x"), 2);
    }

    #[test]
    fn phrases_match_at_word_starts() {
        assert!(contains_phrase("this deletes data", "deletes"));
        assert!(!contains_phrase("undelete data", "delete"));
        assert!(!contains_phrase("a replica set", "repl"));
        // A phrase that overlaps itself keeps the substring search's answer (its second occurrence is skipped).
        assert!(!contains_phrase("xa a a", "a a") && !contains_phrase_by_search("xa a a", "a a"));
        assert!(PhraseIndex::new("is read-only.").contains("is read-only.", "read-only"));
    }

    #[test]
    fn a_prefix_is_counted_in_characters() {
        assert_eq!(char_prefix("d\u{0435}lete", 2), "d\u{0435}");
        assert_eq!(char_prefix("abc", 5), "abc");
        assert_eq!(char_prefix("", 0), "");
    }

    /// `as_seen` as first written, word by word through `skeleton`: the reference the one-pass fold must match.
    fn as_seen_by_words(text: &str) -> String {
        if text.is_ascii() {
            return text.to_owned();
        }
        let mut out = String::new();
        for piece in text.split_inclusive(char::is_whitespace) {
            let word_end = piece
                .char_indices()
                .next_back()
                .filter(|(_, last)| last.is_whitespace())
                .map_or(piece.len(), |(index, _)| index);
            out.push_str(&skeleton(&piece[..word_end]));
            out.push_str(&piece[word_end..]);
        }
        out
    }

    #[test]
    fn printable_ascii_is_seen_as_itself() {
        assert!((' '..='~').all(|character| seen_as(character) == Some(character)));
    }

    proptest::proptest! {
        /// Folding a text character by character gives what folding it word by word gave.
        #[test]
        fn a_text_is_folded_as_its_words_are(
            text in "[a-z .~\t\n\u{b}\u{1}\u{7f}\u{85}\u{a0}\u{435}\u{430}\u{200b}\u{2028}\u{202e}\u{ff41}\u{3000}\u{1d41a}]{0,40}",
        ) {
            let folded = as_seen(&text).into_owned();
            proptest::prop_assert_eq!(folded, as_seen_by_words(&text));
        }
    }

    proptest::proptest! {
        /// The word-start search and the index answer exactly as the substring search they replace: inference's
        /// results must not move by a bit for speed.
        #[test]
        fn the_fast_searches_agree_with_the_substring_search(
            text in "[ab .\u{0435}-]{0,40}",
            phrase in "[ab .-]{0,6}",
        ) {
            let expected = contains_phrase_by_search(&text, &phrase);
            proptest::prop_assert_eq!(contains_phrase(&text, &phrase), expected);
            proptest::prop_assert_eq!(PhraseIndex::new(&text).contains(&text, &phrase), expected);
        }
    }
}
