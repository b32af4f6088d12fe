//! `cargo xtask eval`: scores inference against the declared labels of each corpus, next to a baseline verb map,
//! and the trust rule and the standard policy built on it (`eval_trust`).
//!
//! Scoring follows the corpus rules: only explicitly declared labels count, and `destructiveHint` and
//! `idempotentHint` count only where `readOnlyHint` is declared false. Prints micro figures, macro (per-server)
//! figures, optional held-out groups, per-server tables, confidence calibration, misclassified tools, the trust
//! rule's operating point and the decision figures; `--check` holds each corpus to its recorded thresholds
//! (`eval_check`). Without `--corpus` it scores the shared development corpus and every `corpus/*.jsonl` of the
//! repository. This is the imperative shell: it reads corpus files and prints; all judgement lives in
//! `toolgate-core`.

#![allow(clippy::print_stdout)]

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use toolgate_core::corpus::CorpusEntry;
use toolgate_core::infer::model::LinearModel;
use toolgate_core::infer::{Inference, infer_annotations_with};
use toolgate_core::trust::Convention;
use toolgate_core::words::tokens;
use toolgate_core::{DeclaredHints, Hint, ToolDefinition};

use crate::eval_base::{
    ModelChoice, Scored, default_corpora, label, ratio, short_name, show, tool_with_title, workspace_root,
};
use crate::eval_trust::{
    OPERATING_BARS, TrustFigures, TrustScored, print_operating_points, print_trust, print_trust_errors, score_trust,
    standard_policy,
};
use crate::train::Dataset;
use toolgate_core::trust::DEFAULT_MIN_CONFIDENCE;

const USAGE: &str = "usage: cargo xtask eval [--corpus PATH]... [--model loso|rules|builtin] [--holdout SERVER,...] \
                     [--per-server] [--calibration] [--errors HINT] [--explain TOOL] [--check] [--record] \
                     [--observations DIR]";

#[derive(Default)]
struct Options {
    corpus: Vec<PathBuf>,
    holdout: Vec<String>,
    per_server: bool,
    calibration: bool,
    errors: Option<Hint>,
    explain: Option<String>,
    check: bool,
    record: bool,
    model: ModelChoice,
    /// `toolgate verify` recordings: score only the tools they observed, without and with them (`eval_observed`).
    observations: Option<PathBuf>,
}

pub(crate) fn run(args: &[String]) -> Result<()> {
    let options = parse_options(args)?;
    let paths = if options.corpus.is_empty() { default_corpora()? } else { options.corpus.clone() };
    let policy = standard_policy()?;
    let training = match options.model {
        ModelChoice::Loso => Some(Dataset::load(&crate::train::training_corpora()?)?),
        _ => None,
    };
    let mut missed = Vec::new();
    if let Some(given) = &options.observations {
        // As `cargo xtask test` names it: relative to the repository when not found from here.
        let dir = if given.is_relative() && !given.exists() { workspace_root().join(given) } else { given.clone() };
        // Recordings are of the grown corpus's servers; without `--corpus` only that corpus is matched.
        let paths = if options.corpus.is_empty() { vec![workspace_root().join("corpus/grown.jsonl")] } else { paths };
        for path in &paths {
            crate::eval_observed::run(path, &dir, &policy, options.model, training.as_ref())?;
        }
        return Ok(());
    }
    for path in &paths {
        if let Err(error) = run_corpus(&options, path, &policy, training.as_ref()) {
            missed.push(format!("{error:#}"));
        }
    }
    if !missed.is_empty() {
        bail!("{}", missed.join("\n"));
    }
    Ok(())
}

