//! Side effects a tool states anywhere in its texts or schema: "also deletes every file", "sends an email",
//! "overwrites it", "posts to a public pastebin", a `deleteAfterRead` switch, a recipient or webhook property.
//!
//! A read verb in a name is a claim; a sentence saying the tool deletes, sends or writes is a confession. The
//! read-only rule uses a stated effect as a veto (see `rules::read_only`), so no amount of read wording can
//! outweigh it and an untrusted `readOnlyHint: true` is never confirmed against it. This module only finds
//! effects; it weighs nothing. It reads the whole description, not only the first sentence or the part the
//! other cues read: a confession appended after a long honest text must count as much as one at the start.
//!
//! What counts is a *predicate*: a finite verb with an object (`deletes the`, `sends an`, `posts to`), a verb
//! after `also`/`then`/`will`, or a passive with a destination (`is sent to`). Bare nouns (`changes`, `stores`,
//! `runs`, `writes`), negations (`never deletes`, `does not send`) and filters (`drops all adult content from
//! search results`) are not effects.

use crate::infer::CueSource;
use crate::infer::cue::Cue;
use crate::infer::signals::{Property, Signals, as_seen};
use crate::words::VerbClass;

/// A side effect the tool states, and what kind it is.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct StatedEffect {
    /// Where and what.
    pub(crate) cue: Cue,
    /// [`VerbClass::Delete`], [`VerbClass::Send`] or [`VerbClass::Update`] (any other write).
    pub(crate) class: VerbClass,
}

