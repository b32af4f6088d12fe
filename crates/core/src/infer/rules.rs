//! The weighted rules: how each cue moves each hint, as a signed log-odds-like weight.
//!
//! Every rule is general English or a general schema shape; none names a server or a tool. The numbers were tuned
//! by hand on part of the development corpus (see `docs/inference.md` for the protocol). Rules only add evidence
//! to a [`Tally`]; turning the sum into a value and a confidence happens in `mod.rs`.

use crate::infer::action::{Action, name_and_title_verbs};
use crate::infer::cue::Cue;
use crate::infer::domain::Domain;
use crate::infer::signals::{Signals, contains_phrase};
use crate::infer::{CueSource, Tally, VETO_MARK};
use crate::words::VerbClass;

/// How much a head verb counts, by where it was found: names are terse and exact, titles are written for
/// people, a description's first verb is often preceded by context.
fn source_weight(source: CueSource) -> f32 {
    match source {
        CueSource::Name => 3.0,
        CueSource::Title => 2.5,
        _ => 2.0,
    }
}

/// Verbs that replace what is there (a second call with other arguments loses the first state).
const OVERWRITING: &[&str] = &[
    "set",
    "update",
    "edit",
    "modify",
    "patch",
    "replace",
    "overwrite",
    "move",
    "rename",
    "write",
    "change",
    "configure",
    "apply",
    "import",
    "restore",
    "merge",
    "upgrade",
    "downgrade",
    "resize",
    "scale",
    "sync",
    "upsert",
    "createorupdate",
    "manage",
    "disable",
    "reset",
    "rotate",
    "save",
    "put",
    "store",
    "updater",
    "editor",
    "writer",
    "revert",
    "rollback",
    "transfer",
    "migrate",
];
/// Verbs that only add something new next to what exists.
const ADDITIVE: &[&str] = &[
    "create",
    "add",
    "new",
    "insert",
    "post",
    "upload",
    "register",
    "append",
    "attach",
    "generate",
    "build",
    "clone",
    "copy",
    "duplicate",
    "fork",
    "record",
    "log",
    "comment",
    "tag",
    "label",
    "make",
    "provision",
    "allocate",
    "enroll",
    "submit",
    "grant",
    "invite",
    "subscribe",
    "draft",
    "compose",
    "synthesize",
    "mkdir",
];
/// Verbs that compute an answer and hand it back (creating nothing that stays).
const COMPUTING: &[&str] = &["generate", "design", "compose", "draft", "render", "convert"];
/// Verbs that only move a session's focus (`select_page`, `switch_tab`).
const FOCUSING: &[&str] = &["select", "switch", "focus", "use"];
/// Verbs that disrupt something running without removing it.
const DISRUPTING: &[&str] = &["restart", "reboot", "shutdown", "kill", "pause", "suspend"];
/// Verbs that set a target state, so repeating them changes nothing more.
/// `set` and `cancel` name the state they leave too (a value set, a job cancelled).
const STATE_SETTING: &[&str] = &["set", "cancel", "stop", "enable", "disable", "pause", "resume", "lock", "unlock"];
/// Verbs whose second call fails or acts again because the first one moved things (`rename`, `move`).
const RELOCATING: &[&str] = &["rename", "move", "transfer", "migrate", "import"];
/// Words that warn a person before calling.
const CAUTION_PHRASES: &[&str] =
    &["explicit user confirmation", "requires confirmation", "be careful", "with caution", "confirm with the user"];

/// Words that say the tool destroys or cannot be undone.
const DANGER_PHRASES: &[&str] = &[
    "cannot be undone",
    "can't be undone",
    "irreversible",
    "irreversibly",
    "permanently",
    "will be lost",
    "data loss",
    "destructive",
    "overwrites",
    "overwrite",
    "replaces the",
    "wipes",
    "deletes all",
    "removes all",
    "forcefully",
    "use with caution",
];
/// Words that say the tool is safe to call.
const SAFE_PHRASES: &[&str] = &[
    "read-only operation",
    "read-only tool",
    "is read-only",
    "readonly tool",
    "does not modify",
    "doesn't modify",
    "does not change",
    "without modifying",
    "without making changes",
    "no side effects",
    "does not make any changes",
    "will not modify",
    "non-destructive",
    "safe to call",
];
/// Words that say the tool changes something.
const WRITE_PHRASES: &[&str] = &[
    "modifies",
    "data modification",
    "this tool modifies",
    "changes the",
    "requires explicit user confirmation",
    "requires confirmation",
    "starts new",
    "start a new",
    "starts a new",
    "kicks off",
    "triggers a",
];