fn run_corpus(
    options: &Options,
    path: &Path,
    policy: &toolgate_core::policy::CompiledPolicy,
    training: Option<&Dataset>,
) -> Result<()> {
    let mut scored = Vec::new();
    let mut trust = Vec::new();
    // Per bar of the operating-point table (only with `--calibration`): every tool's trust outcomes at that bar.
    let mut operating: Vec<(f32, Vec<TrustScored>)> = Vec::new();
    if options.calibration {
        operating = OPERATING_BARS.iter().map(|bar| (*bar, Vec::new())).collect();
    }
    let rules_only = LinearModel::rules_only();
    let mut folds: HashMap<String, LinearModel> = HashMap::new();
    let entries = crate::train::read_corpus(path)?;
    print_cost(&entries);
    // Each server's declarations, as the catalog sees one upstream's listing.
    let mut declarations: HashMap<&str, Vec<&DeclaredHints>> = HashMap::new();
    for entry in &entries {
        declarations.entry(entry.server.as_str()).or_default().push(&entry.labels);
    }
    let conventions: HashMap<String, Convention> =
        declarations.into_iter().map(|(server, labels)| (server.to_owned(), Convention::of(labels))).collect();
    for entry in entries {
        let model = match (options.model, training) {
            (ModelChoice::Loso, Some(training)) => {
                &*folds.entry(entry.server.clone()).or_insert_with(|| training.fit(Some(&entry.server)))
            }
            (ModelChoice::Rules, _) => &rules_only,
            _ => LinearModel::builtin(),
        };
        if options.explain.as_deref() == Some(entry.name.as_str()) {
            println!(
                "{} {}: {}",
                entry.server,
                entry.name,
                serde_json::to_string_pretty(&infer_annotations_with(&tool_with_title(&entry), model))?
            );
        }
        let convention = conventions.get(&entry.server).copied().unwrap_or_default();
        let inference = infer_annotations_with(&tool_with_title(&entry), model);
        trust.push(score_trust(&entry, policy, &inference, &convention, DEFAULT_MIN_CONFIDENCE, None));
        for (bar, outcomes) in &mut operating {
            outcomes.push(score_trust(&entry, policy, &inference, &convention, *bar, None));
        }
        scored.push(score(entry, &inference));
    }
    let model = match options.model {
        ModelChoice::Loso => "learned layer leave-one-server-out (each server scored by a model trained without it)",
        ModelChoice::Rules => "the rules alone",
        ModelChoice::Builtin => "the checked-in weights (in-sample)",
    };
    println!("corpus: {} ({} tools), {model}\n", path.display(), scored.len());
    let all: Vec<&Scored> = scored.iter().collect();
    print_block("all servers", &all);
    print_macro(&all);
    print_vetoes(&all);
    if !options.holdout.is_empty() {
        let (held, tuned): (Vec<&Scored>, Vec<&Scored>) =
            all.iter().partition(|entry| options.holdout.contains(&entry.server));
        print_block(&format!("tuning servers (all but {})", options.holdout.join(", ")), &tuned);
        print_block(&format!("held-out servers ({})", options.holdout.join(", ")), &held);
        print_macro(&held);
    }
    if options.per_server {
        print_per_server(&all);
    }
    if options.calibration {
        print_calibration(&all);
        print_read_only_curve(&all);
        let rows: Vec<(f32, TrustFigures)> = operating
            .iter()
            .map(|(bar, outcomes)| (*bar, TrustFigures::of(&outcomes.iter().collect::<Vec<_>>())))
            .collect();
        print_operating_points(&rows);
    }
    crate::eval_convention::print_convention(&all);
    if let Some(hint) = options.errors {
        // While tuning, only the tuning servers' errors are shown: the held-out ones stay unseen.
        let visible: Vec<&Scored> =
            all.iter().copied().filter(|entry| !options.holdout.contains(&entry.server)).collect();
        print_errors(&visible, hint);
    }
    let trust: Vec<&TrustScored> = trust.iter().collect();
    print_trust(&trust, options.per_server);
    if let Some(hint) = options.errors {
        let visible: Vec<&TrustScored> =
            trust.iter().copied().filter(|entry| !options.holdout.contains(&entry.server)).collect();
        print_trust_errors(&visible, hint);
    }
    let mut figures = Metrics::of(&all).named();
    figures.extend(TrustFigures::of(&trust).named());
    if options.record {
        crate::eval_check::print_record(path, scored.len(), &figures);
    }
    if options.check {
        crate::eval_check::check(path, scored.len(), &figures)?;
    }
    Ok(())
}

fn parse_options(args: &[String]) -> Result<Options> {
    let mut options = Options::default();
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        let mut value = |flag: &str| args.next().cloned().with_context(|| format!("{flag} needs a value; {USAGE}"));
        match arg.as_str() {
            "--corpus" => options.corpus.push(PathBuf::from(value("--corpus")?)),
            "--holdout" => {
                options.holdout = value("--holdout")?.split(',').map(str::trim).map(str::to_owned).collect();
            }
            "--per-server" | "--holdout-all" => options.per_server = true,
            "--calibration" => options.calibration = true,
            "--errors" => {
                let name = value("--errors")?;
                let hint =
                    Hint::ALL.into_iter().find(|hint| hint.wire_key().to_lowercase().starts_with(&name.to_lowercase()));
                options.errors = Some(hint.with_context(|| format!("unknown hint {name}"))?);
            }
            "--explain" => options.explain = Some(value("--explain")?),
            "--check" => options.check = true,
            "--model" => {
                options.model = match value("--model")?.as_str() {
                    "loso" => ModelChoice::Loso,
                    "rules" => ModelChoice::Rules,
                    "builtin" => ModelChoice::Builtin,
                    other => bail!("unknown model {other}; {USAGE}"),
                }
            }
            "--record" => options.record = true,
            "--observations" => options.observations = Some(PathBuf::from(value("--observations")?)),
            other => bail!("unknown option {other}; {USAGE}"),
        }
    }
    Ok(options)
}