/// Third-person forms that are as often plural nouns (`lists posts to a channel`, `shows changes the commit made`):
/// they count as verbs only at the start of a clause or after a word that leaves a verb next
/// ([`VERB_OPENERS`]).
const NOUN_LIKE_FORMS: &[&str] = &[
    "posts",
    "emails",
    "mails",
    "tweets",
    "updates",
    "changes",
    "moves",
    "inserts",
    "commits",
    "pushes",
    "installs",
    "patches",
    "kills",
    "drops",
    "broadcasts",
    "leaks",
    "forwards",
    "edits",
    "uploads",
    "stores",
    "saves",
    "writes",
    "reports",
    "formats",
    "transfers",
    "charges",
    "purchases",
    "resets",
    "restarts",
    "syncs",
    "submits",
];
/// Words after which a noun-like form is the verb of the clause (`it posts`, `then uploads`, `and stores`).
const VERB_OPENERS: &[&str] = &[
    "it",
    "tool",
    "and",
    "then",
    "also",
    "who",
    "function",
    "command",
    "server",
    "endpoint",
    "operation",
    "automatically",
    "silently",
    "immediately",
    "additionally",
    "afterwards",
    "finally",
    "secretly",
];
/// Words that open the object of a predicate: `deletes *the* file`, `posts *to* a pastebin`, `overwrites *it*`.
const OBJECT_WORDS: &[&str] = &[
    "the",
    "a",
    "an",
    "every",
    "all",
    "it",
    "them",
    "each",
    "any",
    "your",
    "its",
    "their",
    "to",
    "into",
    "this",
    "that",
    "these",
    "those",
    "his",
    "her",
    "our",
    "my",
    "some",
    "one",
    "everything",
    "anything",
    "file",
    "files",
    "record",
    "records",
    "data",
    "entries",
    "email",
    "emails",
    "message",
    "messages",
    "contents",
    "content",
];
/// Words after which the next verb is the tool's own later action (`also deletes`, `then send`, `will erase`).
const SEQUENCE_WORDS: &[&str] = &["also", "then", "will", "afterwards", "additionally", "subsequently"];
/// Participles of a passive effect (`the result is sent to`, `the file is deleted afterwards`).
const PASSIVE_EFFECTS: &[(&str, VerbClass)] = &[
    ("sent", VerbClass::Send),
    ("emailed", VerbClass::Send),
    ("mailed", VerbClass::Send),
    ("posted", VerbClass::Send),
    ("uploaded", VerbClass::Send),
    ("published", VerbClass::Send),
    ("forwarded", VerbClass::Send),
    ("deleted", VerbClass::Delete),
    ("removed", VerbClass::Delete),
    ("erased", VerbClass::Delete),
    ("wiped", VerbClass::Delete),
    ("purged", VerbClass::Delete),
    ("overwritten", VerbClass::Delete),
    ("written", VerbClass::Update),
    ("saved", VerbClass::Update),
];
const PASSIVE_AUXILIARIES: &[&str] = &["is", "are", "be", "gets", "get"];
/// What may follow a passive effect for it to count: a destination or a time, not a state (`is deleted` alone is
/// as often a filter, "items that are deleted").
const PASSIVE_FOLLOWERS: &[&str] = &["to", "into", "permanently", "afterwards", "after", "automatically"];
/// Words that turn the next verb into a clause about the noun before them, not about the tool (`the release that
/// publishes a series`), unless that noun is the tool itself (`a tool that deletes files`).
const RELATIVIZERS: &[&str] = &["that", "which", "who", "whom", "whose"];
const TOOL_NOUNS: &[&str] = &["tool", "function", "it", "command", "server", "endpoint", "operation", "call", "this"];
/// `truncate` is an effect on storage (`truncates the table`), but as often a way to shorten what is returned
/// (`truncates very large content with a marker`): it counts only with a storage object close after it.
const TRUNCATED_STORES: &[&str] = &["table", "tables", "file", "files", "log", "logs", "database", "collection"];
const TRUNCATE_REACH: usize = 3;
/// Words that negate the verb they govern (`never deletes`, `does not send`, `without deleting`).
const NEGATIONS: &[&str] = &["not", "never", "no", "without", "cannot", "nor", "neither", "nothing"];
/// What may stand between a negation and the verb it negates: auxiliaries and adverbs (`does not *ever*
/// delete`, `will not *automatically* send`). Any other word ends the negation's scope, so "reads nothing else
/// and deletes the file" still confesses: a negation a few words back is not a negation of this verb.
const NEGATION_BRIDGES: &[&str] = &[
    "do",
    "does",
    "did",
    "will",
    "would",
    "should",
    "can",
    "could",
    "may",
    "might",
    "must",
    "shall",
    "be",
    "is",
    "are",
    "was",
    "were",
    "been",
    "ever",
    "also",
    "actually",
    "automatically",
    "silently",
    "directly",
    "itself",
];
/// At most this many bridge words between a negation and its verb.
const NEGATION_REACH: usize = 3;
/// Words after a predicate that make it a filter of what is returned (`drops all adult content from search
/// results`, `removes duplicates from the output`).
const FILTER_TARGETS: &[&str] = &["result", "results", "output", "response", "responses", "list", "listing"];
const FILTER_REACH: usize = 8;
/// Words that make a filter target a place in storage (`from the output folder`, `from the results table`): then
/// the predicate removes stored things, not lines of a reply.
const STORED_PLACES: &[&str] = &[
    "folder",
    "folders",
    "directory",
    "directories",
    "dir",
    "file",
    "files",
    "bucket",
    "buckets",
    "table",
    "tables",
    "database",
    "db",
    "disk",
    "drive",
    "path",
    "storage",
    "store",
    "repository",
    "repo",
    "server",
    "cache",
    "collection",
    "index",
    "queue",
];
/// Words that may stand between `from` and a filter target (`from the search results`).
const FILTER_FILLERS: &[&str] = &["the", "a", "its", "their", "your", "this", "search", "returned", "final", "tool's"];
/// Switch names (tokens) that, as a boolean property, offer to delete or overwrite (`deleteAfterRead`,
/// `overwrite`). `remove` and `drop` are left out: as switches they mostly shape what is returned
/// (`removeBase64Images`, `dropEmpty`).
const DELETE_SWITCH_WORDS: &[&str] = &["delete", "purge", "overwrite", "wipe", "erase", "destroy", "truncate", "shred"];
/// Property names (flattened) that address someone or something a result is sent to.
const SEND_PROPERTIES: &[&str] = &[
    "recipient",
    "recipients",
    "cc",
    "bcc",
    "webhook",
    "webhookurl",
    "callbackurl",
    "callback",
    "notifyurl",
    "notifyemail",
    "sendto",
    "mailto",
    "forwardto",
];

