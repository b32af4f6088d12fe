//! Inference: every hint guessed from a tool's name, title, description and input schema, with evidence.
//!
//! Deterministic and offline. The public contract is [`infer_annotations`] -> [`Inference`]: one
//! [`InferredHint`] per spec hint, each with a value, a confidence in `0.5..=1.0` and the evidence that decided.

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

/// Infers every hint of a tool from its texts and schema.
pub fn infer_annotations(tool: &ToolDefinition) -> Inference {
    // Placeholder until the engine lands: spec defaults with no evidence.
    let prior = |hint: Hint| InferredHint { value: hint.spec_default(), confidence: 0.5, evidence: Vec::new() };
    let _ = tool;
    Inference {
        read_only: prior(Hint::ReadOnly),
        destructive: prior(Hint::Destructive),
        idempotent: prior(Hint::Idempotent),
        open_world: prior(Hint::OpenWorld),
    }
}
