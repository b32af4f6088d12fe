//! Inference: every hint guessed from a tool's name, title, description and input schema, with evidence.
//!
//! Deterministic, offline and pure: no IO, no randomness, no model download (the learned weights are compiled in),
//! and never a look at the hint values the server declared (only `annotations.title`, a text like the top-level title, is read). The public contract is
//! [`infer_annotations`] -> [`Inference`]: one [`InferredHint`] per spec hint, each with a value, a confidence in
//! `0.5..=1.0` and the evidence that decided.
//!
//! Pipeline: `signals` reads the tool into tokens and flattened schema properties; `action` finds the head verb
//! of name, title and description; `domain` finds what the tool touches (web, local machine, code, a cloud
//! account, output files); `rules` turns those cues into signed weights per hint; a `Tally` sums them into the
//! rules' score; `model` (a logistic model per hint, trained offline by `cargo xtask train`) weighs the rules'
//! scores with words, verb-object pairs and schema shapes into the value and a calibrated confidence. A stated
//! effect still vetoes `readOnlyHint` after the model. `docs/inference.md` explains the choices and the evaluation.

mod action;
mod cue;
mod domain;
mod effects;
pub mod model;
mod rules;
mod signals;
#[cfg(test)]
mod tests;

use serde::Serialize;

use crate::hints::Hint;
use crate::tool::ToolDefinition;
use crate::words::VerbClass;

/// Where a piece of evidence was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CueSource {
    /// The tool's name.
    Name,
    /// `title` or `annotations.title`.
    Title,
    /// The description.
    Description,
    /// The input schema (property names, types, enums).
    Schema,
    /// No cue applied; a prior for the hint decided.
    Prior,
    /// The learned layer's correction of the rules (`infer::model`).
    Learned,
}

/// One reason an inferred value is what it is.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Evidence {
    /// Where the cue was found.
    pub source: CueSource,
    /// The word, phrase or schema cue as found (e.g. `delete`, `property:url`).
    pub cue: String,
    /// The verb class the cue belongs to, when it is a verb.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub verb_class: Option<VerbClass>,
    /// Signed weight towards `true` (positive) or `false` (negative).
    pub weight: f32,
}

/// The inferred value of one hint.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct InferredHint {
    /// The inferred value.
    pub value: bool,
    /// How sure the engine is, from 0.5 (a coin toss) to 1.0.
    pub confidence: f32,
    /// The cues that decided, strongest first.
    pub evidence: Vec<Evidence>,
}

impl InferredHint {
    /// True when a stated effect or an output file vetoed reading (`Tally::veto`): the tool's own texts say it
    /// writes, whatever else they say.
    pub fn vetoed(&self) -> bool {
        self.evidence.iter().any(|evidence| evidence.cue.ends_with(VETO_MARK))
    }
}

/// The tail of a veto's evidence text (`stated effect "also deletes" (vetoes reading)`), by which
/// [`InferredHint::vetoed`] knows it.
pub(crate) const VETO_MARK: &str = "(vetoes reading)";

/// Inferred values of all four hints for one tool.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Inference {
    /// `readOnlyHint`.
    #[serde(rename = "readOnlyHint")]
    pub read_only: InferredHint,
    /// `destructiveHint`.
    #[serde(rename = "destructiveHint")]
    pub destructive: InferredHint,
    /// `idempotentHint`.
    #[serde(rename = "idempotentHint")]
    pub idempotent: InferredHint,
    /// `openWorldHint`.
    #[serde(rename = "openWorldHint")]
    pub open_world: InferredHint,
}

impl Inference {
    /// The inferred value of one hint.
    pub fn get(&self, hint: Hint) -> &InferredHint {
        match hint {
            Hint::ReadOnly => &self.read_only,
            Hint::Destructive => &self.destructive,
            Hint::Idempotent => &self.idempotent,
            Hint::OpenWorld => &self.open_world,
        }
    }
}

/// Infers every hint of a tool from its name, titles, description and input schema.
///
/// `destructiveHint` and `idempotentHint` are judged as if the tool writes (the spec gives them meaning only when
/// `readOnlyHint` is false); for a tool inferred read-only they still carry their own guess.
pub fn infer_annotations(tool: &ToolDefinition) -> Inference {
    infer_annotations_with(tool, model::LinearModel::builtin())
}

