//! Inference: every hint guessed from a tool's name, title, description and input schema, with evidence.
//!
//! Deterministic, offline and pure: no IO, no randomness, no model download, and never a look at the hint values the
//! server declared (only `annotations.title`, a text like the top-level title, is read). The public contract is
//! [`infer_annotations`] -> [`Inference`]: one [`InferredHint`] per spec hint, each with a value, a confidence in
//! `0.5..=1.0` and the evidence that decided.
//!
//! Pipeline: `signals` reads the tool into tokens and flattened schema properties; `action` finds the head verb
//! of name, title and description; `domain` finds what the tool touches (web, local machine, code, a cloud
//! account, output files); `rules` turns those cues into signed weights per hint; a `Tally` sums them into a
//! value and a confidence. `docs/inference.md` explains the choices and the evaluation.

mod action;
mod cue;
mod domain;
mod effects;
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
    let signals = signals::Signals::read(tool);
    let actions = action::actions(&signals);
    let domain = domain::read_domain(&signals, &actions);
    Inference {
        read_only: rules::read_only(&signals, &actions, &domain).finish(),
        destructive: rules::destructive(&signals, &actions, &domain).finish(),
        idempotent: rules::idempotent(&signals, &actions, &domain).finish(),
        open_world: rules::open_world(&signals, &actions, &domain).finish(),
    }
}

/// How fast confidence grows with the size of the score; calibrated on the development corpus so that a stated
/// confidence roughly matches the share of correct values (see `cargo xtask eval`).
const CONFIDENCE_SCALE: f32 = 3.0;
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
        self.add(action.source, format!("{place} verb \"{}\"", action.verb), Some(action.class), weight);
    }

    /// The signed sum of prior and cues.
    pub(crate) fn score(&self) -> f32 {
        self.prior + self.evidence.iter().map(|evidence| evidence.weight).sum::<f32>()
    }

    /// The value (score above zero), a confidence growing with the score's size, and the evidence, strongest first.
    pub(crate) fn finish(mut self) -> InferredHint {
        if let Some(mut veto) = self.veto.take() {
            let rest = self.score();
            let rest = if rest.is_finite() { rest } else { 0.0 };
            veto.weight = VETO_WEIGHT.min(VETO_CEILING - rest);
            self.evidence.push(veto);
        }
        let score = self.score();
        let score = if score.is_finite() { score } else { 0.0 };
        let confidence = (0.5 + 0.5 * (1.0 - (-score.abs() / CONFIDENCE_SCALE).exp())).clamp(0.5, MAX_CONFIDENCE);
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