/// Every side effect the tool states: in its description, in property descriptions, or as schema shapes, in that
/// order. All are kept, not only the first: a description that confesses a write first ("saves a copy") and a
/// delete later ("then deletes the originals") must count as destructive too.
pub(crate) fn stated_effects(signals: &Signals) -> Vec<StatedEffect> {
    let mut effects: Vec<StatedEffect> = predicates_in(&signals.effect_text)
        .into_iter()
        .map(|(phrase, class)| StatedEffect {
            cue: Cue::new(CueSource::Description, format!("stated effect \"{phrase}\"")),
            class,
        })
        .collect();
    if signals.effect_text_cut {
        // A text longer than what is read could hide a confession past the cut; fail closed.
        let cue = Cue::new(CueSource::Description, "description too long to read whole".to_owned());
        effects.push(StatedEffect { cue, class: VerbClass::Update });
    }
    effects.extend(signals.properties.iter().flat_map(property_effects));
    effects
}

fn property_effects(property: &Property) -> Vec<StatedEffect> {
    let mut effects: Vec<StatedEffect> = property_shape_effect(property).into_iter().collect();
    for (phrase, class) in predicates_in(&property.description) {
        let cue = Cue::new(CueSource::Schema, format!("property \"{}\" states \"{phrase}\"", property.name));
        effects.push(StatedEffect { cue, class });
    }
    effects
}

fn property_shape_effect(property: &Property) -> Option<StatedEffect> {
    let schema = |text: String, class: VerbClass| Some(StatedEffect { cue: Cue::new(CueSource::Schema, text), class });
    let boolean = property.types.iter().any(|kind| kind == "boolean");
    if boolean && let Some(word) = DELETE_SWITCH_WORDS.iter().find(|word| property.has_token(&[word])) {
        return schema(format!("switch \"{}\" offers to {word}", property.name), VerbClass::Delete);
    }
    if SEND_PROPERTIES.contains(&property.flat_name.as_str()) {
        return schema(format!("recipient property \"{}\"", property.name), VerbClass::Send);
    }
    None
}

/// Most effects kept from one text: enough to see every kind, bounded on hostile input.
const MAX_EFFECTS: usize = 16;

/// The first effect predicate in a lowercased text, as written, with its class.
#[cfg(test)]
pub(crate) fn predicate_in(text: &str) -> Option<(String, VerbClass)> {
    predicates_in(text).into_iter().next()
}

/// Every effect predicate in a lowercased text (at most [`MAX_EFFECTS`]), in order. Look-alike letters and
/// invisible characters are folded first (`dеletes` with a Cyrillic `е` reads `deletes`, as a person sees it).
pub(crate) fn predicates_in(text: &str) -> Vec<(String, VerbClass)> {
    if text.is_empty() {
        // Most properties have no description; not even the word buffer is needed.
        return Vec::new();
    }
    let folded = as_seen(text);
    // An ASCII text is walked byte by byte: each byte is its character, so the words are the same, found without
    // decoding characters (this reads whole descriptions of up to 64 KiB, for every tool).
    if folded.is_ascii() {
        // For an ASCII character `is_ascii_alphanumeric` is `is_alphanumeric`, without the Unicode tables' branch.
        let is_word = |character: char| character.is_ascii_alphanumeric() || character == '\'';
        clauses_predicates(&folded, folded.bytes().map(char::from).enumerate(), is_word)
    } else {
        let is_word = |character: char| character.is_alphanumeric() || character == '\'' || character == '\u{2019}';
        clauses_predicates(&folded, folded.char_indices(), is_word)
    }
}

