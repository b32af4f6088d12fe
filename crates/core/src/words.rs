//! Words in tool names and texts: tokenization and the verb lexicon shared by inference, lint and facts.
//!
//! Tool names come as `snake_case`, `kebab-case`, `camelCase`, `dotted.names` or `API-verb-a-thing`; all are split
//! into lowercase tokens here. The lexicon maps verbs to what they do to the world ([`VerbClass`]). It is general
//! English, never a list of particular servers' tool names.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::OnceLock;

use serde::Serialize;

/// What a verb does to its environment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum VerbClass {
    /// Reads or computes without changing anything (get, list, search, describe).
    Read,
    /// Adds something new (create, add, insert, upload).
    Create,
    /// Changes something that exists (update, edit, set, rename).
    Update,
    /// Removes or irreversibly ends something (delete, remove, drop, purge, terminate).
    Delete,
    /// Sends something to other people or systems (send, email, publish, notify).
    Send,
    /// Writes data out to a file or another place (export, download, dump, backup).
    Export,
    /// Runs or drives something whose effect depends on what it runs (run, execute, deploy, click).
    Execute,
    /// Changes connection or session state only (connect, login, select, switch).
    Connect,
}

impl VerbClass {
    /// The stable lowercase name used in evidence and output.
    pub fn as_str(self) -> &'static str {
        match self {
            VerbClass::Read => "read",
            VerbClass::Create => "create",
            VerbClass::Update => "update",
            VerbClass::Delete => "delete",
            VerbClass::Send => "send",
            VerbClass::Export => "export",
            VerbClass::Execute => "execute",
            VerbClass::Connect => "connect",
        }
    }
}

/// Splits an identifier or a text into lowercase word tokens (`deleteAPIKey` -> `delete`, `api`, `key`).
pub fn tokens(text: &str) -> Vec<String> {
    let mut words = Vec::new();
    split_words(text, |word| {
        let mut lower = String::with_capacity(word.len());
        push_lowercase(&mut lower, word);
        words.push(lower);
    });
    words
}

/// The tokens of a long text (a description), as [`tokens`] splits them, kept in one string: a text of hundreds of
/// words is split on every inference, and a string per word cost more than the splitting.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct TokenText {
    /// The lowercased tokens, one after another.
    joined: String,
    /// Where each token ends in `joined`.
    ends: Vec<usize>,
}

impl TokenText {
    /// Splits `text` as [`tokens`] does.
    pub(crate) fn new(text: &str) -> TokenText {
        let mut tokens = TokenText { joined: String::with_capacity(text.len()), ends: Vec::new() };
        if text.is_ascii() {
            // Every word is ASCII: copied as written, then lowercased at once.
            split_ascii_words(text, |word| {
                tokens.joined.push_str(word);
                tokens.ends.push(tokens.joined.len());
            });
            tokens.joined.make_ascii_lowercase();
        } else {
            split_words(text, |word| {
                push_lowercase(&mut tokens.joined, word);
                tokens.ends.push(tokens.joined.len());
            });
        }
        tokens
    }

    /// The tokens in order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &str> + '_ {
        let starts = std::iter::once(0).chain(self.ends.iter().copied());
        starts.zip(self.ends.iter().copied()).map(|(start, end)| &self.joined[start..end])
    }
}

/// Calls `each` with every word of `text` as written (a slice, not yet lowercased), in order.
fn split_words(text: &str, mut each: impl FnMut(&str)) {
    if text.is_ascii() {
        return split_ascii_words(text, each);
    }
    // Where the word being read starts: a word is a slice of the text, lowercased once when it ends, not built
    // character by character.
    let mut start: Option<usize> = None;
    let mut flush = |start: &mut Option<usize>, end: usize| {
        if let Some(begin) = start.take() {
            each(&text[begin..end]);
        }
    };
    let mut characters = text.char_indices().peekable();
    let mut previous: Option<char> = None;
    while let Some((index, character)) = characters.next() {
        let before = previous.replace(character);
        if !character.is_alphanumeric() {
            flush(&mut start, index);
            continue;
        }
        if character.is_uppercase()
            && start.is_some()
            && let Some(previous) = before
        {
            let next_is_lower = characters.peek().is_some_and(|(_, next)| next.is_lowercase());
            // Boundary at "aB" (camelCase) and at "ABc" (the end of an acronym followed by a word).
            if previous.is_lowercase() || previous.is_numeric() || (previous.is_uppercase() && next_is_lower) {
                flush(&mut start, index);
            }
        }
        start.get_or_insert(index);
    }
    flush(&mut start, text.len());
}

