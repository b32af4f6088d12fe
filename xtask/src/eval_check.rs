//! `cargo xtask eval --check`: holds each corpus's figures to the floors and ceilings recorded for it in
//! `xtask/eval-thresholds.toml`, keyed by the corpus file's name.
//!
//! The thresholds are today's measured values (or the targets where those are met), so CI catches a
//! regression; they are not goals. A corpus with no entry is scored and reported but not held to anything (a new
//! corpus file must not break CI before someone has measured it); a threshold naming a figure that does not exist
//! is an error, so a typo cannot switch a check off. Reads one small file; decides nothing about tools.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, Result, bail};
use serde::Deserialize;

/// The thresholds file, relative to the workspace root.
const THRESHOLDS: &str = "xtask/eval-thresholds.toml";

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Thresholds {
    corpus: BTreeMap<String, Limits>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Limits {
    /// Why these values (in-sample or not, measured when).
    #[serde(default)]
    #[allow(dead_code, reason = "documentation for the reader of the file")]
    note: String,
    /// How many tools the corpus had when the values were recorded: a corpus that has grown since gives other
    /// figures for other reasons, so it is reported, not held to stale values, until someone records it again.
    tools: usize,
    /// Figures that must stay at or above the value.
    #[serde(default)]
    min: BTreeMap<String, f64>,
    /// Figures that must stay at or below the value.
    #[serde(default)]
    max: BTreeMap<String, f64>,
}

/// True for figures where lower is better (leaks, unsafe allows, needless confirmations).
fn lower_is_better(name: &str) -> bool {
    name.ends_with("writers_inferred_read_only") || name.starts_with("decision.")
}

/// Prints today's figures of the corpus at `path` as a thresholds section (floors rounded down, ceilings up, to
/// three places), for recording a new corpus or a deliberate change.
pub(crate) fn print_record(path: &Path, tools: usize, figures: &[(String, Option<f64>)]) {
    let key = path.file_name().map(|name| name.to_string_lossy().into_owned()).unwrap_or_default();
    println!("-- thresholds at today's values (for {THRESHOLDS}) --");
    println!("[corpus.\"{key}\"]");
    println!("tools = {tools}");
    for (table, lower) in [("min", false), ("max", true)] {
        println!("[corpus.\"{key}\".{table}]");
        for (name, value) in figures {
            if lower_is_better(name) != lower {
                continue;
            }
            if let Some(value) = value {
                let rounded = if lower { (value * 1000.0).ceil() } else { (value * 1000.0).floor() } / 1000.0;
                println!("\"{name}\" = {rounded:.3}");
            }
        }
    }
    println!();
}

/// Checks `figures` (name, value) of the corpus at `path`, which has `tools` tools; errors name every missed
/// threshold.
pub(crate) fn check(path: &Path, tools: usize, figures: &[(String, Option<f64>)]) -> Result<()> {
    let file = crate::eval_base::workspace_root().join(THRESHOLDS);
    let text = std::fs::read_to_string(&file).with_context(|| format!("reading {}", file.display()))?;
    let thresholds: Thresholds = toml::from_str(&text).with_context(|| format!("parsing {}", file.display()))?;
    let key = path.file_name().map(|name| name.to_string_lossy().into_owned()).unwrap_or_default();
    let Some(limits) = thresholds.corpus.get(&key) else {
        println!("no thresholds recorded for `{key}` in {THRESHOLDS}: reported, not checked\n");
        return Ok(());
    };
    if limits.tools != tools {
        println!(
            "thresholds for `{key}` were recorded on {} tools; it has {tools} now: reported, not checked (record \
             them again with `cargo xtask eval --corpus {} --record`)\n",
            limits.tools,
            path.display()
        );
        return Ok(());
    }
    let figure = |name: &str| -> Result<Option<f64>> {
        figures
            .iter()
            .find(|(each, _)| each == name)
            .map(|(_, value)| *value)
            .with_context(|| format!("{THRESHOLDS}: `{key}` names an unknown figure `{name}`"))
    };
    let mut missed = Vec::new();
    for (name, floor) in &limits.min {
        let value = figure(name)?;
        if !value.is_some_and(|value| value >= *floor - 1e-9) {
            missed.push(format!("{name} = {} (min {floor})", crate::eval_base::show(value)));
        }
    }
    for (name, ceiling) in &limits.max {
        let value = figure(name)?;
        if !value.is_some_and(|value| value <= *ceiling + 1e-9) {
            missed.push(format!("{name} = {} (max {ceiling})", crate::eval_base::show(value)));
        }
    }
    if !missed.is_empty() {
        bail!("thresholds missed on {}: {}", path.display(), missed.join("; "));
    }
    println!("all {} thresholds for `{key}` met\n", limits.min.len() + limits.max.len());
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::*;

    /// The recorded thresholds parse and name only figures the eval computes, so a typo cannot switch a check off
    /// even where no corpus file is at hand.
    #[test]
    fn the_recorded_thresholds_name_known_figures() {
        let text = std::fs::read_to_string(crate::eval_base::workspace_root().join(THRESHOLDS)).unwrap();
        let thresholds: Thresholds = toml::from_str(&text).unwrap();
        let known = crate::eval::figure_names();
        assert!(thresholds.corpus.contains_key("dev.jsonl"));
        for (corpus, limits) in &thresholds.corpus {
            for name in limits.min.keys().chain(limits.max.keys()) {
                assert!(known.contains(name), "{corpus}: unknown figure {name}; known: {known:?}");
            }
            for name in limits.max.keys() {
                assert!(lower_is_better(name), "{corpus}: {name} has a ceiling but higher is better");
            }
        }
    }

    #[test]
    fn a_missed_threshold_is_an_error_and_an_unknown_figure_too() {
        let path = Path::new("dev.jsonl");
        let mut figures: Vec<(String, Option<f64>)> =
            crate::eval::figure_names().into_iter().map(|name| (name, Some(1.0))).collect();
        for (name, value) in &mut figures {
            if lower_is_better(name) {
                *value = Some(0.0);
            }
        }
        let tools = thresholds_for_dev_tools();
        check(path, tools, &figures).unwrap();
        let worse: Vec<(String, Option<f64>)> = figures
            .iter()
            .map(|(name, value)| (name.clone(), if name == "readOnly.accuracy" { Some(0.5) } else { *value }))
            .collect();
        let error = check(path, tools, &worse).unwrap_err().to_string();
        assert!(error.contains("readOnly.accuracy = 0.500"), "{error}");
        let error = check(path, tools, &figures[1..]).unwrap_err().to_string();
        assert!(error.contains("unknown figure"), "{error}");
        // A corpus of another size is not held to stale values.
        check(path, tools + 1, &worse).unwrap();
    }

    fn thresholds_for_dev_tools() -> usize {
        let text = std::fs::read_to_string(crate::eval_base::workspace_root().join(THRESHOLDS)).unwrap();
        let thresholds: Thresholds = toml::from_str(&text).unwrap();
        thresholds.corpus["dev.jsonl"].tools
    }
}
