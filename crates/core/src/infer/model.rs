//! The learned layer of inference: one logistic model per hint over the tool's words, verb-object pairs, schema
//! shapes and the cue rules' own scores, with weights trained offline by `cargo xtask train` and checked in as
//! `weights.tsv` beside this file.
//!
//! The rules stay the first opinion and the evidence a person reads; the model learns how far to trust them and
//! which words, property names and shapes move the answer on servers the rules were never tuned on. Features come
//! only from the same `Signals` the rules read, so the model never sees a declared hint value. The weights are
//! compiled into the binary (no file is read at run time) and parsed once; a weights table that does not parse
//! leaves inference to the rules alone rather than failing. Features are a sorted, deduplicated list, so a score
//! is the same to the bit on every run. This module must not learn anything at run time.

use std::collections::{BTreeMap, HashMap};
use std::sync::OnceLock;

use crate::hints::Hint;
use crate::infer::action::Action;
use crate::infer::domain::Domain;
use crate::infer::signals::Signals;

/// The checked-in weights (`cargo xtask train` writes them).
const BUILTIN_WEIGHTS: &str = include_str!("weights.tsv");

/// The rules decide alone where their score reaches this size (a confidence of about 0.82): the learned layer
/// only speaks where the rules are unsure. Out of sample the model let more writers pass as reads than the rules
/// where the rules were sure, and found most of its gain where they were not (docs/inference.md).
pub const RULES_DECIDE_AT: f32 = 3.0;

/// The log-odds (probability 0.8) from which the learned layer alone calls a tool read-only when the rules found no
/// cue at all, only their prior (unknown tools are assumed to write).
pub const ALONE_READS_AT: f32 = 1.386_294_4;
/// Description tokens read as features: the lead of a long description carries the action; the rest is mostly
/// domain vocabulary that does not carry over to other servers.
const MAX_DESCRIPTION_FEATURES: usize = 60;
/// The rules' score enters the model divided by this, so its weight reads like the rules' own confidence scale.
const RULE_SCORE_SCALE: f32 = 3.0;
/// A rules' score beyond this many units adds nothing more: a huge hand-set weight must not swamp the model.
const RULE_SCORE_CLIP: f32 = 3.0;

/// The features of one tool: a sorted list of names with values (1.0 for a word that is present).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Features {
    entries: Vec<(String, f32)>,
}

impl Features {
    /// The features, sorted by name.
    pub fn entries(&self) -> &[(String, f32)] {
        &self.entries
    }
}

/// The name of the feature that carries the cue rules' score for `hint`.
pub fn rule_feature(hint: Hint) -> &'static str {
    match hint {
        Hint::ReadOnly => "rule:readOnly",
        Hint::Destructive => "rule:destructive",
        Hint::Idempotent => "rule:idempotent",
        Hint::OpenWorld => "rule:openWorld",
    }
}

/// Reads the features of one tool. `rule_scores` are the rules' settled scores (veto applied), in [`Hint::ALL`]
/// order.
pub(crate) fn features(signals: &Signals, actions: &[Action], domain: &Domain, rule_scores: [f32; 4]) -> Features {
    // Collected, then sorted and deduplicated once: the same sorted set a `BTreeSet` gives, without a tree insertion
    // per feature.
    let mut words: Vec<String> = Vec::new();
    let name = &signals.name_tokens;
    for token in name {
        words.push(format!("n:{token}"));
    }
    if let Some(first) = name.first() {
        words.push(format!("n0:{first}"));
    }
    if let Some(last) = name.last() {
        words.push(format!("n$:{last}"));
    }
    // Verb-object pairs (`get_user` -> `get user`) and their reverse order (`user_get`), as adjacent name tokens.
    for pair in name.windows(2) {
        words.push(format!("nn:{} {}", pair[0], pair[1]));
    }
    for token in &signals.title_tokens {
        words.push(format!("t:{token}"));
    }
    for token in &signals.lead_tokens {
        words.push(format!("l:{token}"));
    }
    for pair in signals.lead_tokens.windows(2).take(8) {
        words.push(format!("ll:{} {}", pair[0], pair[1]));
    }
    for token in signals.description_tokens.iter().take(MAX_DESCRIPTION_FEATURES) {
        words.push(format!("d:{token}"));
    }
    let mut required = 0usize;
    let mut top_level = 0usize;
    for property in &signals.properties {
        if !property.top_level {
            continue;
        }
        top_level += 1;
        required += usize::from(property.required);
        for token in &property.tokens {
            words.push(format!("p:{token}"));
            if property.required {
                words.push(format!("pr:{token}"));
            }
        }
        for kind in &property.types {
            words.push(format!("pt:{kind}"));
        }
        if !property.enum_values.is_empty() {
            words.push("shape:enum".to_owned());
        }
    }
    words.push(format!("shape:properties:{}", bucket(top_level)));
    words.push(format!("shape:required:{}", bucket(required)));
    words.push(format!("shape:sentences:{}", bucket(signals.sentence_count)));
    if signals.description.is_empty() {
        words.push("shape:no-description".to_owned());
    }
    for action in actions {
        words.push(format!("verb:{:?}:{}", action.source, action.class.as_str()).to_lowercase());
    }
    for flag in domain.flags() {
        words.push(format!("domain:{flag}"));
    }
    words.sort_unstable();
    words.dedup();
    let mut entries: Vec<(String, f32)> = words.into_iter().map(|word| (word, 1.0)).collect();
    for (hint, score) in Hint::ALL.into_iter().zip(rule_scores) {
        let value = if score.is_finite() { score.clamp(-RULE_SCORE_CLIP, RULE_SCORE_CLIP) } else { 0.0 };
        let name = rule_feature(hint);
        // Kept sorted; a word of the same name (there is none) would take the rule's value, as a map insert would.
        match entries.binary_search_by(|(entry, _)| entry.as_str().cmp(name)) {
            Ok(found) => entries[found].1 = value / RULE_SCORE_SCALE,
            Err(at) => entries.insert(at, (name.to_owned(), value / RULE_SCORE_SCALE)),
        }
    }
    Features { entries }
}