fn score(entry: CorpusEntry, inference: &Inference) -> Scored {
    let engine = Hint::ALL.map(|hint| {
        let inferred = inference.get(hint);
        (inferred.value, inferred.confidence)
    });
    let vetoed = inference.read_only.vetoed();
    Scored {
        baseline: baseline(&entry.name),
        server: entry.server,
        name: entry.name,
        labels: entry.labels,
        engine,
        vetoed,
    }
}

/// The baseline verb map of the issue: the first name token that is one of these verbs decides; none means the
/// spec defaults (writes, destructive, not idempotent). Everything is open-world.
fn baseline(name: &str) -> [bool; 4] {
    let verb = tokens(name).into_iter().find_map(|token| match token.as_str() {
        "list" | "search" | "get" => Some((true, false, true)),
        "create" | "send" | "update" => Some((false, false, false)),
        "delete" | "archive" | "remove" => Some((false, true, true)),
        _ => None,
    });
    let (read_only, destructive, idempotent) = verb.unwrap_or((false, true, false));
    [read_only, destructive, idempotent, true]
}

/// Counts for one hint: how many scored, how many right, and the recall/leak counts that matter for it.
#[derive(Default, Clone, Copy)]
struct Count {
    n: usize,
    correct: usize,
    /// readOnly: declared writers; destructive: declared destructive.
    positives: usize,
    /// readOnly: writers inferred read-only; destructive: destructive inferred destructive.
    positive_hits: usize,
}

impl Count {
    fn add(&mut self, declared: bool, guessed: bool, special: Hint) {
        self.n += 1;
        self.correct += usize::from(declared == guessed);
        match special {
            Hint::ReadOnly if !declared => {
                self.positives += 1;
                self.positive_hits += usize::from(guessed);
            }
            Hint::Destructive if declared => {
                self.positives += 1;
                self.positive_hits += usize::from(guessed);
            }
            _ => {}
        }
    }

    fn accuracy(&self) -> Option<f64> {
        ratio(self.correct, self.n)
    }

    fn special(&self) -> Option<f64> {
        ratio(self.positive_hits, self.positives)
    }
}

struct Metrics {
    engine: [Count; 4],
    baseline: [Count; 4],
}

impl Metrics {
    fn of(entries: &[&Scored]) -> Metrics {
        let mut metrics = Metrics { engine: [Count::default(); 4], baseline: [Count::default(); 4] };
        for entry in entries {
            for (index, hint) in Hint::ALL.into_iter().enumerate() {
                if let Some(declared) = label(&entry.labels, hint) {
                    metrics.engine[index].add(declared, entry.engine[index].0, hint);
                    metrics.baseline[index].add(declared, entry.baseline[index], hint);
                }
            }
        }
        metrics
    }
}

fn print_block(title: &str, entries: &[&Scored]) {
    let metrics = Metrics::of(entries);
    let servers: std::collections::BTreeSet<&str> = entries.iter().map(|entry| entry.server.as_str()).collect();
    println!("== {title}: {} tools, {} servers (micro) ==", entries.len(), servers.len());
    println!("{:<13} {:<30} {:>8} {:>9} {:>5}", "hint", "metric", "engine", "baseline", "n");
    for (index, hint) in Hint::ALL.into_iter().enumerate() {
        let (engine, base) = (metrics.engine[index], metrics.baseline[index]);
        println!(
            "{:<13} {:<30} {:>8} {:>9} {:>5}",
            hint.wire_key(),
            "accuracy",
            show(engine.accuracy()),
            show(base.accuracy()),
            engine.n
        );
        match hint {
            Hint::ReadOnly => println!(
                "{:<13} {:<30} {:>8} {:>9} {:>5}",
                "",
                "writers inferred read-only",
                show(engine.special()),
                show(base.special()),
                engine.positives
            ),
            Hint::Destructive => println!(
                "{:<13} {:<30} {:>8} {:>9} {:>5}",
                "",
                "recall (declared destructive)",
                show(engine.special()),
                show(base.special()),
                engine.positives
            ),
            _ => {}
        }
    }
    println!();
}