/// [`infer_annotations`] with another learned model: the eval scores each server with a model trained without it.
pub fn infer_annotations_with(tool: &ToolDefinition, model: &model::LinearModel) -> Inference {
    let reading = Reading::of(tool);
    let tallies = reading.tallies();
    let scores = tallies.each_ref().map(Tally::settled_score);
    let [read_only, destructive, idempotent, open_world] = tallies;
    // The learned layer's features cost about as much as a fifth of the rules, and the model speaks only where the
    // rules are unsure (most tools they are not): they are read on the first hint that needs them, then kept.
    let mut features: Option<model::Features> = None;
    let mut learned = |tally: Tally, hint: Hint| {
        let rules = tally.settled_score();
        if !model.learns(hint) || rules.abs() >= model::RULES_DECIDE_AT {
            return tally.finish();
        }
        let features = features.get_or_insert_with(|| reading.features(scores));
        let (logit, parts) = model.logit(features, hint);
        // The model may doubt a read the rules lean to, never turn a write they lean to on a cue into a read: out of
        // sample that was where it let writers through (docs/inference.md). Where the rules found no cue, their
        // write is only the prior's assumption, and a confident model reading decides (issue 15, fifth round).
        if rules <= 0.0 && logit > 0.0 && (tally.has_cues() || logit < model::ALONE_READS_AT) {
            return tally.finish();
        }
        tally.finish_learned(logit, &parts)
    };
    Inference {
        read_only: learned(read_only, Hint::ReadOnly),
        destructive: learned(destructive, Hint::Destructive),
        idempotent: learned(idempotent, Hint::Idempotent),
        open_world: learned(open_world, Hint::OpenWorld),
    }
}

/// The learned layer's features of a tool (what `cargo xtask train` fits the weights on).
pub fn model_features(tool: &ToolDefinition) -> model::Features {
    let reading = Reading::of(tool);
    reading.features(reading.tallies().each_ref().map(Tally::settled_score))
}

/// What the rules read from one tool, kept so the learned layer's features can be read from it later, if at all.
struct Reading {
    signals: signals::Signals,
    actions: Vec<action::Action>,
    domain: domain::Domain,
}

impl Reading {
    fn of(tool: &ToolDefinition) -> Reading {
        let signals = signals::Signals::read(tool);
        let actions = action::actions(&signals);
        let domain = domain::read_domain(&signals, &actions);
        Reading { signals, actions, domain }
    }

    /// The rules' tallies in [`Hint::ALL`] order.
    fn tallies(&self) -> [Tally; 4] {
        let Reading { signals, actions, domain } = self;
        [
            rules::read_only(signals, actions, domain),
            rules::destructive(signals, actions, domain),
            rules::idempotent(signals, actions, domain),
            rules::open_world(signals, actions, domain),
        ]
    }

    /// The learned layer's features; `rule_scores` are the rules' settled scores in [`Hint::ALL`] order.
    fn features(&self, rule_scores: [f32; 4]) -> model::Features {
        model::features(&self.signals, &self.actions, &self.domain, rule_scores)
    }
}

/// How fast confidence grows with the size of the score; calibrated on the development corpus so that a stated
/// confidence roughly matches the share of correct values (see `cargo xtask eval`).
const CONFIDENCE_SCALE: f32 = 3.0;
/// How many of the learned layer's strongest features the evidence names.
const LEARNED_EVIDENCE_SHOWN: usize = 3;
/// Inference never claims certainty: the labels it is checked against are themselves wrong now and then.
const MAX_CONFIDENCE: f32 = 0.98;

/// The most a vetoed score may be: a veto leaves the value `false` with a modest confidence (about 0.64), because
/// the cue that vetoed proves a contradiction in the tool's texts, not which half of it is true.
const VETO_CEILING: f32 = -1.0;
/// The least a veto weighs, even when the other cues already point the same way.
const VETO_WEIGHT: f32 = -3.0;

/// Signed evidence for one hint, summed into a value and a confidence.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Tally {
    prior: f32,
    prior_reason: &'static str,
    evidence: Vec<Evidence>,
    /// A cue that forces the value to `false` whatever the rest says; its weight is set in [`Tally::finish`].
    veto: Option<Evidence>,
}

impl Tally {
    /// Starts from a prior score and the reason for it.
    pub(crate) fn new(prior: f32, prior_reason: &'static str) -> Tally {
        Tally { prior, prior_reason, evidence: Vec::new(), veto: None }
    }

    /// Adds one cue.
    pub(crate) fn add(
        &mut self,
        source: CueSource,
        cue: impl Into<String>,
        verb_class: Option<VerbClass>,
        weight: f32,
    ) {
        if weight != 0.0 {
            self.evidence.push(Evidence { source, cue: cue.into(), verb_class, weight });
        }
    }