/// `0`, `1`, `2-3`, `4-7`, `8+`: counts by order of magnitude, so a shape feature generalises across sizes.
fn bucket(count: usize) -> &'static str {
    match count {
        0 => "0",
        1 => "1",
        2..=3 => "2-3",
        4..=7 => "4-7",
        _ => "8+",
    }
}

/// Why a weights table could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("weights line {line}: {problem}")]
pub struct WeightsError {
    /// The 1-based line.
    pub line: usize,
    /// What is wrong with it.
    pub problem: &'static str,
}

/// A logistic model per hint: a bias and a weight per feature name, in [`Hint::ALL`] order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LinearModel {
    /// Per hint: whether the model decides it. A hint it does not learn is left to the rules alone (training
    /// chooses; see `cargo xtask train`).
    learned: [bool; 4],
    bias: [f32; 4],
    weights: HashMap<String, [f32; 4]>,
    /// True for [`LinearModel::rules_only`]: inference then finishes exactly as the rules did alone (their own
    /// confidence scale), so the eval can compare like with like.
    rules_only: bool,
}

/// The row name of the biases in a weights table.
const BIAS_ROW: &str = "(bias)";
/// The row that says which hints the model decides (1) and which it leaves to the rules (0).
const LEARNED_ROW: &str = "(learned)";

impl LinearModel {
    /// A model from the hints it decides, biases and weights (what training produces).
    pub fn new(learned: [bool; 4], bias: [f32; 4], weights: HashMap<String, [f32; 4]>) -> LinearModel {
        LinearModel { learned, bias, weights, rules_only: false }
    }

    /// True when the model decides `hint`; otherwise the rules alone do.
    pub fn learns(&self, hint: Hint) -> bool {
        !self.rules_only && self.learned[hint_index(hint)]
    }

    /// The model that only passes the rules' score through: inference as it was before the learned layer.
    pub fn rules_only() -> LinearModel {
        let weights = Hint::ALL
            .into_iter()
            .enumerate()
            .map(|(index, hint)| {
                let mut row = [0.0; 4];
                row[index] = RULE_SCORE_SCALE;
                (rule_feature(hint).to_owned(), row)
            })
            .collect();
        LinearModel { learned: [false; 4], bias: [0.0; 4], weights, rules_only: true }
    }

    /// True for the model that only passes the rules through.
    pub fn is_rules_only(&self) -> bool {
        self.rules_only
    }

