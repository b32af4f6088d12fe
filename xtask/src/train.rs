//! `cargo xtask train`: fits inference's learned layer (`toolgate_core::infer::model`) on the labelled corpora and
//! writes `crates/core/src/infer/weights.tsv`; the eval uses the same fit to score each server with a model that
//! never saw it (leave-one-server-out).
//!
//! L2-regularised logistic regression per hint, fitted by AdaGrad over the examples in a fixed pseudo-random order:
//! the same corpora give the same table, byte for byte. Labels follow the eval's rules (only declared values;
//! `destructiveHint`/`idempotentHint` only on declared writers). Two choices are for generalisation, not fit: a
//! feature counts only when at least [`MIN_SERVERS`] servers use it (a word of one server's vocabulary cannot be
//! learned as a rule), and each server's examples weigh at most [`SERVER_CAP`] tools' worth (one large server
//! does not teach its house style as the truth). It reads corpus files and writes one file; what it fits is
//! decided in `toolgate-core`, which also extracts the features, so training and inference cannot drift apart.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use toolgate_core::corpus::{CorpusEntry, parse_corpus_line};
use toolgate_core::infer::model::{LinearModel, rule_feature};
use toolgate_core::infer::model_features;
use toolgate_core::{Hint, ToolDefinition};

/// The hints the model decides. The others stay with the rules: on the design servers (see docs/inference.md) a
/// learned `destructiveHint`, `idempotentHint` or `openWorldHint` learned the servers' house conventions and let
/// more synthetic lies through than the rules, while `readOnlyHint` (what a tool does, not how its author files
/// it) generalised.
const LEARNED_HINTS: [Hint; 1] = [Hint::ReadOnly];
/// Fewest training servers a feature must occur in.
const MIN_SERVERS: usize = 3;
/// A server's examples of one hint weigh, together, at most this many tools.
const SERVER_CAP: f64 = 30.0;
/// Passes over the examples.
const EPOCHS: usize = 25;
/// AdaGrad's base step.
const STEP: f64 = 0.3;
/// L2 penalty per update on the weights an example touches (the bias is not penalised, nor are the rules'
/// scores: the prior is that the rules are right).
const L2: f64 = 0.002;
/// Smaller weights are dropped: they move no decision and would only grow the checked-in table.
const MIN_WEIGHT: f64 = 0.02;
/// The weight the hint's own rule score starts at: 3.0 on the feature (the score divided by 3) reproduces the rules.
const RULE_SCORE_START: f64 = 3.0;

/// One labelled tool, featurised.
pub(crate) struct Example {
    pub(crate) server: String,
    features: Vec<(usize, f64)>,
    labels: [Option<bool>; 4],
}

/// Every labelled tool of the training corpora, with a shared feature index.
pub(crate) struct Dataset {
    names: Vec<String>,
    examples: Vec<Example>,
    /// Per feature: the servers that use it.
    servers_of: Vec<BTreeSet<String>>,
}

/// Corpus files that are scored but never trained on: `fresh.jsonl` is issue 15's blind corpus, kept out of the
/// training pool so that its figures stay those of a model that never saw any of its servers (a leave-one-server-out
/// fold would still train on the other fresh servers, and their house styles would leak into the score).
const HELD_OUT_CORPORA: &[&str] = &["fresh.jsonl"];

/// The corpora training reads: the shared development corpus and every `corpus/*.jsonl` of the repository except
/// the held-out ones ([`HELD_OUT_CORPORA`]).
pub(crate) fn training_corpora() -> Result<Vec<PathBuf>> {
    Ok(crate::eval_base::default_corpora()?
        .into_iter()
        .filter(|path| {
            let name = path.file_name().map(|name| name.to_string_lossy().into_owned()).unwrap_or_default();
            !HELD_OUT_CORPORA.contains(&name.as_str())
        })
        .collect())
}

