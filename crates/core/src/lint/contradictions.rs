//! `TG1xx`: declared hints that contradict each other or what the tool's wording says it does.
//!
//! Each check needs two things before it speaks: a declared hint value (never a default or an inferred one), and a
//! clear action word read by `wording.rs` that no other text of the tool disputes. Anything less ambiguous is left
//! to inference and policy; these checks must not fire on a good declaration.

use serde_json::Value;

use super::catalogue::{
    CREATE_DECLARED_DESTRUCTIVE, CREATE_DECLARED_IDEMPOTENT, DELETE_DECLARED_NOT_DESTRUCTIVE,
    DELETE_DECLARED_READ_ONLY, EXPORT_DECLARED_READ_ONLY, READ_DECLARED_DESTRUCTIVE, READ_ONLY_AND_DESTRUCTIVE,
    SEND_DECLARED_READ_ONLY, URL_DECLARED_CLOSED_WORLD, WRITE_DECLARED_READ_ONLY,
};
use super::wording::{ActionCue, Wording};
use super::{Finding, Rule, hint_pointer};
use crate::hints::Hint;
use crate::normalize::NormalizedAnnotations;
use crate::tool::ToolDefinition;
use crate::words::{VerbClass, tokens};

/// Verbs of a plain, additive create: each call makes one more thing. `add` is weaker: adding a file to a staging
/// area or a member to a team is a set insertion, so for idempotency it counts only next to the word "new".
const PLAIN_CREATE_WORDS: &[&str] = &["create", "add", "insert", "append"];

/// Name or title tokens that make a create an upsert or an ensure (repeating it changes nothing more).
const UPSERT_TOKENS: &[&str] = &["upsert", "ensure", "createorupdate", "createorreplace", "put", "idempotent"];

/// Phrases in the name, title or description that give a create upsert or "if not exists" semantics.
const UPSERT_PHRASES: &[&[&str]] = &[
    &["or", "update"],
    &["or", "replace"],
    &["or", "updates"],
    &["or", "replaces"],
    &["if", "not", "exists"],
    &["if", "not", "exist"],
    &["does", "not", "exist"],
    &["doesn", "t", "exist"],
    &["already", "exists"],
    &["already", "exist"],
    &["no", "op"],
];

/// Things whose "add" is a set membership: adding twice leaves one association, label or member.
const SET_MEMBER_NOUNS: &[&str] = &[
    "association",
    "associations",
    "link",
    "links",
    "member",
    "members",
    "membership",
    "memberships",
    "tag",
    "tags",
    "label",
    "labels",
    "permission",
    "permissions",
    "role",
    "roles",
    "access",
    "star",
    "reaction",
    "reactions",
    "subscriber",
    "subscribers",
    "collaborator",
    "collaborators",
];

/// Stems in a description that admit a create can destroy or overwrite (so `destructiveHint: true` is honest).
const DESTRUCTION_STEMS: &[&str] =
    &["delet", "remov", "destroy", "overwrit", "replac", "drop", "purg", "eras", "truncat", "wipe", "clobber"];

/// Property names that give the created thing a caller-chosen identity (`name`, `id`, or `<object>_name`).
const IDENTITY_WORDS: &[&str] = &["name", "id", "key", "slug", "identifier", "path", "filepath"];

/// Words that end the object of a create in a name (`vm_create_from_template` creates a vm, not a template).
const PREPOSITIONS: &[&str] = &["from", "in", "for", "to", "with", "on", "into", "at", "by", "of"];

/// Delete verbs that are too mild for "destructiveHint false is wrong" (`clear_selection`, `reset_zoom`).
const MILD_DELETE_WORDS: &[&str] = &["clear", "reset"];

/// Export verbs that always write somewhere, with or without a file in sight.
const SAVING_EXPORT_WORDS: &[&str] = &["save", "dump", "backup"];

/// Schema property tokens that name a place on disk.
const PATH_PROPERTY_TOKENS: &[&str] =
    &["path", "filepath", "dir", "directory", "folder", "filename", "outdir", "outfile", "destination"];

/// Words in a description that say the tool writes, and where.
const WRITE_PROSE: &[&str] = &["save", "saves", "saved", "saving", "write", "writes", "written", "writing", "stores"];
const FILE_PROSE: &[&str] = &["file", "files", "disk", "directory", "folder", "path"];