fn verb_of(action: &Action) -> &str {
    action.verb.as_str()
}

fn is_in(list: &[&str], verb: &str) -> bool {
    list.contains(&verb) || crate::words::verb_class(verb).is_some() && stem_in(list, verb)
}

fn stem_in(list: &[&str], verb: &str) -> bool {
    ["ing", "es", "ed", "s", "d"].iter().any(|suffix| {
        verb.strip_suffix(suffix).is_some_and(|stem| {
            list.contains(&stem) || crate::words::with_e(stem, |word| list.contains(&word).then_some(())).is_some()
        })
    })
}

fn add_cue(tally: &mut Tally, cue: &Option<Cue>, weight: f32) {
    if let Some(cue) = cue {
        tally.add(cue.source, cue.text.clone(), None, weight);
    }
}

fn add_phrase(tally: &mut Tally, signals: &Signals, phrases: &[&str], label: &str, weight: f32) {
    if let Some(phrase) = signals.description_phrase(phrases) {
        tally.add(CueSource::Description, format!("{label} \"{phrase}\""), None, weight);
    }
}

/// `readOnlyHint`: positive weights say the tool only reads.
pub(crate) fn read_only(signals: &Signals, actions: &[Action], domain: &Domain) -> Tally {
    let mut tally = Tally::new(-0.5, "unknown tools are assumed to write");
    for action in actions {
        let factor = match action.class {
            _ if is_in(COMPUTING, verb_of(action)) => 0.5,
            _ if is_in(FOCUSING, verb_of(action)) => 0.3,
            VerbClass::Read => 1.0,
            VerbClass::Connect => 0.3,
            VerbClass::Export => 0.15,
            VerbClass::Execute => -0.8,
            VerbClass::Delete => -1.2,
            VerbClass::Create | VerbClass::Update | VerbClass::Send => -1.0,
        };
        tally.add_verb(action, factor * source_weight(action.source));
    }
    // A stated side effect or an output file contradicts any read claim: a veto, so read wording cannot outweigh
    // it (issue 10, item 5: "also deletes every file" after a read verb).
    if let Some(effect) = domain.stated_effects.first() {
        tally.veto(effect.cue.source, format!("{} {VETO_MARK}", effect.cue.text), Some(effect.class));
    } else if let Some(cue) = &domain.file_output {
        tally.veto(cue.source, format!("{} {VETO_MARK}", cue.text), Some(VerbClass::Export));
    }
    add_cue(&mut tally, &domain.file_output, -5.0);
    add_cue(&mut tally, &domain.code, -4.0);
    add_cue(&mut tally, &domain.danger_switch, -2.0);
    add_cue(&mut tally, &domain.dry_run, -2.0);
    add_cue(&mut tally, &domain.content, -1.5);
    if let Some(token) =
        signals.name_tokens.iter().chain(signals.lead_tokens.iter()).find(|token| token.starts_with("download"))
    {
        // Downloading stores a file on the caller's side.
        tally.add(CueSource::Description, format!("verb \"{token}\" (stores a file)"), Some(VerbClass::Export), -2.5);
    }
    if let Some(word) = signals.name_or_title_word(&["next"]) {
        // "Get the next action" with a report of what was done: a step in a workflow, which moves it on.
        let weight = if domain.content.is_some() { -6.0 } else { -1.5 };
        tally.add(CueSource::Name, format!("step word \"{word}\" (advances a workflow)"), None, weight);
    }
    add_cue(&mut tally, &domain.read_shape, 0.5);
    // "Load a sample dataset into a cluster": loading into something writes it.
    if actions.iter().any(|action| action.verb.starts_with("load")) && contains_phrase(&signals.lead_text, "into") {
        tally.add(CueSource::Description, "phrase \"load ... into\"", Some(VerbClass::Create), -4.0);
    }
    if !actions.iter().any(|action| action.class == VerbClass::Read) {
        add_cue(&mut tally, &domain.write_choice, -1.5);
    }
    add_phrase(&mut tally, signals, SAFE_PHRASES, "phrase", 2.0);
    add_phrase(&mut tally, signals, DANGER_PHRASES, "phrase", -1.5);
    add_phrase(&mut tally, signals, WRITE_PHRASES, "phrase", -1.5);
    tally
}

