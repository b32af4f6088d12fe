//! `cargo xtask eval --observations DIR`: how far evidence from behaviour (`toolgate verify`'s recordings,
//! `corpus/observations/<server>.json`) moves the trust figures, on exactly the tools that have one.
//!
//! Each recording is the JSON `toolgate verify --format json` printed for one corpus server, with its package,
//! command and date. A recorded tool counts for a corpus line only when the server and the name are the same *and*
//! the definition is: the fields the corpus keeps (`name`, `title`, `description`, `inputSchema`, and the declared
//! `annotations` title and hints, `null` meaning absent) are fingerprinted on both sides with the gateway's
//! fingerprint and must agree field for field; a definition that differs is listed with its fields and not
//! counted. Fields the corpus does not keep (`outputSchema`, `_meta`, icons) are not compared.
//!
//! For every matched tool the trust and decision figures are computed twice through `eval_trust::score_trust`, the
//! same inference and convention both times: once with inference alone, once with the recording's
//! [`Observation`] weighed by `toolgate_core::trust::resolve_trusted_hints_observed`, as `serve` weighs a record.
//! A synthetic lie keeps the tool's observation (the observation is of what the tool does, not of what it
//! declares). Nothing here decides a hint; it reads files, matches and prints.

#![allow(clippy::print_stdout)]

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use serde_json::{Map, Value};
use toolgate_core::corpus::CorpusEntry;
use toolgate_core::fingerprint::{FieldChange, diff_fingerprints, fingerprint_definition};
use toolgate_core::infer::infer_annotations_with;
use toolgate_core::infer::model::LinearModel;
use toolgate_core::policy::CompiledPolicy;
use toolgate_core::trust::{Convention, DEFAULT_MIN_CONFIDENCE, Observation};
use toolgate_core::{DeclaredHints, Hint};

use crate::eval_base::{ModelChoice, short_name, tool_with_title};
use crate::eval_trust::{TrustScored, annotations_of, print_observed_comparison, score_trust};
use crate::train::Dataset;

/// One tool `toolgate verify` called, as a recording holds it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct RecordedTool {
    /// The corpus server id the recording is of.
    pub(crate) server: String,
    pub(crate) name: String,
    /// The definition as the server listed it under `verify`.
    pub(crate) definition: Map<String, Value>,
    pub(crate) observation: Observation,
    pub(crate) calls: u64,
    pub(crate) succeeded: u64,
}

/// One recording file: the server it is of and the tools it called (tools `verify` did not call carry no evidence
/// and no record, as in the state store).
#[derive(Debug)]
pub(crate) struct Recording {
    pub(crate) server: String,
    pub(crate) listed: usize,
    pub(crate) tools: Vec<RecordedTool>,
}

/// Reads every `*.json` of `dir`, sorted by name.
pub(crate) fn read_recordings(dir: &Path) -> Result<Vec<Recording>> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("listing {}", dir.display()))?
        .filter_map(|entry| entry.ok().map(|entry| entry.path()))
        .filter(|path| path.extension().is_some_and(|extension| extension == "json"))
        .collect();
    paths.sort();
    paths
        .iter()
        .map(|path| {
            let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
            parse_recording(&text).with_context(|| format!("reading the recording {}", path.display()))
        })
        .collect()
}

/// Parses one recording: `{"server": ID, ..., "verification": <verify --format json>}`.
pub(crate) fn parse_recording(text: &str) -> Result<Recording> {
    let value: Value = serde_json::from_str(text)?;
    let server = value.get("server").and_then(Value::as_str).context("no `server`")?.to_owned();
    let tools = value
        .pointer("/verification/tools")
        .and_then(Value::as_array)
        .context("no `verification.tools` (the JSON of `toolgate verify --format json`)")?;
    let mut recorded = Vec::new();
    for tool in tools {
        let name = tool.get("name").and_then(Value::as_str).context("a tool without a name")?.to_owned();
        // As `verify` stores records: only a tool it called has one.
        if tool.get("observations").and_then(Value::as_array).is_none_or(Vec::is_empty) {
            continue;
        }
        let definition = tool.get("definition").and_then(Value::as_object).cloned().context("no definition")?;
        let observed = tool.get("observed").context("no `observed`")?;
        let flag = |key: &str| observed.get(key).and_then(Value::as_bool).unwrap_or(false);
        let count = |key: &str| observed.get(key).and_then(Value::as_u64).unwrap_or(0);
        let observation = Observation {
            record: format!("{server}/{name}"),
            wrote: flag("wrote"),
            connected: flag("connected"),
            repeat_changed: flag("repeat_changed"),
            destroyed: flag("destroyed"),
            supported: flag("supported"),
        };
        let (calls, succeeded) = (count("calls"), count("succeeded"));
        recorded.push(RecordedTool { server: server.clone(), name, definition, observation, calls, succeeded });
    }
    Ok(Recording { server, listed: tools.len(), tools: recorded })
}

