//! Finding the action a tool performs: the head verb of its name, of its title and of its description's first
//! sentence, each with the [`VerbClass`] the lexicon gives it.
//!
//! Names put the verb first (`delete_customer`), after a namespace (`hubspot-get-link`, `kiali_get_logs`) or last
//! (`storage_account_delete`, `Pods: Delete`). Position decides which verb-looking token is the verb, because many
//! nouns double as verbs (`list_runs`, `get_run_comments`, `hubspot-get-link`). This module picks verbs only; the
//! rules weigh them.

use crate::infer::CueSource;
use crate::infer::signals::Signals;
use crate::words::{VerbClass, is_description_filler, verb_class};

/// The head verb found in one place.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Action {
    /// Where it was found.
    pub(crate) source: CueSource,
    /// The token as found (`deletes`, `get`).
    pub(crate) verb: String,
    /// Its class.
    pub(crate) class: VerbClass,
}

/// Tokens that read as nouns when they end a name (`hubspot-get-link`, `pods_log`, `get_job_status`): they count
/// as the verb only when no better candidate exists.
const NOUN_LIKE: &[&str] = &[
    "link",
    "log",
    "logs",
    "status",
    "record",
    "comment",
    "message",
    "text",
    "tag",
    "label",
    "call",
    "command",
    "process",
    "feedback",
    "test",
    "type",
    "format",
    "snapshot",
    "screenshot",
    "pdf",
    "request",
    "shell",
    "new",
    "open",
    "post",
    "star",
    "sample",
    "monitor",
    "alert",
    "schedule",
    "backup",
    "dump",
    "print",
    "share",
    "deploy",
    "search",
    "audit",
    "build",
    "draft",
    "review",
    "merge",
    "lock",
    "mark",
    "watch",
    "store",
    "scale",
    "control",
    "command",
    "handle",
    "act",
    "do",
    "use",
    "auth",
    "diff",
    "lint",
    "count",
];

/// Nouns that name what a verb-less tool returns (`db-stats`, `pods_log`, `fileshares_limits`): such a name reads.
const READ_NOUNS: &[&str] = &[
    "log",
    "logs",
    "status",
    "info",
    "details",
    "stats",
    "statistics",
    "metrics",
    "usage",
    "limits",
    "summary",
    "schema",
    "config",
    "configuration",
    "health",
    "version",
    "versions",
    "rules",
    "indexes",
    "history",
    "events",
    "diagnostics",
    "insights",
    "availability",
    "quota",
    "quotas",
    "overview",
    "report",
    "results",
    "documentation",
    "docs",
    "info",
    "capabilities",
    "settings",
    "properties",
    "top",
];

/// Modifiers that look like verbs but qualify the real one (`force_unlock`, `batch-create`).
const MODIFIERS: &[&str] = &["force", "batch", "bulk", "safe", "safely", "try", "auto"];

fn is_verb(token: &str) -> Option<VerbClass> {
    if MODIFIERS.contains(&token) { None } else { verb_class(token) }
}

/// A token that is a verb as written, not only after folding an inflection (`comments` is no verb at a name's end).
fn is_plain_verb(token: &str) -> Option<VerbClass> {
    let class = is_verb(token)?;
    let folded = ["ing", "es", "ed", "s", "d"]
        .iter()
        .any(|suffix| token.strip_suffix(suffix).is_some_and(|stem| stem.len() >= 3 && verb_class(stem).is_some()))
        && !matches!(token, "process" | "status" | "access" | "address" | "press");
    (!folded).then_some(class)
}

/// A plural noun whose singular is a verb (`posts`, `tags`, `comments`), as opposed to a verb as written.
fn is_plural_of_verb(token: &str) -> bool {
    ["es", "s"]
        .iter()
        .any(|suffix| token.strip_suffix(suffix).is_some_and(|stem| stem.len() >= 3 && verb_class(stem).is_some()))
        && !matches!(token, "process" | "status" | "access" | "address" | "press")
}