impl Dataset {
    pub(crate) fn load(paths: &[PathBuf]) -> Result<Dataset> {
        let mut dataset = Dataset { names: Vec::new(), examples: Vec::new(), servers_of: Vec::new() };
        let mut index: HashMap<String, usize> = HashMap::new();
        for path in paths {
            for entry in read_corpus(path)? {
                let tool = crate::eval_base::tool_with_title(&entry);
                let labels = Hint::ALL.map(|hint| crate::eval_base::label(&entry.labels, hint));
                if labels.iter().all(Option::is_none) {
                    continue;
                }
                let features = dataset.index_features(&mut index, &tool, &entry.server);
                dataset.examples.push(Example { server: entry.server, features, labels });
            }
        }
        Ok(dataset)
    }

    fn index_features(
        &mut self,
        index: &mut HashMap<String, usize>,
        tool: &ToolDefinition,
        server: &str,
    ) -> Vec<(usize, f64)> {
        let features = model_features(tool);
        let mut out = Vec::with_capacity(features.entries().len());
        for (name, value) in features.entries() {
            let id = *index.entry(name.clone()).or_insert_with(|| {
                self.names.push(name.clone());
                self.servers_of.push(BTreeSet::new());
                self.names.len() - 1
            });
            if let Some(servers) = self.servers_of.get_mut(id) {
                servers.insert(server.to_owned());
            }
            out.push((id, f64::from(*value)));
        }
        out
    }

    /// Fits a model on every example except those of `held_out`'s server.
    pub(crate) fn fit(&self, held_out: Option<&str>) -> LinearModel {
        let rule_ids: BTreeSet<usize> = Hint::ALL
            .into_iter()
            .filter_map(|hint| self.names.iter().position(|name| name == rule_feature(hint)))
            .collect();
        // A feature is usable when enough *training* servers have it.
        let usable: Vec<bool> = self
            .servers_of
            .iter()
            .enumerate()
            .map(|(id, servers)| {
                let count = servers.iter().filter(|server| Some(server.as_str()) != held_out).count();
                rule_ids.contains(&id) || count >= MIN_SERVERS
            })
            .collect();
        // Only the usable features of the training examples, read once per fit.
        let training: Vec<(&Example, Vec<(usize, f64)>)> = self
            .examples
            .iter()
            .filter(|example| Some(example.server.as_str()) != held_out)
            .map(|example| {
                let features =
                    example.features.iter().copied().filter(|(id, _)| usable.get(*id).copied().unwrap_or(false));
                (example, features.collect())
            })
            .collect();
        let order = shuffled(training.len());
        let penalised: Vec<bool> = self.names.iter().map(|name| !name.starts_with("rule:")).collect();
        let mut bias = [0.0f32; 4];
        let mut weights: HashMap<String, [f32; 4]> = HashMap::new();
        for (hint_index, hint) in Hint::ALL.into_iter().enumerate() {
            if !LEARNED_HINTS.contains(&hint) {
                continue;
            }
            let own_rule = self.names.iter().position(|name| name == rule_feature(hint));
            let (hint_bias, hint_weights) = fit_hint(&training, &order, hint_index, &penalised, own_rule);
            bias[hint_index] = hint_bias as f32;
            for (id, weight) in hint_weights {
                if let Some(name) = self.names.get(id) {
                    weights.entry(name.clone()).or_insert([0.0; 4])[hint_index] = weight as f32;
                }
            }
        }
        LinearModel::new(Hint::ALL.map(|hint| LEARNED_HINTS.contains(&hint)), bias, weights)
    }
}

/// One example of a hint as the fit reads it: label (0 or 1), its weight, its usable features.
type Labelled<'a> = (f64, f64, &'a [(usize, f64)]);