/// The fields of a definition the corpus keeps, `null`s left out, so both sides are fingerprinted alike.
fn comparable(raw: &Map<String, Value>, declared: Option<&Map<String, Value>>) -> Map<String, Value> {
    let mut view = Map::new();
    for key in ["name", "title", "description", "inputSchema"] {
        if let Some(value) = raw.get(key).filter(|value| !value.is_null()) {
            view.insert(key.to_owned(), value.clone());
        }
    }
    let mut annotations = Map::new();
    if let Some(declared) = declared {
        let keys = std::iter::once("title").chain(Hint::ALL.into_iter().map(Hint::wire_key));
        for key in keys {
            if let Some(value) = declared.get(key).filter(|value| !value.is_null()) {
                annotations.insert(key.to_owned(), value.clone());
            }
        }
    }
    if !annotations.is_empty() {
        view.insert("annotations".into(), Value::Object(annotations));
    }
    view
}

/// The fields in which a recorded definition differs from the corpus line (empty: the same definition).
pub(crate) fn definition_differences(entry: &CorpusEntry, recorded: &Map<String, Value>) -> Result<Vec<String>> {
    let corpus = comparable(entry.tool.raw(), Some(&annotations_of(&entry.labels)));
    let listed = comparable(recorded, recorded.get("annotations").and_then(Value::as_object));
    let (corpus, listed) = (fingerprint_definition(&corpus)?, fingerprint_definition(&listed)?);
    if corpus.whole == listed.whole {
        return Ok(Vec::new());
    }
    Ok(diff_fingerprints(&corpus, &listed)
        .into_iter()
        .map(|(field, change)| match change {
            FieldChange::Changed => field,
            other => format!("{field} ({})", other.as_str()),
        })
        .collect())
}

/// How the recordings met the corpus.
#[derive(Default)]
pub(crate) struct Matching<'a> {
    /// Corpus line index → the recorded tool of the same server, name and definition.
    pub(crate) matched: BTreeMap<usize, &'a RecordedTool>,
    /// Server, tool and the fields that differ: same name, another definition; not counted.
    pub(crate) differs: Vec<(String, String, Vec<String>)>,
    /// Called tools with no corpus line (the corpus keeps only tools that declare a hint).
    pub(crate) not_in_corpus: Vec<(String, String)>,
}

/// Matches recorded tools to corpus lines by server and name, then by definition.
pub(crate) fn match_recordings<'a>(entries: &[CorpusEntry], recordings: &'a [Recording]) -> Result<Matching<'a>> {
    let mut lines: HashMap<(&str, &str), Vec<usize>> = HashMap::new();
    for (index, entry) in entries.iter().enumerate() {
        lines.entry((entry.server.as_str(), entry.name.as_str())).or_default().push(index);
    }
    let mut matching = Matching::default();
    for tool in recordings.iter().flat_map(|recording| &recording.tools) {
        let Some(candidates) = lines.get(&(tool.server.as_str(), tool.name.as_str())) else {
            matching.not_in_corpus.push((tool.server.clone(), tool.name.clone()));
            continue;
        };
        // A server that lists a tool twice (`variant`) matches the line whose definition is the recorded one.
        let mut differences = Vec::new();
        let mut found = None;
        for index in candidates {
            let Some(entry) = entries.get(*index) else { continue };
            let differing = definition_differences(entry, &tool.definition)?;
            if differing.is_empty() {
                found = Some(*index);
                break;
            }
            differences = differing;
        }
        match found {
            Some(index) => {
                matching.matched.insert(index, tool);
            }
            None => matching.differs.push((tool.server.clone(), tool.name.clone(), differences)),
        }
    }
    Ok(matching)
}