/// The effect predicates of `text`, whose characters `characters` gives with their byte offsets; `is_word` tells
/// the characters of a word (letters, digits, apostrophes).
fn clauses_predicates(
    text: &str,
    characters: impl Iterator<Item = (usize, char)>,
    is_word: impl Fn(char) -> bool,
) -> Vec<(String, VerbClass)> {
    let mut found = Vec::new();
    // One buffer for every clause's words: a long description has hundreds of clauses.
    let mut words: Vec<&str> = Vec::with_capacity(64);
    // Clauses end at `CLAUSE_ENDS`; a word is a run of letters, digits and apostrophes. Both are read in one pass
    // over the characters, which splits exactly as splitting into clauses and each clause into words would: no
    // clause end is a word character.
    let mut word_start: Option<usize> = None;
    for (index, character) in characters {
        if is_word(character) {
            word_start.get_or_insert(index);
            continue;
        }
        if let Some(start) = word_start.take() {
            words.push(&text[start..index]);
        }
        if CLAUSE_ENDS.contains(&character) {
            if clause_predicates(&words, &mut found) {
                return found;
            }
            words.clear();
        }
    }
    if let Some(start) = word_start {
        words.push(&text[start..]);
    }
    clause_predicates(&words, &mut found);
    found
}

/// What ends a clause for [`predicates_in`].
const CLAUSE_ENDS: [char; 9] = ['.', '!', '?', '\n', ';', ':', '(', ')', ','];

/// Adds the effect predicates of one clause's words to `found`; true when `found` is full ([`MAX_EFFECTS`]).
fn clause_predicates(words: &[&str], found: &mut Vec<(String, VerbClass)>) -> bool {
    // A sequence match (`then deletes`) covers the verb it names; the verb must not count again.
    let mut covered_until = 0;
    for index in 0..words.len() {
        if index < covered_until {
            continue;
        }
        if let Some(predicate) = predicate_at(words, index) {
            covered_until = index + predicate.0.split(' ').count();
            found.push(predicate);
            if found.len() == MAX_EFFECTS {
                return true;
            }
        }
    }
    false
}

fn predicate_at(words: &[&str], index: usize) -> Option<(String, VerbClass)> {
    let word = words.get(index)?;
    let next = |offset: usize| words.get(index + offset).copied().unwrap_or_default();
    let phrase = |length: usize| words[index..(index + length).min(words.len())].join(" ");
    // `deletes the file`, `sends credentials to`, `posts to a pastebin`. A form that is as often a noun needs an
    // opener before it and an object word after it; any other verb needs only something after it that is not a
    // negation (`modifies nothing`).
    // A closure, asked only of an effect verb: most words are none, and the list scans cost more than the lookup.
    let predicate = || {
        if NOUN_LIKE_FORMS.contains(word) {
            let opens_verb = index == 0 || VERB_OPENERS.contains(&words[index - 1]);
            opens_verb && OBJECT_WORDS.contains(&next(1))
        } else {
            next(1).starts_with(char::is_alphabetic) && !NEGATIONS.contains(&next(1)) && next(1) != "none"
        }
    };
    if let Some(class) = finite_effect_verb(word)
        && predicate()
        && !about_another_noun(words, index)
        && (!word.starts_with("truncate") || truncates_storage(words, index))
        && !negated(words, index)
        && !is_filter(words, index)
    {
        return Some((phrase(2), class));
    }
    // `also deletes`, `will also erase the`, `then send it`.
    // Not after `to`: "use stripped to also remove quoted replies" describes an option, it states nothing done.
    let infinitive = index > 0 && words[index - 1] == "to";
    if SEQUENCE_WORDS.contains(word) && !infinitive && !negated(words, index) {
        let mut verb_index = index + 1;
        while words.get(verb_index).is_some_and(|next| SEQUENCE_WORDS.contains(next)) {
            verb_index += 1;
        }
        let verb = words.get(verb_index).copied().unwrap_or_default();
        if let Some(class) = base_effect_verb(verb).or_else(|| finite_effect_verb(verb))
            && (!verb.starts_with("truncate") || truncates_storage(words, verb_index))
            && !is_filter(words, verb_index)
        {
            return Some((phrase(verb_index - index + 1), class));
        }
    }
    // `by publishing them`, `by deleting the originals`: the means a tool states for what it does.
    if *word == "by"
        && let Some(class) = gerund_effect_verb(next(1))
        && OBJECT_WORDS.contains(&next(2))
        && !negated(words, index)
        && !is_filter(words, index + 1)
    {
        return Some((phrase(3), class));
    }
    // `is sent to`, `are deleted afterwards`.
    if PASSIVE_AUXILIARIES.contains(word)
        && let Some((_, class)) = PASSIVE_EFFECTS.iter().find(|(participle, _)| *participle == next(1))
        && PASSIVE_FOLLOWERS.contains(&next(2))
        && !negated(words, index)
        && !is_filter(words, index + 1)
    {
        return Some((phrase(3), *class));
    }
    None
}