/// The time inference takes per tool with the checked-in model (rules, features, learned layer), over the corpus.
/// A debug build measures unoptimised code: an upper bound for the release binary.
fn print_cost(entries: &[CorpusEntry]) {
    let tools: Vec<ToolDefinition> = entries.iter().map(tool_with_title).collect();
    let per_tool = |model: &LinearModel| {
        let started = std::time::Instant::now();
        for tool in &tools {
            std::hint::black_box(infer_annotations_with(tool, model));
        }
        started.elapsed().as_secs_f64() * 1e6 / tools.len().max(1) as f64
    };
    let builtin = LinearModel::builtin();
    per_tool(builtin);
    let (rules, learned) = (per_tool(&LinearModel::rules_only()), per_tool(builtin));
    let profile = if cfg!(debug_assertions) { "debug build" } else { "release build" };
    println!(
        "inference cost (wall clock, {profile}, {} tools): rules alone {rules:.1} µs per tool, with the learned layer \
         {learned:.1} µs",
        tools.len()
    );
}

/// How often the read veto (a stated effect or an output file) fires on declared reads (false alarms) and on
/// declared writers.
fn print_vetoes(entries: &[&Scored]) {
    let reads: Vec<&&Scored> = entries.iter().filter(|entry| entry.labels.read_only == Some(true)).collect();
    let writers: Vec<&&Scored> = entries.iter().filter(|entry| entry.labels.read_only == Some(false)).collect();
    let vetoed = |group: &[&&Scored]| group.iter().filter(|entry| entry.vetoed).count();
    println!(
        "read veto (stated effect or output file): {} of {} declared reads (false alarms), {} of {} declared writers",
        vetoed(&reads),
        reads.len(),
        vetoed(&writers),
        writers.len()
    );
    for entry in reads.iter().filter(|entry| entry.vetoed) {
        println!("  vetoed read: {} {}", entry.server, entry.name);
    }
    println!();
}

fn by_server<'a>(entries: &[&'a Scored]) -> BTreeMap<&'a str, Vec<&'a Scored>> {
    let mut groups: BTreeMap<&str, Vec<&Scored>> = BTreeMap::new();
    for entry in entries {
        groups.entry(entry.server.as_str()).or_default().push(entry);
    }
    groups
}

/// Macro figures: each server's accuracy (and readOnly leak / destructive recall) averaged over the servers that
/// have that label, so azure-mcp's 234 tools count as one server.
fn print_macro(entries: &[&Scored]) {
    let groups = by_server(entries);
    let per_server: Vec<Metrics> = groups.values().map(|group| Metrics::of(group)).collect();
    let mean = |values: Vec<Option<f64>>| {
        let present: Vec<f64> = values.into_iter().flatten().collect();
        (!present.is_empty()).then(|| present.iter().sum::<f64>() / present.len() as f64)
    };
    println!("-- macro (mean over servers with the label) --");
    println!("{:<13} {:<30} {:>8} {:>9} {:>5}", "hint", "metric", "engine", "baseline", "srv");
    for (index, hint) in Hint::ALL.into_iter().enumerate() {
        let engine: Vec<Option<f64>> = per_server.iter().map(|metrics| metrics.engine[index].accuracy()).collect();
        let base: Vec<Option<f64>> = per_server.iter().map(|metrics| metrics.baseline[index].accuracy()).collect();
        let count = engine.iter().flatten().count();
        println!(
            "{:<13} {:<30} {:>8} {:>9} {:>5}",
            hint.wire_key(),
            "accuracy",
            show(mean(engine)),
            show(mean(base)),
            count
        );
        if matches!(hint, Hint::ReadOnly | Hint::Destructive) {
            let metric =
                if hint == Hint::ReadOnly { "writers inferred read-only" } else { "recall (declared destructive)" };
            let engine: Vec<Option<f64>> = per_server.iter().map(|metrics| metrics.engine[index].special()).collect();
            let base: Vec<Option<f64>> = per_server.iter().map(|metrics| metrics.baseline[index].special()).collect();
            let count = engine.iter().flatten().count();
            println!("{:<13} {:<30} {:>8} {:>9} {:>5}", "", metric, show(mean(engine)), show(mean(base)), count);
        }
    }
    println!();
}

fn print_per_server(entries: &[&Scored]) {
    println!("-- per server: engine accuracy (n) / baseline accuracy --");
    println!("{:<24} {:>16} {:>16} {:>16} {:>16}", "server", "readOnly", "destructive", "idempotent", "openWorld");
    for (server, group) in by_server(entries) {
        let metrics = Metrics::of(&group);
        let cell = |index: usize| {
            let (engine, base) = (metrics.engine[index], metrics.baseline[index]);
            if engine.n == 0 {
                "-".to_owned()
            } else {
                format!("{}({})/{}", show(engine.accuracy()), engine.n, show(base.accuracy()))
            }
        };
        println!("{:<24} {:>16} {:>16} {:>16} {:>16}", server, cell(0), cell(1), cell(2), cell(3));
    }
    println!();
}