/// Scores the corpus at `path` on its observed tools: inference alone, then with the recordings in `dir`.
pub(crate) fn run(
    path: &Path,
    dir: &Path,
    policy: &CompiledPolicy,
    model_choice: ModelChoice,
    training: Option<&Dataset>,
) -> Result<()> {
    let entries = crate::train::read_corpus(path)?;
    let recordings = read_recordings(dir)?;
    if recordings.is_empty() {
        bail!("no recordings (*.json) in {}", dir.display());
    }
    let matching = match_recordings(&entries, &recordings)?;
    println!("corpus: {} · recordings: {} ({} servers)\n", path.display(), dir.display(), recordings.len());
    print_coverage(&recordings, &entries, &matching);
    // The convention is the whole listing's, as the catalog sees it, not only the observed tools'.
    let mut declarations: HashMap<&str, Vec<&DeclaredHints>> = HashMap::new();
    for entry in &entries {
        declarations.entry(entry.server.as_str()).or_default().push(&entry.labels);
    }
    let conventions: HashMap<&str, Convention> =
        declarations.into_iter().map(|(server, labels)| (server, Convention::of(labels))).collect();
    let rules_only = LinearModel::rules_only();
    let mut folds: HashMap<String, LinearModel> = HashMap::new();
    let (mut alone, mut observed) = (Vec::new(), Vec::new());
    for (index, recorded) in &matching.matched {
        let Some(entry) = entries.get(*index) else { continue };
        let model = match (model_choice, training) {
            (ModelChoice::Loso, Some(training)) => {
                &*folds.entry(entry.server.clone()).or_insert_with(|| training.fit(Some(&entry.server)))
            }
            (ModelChoice::Rules, _) => &rules_only,
            _ => LinearModel::builtin(),
        };
        let inference = infer_annotations_with(&tool_with_title(entry), model);
        let convention = conventions.get(entry.server.as_str()).copied().unwrap_or_default();
        let bar = DEFAULT_MIN_CONFIDENCE;
        alone.push(score_trust(entry, policy, &inference, &convention, bar, None));
        observed.push(score_trust(entry, policy, &inference, &convention, bar, Some(&recorded.observation)));
    }
    let model = match model_choice {
        ModelChoice::Loso => "learned layer leave-one-server-out",
        ModelChoice::Rules => "the rules alone",
        ModelChoice::Builtin => "the checked-in weights (in-sample)",
    };
    println!("inference: {model}\n");
    let (alone_refs, observed_refs): (Vec<&TrustScored>, Vec<&TrustScored>) =
        (alone.iter().collect(), observed.iter().collect());
    print_observed_comparison(&alone_refs, &observed_refs);
    print_changes(&alone, &observed, &matching);
    Ok(())
}

/// Per server: tools listed, called, with a corpus line, matched, differing, supported and contradicting.
fn print_coverage(recordings: &[Recording], entries: &[CorpusEntry], matching: &Matching<'_>) {
    println!(
        "-- recordings: tools listed / called / in the corpus / matched / supported / caught (wrote, connected) --"
    );
    println!(
        "{:<28} {:>6} {:>6} {:>7} {:>7} {:>9} {:>8} {:>8}",
        "server", "listed", "called", "failed", "corpus", "matched", "support", "effects"
    );
    for recording in recordings {
        let corpus = entries.iter().filter(|entry| entry.server == recording.server).count();
        let matched = matching.matched.values().filter(|tool| tool.server == recording.server).count();
        let failed = recording.tools.iter().filter(|tool| tool.succeeded == 0).count();
        let supported = recording.tools.iter().filter(|tool| tool.observation.supported).count();
        let caught = recording
            .tools
            .iter()
            .filter(|tool| tool.observation.wrote || tool.observation.connected || tool.observation.destroyed)
            .count();
        println!(
            "{:<28} {:>6} {:>6} {:>7} {:>7} {:>9} {:>8} {:>8}",
            recording.server,
            recording.listed,
            recording.tools.len(),
            failed,
            corpus,
            matched,
            supported,
            caught
        );
    }
    for (server, name, fields) in &matching.differs {
        println!("not counted: {server} {name}: the definition differs from the corpus line in {}", fields.join(", "));
    }
    println!(
        "{} called tool(s) have no corpus line (the corpus keeps tools that declare a hint)\n",
        matching.not_in_corpus.len()
    );
}