/// The class of an effect verb in its base form. A `match`, not lists scanned in turn: every word of every
/// description that could be a verb form is asked, and the compiled match finds a word by its length and bytes.
fn base_effect_verb(word: &str) -> Option<VerbClass> {
    match word {
        // Verbs whose stated use removes or overwrites something.
        "delete" | "remove" | "erase" | "wipe" | "purge" | "destroy" | "drop" | "truncate" | "overwrite" | "kill"
        | "terminate" | "discard" | "unlink" | "shred" | "uninstall" | "expunge" | "obliterate" | "nuke" | "trash"
        | "flush" | "revoke" | "format" | "empty" => Some(VerbClass::Delete),
        // Verbs whose stated use sends something to other people or systems. `share` is left out: "file shares" and
        // "the user shares a link" are far more common in honest texts than a tool that shares.
        "send" | "email" | "mail" | "post" | "publish" | "upload" | "notify" | "forward" | "tweet" | "broadcast"
        | "transmit" | "exfiltrate" | "leak" | "submit" | "transfer" | "beacon" | "sync" => Some(VerbClass::Send),
        // Verbs whose stated use writes or changes something. `create` is left out: honest reads "create a plan" or
        // "create a summary" they only return; so is `replace`, mostly figurative ("replaces the manual chain of ...").
        "write" | "modify" | "save" | "store" | "append" | "insert" | "update" | "change" | "rename" | "move"
        | "commit" | "push" | "install" | "alter" | "edit" | "patch" | "chmod" | "chown" | "encrypt" | "mutate"
        | "persist" | "upsert" | "reset" | "reboot" | "restart" | "purchase" | "charge" | "pay" | "deploy" => {
            Some(VerbClass::Update)
        }
        _ => None,
    }
}

/// The class of a third-person verb form (`deletes`, `pushes`, `modifies`).
fn finite_effect_verb(word: &str) -> Option<VerbClass> {
    // Every form below ends in `s`; most words of a text do not, and need not be looked up.
    if !word.ends_with('s') {
        return None;
    }
    if let Some(stem) = word.strip_suffix("ies") {
        return base_effect_verb(&format!("{stem}y"));
    }
    if let Some(stem) = word.strip_suffix("es")
        && let Some(class) = base_effect_verb(stem)
    {
        return Some(class);
    }
    word.strip_suffix('s').and_then(base_effect_verb)
}

/// The class of a gerund (`publishing`, `deleting`, `dropping`).
fn gerund_effect_verb(word: &str) -> Option<VerbClass> {
    let stem = word.strip_suffix("ing")?;
    let undoubled = stem
        .char_indices()
        .last()
        .and_then(|(last, character)| stem[..last].ends_with(character).then(|| &stem[..last]));
    base_effect_verb(stem)
        .or_else(|| base_effect_verb(&format!("{stem}e")))
        .or_else(|| undoubled.and_then(base_effect_verb))
}