/// [`split_words`] for an ASCII text, byte by byte: for an ASCII character each `char` test below is its ASCII
/// twin (`is_alphanumeric` is `is_ascii_alphanumeric`, `is_numeric` is `is_ascii_digit`, ...), so the words are the
/// same, found without decoding characters.
fn split_ascii_words(text: &str, mut each: impl FnMut(&str)) {
    let bytes = text.as_bytes();
    let mut start: Option<usize> = None;
    for (index, &byte) in bytes.iter().enumerate() {
        if !byte.is_ascii_alphanumeric() {
            if let Some(begin) = start.take() {
                each(&text[begin..index]);
            }
            continue;
        }
        if byte.is_ascii_uppercase()
            && let Some(begin) = start
            && let Some(&previous) = index.checked_sub(1).and_then(|before| bytes.get(before))
        {
            let next_is_lower = bytes.get(index + 1).is_some_and(u8::is_ascii_lowercase);
            if previous.is_ascii_lowercase()
                || previous.is_ascii_digit()
                || (previous.is_ascii_uppercase() && next_is_lower)
            {
                each(&text[begin..index]);
                start = None;
            }
        }
        start.get_or_insert(index);
    }
    if let Some(begin) = start {
        each(&text[begin..]);
    }
}

/// Appends `word` lowercased character by character (not `str::to_lowercase`, which lowercases a final sigma by
/// its context).
fn push_lowercase(out: &mut String, word: &str) {
    if word.is_ascii() {
        let start = out.len();
        out.push_str(word);
        out[start..].make_ascii_lowercase();
    } else {
        out.extend(word.chars().flat_map(char::to_lowercase));
    }
}

/// Words a description may open with before its verb ("This tool retrieves", "Use this tool to delete", "Simply
/// run", "We help you send"): inference and lint both skip them when they read the description's verb, so the two
/// cannot disagree about which word that is.
pub(crate) const DESCRIPTION_FILLERS: &[&str] = &[
    "this",
    "tool",
    "the",
    "a",
    "an",
    "use",
    "to",
    "it",
    "will",
    "can",
    "that",
    "you",
    "we",
    "i",
    "lets",
    "let",
    "allows",
    "allow",
    "helps",
    "help",
    "function",
    "command",
    "operation",
    "endpoint",
    "mcp",
    "simply",
    "quickly",
    "just",
    "please",
];

/// Whether `token` (lowercase) is one of the [`DESCRIPTION_FILLERS`].
pub(crate) fn is_description_filler(token: &str) -> bool {
    DESCRIPTION_FILLERS.contains(&token)
}

/// The class of a verb token, if the lexicon knows it. Inflections (`deletes`, `deleted`, `deleting`) are folded.
pub fn verb_class(token: &str) -> Option<VerbClass> {
    lookup_verb(token).or_else(|| stem(token))
}

fn stem(token: &str) -> Option<VerbClass> {
    for suffix in ["ing", "es", "ed", "s", "d"] {
        if let Some(stem) = token.strip_suffix(suffix)
            && stem.len() >= 3
        {
            if let Some(class) = lookup_verb(stem) {
                return Some(class);
            }
            // "creating" -> "creat" + "e"
            if let Some(class) = with_e(stem, lookup_verb) {
                return Some(class);
            }
        }
    }
    None
}

/// `check` of `stem` + `e`, built on the stack: inflected description words reach here by the hundred per tool, and
/// a `format!` each cost more than the lookup. A stem too long for the buffer is no lexicon word plus `e`, but it
/// is still checked (on the heap) so the answer never depends on the buffer.
pub(crate) fn with_e<T>(stem: &str, check: impl Fn(&str) -> Option<T>) -> Option<T> {
    let mut buffer = [0u8; 32];
    match buffer.get_mut(..=stem.len()) {
        Some(slot) => {
            let (head, tail) = slot.split_at_mut(stem.len());
            head.copy_from_slice(stem.as_bytes());
            tail.copy_from_slice(b"e");
            std::str::from_utf8(slot).ok().and_then(check)
        }
        None => check(&format!("{stem}e")),
    }
}