/// `destructiveHint`, judged as if the tool writes: positive weights say it may destroy or overwrite.
pub(crate) fn destructive(signals: &Signals, actions: &[Action], domain: &Domain) -> Tally {
    let mut tally = Tally::new(0.2, "a writing tool may destroy (the spec default)");
    let head_is_create = actions.first().is_some_and(|action| is_in(ADDITIVE, verb_of(action)));
    let head_creates_new =
        actions.first().is_some_and(|action| is_in(&["create", "new", "provision", "clone"], verb_of(action)));
    for action in actions {
        let verb = verb_of(action);
        let factor = match action.class {
            VerbClass::Delete => 1.2,
            _ if is_in(DISRUPTING, verb) => 0.8,
            _ if is_in(OVERWRITING, verb) => 0.6,
            _ if is_in(ADDITIVE, verb) => -0.6,
            VerbClass::Update => -0.2,
            VerbClass::Create | VerbClass::Send => -0.6,
            VerbClass::Execute => -0.2,
            VerbClass::Export => -0.5,
            VerbClass::Read | VerbClass::Connect => -0.8,
        };
        tally.add_verb(action, factor * source_weight(action.source));
    }
    // A second verb in name or title that deletes (`create_or_delete`, "Add, update, or remove").
    if !actions.iter().any(|action| action.class == VerbClass::Delete)
        && let Some((verb, class)) =
            name_and_title_verbs(signals).into_iter().find(|(_, class)| *class == VerbClass::Delete)
    {
        tally.add(CueSource::Name, format!("verb \"{verb}\""), Some(class), 2.0);
    }
    if let Some(verb) = deleting_verb_in(signals.lead_tokens.iter().map(String::as_str))
        && !actions.iter().any(|action| action.class == VerbClass::Delete)
    {
        tally.add(
            CueSource::Description,
            format!("verb \"{verb}\" in the first sentence"),
            Some(VerbClass::Delete),
            2.0,
        );
    } else if let Some(verb) = deleting_verb_in(signals.description_tokens.iter()) {
        tally.add(CueSource::Description, format!("verb \"{verb}\""), Some(VerbClass::Delete), 0.6);
    }
    // A tool that says it deletes or overwrites, wherever it says so, may destroy (`read_notes` that "also deletes
    // every file").
    if let Some(effect) = domain.stated_effects.iter().find(|effect| effect.class == VerbClass::Delete) {
        tally.add(effect.cue.source, effect.cue.text.clone(), Some(effect.class), 4.0);
    }
    add_cue(&mut tally, &domain.delete_choice, 5.0);
    if domain.delete_choice.is_none() {
        add_cue(&mut tally, &domain.overwrite_choice, 2.5);
    }
    add_cue(&mut tally, &domain.danger_switch, 2.0);
    add_cue(&mut tally, &domain.code, 4.0);
    add_phrase(&mut tally, signals, DANGER_PHRASES, "phrase", 2.0);
    add_phrase(&mut tally, signals, CAUTION_PHRASES, "phrase", 1.5);
    // Ending a session discards whatever state it held.
    if actions.iter().any(|action| is_in(&["stop", "close", "end", "terminate", "kill"], verb_of(action)))
        && let Some(word) = signals.name_or_title_word(&["session", "sessions"])
    {
        tally.add(CueSource::Name, format!("ends a \"{word}\""), None, 2.5);
    }
    if signals.name_tokens.iter().any(|token| token == "force") {
        tally.add(CueSource::Name, "name word \"force\"", None, 2.5);
    }
    if head_creates_new {
        // Cloud control planes create with PUT: a create with an existing name replaces the resource.
        add_cue(&mut tally, &domain.control_plane, 6.0);
        // Machines and disks are infrastructure: creating one allocates, bills and may replace.
        if let Some(word) = signals.name_or_title_word(&["vm", "vms", "vmss", "virtual", "disk", "disks", "server"]) {
            tally.add(CueSource::Name, format!("infrastructure object \"{word}\""), None, 5.0);
        }
    }
    if !head_is_create && actions.first().is_some_and(|action| is_in(OVERWRITING, verb_of(action))) {
        // Updates on a control plane are PUTs of the whole resource.
        add_cue(&mut tally, &domain.control_plane, 1.5);
    }
    if signals
        .description_phrase(&["non-destructive", "not destructive", "does not delete", "without deleting"])
        .is_some()
    {
        tally.add(CueSource::Description, "phrase \"non-destructive\"", None, -3.0);
    }
    tally
}