/// Runs every contradiction check.
pub(super) fn check(
    tool: &ToolDefinition,
    normalized: &NormalizedAnnotations,
    wording: &Wording,
    findings: &mut Vec<Finding>,
) {
    check_open_world(tool, normalized, findings);
    let declared = &normalized.declared;
    let pointer = |hint: Hint| Some(hint_pointer(tool, normalized, hint));
    let says = |cue: &ActionCue| format!("{} says `{}`", cue.place.as_str(), cue.word);
    let mut push = |rule: &Rule, message: String, hint: Hint| findings.push(Finding::new(rule, message, pointer(hint)));

    if declared.read_only == Some(true) {
        if declared.destructive == Some(true) {
            // Point at the hint the wording contradicts: a read tool is not destructive, a writer is not read-only.
            let writes = wording.primary().is_some_and(|cue| cue.class != VerbClass::Read);
            let hint = if writes { Hint::ReadOnly } else { Hint::Destructive };
            push(&READ_ONLY_AND_DESTRUCTIVE, "readOnlyHint and destructiveHint are both true".into(), hint);
        }
        if let Some(cue) = wording.agreed(VerbClass::Delete) {
            push(&DELETE_DECLARED_READ_ONLY, format!("{} but readOnlyHint is true", says(cue)), Hint::ReadOnly);
        }
        if let Some(cue) = wording.agreed(VerbClass::Send) {
            push(&SEND_DECLARED_READ_ONLY, format!("{} but readOnlyHint is true", says(cue)), Hint::ReadOnly);
        }
        if let Some(cue) = wording.agreed(VerbClass::Export)
            && let Some(place) = file_evidence(tool, wording, cue)
        {
            let message = format!("{}{place} but readOnlyHint is true", says(cue));
            push(&EXPORT_DECLARED_READ_ONLY, message, Hint::ReadOnly);
        }
        if let Some(cue) = wording.agreed(VerbClass::Create).or_else(|| wording.agreed(VerbClass::Update)) {
            push(&WRITE_DECLARED_READ_ONLY, format!("{} but readOnlyHint is true", says(cue)), Hint::ReadOnly);
        }
        return;
    }

    // From here on the tool is not declared read-only, so destructiveHint and idempotentHint mean something.
    if declared.destructive == Some(true)
        && let Some(cue) = wording.agreed(VerbClass::Read)
        && !wording.label_has_non_read_verb()
    {
        let read_only = if declared.read_only == Some(false) { "readOnlyHint is false and " } else { "" };
        let message = format!("{} but {read_only}destructiveHint is true", says(cue));
        push(&READ_DECLARED_DESTRUCTIVE, message, Hint::Destructive);
    }
    if declared.destructive == Some(false)
        && let Some(cue) = wording.agreed(VerbClass::Delete)
        && !MILD_DELETE_WORDS.contains(&cue.word.as_str())
    {
        push(
            &DELETE_DECLARED_NOT_DESTRUCTIVE,
            format!("{} but destructiveHint is false", says(cue)),
            Hint::Destructive,
        );
    }
    // A create whose caller names the new thing may collide with an existing one: a repeat then fails (idempotent)
    // or replaces (destructive), depending on the API, so neither declaration can be called wrong.
    if let Some(cue) = plain_create(wording).filter(|_| !takes_identity(tool)) {
        if declared.idempotent == Some(true) && !adds_to_a_set(wording, cue) {
            push(&CREATE_DECLARED_IDEMPOTENT, format!("{} but idempotentHint is true", says(cue)), Hint::Idempotent);
        }
        if declared.destructive == Some(true) && !admits_destruction(wording) {
            push(&CREATE_DECLARED_DESTRUCTIVE, format!("{} but destructiveHint is true", says(cue)), Hint::Destructive);
        }
    }
}

/// `TG110`: a closed-world declaration on a tool whose input is a URL.
fn check_open_world(tool: &ToolDefinition, normalized: &NormalizedAnnotations, findings: &mut Vec<Finding>) {
    if normalized.declared.open_world != Some(false) {
        return;
    }
    let properties = tool.input_schema().and_then(|schema| schema.get("properties")).and_then(Value::as_object);
    let url_property = properties.into_iter().flat_map(|properties| properties.keys()).find(|key| {
        let lower = key.to_ascii_lowercase();
        lower == "url" || lower == "urls"
    });
    if let Some(key) = url_property {
        let message = format!("the input schema takes `{key}` but openWorldHint is false");
        let pointer = hint_pointer(tool, normalized, Hint::OpenWorld);
        findings.push(Finding::new(&URL_DECLARED_CLOSED_WORLD, message, Some(pointer)));
    }
}

