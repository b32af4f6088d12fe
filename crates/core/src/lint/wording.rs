//! What a tool's wording says it does, read strictly enough that lint can accuse a declaration.
//!
//! Lint needs fewer, surer words than inference: a finding claims a contradiction, so a verb counts only when it
//! is unambiguous (`delete`, `send`, `get`) and sits where the action of a tool is named (the name's verb, the
//! first words of the title, the first words of the description). The lint-specific word lists live here; the
//! shared lexicon in [`crate::words`] stays the general one. Nothing here looks at hints or decides a finding.

use crate::tool::ToolDefinition;
use crate::words::{VerbClass, is_description_filler, tokens};

/// Where a cue was read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Place {
    Name,
    Title,
    Description,
}

impl Place {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Place::Name => "name",
            Place::Title => "title",
            Place::Description => "description",
        }
    }
}

/// One action word as found, with the class lint gives it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ActionCue {
    pub(crate) place: Place,
    /// The token as written (lowercase).
    pub(crate) word: String,
    pub(crate) class: VerbClass,
}

/// The action words of one tool: one per place at most, plus every token of the name and title.
#[derive(Debug, Clone, Default)]
pub(crate) struct Wording {
    pub(crate) name: Option<ActionCue>,
    pub(crate) title: Option<ActionCue>,
    pub(crate) description: Option<ActionCue>,
    /// Tokens of the name and the display title (Tool.title, else annotations.title).
    pub(crate) label_tokens: Vec<String>,
    /// Tokens of the whole description.
    pub(crate) description_tokens: Vec<String>,
}

/// Verbs that name a read without any doubt. `post`, `check`, `test`, `monitor`, `status` are left out on purpose:
/// they are HTTP methods, nouns or namespaces as often as they are reads.
const READ_WORDS: &[&str] = &[
    "get",
    "list",
    "search",
    "find",
    "query",
    "read",
    "fetch",
    "retrieve",
    "describe",
    "show",
    "view",
    "lookup",
    "inspect",
    "browse",
    "count",
    "explain",
    "enumerate",
];

/// Verbs that add something new. `new`, `generate`, `make`, `build` are left out: they often make nothing lasting.
const CREATE_WORDS: &[&str] = &["create", "add", "insert", "upload", "append", "clone", "copy", "duplicate", "fork"];

/// Verbs that change something that exists.
const UPDATE_WORDS: &[&str] = &[
    "update",
    "edit",
    "modify",
    "patch",
    "set",
    "rename",
    "move",
    "write",
    "overwrite",
    "replace",
    "upsert",
    "import",
    "merge",
    "assign",
    "enable",
    "disable",
    "configure",
    "change",
    "apply",
    "grant",
    "restore",
];

/// Verbs that remove or irreversibly end something. Only base forms count in names: `list_deleted_items` reads.
const DELETE_WORDS: &[&str] = &[
    "delete",
    "remove",
    "drop",
    "destroy",
    "purge",
    "erase",
    "wipe",
    "truncate",
    "uninstall",
    "terminate",
    "kill",
    "rm",
    "del",
    "trash",
    "prune",
    "deprovision",
    "decommission",
    "unregister",
    "evict",
    "teardown",
    "deallocate",
    "undeploy",
    "clear",
    "reset",
];

/// Verbs that deliver something to other people or systems. `email`, `sms`, `message`, `post` are nouns or HTTP
/// methods too often (`get_email`, `API-post-search`) to count on their own.
const SEND_WORDS: &[&str] = &["send", "publish", "notify", "broadcast", "tweet", "reply"];

/// Verbs that write data out of the tool's domain, typically to a file.
const EXPORT_WORDS: &[&str] = &["export", "download", "save", "dump", "backup"];

/// Verbs whose effect depends on what they run.
const EXECUTE_WORDS: &[&str] = &[
    "run", "execute", "exec", "invoke", "trigger", "start", "stop", "restart", "deploy", "install", "launch", "spawn",
    "eval", "navigate", "click", "reboot", "shutdown", "rerun", "dispatch", "cancel", "abort",
];

/// The lint class of an exact token.
fn strict_class(token: &str) -> Option<VerbClass> {
    let lists: [(&[&str], VerbClass); 7] = [
        (READ_WORDS, VerbClass::Read),
        (CREATE_WORDS, VerbClass::Create),
        (UPDATE_WORDS, VerbClass::Update),
        (DELETE_WORDS, VerbClass::Delete),
        (SEND_WORDS, VerbClass::Send),
        (EXPORT_WORDS, VerbClass::Export),
        (EXECUTE_WORDS, VerbClass::Execute),
    ];
    lists.into_iter().find(|(words, _)| words.contains(&token)).map(|(_, class)| class)
}

