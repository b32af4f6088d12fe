//! Cues about *what a tool touches* rather than what it does: the web, the local machine, arbitrary code, a cloud
//! control plane, files it writes, and danger words in its texts.
//!
//! Each cue is found once per tool and shared by the hint rules. A cue is a short, human-readable reason
//! (`property "url"`, `phrase "cannot be undone"`) or `None`; this module assigns no weights.

use crate::infer::CueSource;
use crate::infer::action::Action;
use crate::infer::cue::Cue;
use crate::infer::effects::{StatedEffect, stated_effects};
use crate::infer::signals::{Property, Signals, contains_phrase};
use crate::words::VerbClass;

/// The domain cues of one tool.
#[derive(Debug, Clone, Default)]
pub(crate) struct Domain {
    /// It reaches the web: URL properties, or web words in name, title or first sentence.
    pub(crate) web: Option<Cue>,
    /// It works on the local machine: paths, directories, processes, terminals, local memory.
    pub(crate) local: Option<Cue>,
    /// It runs caller-supplied code or commands (a shell, a script, SQL to execute).
    pub(crate) code: Option<Cue>,
    /// It manages resources of a cloud account addressed by subscription, tenant or resource group.
    pub(crate) control_plane: Option<Cue>,
    /// It writes its output to a file the caller names.
    pub(crate) file_output: Option<Cue>,
    /// A confirmation, force or overwrite switch.
    pub(crate) danger_switch: Option<Cue>,
    /// It returns guidance bundled with the server (best practices, templates, instructions), not live data.
    pub(crate) static_guidance: Option<Cue>,
    /// A dry-run switch: the tool has effects worth previewing.
    pub(crate) dry_run: Option<Cue>,
    /// Required free-text content to store or send (`content`, `body`, `note`, `message`).
    pub(crate) content: Option<Cue>,
    /// A property shaped for reading (`query`, `filter`, `limit`, `cursor`).
    pub(crate) read_shape: Option<Cue>,
    /// An enum of actions that includes removing or stopping something.
    pub(crate) delete_choice: Option<Cue>,
    /// An enum of actions that includes writing or changing something.
    pub(crate) write_choice: Option<Cue>,
    /// An `action`/`operation` property offering to overwrite or delete (in its enum or its description).
    pub(crate) overwrite_choice: Option<Cue>,
    /// Every delete, send or write the tool states anywhere in its texts or schema (`also deletes every file`).
    pub(crate) stated_effects: Vec<StatedEffect>,
}

impl Domain {
    /// The names of the cues found, for the learned layer's features (`web`, `stated-delete`, ...).
    pub(crate) fn flags(&self) -> Vec<&'static str> {
        let cues: [(&'static str, bool); 13] = [
            ("web", self.web.is_some()),
            ("local", self.local.is_some()),
            ("code", self.code.is_some()),
            ("control-plane", self.control_plane.is_some()),
            ("file-output", self.file_output.is_some()),
            ("danger-switch", self.danger_switch.is_some()),
            ("static-guidance", self.static_guidance.is_some()),
            ("dry-run", self.dry_run.is_some()),
            ("content", self.content.is_some()),
            ("read-shape", self.read_shape.is_some()),
            ("delete-choice", self.delete_choice.is_some()),
            ("write-choice", self.write_choice.is_some()),
            ("overwrite-choice", self.overwrite_choice.is_some()),
        ];
        let mut flags: Vec<&'static str> = cues.into_iter().filter(|(_, found)| *found).map(|(name, _)| name).collect();
        for effect in &self.stated_effects {
            let flag = match effect.class {
                VerbClass::Delete => "stated-delete",
                VerbClass::Send => "stated-send",
                _ => "stated-write",
            };
            if !flags.contains(&flag) {
                flags.push(flag);
            }
        }
        flags
    }
}