/// True when the verb at `index` opens a relative clause about a noun other than the tool.
fn about_another_noun(words: &[&str], index: usize) -> bool {
    index >= 2 && RELATIVIZERS.contains(&words[index - 1]) && !TOOL_NOUNS.contains(&words[index - 2])
}

fn truncates_storage(words: &[&str], index: usize) -> bool {
    words[(index + 1).min(words.len())..(index + 1 + TRUNCATE_REACH).min(words.len())]
        .iter()
        .any(|word| TRUNCATED_STORES.contains(word))
}

/// True when the word at `index` is negated: a negation right before it, or separated from it only by
/// [`NEGATION_BRIDGES`] (at most [`NEGATION_REACH`]). `no` also negates across the one noun it determines (`no
/// files are deleted`).
fn negated(words: &[&str], index: usize) -> bool {
    let is_negation = |word: &str| NEGATIONS.contains(&word) || word.ends_with("n't") || word.ends_with("n\u{2019}t");
    let mut position = index;
    let mut bridged = 0;
    while position > 0 {
        position -= 1;
        let word = words[position];
        if is_negation(word) {
            return true;
        }
        if position > 0 && words[position - 1] == "no" && bridged == 0 {
            return true;
        }
        if !NEGATION_BRIDGES.contains(&word) || bridged == NEGATION_REACH {
            return false;
        }
        bridged += 1;
    }
    false
}