/// The lint class of a token in running text, where a third-person `-s`/`-es` is common ("Sends SMS messages").
/// Past forms are not folded: "deleted" describes more often than it acts.
fn prose_class(token: &str) -> Option<(String, VerbClass)> {
    let candidates = [Some(token), token.strip_suffix('s'), token.strip_suffix("es")];
    candidates.into_iter().flatten().find_map(|stem| strict_class(stem).map(|class| (stem.to_owned(), class)))
}

/// The verb of a tool name: the first token when it is a verb (`delete_customer`), else the last token when it is one
/// (`storage_account_delete`), else the first verb anywhere (`API-create-a-comment`).
fn name_action(name_tokens: &[String]) -> Option<(String, VerbClass)> {
    let first = name_tokens.first().and_then(|token| strict_class(token).map(|class| (token.clone(), class)));
    let last = || name_tokens.last().and_then(|token| strict_class(token).map(|class| (token.clone(), class)));
    let anywhere = || name_tokens.iter().find_map(|token| strict_class(token).map(|class| (token.clone(), class)));
    first.or_else(last).or_else(anywhere)
}

/// The title's verb: titles are imperative ("Send Email", "Post Search"), so one of the first two words, as written.
/// No inflection is folded: a title's "Updates" or "Exports" is a noun ("Check for updates").
fn title_action(title_tokens: &[String]) -> Option<(String, VerbClass)> {
    title_tokens.iter().take(2).find_map(|token| strict_class(token).map(|class| (token.clone(), class)))
}

/// The first line or sentence of a description, where its author says what the tool does.
fn first_sentence(description: &str) -> &str {
    let text = description.trim_start();
    let end = text.find(['\n', '.']).unwrap_or(text.len());
    text.get(..end).unwrap_or(text)
}

/// The description's verb: the first word of its first sentence after the fillers, with `-s`/`-es` folded.
fn description_action(description: &str) -> Option<(String, VerbClass)> {
    let sentence = first_sentence(description);
    // "Notion | Create a page": a product name before a bar is no part of the sentence.
    let sentence = sentence.rsplit('|').next().unwrap_or(sentence);
    let words = tokens(sentence);
    let first = words.iter().find(|token| !is_description_filler(token))?;
    prose_class(first)
}

/// Reads the action words of a tool.
pub(crate) fn read_wording(tool: &ToolDefinition) -> Wording {
    let name_tokens = tokens(tool.name());
    let title = tool.title().or_else(|| tool.annotations_title());
    let title_tokens = title.map(tokens).unwrap_or_default();
    let description = tool.description().unwrap_or_default();
    let cue = |place: Place| move |(word, class): (String, VerbClass)| ActionCue { place, word, class };
    Wording {
        name: name_action(&name_tokens).map(cue(Place::Name)),
        title: title_action(&title_tokens).map(cue(Place::Title)),
        description: description_action(description).map(cue(Place::Description)),
        label_tokens: name_tokens.into_iter().chain(title_tokens).collect(),
        description_tokens: tokens(description),
    }
}

impl Wording {
    /// The cues found, name first.
    pub(crate) fn cues(&self) -> impl Iterator<Item = &ActionCue> {
        [&self.name, &self.title, &self.description].into_iter().flatten()
    }

    /// The action that names what the tool does: the name's verb, else the title's, else the description's.
    pub(crate) fn primary(&self) -> Option<&ActionCue> {
        self.cues().next()
    }

    /// The primary action when it is of `class` and no other place says the tool only reads (or, for a read,
    /// that it does something else). Disagreeing texts are left alone: lint accuses only on clear wording.
    pub(crate) fn agreed(&self, class: VerbClass) -> Option<&ActionCue> {
        let primary = self.primary().filter(|cue| cue.class == class)?;
        let disagrees = |cue: &ActionCue| (cue.class == VerbClass::Read) != (class == VerbClass::Read);
        if self.cues().any(disagrees) { None } else { Some(primary) }
    }

    /// True when the name or title holds a verb of any class other than read, in the lint lists or the shared
    /// lexicon (`stop_search`, `search_and_replace`). `post` is ignored: it is the HTTP method of many read endpoints.
    pub(crate) fn label_has_non_read_verb(&self) -> bool {
        self.label_tokens.iter().any(|token| {
            token != "post"
                && (strict_class(token).is_some_and(|class| class != VerbClass::Read)
                    || crate::words::verb_class(token).is_some_and(|class| class != VerbClass::Read))
        })
    }