    /// The checked-in model, parsed once; the rules alone if the table does not parse (a test keeps it parsing).
    pub fn builtin() -> &'static LinearModel {
        static BUILTIN: OnceLock<LinearModel> = OnceLock::new();
        BUILTIN.get_or_init(|| LinearModel::parse(BUILTIN_WEIGHTS).unwrap_or_else(|_| LinearModel::rules_only()))
    }

    /// Reads a weights table: `#` comments, then tab-separated rows `feature w_readOnly w_destructive w_idempotent
    /// w_openWorld`; the row named `(bias)` holds the biases.
    pub fn parse(text: &str) -> Result<LinearModel, WeightsError> {
        let mut model = LinearModel::default();
        for (index, line) in text.lines().enumerate() {
            if line.trim().is_empty() || line.starts_with('#') {
                continue;
            }
            let error = |problem| WeightsError { line: index + 1, problem };
            let mut cells = line.split('\t');
            let name = cells.next().ok_or(error("no feature name"))?;
            let mut row = [0.0f32; 4];
            for slot in &mut row {
                let cell = cells.next().ok_or(error("fewer than four weights"))?;
                *slot = cell.parse().map_err(|_| error("a weight is not a number"))?;
                if !slot.is_finite() {
                    return Err(error("a weight is not finite"));
                }
            }
            if cells.next().is_some() {
                return Err(error("more than four weights"));
            }
            if name == BIAS_ROW {
                model.bias = row;
            } else if name == LEARNED_ROW {
                model.learned = row.map(|flag| flag != 0.0);
            } else {
                model.weights.insert(name.to_owned(), row);
            }
        }
        Ok(model)
    }

    /// The table [`LinearModel::parse`] reads, rows sorted by name, weights rounded to `decimals`; rows whose
    /// weights all round to zero are left out.
    pub fn to_table(&self, header: &str, decimals: usize) -> String {
        let mut text = String::new();
        for line in header.lines() {
            text.push_str("# ");
            text.push_str(line);
            text.push('\n');
        }
        let flags = self.learned.map(|flag| if flag { "1" } else { "0" });
        text.push_str(&format!("{LEARNED_ROW}\t{}\n", flags.join("\t")));
        let cell = |value: f32| {
            let shown = format!("{value:.decimals$}");
            // `-0.00` and `0.00` are the same weight; write it one way.
            if shown.trim_start_matches('-').chars().all(|character| character == '0' || character == '.') {
                "0".to_owned()
            } else {
                shown
            }
        };
        let mut row = |name: &str, weights: &[f32; 4]| {
            let cells: Vec<String> = weights.iter().map(|weight| cell(*weight)).collect();
            if name == BIAS_ROW || cells.iter().any(|cell| cell != "0") {
                text.push_str(&format!("{name}\t{}\n", cells.join("\t")));
            }
        };
        row(BIAS_ROW, &self.bias);
        let sorted: BTreeMap<&String, &[f32; 4]> = self.weights.iter().collect();
        for (name, weights) in sorted {
            row(name, weights);
        }
        text
    }

    /// The log-odds that `hint` is true, with the features that moved it most (name, contribution), strongest
    /// first.
    pub fn logit(&self, features: &Features, hint: Hint) -> (f32, Vec<(String, f32)>) {
        let index = hint_index(hint);
        let mut sum = self.bias[index];
        let mut parts = Vec::new();
        for (name, value) in &features.entries {
            if let Some(row) = self.weights.get(name) {
                let part = row[index] * value;
                sum += part;
                if part != 0.0 {
                    parts.push((name.clone(), part));
                }
            }
        }
        parts.sort_by(|left, right| right.1.abs().total_cmp(&left.1.abs()));
        (sum, parts)
    }
}

fn hint_index(hint: Hint) -> usize {
    Hint::ALL.iter().position(|each| *each == hint).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_checked_in_weights_parse() {
        let parsed = LinearModel::parse(BUILTIN_WEIGHTS);
        assert!(parsed.is_ok(), "{parsed:?}");
    }

    #[test]
    fn a_table_round_trips() {
        let mut weights = HashMap::new();
        weights.insert("n:get".to_owned(), [1.25, -0.5, 0.0, 0.0]);
        weights.insert("n:zero".to_owned(), [0.0, -0.0, 0.0001, 0.0]);
        let model = LinearModel::new([true, false, false, true], [0.5, 0.0, -1.0, 2.0], weights);
        let table = model.to_table("test", 3);
        let parsed = LinearModel::parse(&table).unwrap_or_default();
        assert_eq!(parsed.bias, [0.5, 0.0, -1.0, 2.0]);
        assert_eq!(parsed.learned, [true, false, false, true]);
        assert_eq!(parsed.weights.get("n:get"), Some(&[1.25, -0.5, 0.0, 0.0]));
        assert!(!parsed.weights.contains_key("n:zero"));
    }

    #[test]
    fn a_broken_table_is_an_error() {
        assert_eq!(LinearModel::parse("n:get\t1\t2\t3").map_err(|error| error.line), Err(1));
        assert_eq!(
            LinearModel::parse("# c\nn:get\t1\tx\t3\t4").map_err(|error| error.problem),
            Err("a weight is not a number")
        );
        assert!(LinearModel::parse("n:get\tNaN\t0\t0\t0").is_err());
    }
}
