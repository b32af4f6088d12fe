//! What every `cargo xtask eval` report and `cargo xtask train` share, below all of them: where the corpora are, the
//! tool as inference sees it, which labels count, one scored tool, and how a figure is computed and printed. Nothing
//! here reads options, scores a corpus or prints a table; the eval modules and training import it, never the
//! other way.

use std::path::PathBuf;

use anyhow::{Context, Result};
use toolgate_core::corpus::CorpusEntry;
use toolgate_core::{DeclaredHints, Hint, ToolDefinition};

/// Which learned layer scores a tool.
#[derive(Default, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ModelChoice {
    /// Leave-one-server-out: each server scored by a model trained on every other server (the honest figure).
    #[default]
    Loso,
    /// The rules alone, as before the learned layer.
    Rules,
    /// The checked-in weights (in-sample for every training corpus).
    Builtin,
}

/// One tool with its labels and both guesses.
pub(crate) struct Scored {
    pub(crate) server: String,
    pub(crate) name: String,
    pub(crate) labels: DeclaredHints,
    /// Per hint: the inferred value and its confidence.
    pub(crate) engine: [(bool, f32); 4],
    pub(crate) baseline: [bool; 4],
    /// The stated-effect veto (or an output file) capped `readOnlyHint`.
    pub(crate) vetoed: bool,
}

/// The repository root (the workspace above `xtask/`).
pub(crate) fn workspace_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The shared development corpus and every `corpus/*.jsonl` in the repository, sorted.
pub(crate) fn default_corpora() -> Result<Vec<PathBuf>> {
    let mut paths = vec![workspace_root().join("../shared/corpus/dev.jsonl")];
    let grown = workspace_root().join("corpus");
    if grown.is_dir() {
        let mut found: Vec<PathBuf> = std::fs::read_dir(&grown)
            .with_context(|| format!("listing {}", grown.display()))?
            .filter_map(|entry| entry.ok().map(|entry| entry.path()))
            .filter(|path| path.extension().is_some_and(|extension| extension == "jsonl"))
            .collect();
        found.sort();
        paths.extend(found);
    }
    Ok(paths)
}

/// The tool as a client would see it, minus every hint: `annotations.title` is a text that inference may read
/// (many servers put their only title there), so it is put back; the hint labels never are.
pub(crate) fn tool_with_title(entry: &CorpusEntry) -> ToolDefinition {
    let Some(title) = &entry.labels.title else { return entry.tool.clone() };
    let mut raw = entry.tool.raw().clone();
    raw.insert("annotations".into(), serde_json::json!({ "title": title }));
    ToolDefinition::from_map(raw).unwrap_or_else(|_| entry.tool.clone())
}

/// `part / whole`, none for an empty whole.
pub(crate) fn ratio(part: usize, whole: usize) -> Option<f64> {
    (whole > 0).then(|| part as f64 / whole as f64)
}

/// Whether a hint's label counts for a tool, and its value.
pub(crate) fn label(labels: &DeclaredHints, hint: Hint) -> Option<bool> {
    match hint {
        Hint::Destructive | Hint::Idempotent if labels.read_only != Some(false) => None,
        _ => labels.get(hint),
    }
}

/// A figure as the tables print it: three decimals, `-` for none.
pub(crate) fn show(value: Option<f64>) -> String {
    value.map_or_else(|| "-".to_owned(), |value| format!("{value:.3}"))
}

/// `readOnly`, `destructive`, `idempotent`, `openWorld`: the names thresholds and tables use.
pub(crate) fn short_name(hint: Hint) -> &'static str {
    hint.wire_key().trim_end_matches("Hint")
}