fn deleting_verb_in<'a>(mut tokens: impl Iterator<Item = &'a str>) -> Option<&'a str> {
    tokens.find(|token| {
        crate::words::verb_class(token) == Some(VerbClass::Delete)
            && !matches!(*token, "force" | "clear" | "reset" | "flush" | "archive" | "expire" | "detach")
    })
}

/// Phrases that say what a repeated call finds: the target already gone or already there, handled without error.
const REPEAT_HANDLING_PHRASES: &[&str] = &[
    "does not exist",
    "doesn't exist",
    "not found",
    "already exists",
    "already exist",
    "if it exists",
    "if exists",
    "nothing happens",
    "no error is returned",
    "no-op",
    "has no effect",
];
/// Phrases that say a second call fails (within the sentence that says the thing "already exists").
const REPEAT_FAILS_WORDS: &[&str] = &["fail", "fails", "error", "conflict", "rejected"];
/// A description of fewer sentences than this mostly restates the action ("Delete a file share.").
const SUBSTANTIVE_SENTENCES: usize = 3;

/// `idempotentHint`, judged as if the tool writes: positive weights say repeating a call changes nothing more.
///
/// `idempotentHint: true` relaxes a client (it licenses automatic retries), so it is claimed only with support.
/// Delete and update verbs imply it only when the description supports it: it says `idempotent`, says how a
/// repeated call finds its target (already gone, already there), or documents the behaviour at some length
/// ([`SUBSTANTIVE_SENTENCES`] or more). A terse description leaves the spec default (false) with low confidence.
/// Verbs that name the state they leave (`set`, `lock`, `cancel`, `stop`) imply it without support.
pub(crate) fn idempotent(signals: &Signals, actions: &[Action], domain: &Domain) -> Tally {
    let mut tally = Tally::new(-0.3, "repeating an unknown call may act twice (the spec default)");
    let upsert = contains_phrase(&signals.lead_text, "create or update")
        || contains_phrase(&signals.lead_text, "creates or updates")
        || signals.description_phrase(&["upsert", "upserts"]).is_some()
        || signals.name_or_title_word(&["upsert", "createorupdate"]).is_some();
    let repeat_fails = repeat_fails_sentence(signals);
    let terse = signals.sentence_count < SUBSTANTIVE_SENTENCES;
    // The support that lets a delete or update verb count; each kind adds its own evidence further down.
    let supported = signals.description_phrase(&["not idempotent", "non-idempotent"]).is_none()
        && !repeat_fails
        && (signals.description_phrase(&["idempotent"]).is_some()
            || upsert
            || signals.description_phrase(REPEAT_HANDLING_PHRASES).is_some()
            || !terse);
    // "Get the next action": with a step word the read is a step that moves a workflow on, not a repeatable read.
    let step_word = signals.name_or_title_word(&["next"]);
    let mut unsupported = Vec::new();
    for action in actions {
        let verb = verb_of(action);
        let factor = match action.class {
            _ if is_in(RELOCATING, verb) => -0.6,
            _ if is_in(STATE_SETTING, verb) => 0.4,
            // "Create or update": the create is the first half of an upsert, not an addition.
            _ if upsert && (action.class == VerbClass::Create || is_in(ADDITIVE, verb)) => 0.0,
            VerbClass::Read if step_word.is_some() => 0.0,
            VerbClass::Read => 1.0,
            VerbClass::Delete => 0.6,
            _ if is_in(OVERWRITING, verb) => 0.4,
            _ if is_in(ADDITIVE, verb) => -0.8,
            VerbClass::Update => 0.3,
            VerbClass::Connect => 0.3,
            VerbClass::Create | VerbClass::Send => -0.8,
            VerbClass::Execute => -0.6,
            VerbClass::Export => 0.0,
        };
        let gated = factor > 0.0 && matches!(action.class, VerbClass::Delete | VerbClass::Update | VerbClass::Create);
        if gated && !supported && !is_in(STATE_SETTING, verb) {
            unsupported.push(verb);
        } else {
            tally.add_verb(action, factor * source_weight(action.source));
        }
    }
    if let Some(verb) = unsupported.first() {
        let why = if terse { "terse description" } else { "no support in the description" };
        tally.add(CueSource::Description, format!("{why}: \"{verb}\" alone does not license retries"), None, -0.3);
    }
    add_cue(&mut tally, &domain.content, -0.5);
    add_cue(&mut tally, &domain.code, -1.0);
    if let Some(word) = step_word {
        let weight = if domain.content.is_some() { -4.0 } else { -2.0 };
        tally.add(CueSource::Name, format!("step word \"{word}\" (each call advances)"), None, weight);
    }
    if let Some(cue) = &domain.write_choice
        && cue.text.contains("\"add")
    {
        tally.add(cue.source, cue.text.clone(), None, -1.5);
    }
    if signals.description_phrase(&["not idempotent", "non-idempotent"]).is_some() {
        tally.add(CueSource::Description, "phrase \"not idempotent\"", None, -4.0);
    } else if signals.description_phrase(&["idempotent"]).is_some() {
        tally.add(CueSource::Description, "phrase \"idempotent\"", None, 3.0);
    }
    if repeat_fails {
        tally.add(CueSource::Description, "a second call fails (\"already exists\")", None, -3.0);
    } else if let Some(phrase) = signals.description_phrase(REPEAT_HANDLING_PHRASES) {
        tally.add(CueSource::Description, format!("a repeated call is handled (\"{phrase}\")"), None, 0.5);
    }
    if upsert {
        tally.add(CueSource::Name, "create-or-update", None, 2.0);
    }
    tally
}