/// Lists every check whose outcome the observation changed.
fn print_changes(alone: &[TrustScored], observed: &[TrustScored], matching: &Matching<'_>) {
    println!("-- outcomes the observation changed (honest: accepted?, lie: caught?) --");
    let tools: Vec<&&RecordedTool> = matching.matched.values().collect();
    let mut any = false;
    for ((before, after), recorded) in alone.iter().zip(observed).zip(tools) {
        for (index, hint) in Hint::ALL.into_iter().enumerate() {
            let pairs =
                [("honest", before.honest[index], after.honest[index]), ("lie", before.lies[index], after.lies[index])];
            for (kind, was, now) in pairs {
                if was != now {
                    any = true;
                    let facts = facts(&recorded.observation, recorded.succeeded, recorded.calls);
                    println!(
                        "{:<24} {:<36} {:<12} {:<6} {} -> {}  ({facts})",
                        before.server,
                        before.name,
                        short_name(hint),
                        kind,
                        outcome(was),
                        outcome(now)
                    );
                }
            }
        }
    }
    if !any {
        println!("(none)");
    }
    println!();
}

fn outcome(value: Option<bool>) -> &'static str {
    match value {
        Some(true) => "yes",
        Some(false) => "no",
        None => "-",
    }
}

fn facts(observation: &Observation, succeeded: u64, calls: u64) -> String {
    let mut parts = vec![format!("{succeeded}/{calls} ok")];
    for (seen, name) in [
        (observation.wrote, "wrote"),
        (observation.connected, "connected"),
        (observation.repeat_changed, "repeat changed"),
        (observation.destroyed, "destroyed"),
        (observation.supported, "supported"),
    ] {
        if seen {
            parts.push(name.to_owned());
        }
    }
    parts.join(", ")
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use toolgate_core::corpus::parse_corpus_line;
    use toolgate_core::infer::infer_annotations;

    use super::*;
    use crate::eval_trust::standard_policy;

    fn corpus_line(name: &str, description: &str, annotations: Value) -> CorpusEntry {
        let line = json!({
            "server": "constructed", "name": name, "title": null, "description": description,
            "input_schema": {"type": "object", "properties": {}}, "annotations": annotations,
        });
        parse_corpus_line(&line.to_string()).unwrap_or_else(|error| unreachable!("{error}"))
    }

    fn recorded_tool(name: &str, description: &str, annotations: Value, observed: Value) -> Value {
        json!({
            "name": name,
            "definition": {"name": name, "description": description, "inputSchema": {"type": "object", "properties": {}},
                           "annotations": annotations, "outputSchema": {"type": "object"}},
            "observations": [{}, {}],
            "observed": observed,
        })
    }

    /// Alone and with the observation, one tool: (honest, lies) per hint.
    fn both(entry: &CorpusEntry, observation: &Observation) -> (TrustScored, TrustScored) {
        let policy = standard_policy().unwrap_or_else(|error| unreachable!("{error}"));
        let inference = infer_annotations(&tool_with_title(entry));
        let convention = Convention::default();
        let bar = DEFAULT_MIN_CONFIDENCE;
        (
            score_trust(entry, &policy, &inference, &convention, bar, None),
            score_trust(entry, &policy, &inference, &convention, bar, Some(observation)),
        )
    }

    const READ_ONLY: usize = 0;
    const OPEN_WORLD: usize = 3;

    /// A recording matches a corpus line by server, name and definition (fields the corpus does not keep aside);
    /// a tool `verify` did not call has no observation, and a changed description is reported, not counted.
    #[test]
    fn recordings_match_corpus_lines_by_definition() {
        let funnel = "Funnel card: counts of leads, opportunities and orders this month.";
        let entries = vec![
            corpus_line("sales_funnel", funnel, json!({"openWorldHint": false})),
            corpus_line("get_report", "Returns the monthly report.", json!({"readOnlyHint": false})),
        ];
        let recording = json!({
            "server": "constructed",
            "verification": {"tools": [
                recorded_tool("sales_funnel", funnel, json!({"openWorldHint": false, "x-extra": 1}),
                    json!({"calls": 2, "succeeded": 2, "supported": true})),
                recorded_tool("get_report", "Returns the monthly report, now cached.", json!({"readOnlyHint": false}),
                    json!({"calls": 2, "succeeded": 2, "wrote": true})),
                {"name": "not_called", "definition": {"name": "not_called"}, "observations": [], "observed": {}},
                recorded_tool("undeclared", "Lists things.", json!({}), json!({"calls": 2, "succeeded": 0})),
            ]},
        });
        let recordings = vec![parse_recording(&recording.to_string()).unwrap_or_else(|error| unreachable!("{error}"))];
        assert_eq!(recordings[0].listed, 4);
        assert_eq!(recordings[0].tools.len(), 3, "the tool verify did not call has no observation");
        let matching = match_recordings(&entries, &recordings).unwrap_or_else(|error| unreachable!("{error}"));
        assert_eq!(matching.matched.keys().copied().collect::<Vec<_>>(), vec![0]);
        assert!(matching.matched[&0].observation.supported);
        assert_eq!(
            matching.differs,
            vec![("constructed".to_owned(), "get_report".to_owned(), vec!["description".to_owned()])]
        );
        assert_eq!(matching.not_in_corpus, vec![("constructed".to_owned(), "undeclared".to_owned())]);
    }

    /// The combination on a constructed case: a read-only lie inference alone believes is caught only because the
    /// tool was seen writing (the lie keeps the behaviour); an honest closed-world declaration inference cannot
    /// place is accepted only on the support of quiet calls; a failed call is no evidence either way.
    #[test]
    fn observations_catch_lies_and_back_declarations_only_where_seen() {
        let writer = corpus_line("get_report", "Returns the monthly sales report.", json!({"readOnlyHint": false}));
        let wrote = Observation { record: "r/1".into(), wrote: true, ..Observation::default() };
        let (alone, with) = both(&writer, &wrote);
        assert_eq!(alone.lies[READ_ONLY], Some(false), "inference alone believes the read-only lie");
        assert_eq!(with.lies[READ_ONLY], Some(true), "the observed write catches it");

        let funnel = "Funnel card: counts of leads, opportunities and orders this month.";
        let closed = corpus_line("sales_funnel", funnel, json!({"readOnlyHint": true, "openWorldHint": false}));
        let quiet = Observation { record: "r/2".into(), supported: true, ..Observation::default() };
        let (alone, with) = both(&closed, &quiet);
        assert_eq!(alone.honest[OPEN_WORLD], Some(false), "inference alone cannot place the closed world");
        assert_eq!(with.honest[OPEN_WORLD], Some(true), "quiet calls support it");

        let failed = Observation { record: "r/3".into(), ..Observation::default() };
        let (alone, with) = both(&closed, &failed);
        assert_eq!((alone.honest, alone.lies), (with.honest, with.lies), "failed calls change nothing");
    }

    /// The checked-in recordings (`corpus/observations`) are read and still describe the grown corpus's tools: every
    /// recorded server is a corpus server, and no recorded tool with a corpus line differs from it (a re-harvested
    /// server needs `corpus/observe.py` again). Scoring them is `cargo xtask eval --observations`.
    #[test]
    fn checked_in_recordings_match_the_grown_corpus() {
        let root = crate::eval_base::workspace_root().join("corpus");
        let entries =
            crate::train::read_corpus(&root.join("grown.jsonl")).unwrap_or_else(|error| unreachable!("{error:#}"));
        let recordings = read_recordings(&root.join("observations")).unwrap_or_else(|error| unreachable!("{error:#}"));
        assert!(!recordings.is_empty());
        for recording in &recordings {
            assert!(
                entries.iter().any(|entry| entry.server == recording.server),
                "{} is no corpus server",
                recording.server
            );
        }
        let matching = match_recordings(&entries, &recordings).unwrap_or_else(|error| unreachable!("{error:#}"));
        assert!(matching.differs.is_empty(), "recorded definitions differ from the corpus: {:?}", matching.differs);
        assert!(!matching.matched.is_empty());
        // Scored through the trust rule (the checked-in weights: no refit, so this stays cheap), every lie whose
        // tool was seen doing what the lie denies is caught, whatever inference says.
        let policy = standard_policy().unwrap_or_else(|error| unreachable!("{error}"));
        for (index, recorded) in &matching.matched {
            let entry = &entries[*index];
            let inference = infer_annotations(&tool_with_title(entry));
            let convention = Convention::default();
            let observation = Some(&recorded.observation);
            let scored = score_trust(entry, &policy, &inference, &convention, DEFAULT_MIN_CONFIDENCE, observation);
            for (slot, hint) in Hint::ALL.into_iter().enumerate() {
                if recorded.observation.contradiction(hint).is_some() && scored.lies[slot].is_some() {
                    assert_eq!(scored.lies[slot], Some(true), "{} {} {hint:?}", entry.server, entry.name);
                }
            }
        }
    }
}