/// The verb lexicon: each class with its words, separated by spaces, looked up through [`lookup_verb`]'s table. A
/// word listed twice would keep its first class (as in the `match` this table replaced).
const LEXICON: &[(VerbClass, &str)] = &[
    // Reads. `echo` hands back what it was given (server-everything's `echo`): a test of the connection, a read.
    (
        VerbClass::Read,
        "get list search find read fetch query describe show view check inspect analyze analyse count lookup \
         explain validate preview status retrieve browse lint diff compare estimate calculate summarize scan \
         audit recommend suggest verify test resolve watch monitor poll wait aggregate explore look load see \
         discover detect diagnose evaluate translate convert format parse render troubleshoot review research \
         recognize recognise whoami ask reader viewer summarise peek grep sample measure forecast predict \
         classify rank identify echo echoes",
    ),
    (
        VerbClass::Create,
        "create add new insert post upload register put make clone copy append attach fork provision allocate \
         generate build duplicate save store write record log comment tag label star enroll synthesize writer \
         compose draft bookmark subscribe follow reserve mkdir touch",
    ),
    (
        VerbClass::Update,
        "update edit set modify patch rename move assign unassign enable disable configure change replace \
         merge apply import sync upsert toggle approve reject close reopen resize scale rotate grant lock \
         unlock pause resume mark accept complete transfer restore upgrade downgrade promote link unlink pin \
         unpin schedule refresh reorder fill type select emulate manage activate deactivate unpause updater \
         editor createorupdate commit push checkout rebase revert suspend annotate categorize tweak",
    ),
    (
        VerbClass::Delete,
        "delete remove drop destroy purge erase uninstall terminate kill revoke archive clear reset wipe \
         truncate cancel abort evict detach deprovision decommission unregister unsubscribe trash overwrite \
         force rollback undeploy deallocate prune flush rm del teardown discard unset unfollow unstar \
         uninvite expire",
    ),
    (
        VerbClass::Send,
        "send email mail sms notify publish reply share invite message tweet broadcast forward respond submit \
         announce text call dm feedback give answer ping escalate",
    ),
    (VerbClass::Export, "export download dump backup snapshot screenshot print pdf extract"),
    (
        VerbClass::Execute,
        "run execute exec invoke trigger start stop restart deploy install navigate click press drag rerun \
         launch spawn eval hover scroll reboot shutdown dispatch perform do act control handle process crawl \
         scrape train migrate upgrade_all kubectl shell command interact automate orchestrate simulate \
         benchmark compile bash sudo",
    ),
    // `open` is a view as often as a creation (`open_nodes`, `open_presentation` read; `open_url` drives a
    // browser; "open an issue" creates): it names a session step, and the other cues decide.
    (VerbClass::Connect, "open connect disconnect login logout signin signout switch use authenticate auth"),
];

/// The lexicon's class of a word as written. A hash table built once, not a `match`: verbs are looked up for every
/// word of a description and its folded stems, and the compiled match compared a word with each lexicon word of
/// its length in turn. Most words are no verb, so a word whose length and first and last letters no lexicon word
/// has is answered before it is hashed ([`Lexicon::may_hold`]).
fn lookup_verb(token: &str) -> Option<VerbClass> {
    static LEXICON_TABLE: OnceLock<Lexicon> = OnceLock::new();
    let lexicon = LEXICON_TABLE.get_or_init(|| {
        let mut lexicon = Lexicon { table: HashMap::default(), shapes: [0; SHAPE_WORDS] };
        for (class, words) in LEXICON {
            for word in words.split_whitespace() {
                lexicon.table.entry(word).or_insert(*class);
                let shape = shape(word);
                lexicon.shapes[shape / 64] |= 1 << (shape % 64);
            }
        }
        lexicon
    });
    if !lexicon.may_hold(token) {
        return None;
    }
    lexicon.table.get(token).copied()
}

/// [`LEXICON`] as a table, with a bit set of its words' shapes ([`shape`]).
struct Lexicon {
    table: HashMap<&'static str, VerbClass, BuildHasherDefault<WordHasher>>,
    shapes: [u64; SHAPE_WORDS],
}

/// Words of 64 bits in [`Lexicon::shapes`]: 4096 shapes.
const SHAPE_WORDS: usize = 64;

impl Lexicon {
    /// False when no lexicon word has the shape of `token`, which then is none of them; true says only "maybe".
    fn may_hold(&self, token: &str) -> bool {
        let shape = shape(token);
        self.shapes[shape / 64] & (1 << (shape % 64)) != 0
    }
}