/// True when a sentence says the target "already exists" and that the call then fails or errors.
fn repeat_fails_sentence(signals: &Signals) -> bool {
    // A sentence holds a phrase only if the whole description does (sentences end at `.` or a line break, which
    // no phrase's word boundary can tell from the text's end), so most descriptions need no sentence split.
    if signals.description_phrase(&["already exists", "already exist"]).is_none() {
        return false;
    }
    signals.description.split(['.', '\n']).any(|sentence| {
        (contains_phrase(sentence, "already exists") || contains_phrase(sentence, "already exist"))
            && REPEAT_FAILS_WORDS.iter().any(|word| contains_phrase(sentence, word))
    })
}

/// `openWorldHint`: positive weights say the tool reaches entities outside a closed domain.
pub(crate) fn open_world(signals: &Signals, actions: &[Action], domain: &Domain) -> Tally {
    let mut tally = Tally::new(0.5, "a remote service is an open world (the spec default)");
    add_cue(&mut tally, &domain.web, 3.0);
    add_cue(&mut tally, &domain.local, -3.0);
    add_cue(&mut tally, &domain.code, 3.0);
    add_cue(&mut tally, &domain.control_plane, -5.0);
    add_cue(&mut tally, &domain.static_guidance, -3.0);
    // A message reaches people outside any closed domain.
    if let Some(action) = actions.iter().find(|action| action.class == VerbClass::Send) {
        tally.add_verb(action, 5.0);
    }
    // A tool that says it sends something, wherever it says so, reaches outside (`posts to a public pastebin`).
    if let Some(effect) = domain.stated_effects.iter().find(|effect| effect.class == VerbClass::Send) {
        tally.add(effect.cue.source, effect.cue.text.clone(), Some(effect.class), 4.0);
    }
    if let Some(action) = actions.iter().find(|action| action.verb.starts_with("download")) {
        tally.add_verb(action, 1.5);
    }
    let _ = signals;
    tally
}
