//! The rule catalogue: one constant per rule, and [`RULES`] listing them in code order.
//!
//! Codes are stable: a rule that is retired keeps its code unused, and a new rule takes the next free code of its
//! group (`TG1xx` contradictions, `TG2xx` missing hints, `TG3xx` spelling and shape). This file holds data only;
//! the checks live in `contradictions.rs`, `missing.rs` and `shape.rs`, and `docs/lint-rules.md` explains each rule.

use super::{Rule, Severity};

/// `TG101`: read-only and destructive both declared true.
pub(crate) const READ_ONLY_AND_DESTRUCTIVE: Rule = Rule {
    code: "TG101",
    name: "read-only-and-destructive",
    severity: Severity::Error,
    summary: "readOnlyHint and destructiveHint are both true",
    fix: "declare destructiveHint only on tools that write; drop it or set readOnlyHint to false",
};

/// `TG102`: a delete/remove/drop tool declared read-only.
pub(crate) const DELETE_DECLARED_READ_ONLY: Rule = Rule {
    code: "TG102",
    name: "delete-declared-read-only",
    severity: Severity::Error,
    summary: "the name or texts say the tool deletes, but readOnlyHint is true",
    fix: "set readOnlyHint to false and destructiveHint to true",
};

/// `TG103`: a send/publish/notify tool declared read-only.
pub(crate) const SEND_DECLARED_READ_ONLY: Rule = Rule {
    code: "TG103",
    name: "send-declared-read-only",
    severity: Severity::Error,
    summary: "the name or texts say the tool sends or publishes, but readOnlyHint is true",
    fix: "set readOnlyHint to false (and openWorldHint to true): a sent message changes the world",
};

/// `TG104`: a tool that exports, downloads or saves to a file declared read-only.
pub(crate) const EXPORT_DECLARED_READ_ONLY: Rule = Rule {
    code: "TG104",
    name: "export-declared-read-only",
    severity: Severity::Warning,
    summary: "the tool saves, exports or downloads to a file, but readOnlyHint is true",
    fix: "set readOnlyHint to false; set destructiveHint to true if it can overwrite an existing file",
};

/// `TG105`: a get/list/search/query tool declared destructive.
pub(crate) const READ_DECLARED_DESTRUCTIVE: Rule = Rule {
    code: "TG105",
    name: "read-declared-destructive",
    severity: Severity::Warning,
    summary: "the name or texts say the tool only reads, but destructiveHint is true",
    fix: "set readOnlyHint to true (or destructiveHint to false if the call does change something)",
};

/// `TG106`: a create/update tool declared read-only.
pub(crate) const WRITE_DECLARED_READ_ONLY: Rule = Rule {
    code: "TG106",
    name: "write-declared-read-only",
    severity: Severity::Warning,
    summary: "the name or texts say the tool creates or changes something, but readOnlyHint is true",
    fix: "set readOnlyHint to false, or rename the tool if it really changes nothing",
};

/// `TG107`: a delete tool declared not destructive.
pub(crate) const DELETE_DECLARED_NOT_DESTRUCTIVE: Rule = Rule {
    code: "TG107",
    name: "delete-declared-not-destructive",
    severity: Severity::Warning,
    summary: "the name or texts say the tool deletes, but destructiveHint is false",
    fix: "set destructiveHint to true (false means the tool only adds)",
};

/// `TG108`: idempotentHint true on a plain create.
pub(crate) const CREATE_DECLARED_IDEMPOTENT: Rule = Rule {
    code: "TG108",
    name: "create-declared-idempotent",
    severity: Severity::Warning,
    summary: "a plain create/add/insert tool declares idempotentHint true",
    fix: "set idempotentHint to false, or say in the description that a repeated call changes nothing more",
};

/// `TG109`: a plain create declared destructive.
pub(crate) const CREATE_DECLARED_DESTRUCTIVE: Rule = Rule {
    code: "TG109",
    name: "create-declared-destructive",
    severity: Severity::Warning,
    summary: "a plain create/add/insert tool declares destructiveHint true, though it only adds",
    fix: "set destructiveHint to false, or say in the description what it overwrites or removes",
};

/// `TG110`: openWorldHint false on a tool that takes a URL.
pub(crate) const URL_DECLARED_CLOSED_WORLD: Rule = Rule {
    code: "TG110",
    name: "url-declared-closed-world",
    severity: Severity::Warning,
    summary: "the input schema takes a `url`, but openWorldHint is false",
    fix: "set openWorldHint to true, or restrict the URL to a closed domain and say so in the description",
};

/// `TG201`: no title anywhere.
pub(crate) const MISSING_TITLE: Rule = Rule {
    code: "TG201",
    name: "missing-title",
    severity: Severity::Warning,
    summary: "neither Tool.title nor annotations.title is set",
    fix: "add a short human-readable `title` (Tool.title, or annotations.title for older clients)",
};

/// `TG202`: readOnlyHint not declared.
pub(crate) const MISSING_READ_ONLY_HINT: Rule = Rule {
    code: "TG202",
    name: "missing-read-only-hint",
    severity: Severity::Warning,
    summary: "readOnlyHint is not declared, so clients must assume the tool writes",
    fix: "declare readOnlyHint explicitly",
};

/// `TG203`: destructiveHint not declared on a tool that is not read-only.
pub(crate) const MISSING_DESTRUCTIVE_HINT: Rule = Rule {
    code: "TG203",
    name: "missing-destructive-hint",
    severity: Severity::Warning,
    summary: "destructiveHint is not declared on a tool that is not read-only, so clients must assume it destroys",
    fix: "declare destructiveHint explicitly (false when the tool only adds)",
};