    /// Adds a cue that forces the value to `false`: no sum of other cues can outweigh it. The first veto counts;
    /// later ones add nothing (one contradiction is enough).
    pub(crate) fn veto(&mut self, source: CueSource, cue: impl Into<String>, verb_class: Option<VerbClass>) {
        if self.veto.is_none() {
            self.veto = Some(Evidence { source, cue: cue.into(), verb_class, weight: VETO_WEIGHT });
        }
    }

    /// Adds a head verb.
    pub(crate) fn add_verb(&mut self, action: &action::Action, weight: f32) {
        let place = match action.source {
            CueSource::Name => "name",
            CueSource::Title => "title",
            _ => "description",
        };
        // Concatenated, not `format!`: every tool adds a few verbs per hint, and formatting cost more than pushing.
        let mut cue = String::with_capacity(place.len() + action.verb.len() + 8);
        for piece in [place, " verb \"", action.verb.as_str(), "\""] {
            cue.push_str(piece);
        }
        self.add(action.source, cue, Some(action.class), weight);
    }

    /// The signed sum of prior and cues.
    pub(crate) fn score(&self) -> f32 {
        self.prior + self.evidence.iter().map(|evidence| evidence.weight).sum::<f32>()
    }

    /// Whether any cue (or a veto) was found besides the prior.
    pub(crate) fn has_cues(&self) -> bool {
        !self.evidence.is_empty() || self.veto.is_some()
    }

    /// The rules' score once a veto is applied (what [`Tally::finish`] decides on).
    pub(crate) fn settled_score(&self) -> f32 {
        let rest = self.score();
        let rest = if rest.is_finite() { rest } else { 0.0 };
        match self.veto {
            Some(_) => rest + VETO_WEIGHT.min(VETO_CEILING - rest),
            None => rest,
        }
    }

    /// Moves a veto into the evidence with the weight that caps the score.
    fn settle_veto(&mut self) {
        if let Some(mut veto) = self.veto.take() {
            let rest = self.score();
            let rest = if rest.is_finite() { rest } else { 0.0 };
            veto.weight = VETO_WEIGHT.min(VETO_CEILING - rest);
            self.evidence.push(veto);
        }
    }

    /// The rules alone: the value (score above zero), a confidence growing with the score's size, and the evidence,
    /// strongest first.
    pub(crate) fn finish(mut self) -> InferredHint {
        self.settle_veto();
        let score = self.score();
        let score = if score.is_finite() { score } else { 0.0 };
        let confidence = (0.5 + 0.5 * (1.0 - (-score.abs() / CONFIDENCE_SCALE).exp())).clamp(0.5, MAX_CONFIDENCE);
        self.into_hint(score, confidence)
    }

    /// The learned model's verdict: `logit` is its log-odds (the rules' score is one of its inputs), `parts` the
    /// features that moved it most. The value is `logit > 0` and the confidence the model's probability of that
    /// value, which training calibrates. A veto still caps the result, whatever the model learned: a confession
    /// is not a matter of statistics. The evidence keeps the rules' cues and adds the model's correction, so the
    /// weights still sum to the score.
    pub(crate) fn finish_learned(mut self, logit: f32, parts: &[(String, f32)]) -> InferredHint {
        let vetoed = self.veto.is_some();
        self.settle_veto();
        let logit = if logit.is_finite() { logit } else { 0.0 };
        let score = if vetoed { logit.min(VETO_CEILING) } else { logit };
        let correction = score - self.score();
        if correction.is_finite() && correction != 0.0 {
            let strongest: Vec<String> = parts
                .iter()
                .filter(|(name, _)| !name.starts_with("rule:"))
                .take(LEARNED_EVIDENCE_SHOWN)
                .map(|(name, part)| format!("{name} {part:+.2}"))
                .collect();
            let cue = if strongest.is_empty() {
                "learned weighting of the rules".to_owned()
            } else {
                format!("learned weights ({})", strongest.join(", "))
            };
            self.evidence.push(Evidence { source: CueSource::Learned, cue, verb_class: None, weight: correction });
        }
        let probability = 1.0 / (1.0 + (-score.abs()).exp());
        let confidence = if probability.is_finite() { probability.clamp(0.5, MAX_CONFIDENCE) } else { 0.5 };
        self.into_hint(score, confidence)
    }

    fn into_hint(mut self, score: f32, confidence: f32) -> InferredHint {
        // Stable sort: ties keep the order the rules added them in, so output is deterministic.
        self.evidence.sort_by(|left, right| right.weight.abs().total_cmp(&left.weight.abs()));
        self.evidence.push(Evidence {
            source: CueSource::Prior,
            cue: self.prior_reason.to_owned(),
            verb_class: None,
            weight: self.prior,
        });
        InferredHint { value: score > 0.0, confidence, evidence: self.evidence }
    }
}