/// Fits one hint; returns the bias and the non-zero weights by feature id.
fn fit_hint(
    training: &[(&Example, Vec<(usize, f64)>)],
    order: &[usize],
    hint_index: usize,
    penalised: &[bool],
    own_rule: Option<usize>,
) -> (f64, BTreeMap<usize, f64>) {
    // Each server's examples of this hint weigh at most SERVER_CAP tools in all.
    let mut per_server: HashMap<&str, usize> = HashMap::new();
    for (example, _) in training.iter().filter(|(example, _)| example.labels[hint_index].is_some()) {
        *per_server.entry(example.server.as_str()).or_default() += 1;
    }
    let cap = SERVER_CAP;
    let l2 = L2;
    let labelled: Vec<Labelled<'_>> = order
        .iter()
        .filter_map(|position| training.get(*position))
        .filter_map(|(example, features)| {
            let label = example.labels[hint_index]?;
            let count = per_server.get(example.server.as_str()).copied().unwrap_or(1) as f64;
            Some((f64::from(u8::from(label)), (cap / count).min(1.0), features.as_slice()))
        })
        .collect();
    let size = penalised.len();
    let mut weights = vec![0.0f64; size];
    let mut squared = vec![1e-8f64; size];
    let (mut bias, mut bias_squared) = (0.0f64, 1e-8f64);
    // Start from the rules: the hint's own rule score at the weight that reproduces the rules alone.
    if let Some(id) = own_rule {
        weights[id] = RULE_SCORE_START;
    }
    for _ in 0..EPOCHS {
        for (label, example_weight, features) in &labelled {
            let logit = bias + features.iter().map(|(id, value)| weights[*id] * value).sum::<f64>();
            let probability = 1.0 / (1.0 + (-logit).exp());
            let error = (probability - label) * example_weight;
            bias_squared += error * error;
            bias -= STEP * error / bias_squared.sqrt();
            for &(id, value) in *features {
                let penalty = if penalised[id] { l2 * weights[id] } else { 0.0 };
                let gradient = error * value + penalty;
                squared[id] += gradient * gradient;
                weights[id] -= STEP * gradient / squared[id].sqrt();
            }
        }
    }
    // Rounded as the table stores them, and small weights dropped: the eval's folds score with exactly what a
    // checked-in table would hold.
    let kept = weights
        .into_iter()
        .enumerate()
        .map(|(id, weight)| (id, rounded(weight)))
        .filter(|(_, weight)| weight.abs() >= MIN_WEIGHT)
        .collect();
    (rounded(bias), kept)
}

fn rounded(weight: f64) -> f64 {
    (weight * 100.0).round() / 100.0
}

/// 0..count in a fixed pseudo-random order (a linear congruential generator with a constant seed), so SGD does
/// not see one server's tools in a row and every run sees the same order.
fn shuffled(count: usize) -> Vec<usize> {
    let mut order: Vec<usize> = (0..count).collect();
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    for index in (1..count).rev() {
        state = state.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        let other = ((state >> 33) as usize) % (index + 1);
        order.swap(index, other);
    }
    order
}

pub(crate) fn read_corpus(path: &Path) -> Result<Vec<CorpusEntry>> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading corpus {}", path.display()))?;
    let mut entries = Vec::new();
    for (index, line) in text.lines().enumerate().filter(|(_, line)| !line.trim().is_empty()) {
        entries.push(parse_corpus_line(line).with_context(|| format!("{}:{}", path.display(), index + 1))?);
    }
    Ok(entries)
}

/// `cargo xtask train [--check]`: fits on every training corpus and writes the weights table (with `--check`,
/// fails instead when the checked-in table differs from what the corpora give).
pub(crate) fn run(args: &[String]) -> Result<()> {
    let check = match args {
        [] => false,
        [flag] if flag == "--check" => true,
        _ => bail!("usage: cargo xtask train [--check]"),
    };
    let paths = training_corpora()?;
    let dataset = Dataset::load(&paths)?;
    let model = dataset.fit(None);
    let names: Vec<String> = paths
        .iter()
        .map(|path| path.file_name().map_or_else(String::new, |name| name.to_string_lossy().into_owned()))
        .collect();
    let header = format!(
        "Generated by `cargo xtask train` from {} ({} labelled tools); do not edit.\n\
         Columns: feature, then its weight for readOnlyHint, destructiveHint, idempotentHint, openWorldHint.",
        names.join(", "),
        dataset.examples.len()
    );
    let table = model.to_table(&header, 2);
    let target = crate::eval_base::workspace_root().join("crates/core/src/infer/weights.tsv");
    if check {
        let current = std::fs::read_to_string(&target).unwrap_or_default();
        if current != table {
            bail!("{} is not what `cargo xtask train` gives; run it and commit the result", target.display());
        }
        println!("{} is up to date", target.display());
        return Ok(());
    }
    std::fs::write(&target, &table).with_context(|| format!("writing {}", target.display()))?;
    println!("wrote {} ({} rows)", target.display(), table.lines().count());
    Ok(())
}