/// `TG204`: openWorldHint not declared.
pub(crate) const MISSING_OPEN_WORLD_HINT: Rule = Rule {
    code: "TG204",
    name: "missing-open-world-hint",
    severity: Severity::Warning,
    summary: "openWorldHint is not declared, so clients must assume the tool reaches the outside world",
    fix: "declare openWorldHint explicitly (false for a closed domain such as a local store)",
};

/// `TG205`: an app-only tool that writes and declares nothing.
pub(crate) const APP_ONLY_WRITER_UNANNOTATED: Rule = Rule {
    code: "TG205",
    name: "app-only-writer-unannotated",
    severity: Severity::Warning,
    summary: "an app-only tool (`_meta.ui.visibility` without \"model\") that writes declares no hints",
    fix: "declare readOnlyHint, destructiveHint and openWorldHint: policy applies to app-initiated calls too",
};

/// `TG301`: a hint under a vendor spelling.
pub(crate) const VENDOR_SPELLING: Rule = Rule {
    code: "TG301",
    name: "vendor-spelling",
    severity: Severity::Warning,
    summary: "a hint is written under a non-standard key (e.g. `readOnly` for `readOnlyHint`)",
    fix: "rename the key to the spec spelling",
};

/// `TG302`: a boolean written as a string or number.
pub(crate) const LOOSE_BOOLEAN: Rule = Rule {
    code: "TG302",
    name: "loose-boolean",
    severity: Severity::Warning,
    summary: "a hint value is a string or number standing for a boolean (e.g. `\"true\"`)",
    fix: "write a JSON boolean",
};

/// `TG303`: a hint value that is no boolean at all.
pub(crate) const INVALID_HINT_VALUE: Rule = Rule {
    code: "TG303",
    name: "invalid-hint-value",
    severity: Severity::Error,
    summary: "a hint value is not a boolean and was ignored",
    fix: "write a JSON boolean, or remove the key",
};

/// `TG304`: a hint at the tool's top level.
pub(crate) const MISPLACED_HINT: Rule = Rule {
    code: "TG304",
    name: "misplaced-hint",
    severity: Severity::Warning,
    summary: "a hint is written at the tool's top level instead of inside `annotations`",
    fix: "move the key into `annotations`",
};

/// `TG305`: two spellings of one hint disagree.
pub(crate) const CONFLICTING_SPELLINGS: Rule = Rule {
    code: "TG305",
    name: "conflicting-spellings",
    severity: Severity::Error,
    summary: "two spellings of one hint disagree; one was ignored",
    fix: "keep only the spec key with the intended value",
};

/// `TG306`: an unknown key inside annotations.
pub(crate) const UNKNOWN_ANNOTATION_KEY: Rule = Rule {
    code: "TG306",
    name: "unknown-annotation-key",
    severity: Severity::Note,
    summary: "`annotations` holds a key that neither the spec nor toolgate knows",
    fix: "move vendor data to `_meta` under a product prefix",
};

/// `TG307`: an extended (non-spec) hint inside annotations.
pub(crate) const EXTENDED_HINT: Rule = Rule {
    code: "TG307",
    name: "extended-hint",
    severity: Severity::Note,
    summary: "`annotations` holds an extended hint (`costWarning`, `progressIndicators`) that MCP clients ignore",
    fix: "keep it if toolgate's policy uses it; other clients need the facts in the description too",
};

/// `TG308`: `annotations` is not an object.
pub(crate) const ANNOTATIONS_NOT_AN_OBJECT: Rule = Rule {
    code: "TG308",
    name: "annotations-not-an-object",
    severity: Severity::Error,
    summary: "`annotations` is present but is not a JSON object, so every hint in it is lost",
    fix: "make `annotations` an object of hint keys",
};

/// `TG309`: a title that is not a string.
pub(crate) const INVALID_TITLE: Rule = Rule {
    code: "TG309",
    name: "invalid-title",
    severity: Severity::Warning,
    summary: "`title` or `annotations.title` is present but is not a non-empty string",
    fix: "write the title as a non-empty string, or remove the key",
};

/// `TG310`: a name that looks like another name.
pub(crate) const CONFUSABLE_NAME: Rule = Rule {
    code: "TG310",
    name: "confusable-name",
    severity: Severity::Warning,
    summary: "the name mixes scripts, uses look-alike letters or holds invisible or control characters",
    fix: "name the tool in plain ASCII (`[A-Za-z0-9_-]`); a look-alike of another name is how a tool impersonates one",
};

/// The rule catalogue, in code order.
pub const RULES: &[Rule] = &[
    READ_ONLY_AND_DESTRUCTIVE,
    DELETE_DECLARED_READ_ONLY,
    SEND_DECLARED_READ_ONLY,
    EXPORT_DECLARED_READ_ONLY,
    READ_DECLARED_DESTRUCTIVE,
    WRITE_DECLARED_READ_ONLY,
    DELETE_DECLARED_NOT_DESTRUCTIVE,
    CREATE_DECLARED_IDEMPOTENT,
    CREATE_DECLARED_DESTRUCTIVE,
    URL_DECLARED_CLOSED_WORLD,
    MISSING_TITLE,
    MISSING_READ_ONLY_HINT,
    MISSING_DESTRUCTIVE_HINT,
    MISSING_OPEN_WORLD_HINT,
    APP_ONLY_WRITER_UNANNOTATED,
    VENDOR_SPELLING,
    LOOSE_BOOLEAN,
    INVALID_HINT_VALUE,
    MISPLACED_HINT,
    CONFLICTING_SPELLINGS,
    UNKNOWN_ANNOTATION_KEY,
    EXTENDED_HINT,
    ANNOTATIONS_NOT_AN_OBJECT,
    INVALID_TITLE,
    CONFUSABLE_NAME,
];