/// The create cue of a plain create: create/add/insert/append, with no upsert or "if not exists" wording.
fn plain_create(wording: &Wording) -> Option<&ActionCue> {
    let cue = wording.agreed(VerbClass::Create).filter(|cue| PLAIN_CREATE_WORDS.contains(&cue.word.as_str()))?;
    let upsert = wording.label_tokens.iter().any(|token| UPSERT_TOKENS.contains(&token.as_str()))
        || wording.description_tokens.iter().any(|token| token == "ensure" || token == "ensures")
        || UPSERT_PHRASES.iter().any(|phrase| wording.mentions_phrase(phrase))
        || wording.label_has_class(VerbClass::Update)
        || wording.label_has_class(VerbClass::Delete);
    if upsert { None } else { Some(cue) }
}

/// True when a required input names the created thing: a bare `name`/`id`/`key`/`path`, the object of the name
/// (`project` for `create_project`), or the object plus an identity word (`workspace_name`).
fn takes_identity(tool: &ToolDefinition) -> bool {
    let name_tokens = tokens(tool.name());
    let Some(verb_at) = name_tokens.iter().position(|token| PLAIN_CREATE_WORDS.contains(&token.as_str())) else {
        return false;
    };
    let after: Vec<&String> =
        name_tokens.iter().skip(verb_at + 1).take_while(|token| !PREPOSITIONS.contains(&token.as_str())).collect();
    let object =
        if after.is_empty() { name_tokens.get(..verb_at).and_then(<[String]>::last) } else { after.last().copied() };
    let Some(schema) = tool.input_schema() else {
        return false;
    };
    let properties = schema.get("properties").and_then(Value::as_object);
    let required: Vec<&str> = match schema.get("required").and_then(Value::as_array) {
        Some(required) => required.iter().filter_map(Value::as_str).collect(),
        None => properties.into_iter().flat_map(|properties| properties.keys().map(String::as_str)).collect(),
    };
    required.iter().any(|property| {
        let property_tokens = tokens(property);
        let is_object = |token: &String| object.is_some_and(|object| object == token);
        match property_tokens.as_slice() {
            [single] => IDENTITY_WORDS.contains(&single.as_str()) || is_object(single),
            [.., noun, identity] => is_object(noun) && IDENTITY_WORDS.contains(&identity.as_str()),
            [] => false,
        }
    })
}

/// True when the create may be a set insertion (`add_label`, `create_association`, `git_add`): repeating it is
/// harmless, so `idempotentHint: true` may well be right.
fn adds_to_a_set(wording: &Wording, cue: &ActionCue) -> bool {
    let says_new = wording.label_tokens.iter().chain(&wording.description_tokens).any(|token| token == "new");
    (cue.word == "add" && !says_new)
        || wording.label_tokens.iter().any(|token| SET_MEMBER_NOUNS.contains(&token.as_str()))
        || wording.description_tokens.iter().any(|token| token == "idempotent")
}

/// True when the description admits that the tool can delete, replace or overwrite something.
fn admits_destruction(wording: &Wording) -> bool {
    wording
        .description_tokens
        .iter()
        .any(|token| DESTRUCTION_STEMS.iter().any(|stem| token.starts_with(stem)) || token == "destructive")
}

/// Why an export cue writes a file: ` and the input takes `outputPath``, or an empty string for `save`-like verbs.
fn file_evidence(tool: &ToolDefinition, wording: &Wording, cue: &ActionCue) -> Option<String> {
    if SAVING_EXPORT_WORDS.contains(&cue.word.as_str()) {
        return Some(String::new());
    }
    let properties = tool.input_schema().and_then(|schema| schema.get("properties")).and_then(Value::as_object);
    let path_property = properties.into_iter().flat_map(|properties| properties.keys()).find(|key| {
        let key_tokens = tokens(key);
        key_tokens.iter().any(|token| PATH_PROPERTY_TOKENS.contains(&token.as_str()))
            || (key_tokens.iter().any(|token| token == "file")
                && key_tokens
                    .iter()
                    .any(|token| ["output", "save", "target", "local", "dest"].contains(&token.as_str())))
    });
    if let Some(key) = path_property {
        return Some(format!(" and the input takes `{key}`,"));
    }
    let writes = wording.description_tokens.iter().any(|token| WRITE_PROSE.contains(&token.as_str()));
    let to_file = wording.description_tokens.iter().any(|token| FILE_PROSE.contains(&token.as_str()));
    (writes && to_file).then(|| " and the description says it writes a file,".to_owned())
}