const WEB_WORDS: &[&str] = &[
    "web",
    "website",
    "websites",
    "webpage",
    "webpages",
    "internet",
    "browser",
    "url",
    "urls",
    "online",
    "http",
    "https",
    "scrape",
    "scraping",
    "crawl",
    "crawler",
    "arxiv",
    "wikipedia",
    "tab",
    "page",
    "pages",
];
const WEB_PROPERTY_TOKENS: &[&str] = &["url", "urls", "uri", "href", "website", "domain"];
const LOCAL_WORDS: &[&str] = &[
    "filesystem",
    "directory",
    "directories",
    "folder",
    "folders",
    "terminal",
    "repl",
    "pid",
    "clipboard",
    "localhost",
    "disk",
];
const LOCAL_PHRASES: &[&str] = &[
    "local file",
    "file system",
    "local machine",
    "on disk",
    "the file",
    "a file",
    "files",
    "running process",
    "process",
    "knowledge graph",
    "in memory",
    "configuration value",
    "local directory",
    "local disk",
];
const LOCAL_PROPERTY_TOKENS: &[&str] = &["path", "paths", "filepath", "cwd", "pid", "filename"];
const CODE_PROPERTY_TOKENS: &[&str] =
    &["command", "cmd", "script", "code", "javascript", "js", "expression", "function", "sql", "statement"];
const CODE_PHRASES: &[&str] = &[
    "execute a command",
    "run a command",
    "shell command",
    "terminal",
    "arbitrary",
    "execute javascript",
    "javascript function",
    "execute sql",
    "run sql",
    "execute the sql",
    "repl",
    "shell access",
];
const CONTROL_PLANE_PROPERTIES: &[&str] = &["subscription", "resourcegroup", "tenant"];
const OUTPUT_HINTS: &[&str] = &[
    "save",
    "saved",
    "saves",
    "write to",
    "written to",
    "output file",
    "output directory",
    "output path",
    "export to",
    "store the",
    "destination",
];
const READ_SHAPE: &[&str] = &[
    "query",
    "q",
    "filter",
    "filters",
    "limit",
    "cursor",
    "offset",
    "sort",
    "sortby",
    "orderby",
    "pagesize",
    "perpage",
    "maxresults",
    "pagetoken",
    "pagenumber",
    "top",
];
const CONTENT_PROPERTIES: &[&str] = &[
    "content",
    "contents",
    "body",
    "note",
    "completionnote",
    "message",
    "text",
    "data",
    "documents",
    "document",
    "value",
    "values",
    "update",
    "patch",
    "newcontent",
    "newstring",
    "edits",
    "inputs",
];

/// Reads the domain cues of a tool.
pub(crate) fn read_domain(signals: &Signals, actions: &[Action]) -> Domain {
    let head_class = actions.first().map(|action| action.class);
    Domain {
        stated_effects: stated_effects(signals),
        web: web_cue(signals),
        local: local_cue(signals),
        code: code_cue(signals, head_class),
        control_plane: signals
            .property_named(CONTROL_PLANE_PROPERTIES)
            .map(|property| Cue::property(property, "cloud account property")),
        file_output: signals
            .properties
            .iter()
            .find(|property| writes_file(property))
            .map(|property| Cue::property(property, "output file property")),
        danger_switch: signals
            .property_named(&["force", "confirm", "confirmed", "overwrite", "forcedeletion", "forcedelete"])
            .map(|property| Cue::property(property, "switch")),
        static_guidance: signals
            .name_or_title_word(&[
                "bestpractices",
                "practices",
                "guidance",
                "guide",
                "template",
                "templates",
                "instructions",
                "rules",
                "learning",
                "language",
                "languages",
            ])
            .map(|word| Cue::new(CueSource::Name, format!("guidance word \"{word}\""))),
        dry_run: signals.property_named(&["dryrun", "preview", "validateonly"]).map(|p| Cue::property(p, "switch")),
        content: signals
            .properties
            .iter()
            .find(|property| property.required && property.top_level && is_named(property, CONTENT_PROPERTIES))
            .map(|property| Cue::property(property, "required content property")),
        read_shape: signals
            .properties
            .iter()
            .find(|property| property.top_level && is_named(property, READ_SHAPE))
            .map(|property| Cue::property(property, "query-shaped property")),
        delete_choice: choice_cue(signals, |class| class == VerbClass::Delete),
        write_choice: choice_cue(signals, |class| {
            matches!(class, VerbClass::Create | VerbClass::Update | VerbClass::Delete | VerbClass::Send)
        }),
        overwrite_choice: signals
            .properties
            .iter()
            .filter(|property| property.top_level && is_named(property, &["action", "actions", "operation", "op"]))
            .find_map(|property| {
                let words = crate::words::tokens(&property.description);
                let values = property.enum_values.iter().flat_map(|value| crate::words::tokens(value));
                words
                    .into_iter()
                    .chain(values)
                    .find(|word| {
                        matches!(
                            word.as_str(),
                            "update" | "set" | "replace" | "overwrite" | "delete" | "remove" | "destroy"
                        )
                    })
                    .map(|word| {
                        Cue::new(CueSource::Schema, format!("action \"{word}\" offered by \"{}\"", property.name))
                    })
            }),
    }
}