/// Accuracy by stated confidence, over all scored labels: a useful confidence rises with accuracy.
fn print_calibration(entries: &[&Scored]) {
    const EDGES: [f32; 6] = [0.5, 0.6, 0.7, 0.8, 0.9, 1.01];
    println!("-- calibration: accuracy by stated confidence (all scored labels) --");
    for hint in Hint::ALL.into_iter().map(Some).chain([None]) {
        let mut bins = [(0usize, 0usize); 5];
        for entry in entries {
            for (index, each) in Hint::ALL.into_iter().enumerate() {
                if hint.is_some_and(|hint| hint != each) {
                    continue;
                }
                if let Some(declared) = label(&entry.labels, each) {
                    let (value, confidence) = entry.engine[index];
                    let bin = EDGES.windows(2).position(|edge| confidence >= edge[0] && confidence < edge[1]);
                    if let Some(bin) = bin {
                        bins[bin].0 += 1;
                        bins[bin].1 += usize::from(value == declared);
                    }
                }
            }
        }
        let name = hint.map_or("all hints", Hint::wire_key);
        let cells: Vec<String> = bins
            .iter()
            .zip(EDGES.windows(2))
            .map(|((n, correct), edge)| {
                format!("[{:.1},{:.1}) {} n={}", edge[0], edge[1].min(1.0), show(ratio(*correct, *n)), n)
            })
            .collect();
        println!("{name:<15} {}", cells.join("  "));
    }
    println!();
}

/// The trust rule's trade-off for `readOnlyHint` at other bars: a declared read is accepted when inference says
/// read-only with at least the bar; a writer re-declared read-only is caught otherwise (inference alone, before
/// the veto of a declared `destructiveHint: true`, which the lies drop).
fn print_read_only_curve(entries: &[&Scored]) {
    println!("-- readOnlyHint: honest accepted / lies caught by bar (inference alone) --");
    let mut cells = Vec::new();
    for bar in [0.5f32, 0.6, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95] {
        let (mut honest, mut accepted, mut writers, mut caught) = (0, 0, 0, 0);
        for entry in entries {
            let Some(declared) = label(&entry.labels, Hint::ReadOnly) else { continue };
            let (value, confidence) = entry.engine[0];
            let confirms = value && confidence >= bar;
            if declared {
                honest += 1;
                accepted += usize::from(confirms);
            } else {
                writers += 1;
                caught += usize::from(!confirms);
            }
        }
        cells.push(format!("{bar:.2}: {} / {}", show(ratio(accepted, honest)), show(ratio(caught, writers))));
    }
    println!("{}", cells.join("  "));
    println!();
}

fn print_errors(entries: &[&Scored], hint: Hint) {
    let index = Hint::ALL.iter().position(|each| *each == hint).unwrap_or_default();
    println!("-- {} errors (declared -> inferred, confidence) --", hint.wire_key());
    for entry in entries {
        if let Some(declared) = label(&entry.labels, hint)
            && declared != entry.engine[index].0
        {
            println!(
                "{:<24} {:<50} {} -> {} ({:.2})",
                entry.server, entry.name, declared, entry.engine[index].0, entry.engine[index].1
            );
        }
    }
    println!();
}

/// The name of every figure `--check` can hold a corpus to (the thresholds test checks the file against it).
#[cfg(test)]
pub(crate) fn figure_names() -> Vec<String> {
    let mut figures = Metrics::of(&[]).named();
    figures.extend(TrustFigures::of(&[]).named());
    figures.into_iter().map(|(name, _)| name).collect()
}

impl Metrics {
    /// The engine's figures by the names `--check` thresholds use.
    fn named(&self) -> Vec<(String, Option<f64>)> {
        let mut named = Vec::new();
        for (index, hint) in Hint::ALL.into_iter().enumerate() {
            let key = short_name(hint);
            named.push((format!("{key}.accuracy"), self.engine[index].accuracy()));
            match hint {
                Hint::ReadOnly => {
                    named.push((format!("{key}.writers_inferred_read_only"), self.engine[index].special()))
                }
                Hint::Destructive => named.push((format!("{key}.recall"), self.engine[index].special())),
                _ => {}
            }
        }
        named
    }
}