/// The head verb of a name-like token list (a tool name or a title).
pub(crate) fn head_verb(tokens: &[String]) -> Option<(String, VerbClass)> {
    let words: Vec<&str> = tokens.iter().map(String::as_str).filter(|token| !MODIFIERS.contains(token)).collect();
    let pick = |token: &str, class: VerbClass| Some((token.to_owned(), class));
    let (first, rest) = words.split_first()?;
    if rest.is_empty() {
        return verb_class(first).and_then(|class| pick(first, class));
    }
    let last = words.last().copied().unwrap_or_default();
    let last_verb = is_plain_verb(last).filter(|_| !NOUN_LIKE.contains(&last));
    if let Some(class) = is_verb(first) {
        // `monitor_instrumentation_send-brownfield-analysis`: a noun-like namespace, then a real verb.
        // A plural object is no verb (`search_emails`, `search_messages`: what is searched, not sent).
        if NOUN_LIKE.contains(first)
            && let Some(found) = rest.iter().find_map(|token| {
                is_verb(token)
                    .filter(|_| !NOUN_LIKE.contains(token) && !is_plural_of_verb(token))
                    .and_then(|class| pick(token, class))
            })
        {
            return Some(found);
        }
        // `monitor_webtests_get`, `deploy_plan_get`: a namespace that happens to be a verb, then the real verb.
        if words.len() >= 3
            && let Some(last_class) = last_verb
        {
            return pick(last, last_class);
        }
        return pick(first, class);
    }
    // `hubspot-get-link`, `kiali_get_logs`: a namespace, then the verb.
    if let Some(second) = words.get(1)
        && let Some(class) = is_verb(second).filter(|_| !NOUN_LIKE.contains(second))
    {
        // `kiali_manage_istio_config_read`: a generic verb, then the specific one at the end.
        if words.len() >= 4
            && matches!(*second, "manage" | "handle" | "control" | "process" | "perform" | "do")
            && let Some(last_class) = last_verb
        {
            return pick(last, last_class);
        }
        return pick(second, class);
    }
    if let Some(class) = last_verb {
        return pick(last, class);
    }
    if READ_NOUNS.contains(&last) {
        return pick(last, VerbClass::Read);
    }
    // No verb where verbs stand. A plural that folds to a verb is the object, not the action
    // (`dcard_search_posts`: `search` is the action, `posts` what it finds), so a noun-like verb outranks it; a
    // participle still names an action (`requirements_linked_test_cases`).
    let not_plural = |token: &&str| !is_plural_of_verb(token);
    let found = words
        .iter()
        .filter(|token| !NOUN_LIKE.contains(*token) && not_plural(token))
        .chain(words.iter().filter(|token| not_plural(token)))
        .chain(words.iter())
        .find_map(|token| is_verb(token).and_then(|class| pick(token, class)));
    if found.is_some() {
        return found;
    }
    // A name without any verb that names what it returns anywhere (`wireshark_stats_conversations`) reads, as
    // `db-stats` does.
    words.iter().find(|token| READ_NOUNS.contains(*token)).and_then(|token| pick(token, VerbClass::Read))
}

/// The verb that opens a description's first sentence, if it opens with one.
fn lead_verb(tokens: &[String]) -> Option<(String, VerbClass)> {
    tokens
        .iter()
        .map(String::as_str)
        .filter(|token| !is_description_filler(token) && !token.ends_with("ly"))
        .take(2)
        .find_map(|token| is_verb(token).map(|class| (token.to_owned(), class)))
}

/// The head verbs of name, title and description lead, in that order (each at most once).
pub(crate) fn actions(signals: &Signals) -> Vec<Action> {
    let mut found = Vec::new();
    if let Some((verb, class)) = head_verb(&signals.name_tokens) {
        found.push(Action { source: CueSource::Name, verb, class });
    }
    // A title that repeats the name (`atlas-create-cluster`) says nothing new.
    if signals.title_tokens != signals.name_tokens
        && let Some((verb, class)) = head_verb(&signals.title_tokens)
    {
        found.push(Action { source: CueSource::Title, verb, class });
    }
    if let Some((verb, class)) = lead_verb(&signals.lead_tokens) {
        found.push(Action { source: CueSource::Description, verb, class });
    }
    found
}

/// Every verb of a class in the name and title (`atlas-pause-resume-cluster` has two).
pub(crate) fn name_and_title_verbs(signals: &Signals) -> Vec<(String, VerbClass)> {
    signals
        .name_tokens
        .iter()
        .chain(signals.title_tokens.iter())
        .filter_map(|token| is_verb(token).map(|class| (token.clone(), class)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::words::tokens;

    fn check(name: &str, expected: Option<&str>) {
        let verb = head_verb(&tokens(name)).map(|(verb, _)| verb);
        assert_eq!(verb.as_deref(), expected, "{name}");
    }

    #[test]
    fn picks_the_head_verb_by_position() {
        check("delete_customer", Some("delete"));
        check("storage_account_delete", Some("delete"));
        check("monitor_webtests_get", Some("get"));
        check("hubspot-get-link", Some("get"));
        check("get_run_comments", Some("get"));
        check("list_runs", Some("list"));
        check("kiali_manage_istio_config_read", Some("read"));
        check("force_unlock_workspace", Some("unlock"));
        check("start_search", Some("start"));
        check("pods_exec", Some("exec"));
        check("whoami", Some("whoami"));
        check("customer", None);
        check("pods_log", Some("log"));
        check("atlas-create-access-list", Some("create"));
        check("db-stats", Some("stats"));
        check("monitor_instrumentation_send-brownfield-analysis", Some("send"));
        check("dcard_search_posts", Some("search"));
        check("wireshark_stats_conversations", Some("stats"));
        check("qmetry_requirements_linked_test_cases_to_test_suite", Some("linked"));
        check("search_emails", Some("search"));
        check("search_messages", Some("search"));
    }
}