fn is_named(property: &Property, names: &[&str]) -> bool {
    names.contains(&property.flat_name.as_str())
}

fn web_cue(signals: &Signals) -> Option<Cue> {
    let property = signals
        .properties
        .iter()
        .find(|property| property.top_level && (property.has_token(WEB_PROPERTY_TOKENS) || property.format == "uri"));
    if let Some(property) = property {
        return Some(Cue::property(property, "web property"));
    }
    let find = |tokens: &[String]| WEB_WORDS.iter().copied().find(|word| tokens.iter().any(|token| token == word));
    if let Some(word) = find(&signals.name_tokens) {
        return Some(Cue::new(CueSource::Name, format!("web word \"{word}\"")));
    }
    if let Some(word) = find(&signals.title_tokens) {
        return Some(Cue::new(CueSource::Title, format!("web word \"{word}\"")));
    }
    find(&signals.lead_tokens).map(|word| Cue::new(CueSource::Description, format!("web word \"{word}\"")))
}

fn local_cue(signals: &Signals) -> Option<Cue> {
    let lead = &signals.lead_text;
    if let Some(word) = LOCAL_WORDS.iter().find(|word| signals.lead_tokens.iter().any(|token| token == *word)) {
        return Some(Cue::new(CueSource::Description, format!("local word \"{word}\"")));
    }
    if let Some(phrase) = LOCAL_PHRASES.iter().find(|phrase| contains_phrase(lead, phrase)) {
        return Some(Cue::new(CueSource::Description, format!("local phrase \"{}\"", phrase.trim())));
    }
    if let Some(word) = signals.name_or_title_word(&["file", "files", "directory", "process", "processes", "terminal"])
    {
        return Some(Cue::new(CueSource::Name, format!("local word \"{word}\"")));
    }
    signals
        .properties
        .iter()
        .find(|property| {
            property.top_level
                && property.has_token(LOCAL_PROPERTY_TOKENS)
                && !property.has_token(WEB_PROPERTY_TOKENS)
                && (property.description.contains("file")
                    || property.description.contains("director")
                    || property.description.contains("absolute")
                    || property.has_token(&["pid"]))
        })
        .map(|property| Cue::property(property, "local path property"))
}

fn code_cue(signals: &Signals, head_class: Option<VerbClass>) -> Option<Cue> {
    let lead = &signals.lead_text;
    if let Some(phrase) = CODE_PHRASES.iter().find(|phrase| contains_phrase(lead, phrase)) {
        return Some(Cue::new(CueSource::Description, format!("phrase \"{phrase}\"")));
    }
    let runs_things = head_class == Some(VerbClass::Execute)
        || ["execute", "run ", "evaluate", "eval"].iter().any(|word| contains_phrase(lead, word));
    if !runs_things {
        return None;
    }
    signals
        .properties
        .iter()
        .find(|property| {
            property.top_level
                && property.has_token(CODE_PROPERTY_TOKENS)
                && property.types.iter().all(|kind| kind == "string" || kind == "null")
        })
        .map(|property| Cue::property(property, "code property"))
}

fn writes_file(property: &Property) -> bool {
    let path_like = property.has_token(&["path", "file", "filename", "dir", "directory", "folder", "filepath"]);
    let named_output = property.has_token(&["output", "save", "destination", "dest", "target", "export"]);
    // Closures, so the description is searched only for a path-like string property not already named as output.
    let described_output = || {
        OUTPUT_HINTS.iter().any(|hint| contains_phrase(&property.description, hint))
            && !property.description.contains("read from")
            && !property.description.contains("to read")
    };
    property.types.iter().all(|kind| kind == "string" || kind == "null")
        && path_like
        && (named_output || described_output())
}

fn choice_cue(signals: &Signals, wanted: impl Fn(VerbClass) -> bool) -> Option<Cue> {
    signals.properties.iter().filter(|property| property.top_level).find_map(|property| {
        property.enum_values.iter().find_map(|value| {
            // `is_destroy`, `delete-processor`: a verb anywhere in the value.
            crate::words::tokens(value).iter().filter(|token| token.as_str() != "force").find_map(|token| {
                let class = crate::words::verb_class(token)?;
                wanted(class)
                    .then(|| Cue::new(CueSource::Schema, format!("choice \"{value}\" of \"{}\"", property.name)))
            })
        })
    })
}