/// A word's length, first and last byte folded into one of 4096 buckets: equal words have equal shapes.
fn shape(word: &str) -> usize {
    let bytes = word.as_bytes();
    let first = usize::from(bytes.first().copied().unwrap_or(0));
    let last = usize::from(bytes.last().copied().unwrap_or(0));
    ((bytes.len() * 31 + first) * 31 + last) % (SHAPE_WORDS * 64)
}

/// FNV-1a over a word's bytes: the lexicon's keys are short, fixed and ours, so a fast hash without protection
/// against chosen collisions is enough (a token can only make its own lookup slower, never wrong).
struct WordHasher(u64);

impl Default for WordHasher {
    fn default() -> WordHasher {
        WordHasher(0xcbf2_9ce4_8422_2325)
    }
}

impl Hasher for WordHasher {
    fn write(&mut self, bytes: &[u8]) {
        for byte in bytes {
            self.0 = (self.0 ^ u64::from(*byte)).wrapping_mul(0x0000_0100_0000_01b3);
        }
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

/// The first token of a tool name that the lexicon knows as a verb, with its class.
///
/// Names put the verb first (`delete_customer`) or last (`storage_account_delete`): the first known verb wins, and
/// a trailing verb is found when no earlier token is one.
pub fn name_verb(name: &str) -> Option<(String, VerbClass)> {
    tokens(name).into_iter().find_map(|token| verb_class(&token).map(|class| (token, class)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_every_naming_style() {
        assert_eq!(tokens("delete_customer"), ["delete", "customer"]);
        assert_eq!(tokens("hubspot-batch-create-objects"), ["hubspot", "batch", "create", "objects"]);
        assert_eq!(tokens("deleteAPIKey"), ["delete", "api", "key"]);
        assert_eq!(tokens("API-post-search"), ["api", "post", "search"]);
        assert_eq!(tokens("fs.readFile"), ["fs", "read", "file"]);
    }

    /// `tokens` as first written, a string built character by character: the reference the slicing one must match.
    fn tokens_by_characters(text: &str) -> Vec<String> {
        let mut words = Vec::new();
        let mut current = String::new();
        let mut characters = text.chars().peekable();
        let mut previous: Option<char> = None;
        while let Some(character) = characters.next() {
            let before = previous.replace(character);
            if !character.is_alphanumeric() {
                if !current.is_empty() {
                    words.push(std::mem::take(&mut current));
                }
                continue;
            }
            if character.is_uppercase()
                && !current.is_empty()
                && let Some(previous) = before
            {
                let next_is_lower = characters.peek().is_some_and(|next| next.is_lowercase());
                if (previous.is_lowercase() || previous.is_numeric() || (previous.is_uppercase() && next_is_lower))
                    && !current.is_empty()
                {
                    words.push(std::mem::take(&mut current));
                }
            }
            current.extend(character.to_lowercase());
        }
        if !current.is_empty() {
            words.push(current);
        }
        words
    }

    proptest::proptest! {
        /// Slicing words and lowercasing each once splits and folds exactly as building them did.
        #[test]
        fn tokens_match_the_character_by_character_split(
            text in "[aZ9 _.\u{3a3}\u{3c3}\u{130}\u{1c5}\u{2160}\u{435}\u{415}\u{df}]{0,30}|[aAbZ09 _.-]{0,30}",
        ) {
            let expected = tokens_by_characters(&text);
            proptest::prop_assert_eq!(&tokens(&text), &expected);
            let joined = TokenText::new(&text);
            proptest::prop_assert_eq!(joined.iter().collect::<Vec<_>>(), expected);
        }
    }

    #[test]
    fn folds_inflections() {
        assert_eq!(verb_class("deletes"), Some(VerbClass::Delete));
        assert_eq!(verb_class("creating"), Some(VerbClass::Create));
        assert_eq!(verb_class("listed"), Some(VerbClass::Read));
        assert_eq!(verb_class("customer"), None);
    }

    #[test]
    fn a_stem_is_checked_with_e_at_any_length() {
        assert_eq!(with_e("creat", lookup_verb), Some(VerbClass::Create));
        assert_eq!(with_e("", |word| Some(word.to_owned())), Some("e".to_owned()));
        let long = "x".repeat(40);
        assert_eq!(with_e(&long, |word| Some(word.len())), Some(41));
    }

    #[test]
    fn finds_the_verb_first_or_last() {
        assert_eq!(name_verb("storage_account_delete"), Some(("delete".into(), VerbClass::Delete)));
        assert_eq!(name_verb("send_email"), Some(("send".into(), VerbClass::Send)));
    }
}