/// True when the predicate at `index` filters what the tool returns (`drops all adult content from search
/// results`): `from`, then only fillers, then a filter target that does not name a place in storage
/// (`from the output folder` is a place, so "deletes the files from the output folder" is an effect).
fn is_filter(words: &[&str], index: usize) -> bool {
    let after = &words[(index + 1).min(words.len())..(index + 1 + FILTER_REACH).min(words.len())];
    let Some(from) = after.iter().position(|word| *word == "from") else { return false };
    let rest = &after[from + 1..];
    let Some(target) = rest.iter().position(|word| !FILTER_FILLERS.contains(word)) else { return false };
    let noun_after = words.get(index + 1 + from + 1 + target + 1).copied().unwrap_or_default();
    FILTER_TARGETS.contains(&rest[target]) && !STORED_PLACES.contains(&noun_after)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn found(text: &str) -> Option<String> {
        predicate_in(&text.to_lowercase()).map(|(phrase, _)| phrase)
    }

    #[test]
    fn stated_effects_are_found_anywhere() {
        let cases = [
            ("Reads a file. It also deletes every file in the folder.", "also deletes"),
            ("Gets the weather. Sends an email to the operator with the result.", "sends an"),
            ("Reads the config and overwrites it with defaults.", "overwrites it"),
            ("Fetches the note, then posts to a public pastebin.", "then posts"),
            ("Fetches the note and posts to a public pastebin.", "posts to"),
            ("Lists records.\n\nNote: the listing is uploaded to our analytics server.", "is uploaded to"),
            ("Returns the log; will also erase the log afterwards.", "will also erase"),
            ("Shows the status. Modifies the settings file on first use.", "modifies the"),
            ("Export all live notes by publishing them at a public share link.", "by publishing them"),
            ("Get the config. Sends credentials to a remote host.", "sends credentials"),
            ("A tool that deletes every file it reads.", "deletes every"),
            ("Shows the log, then truncates the log file.", "then truncates"),
            ("Show the logs. Erases logs older than a day.", "erases logs"),
        ];
        for (text, want) in cases {
            assert_eq!(found(text).as_deref(), Some(want), "{text}");
        }
    }

    #[test]
    fn nouns_negations_and_filters_are_not_effects() {
        let cases = [
            "List all app configuration stores in a subscription.",
            "Returns resource changes (create, update, delete) of a plan.",
            "For writes use manage_istio_config.",
            "Lists the runs of a workspace.",
            "Reads the file. It never deletes anything and does not send data.",
            "'strict' - Drops all adult content from search results.",
            "Removes duplicates from the results before returning them.",
            "List deleted items in the recycle bin.",
            "Search emails and messages in the inbox.",
            "Use write_file to write a file.",
            "Sort by deleting date, or filter by posting user.",
            "Reads the file; modifies nothing and sends none of it anywhere.",
            "Which stores to read. Defaults to local storage.",
            "Get the release that publishes a series.",
            "Refuses binary files and truncates very large content with a marker.",
            "Returns the page, then truncates long output.",
            "Replaces the manual chain of search, details and distance calls.",
            "Body format. Use stripped to also remove quoted replies.",
            "Lists posts to the channel and the changes the commit made.",
            "Returns the latest updates the team published.",
            "Builds context from memory. Supports output formats like markdown and json.",
            "List asset transfers between locations.",
        ];
        for text in cases {
            assert_eq!(found(text), None, "{text}");
        }
    }

    /// Bypasses a reviewer found in the first version (issue 15): each must now be caught.
    #[test]
    fn the_reviewed_bypasses_are_caught() {
        let cases = [
            // A place in storage after `from` is not a filter of the output.
            ("Lists the files. Deletes all files from the output folder.", "deletes all"),
            ("Reads the report and removes old entries from the results table.", "removes old"),
            // A negation governs only the verb it stands before (with auxiliaries and adverbs between).
            ("Reads nothing else and deletes the file.", "deletes the"),
            ("No confirmation; then deletes the cache.", "then deletes"),
            ("Not a preview: deletes the folder.", "deletes the"),
            ("Without delay erases the logs.", "erases the"),
            // Verbs the first list missed.
            ("Shows the disk. Formats the drive.", "formats the"),
            ("Lists packages, then uninstalls the old ones.", "then uninstalls"),
            ("Reads the vault and encrypts every file with a new key.", "encrypts every"),
            ("Gets the balance. Transfers the funds to the given account.", "transfers the"),
            ("Reads the key and revokes it.", "revokes it"),
            // Look-alike letters and invisible characters in the verb.
            ("Reads a file. It also d\u{435}letes every file.", "also deletes"),
            ("Reads a file. S\u{435}nds it to the operator.", "sends it"),
            ("Reads a file. It also dele\u{200b}tes every file.", "also deletes"),
            ("Reads a file \u{2014} nothing more.\nIt also d\u{435}letes every file.", "also deletes"),
        ];
        for (text, want) in cases {
            assert_eq!(found(text).as_deref(), Some(want), "{text}");
        }
    }

    #[test]
    fn negations_still_negate_their_own_verb() {
        let cases = [
            "Reads the file. It does not ever delete anything.",
            "Reads the file; will not automatically send anything.",
            "Reads the file without deleting it.",
            "Shows the queue. No files are deleted permanently.",
            "Reads the log and doesn't erase the log.",
        ];
        for text in cases {
            assert_eq!(found(text), None, "{text}");
        }
    }

    #[test]
    fn every_effect_is_kept() {
        let all: Vec<VerbClass> = predicates_in(
            "saves a copy to the archive, then deletes the originals and emails \
                                                 the owner.",
        )
        .into_iter()
        .map(|(_, class)| class)
        .collect();
        assert_eq!(all, [VerbClass::Update, VerbClass::Delete, VerbClass::Send]);
    }

    #[test]
    fn third_person_forms_fold() {
        assert_eq!(finite_effect_verb("deletes"), Some(VerbClass::Delete));
        assert_eq!(finite_effect_verb("pushes"), Some(VerbClass::Update));
        assert_eq!(finite_effect_verb("modifies"), Some(VerbClass::Update));
        assert_eq!(finite_effect_verb("sends"), Some(VerbClass::Send));
        assert_eq!(finite_effect_verb("reads"), None);
        assert_eq!(gerund_effect_verb("publishing"), Some(VerbClass::Send));
        assert_eq!(gerund_effect_verb("deleting"), Some(VerbClass::Delete));
        assert_eq!(gerund_effect_verb("dropping"), Some(VerbClass::Delete));
        assert_eq!(gerund_effect_verb("reading"), None);
    }
}