    /// True when a name or title token is a lint verb of `class` (`create_or_update` has an update).
    pub(crate) fn label_has_class(&self, class: VerbClass) -> bool {
        self.label_tokens.iter().any(|token| strict_class(token) == Some(class))
    }

    /// True when the name, title or description holds the token sequence `phrase` (e.g. `["or", "update"]`).
    pub(crate) fn mentions_phrase(&self, phrase: &[&str]) -> bool {
        let holds = |tokens: &[String]| {
            tokens.windows(phrase.len()).any(|window| window.iter().zip(phrase).all(|(token, word)| token == word))
        };
        !phrase.is_empty() && (holds(&self.label_tokens) || holds(&self.description_tokens))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn wording(value: serde_json::Value) -> Wording {
        match ToolDefinition::from_value(value) {
            Ok(tool) => read_wording(&tool),
            Err(error) => unreachable!("test tool is valid: {error}"),
        }
    }

    fn name_cue(name: &str) -> Option<(String, VerbClass)> {
        wording(json!({"name": name})).name.map(|cue| (cue.word, cue.class))
    }

    #[test]
    fn name_verbs_are_found_first_or_last() {
        assert_eq!(name_cue("delete_customer"), Some(("delete".into(), VerbClass::Delete)));
        assert_eq!(name_cue("storage_account_delete"), Some(("delete".into(), VerbClass::Delete)));
        assert_eq!(name_cue("API-create-a-comment"), Some(("create".into(), VerbClass::Create)));
        assert_eq!(name_cue("API-post-search"), Some(("search".into(), VerbClass::Read)));
        assert_eq!(name_cue("stop_search"), Some(("stop".into(), VerbClass::Execute)));
        assert_eq!(name_cue("list_deleted_items"), Some(("list".into(), VerbClass::Read)));
        assert_eq!(name_cue("azuremigrate_platformlandingzone_getguidance"), None);
    }

    #[test]
    fn titles_and_descriptions_lead_with_their_verb() {
        let found = wording(json!({
            "name": "communication_sms",
            "annotations": {"title": "Send SMS Message"},
            "description": "Sends SMS messages to one or more recipients. Returns message ids."
        }));
        assert_eq!(found.title.map(|cue| cue.word), Some("send".into()));
        assert_eq!(found.description.map(|cue| cue.word), Some("send".into()));
        let notion = wording(json!({"name": "API-post-page", "description": "Notion | Create a page\nError"}));
        assert_eq!(notion.primary().map(|cue| (cue.place, cue.class)), Some((Place::Description, VerbClass::Create)));
        let filler = wording(json!({"name": "flaky", "description": "\n  This tool retrieves flaky tests."}));
        assert_eq!(filler.description.map(|cue| cue.word), Some("retrieve".into()));
    }

    #[test]
    fn nouns_after_the_lead_are_not_actions() {
        let updates =
            wording(json!({"name": "updater", "title": "Check for updates", "description": "Check for updates."}));
        assert!(updates.cues().next().is_none(), "{updates:?}");
        let exports = wording(json!({"name": "x", "description": "Returns the exports of a module."}));
        assert!(exports.description.is_none());
    }

    #[test]
    fn disagreeing_texts_agree_on_nothing() {
        let found = wording(json!({"name": "delete_report", "description": "Lists the reports that would go."}));
        assert!(found.agreed(VerbClass::Delete).is_none());
        let found = wording(json!({"name": "delete_report", "description": "Removes a report for good."}));
        assert!(found.agreed(VerbClass::Delete).is_some());
    }

    #[test]
    fn every_filler_inference_skips_is_skipped_before_the_description_verb() {
        // One list for inference and lint: a description that opens with any filler has its verb after it.
        for filler in crate::words::DESCRIPTION_FILLERS {
            let found = wording(json!({"name": "x", "description": format!("{filler} delete the record.")}));
            assert_eq!(found.description.map(|cue| cue.word), Some("delete".into()), "after {filler:?}");
        }
    }

    #[test]
    fn phrases_match_whole_tokens() {
        let found = wording(json!({"name": "create_thing", "description": "Create or update a thing."}));
        assert!(found.mentions_phrase(&["or", "update"]));
        assert!(!found.mentions_phrase(&["or", "upd"]));
        assert!(!found.mentions_phrase(&[]));
    }
}
