//! toolgate's pure core: what a tool's annotations say, what they should say, and why.
//!
//! Everything here is a function of its inputs: no IO, no async, no clocks, no randomness. The runtime crates
//! (`upstream`, the CLI, later the proxy and store) feed raw JSON in and act on the data that comes out.
//!
//! Principal types:
//! - [`ToolDefinition`]: one tool as raw JSON (every field survives), with typed accessors.
//! - [`normalize::normalize_annotations`] reads declared hints (spec keys, vendor spellings, string booleans)
//!   into [`DeclaredHints`] plus [`normalize::NormalizationFinding`]s.
//! - [`infer::infer_annotations`] guesses every hint from name, title, description and schema, with evidence.
//! - [`effective::resolve_hints`] merges overrides, declarations, inference and spec defaults into
//!   [`EffectiveHints`], recording the [`HintSource`] of each value.
//! - [`facts`] turns effective hints into what a client UI shows: category, risk level, action phrase, title.
//! - [`fingerprint::fingerprint_tool`] hashes the RFC 8785 canonical form of a definition, whole and per field.
//! - [`lint::lint_tool`] checks declarations against a catalogue of rules with stable codes.
//! - [`display`] escapes upstream- and model-controlled text for a person (terminal, log, HTML, questions).
//!
//! ```
//! use toolgate_core::{ToolDefinition, assess_tool, HintSource};
//! let tool = ToolDefinition::from_value(serde_json::json!({
//!     "name": "delete_customer",
//!     "description": "Permanently deletes a customer record.",
//!     "inputSchema": {"type": "object", "properties": {"id": {"type": "string"}}}
//! })).unwrap();
//! let assessment = assess_tool(&tool, &Default::default());
//! assert!(!assessment.effective.read_only.value);
//! assert_eq!(assessment.effective.read_only.source, HintSource::Inferred);
//! ```

pub mod assess;
pub mod confusable;
pub mod corpus;
pub mod decision;
pub mod definition_diff;
pub mod display;
pub mod effective;
pub mod facts;
pub mod fingerprint;
pub mod hints;
pub mod infer;
pub mod jcs;
pub mod lint;
pub mod manifest;
pub mod normalize;
pub mod policy;
pub mod presets;
pub mod rebinding;
pub mod safety_prompt;
pub mod tool;
pub mod trust;
pub mod words;

pub use assess::{Assessment, assess_tool, assess_tool_with};
pub use effective::{EffectiveHint, EffectiveHints, HintOverrides, resolve_hints};
pub use hints::{DeclaredHints, Hint, HintSource};
pub use tool::{ToolDefinition, ToolDefinitionError};
