//! `cargo xtask infer-cost`: how long inference takes per tool, over a labelled corpus, with the rules alone and
//! with the learned layer; and, with `--dump`, every inference in full, so that a change meant only to make
//! inference faster can be shown to change no result (dump before, dump after, compare the files).
//!
//! Built in release (`cargo build --release -p xtask`) it is the driver the cost figures in docs/inference.md come
//! from: it needs nothing but its binary and the corpus file, so it runs from a copied tree on another machine, and
//! under `valgrind --tool=callgrind` it gives instruction counts, which a loaded machine does not disturb. It only
//! reads the corpus and times `toolgate_core::infer`; it judges nothing and must not change what it measures.

#![allow(clippy::print_stdout)]

use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Context, Result, bail};
use toolgate_core::ToolDefinition;
use toolgate_core::infer::model::LinearModel;
use toolgate_core::infer::{infer_annotations_with, model_features};

const USAGE: &str = "usage: cargo xtask infer-cost [--corpus PATH] [--passes N] [--dump PATH] [--only rules|learned]";
/// Timed passes over the corpus per model when `--passes` is not given: enough for a stable median, few enough
/// that a run takes seconds.
const DEFAULT_PASSES: usize = 5;

struct Options {
    corpus: PathBuf,
    passes: usize,
    dump: Option<PathBuf>,
    /// Run only this model's passes (no warm-up pass, no line printed): under callgrind, instructions per tool are
    /// then the count of `infer_annotations_with` divided by passes times tools.
    only: Option<String>,
}

pub(crate) fn run(args: &[String]) -> Result<()> {
    let options = parse_options(args)?;
    let entries = crate::train::read_corpus(&options.corpus)?;
    // The tools exactly as the eval scores them (hints stripped, `annotations.title` kept).
    let tools: Vec<ToolDefinition> = entries.iter().map(crate::eval_base::tool_with_title).collect();
    if tools.is_empty() {
        bail!("{} holds no tools", options.corpus.display());
    }
    let rules = LinearModel::rules_only();
    let learned = LinearModel::builtin();
    if let Some(path) = &options.dump {
        dump(path, &entries, &tools, &rules, learned)?;
    }
    if let Some(only) = options.only.as_deref() {
        let model = match only {
            "rules" => &rules,
            "learned" => learned,
            other => bail!("--only takes rules or learned, not {other}\n{USAGE}"),
        };
        for _ in 0..options.passes {
            pass(&tools, model);
        }
        return Ok(());
    }
    // One untimed pass parses the built-in weights and warms caches, so the first timed pass is not an outlier.
    pass(&tools, learned);
    let rules_alone = median_per_tool(&tools, &rules, options.passes);
    let with_learned = median_per_tool(&tools, learned, options.passes);
    println!(
        "inference: {} tools, {rules_alone:.1} µs per tool (rules alone), {with_learned:.1} µs (with the learned layer)",
        tools.len()
    );
    Ok(())
}

fn parse_options(args: &[String]) -> Result<Options> {
    let mut options =
        Options { corpus: PathBuf::from("corpus/grown.jsonl"), passes: DEFAULT_PASSES, dump: None, only: None };
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        let mut value = || args.next().with_context(|| format!("{arg} needs a value\n{USAGE}"));
        match arg.as_str() {
            "--corpus" => options.corpus = PathBuf::from(value()?),
            "--passes" => options.passes = value()?.parse().with_context(|| format!("--passes\n{USAGE}"))?,
            "--dump" => options.dump = Some(PathBuf::from(value()?)),
            "--only" => options.only = Some(value()?.clone()),
            _ => bail!("unknown argument {arg}\n{USAGE}"),
        }
    }
    if options.passes == 0 {
        bail!("--passes must be at least 1\n{USAGE}");
    }
    Ok(options)
}

/// Infers every tool once; `black_box` keeps the optimiser from dropping work whose result is unused.
fn pass(tools: &[ToolDefinition], model: &LinearModel) {
    for tool in tools {
        std::hint::black_box(infer_annotations_with(std::hint::black_box(tool), model));
    }
}

/// The median over `passes` timed passes of the wall-clock microseconds per tool: the median, because on a shared
/// machine a pass now and then loses the core to another process.
fn median_per_tool(tools: &[ToolDefinition], model: &LinearModel, passes: usize) -> f64 {
    let mut figures: Vec<f64> = (0..passes)
        .map(|_| {
            let started = Instant::now();
            pass(tools, model);
            started.elapsed().as_secs_f64() * 1e6 / tools.len() as f64
        })
        .collect();
    figures.sort_by(f64::total_cmp);
    figures[figures.len() / 2]
}

/// One JSON line per tool: its server and name, the inference with the learned layer and with the rules alone
/// (values, confidences and evidence as serialised), and the learned layer's features.
fn dump(
    path: &PathBuf,
    entries: &[toolgate_core::corpus::CorpusEntry],
    tools: &[ToolDefinition],
    rules: &LinearModel,
    learned: &LinearModel,
) -> Result<()> {
    let file = std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?;
    let mut out = std::io::BufWriter::new(file);
    for (entry, tool) in entries.iter().zip(tools) {
        let line = serde_json::json!({
            "server": entry.server,
            "name": entry.name,
            "learned": infer_annotations_with(tool, learned),
            "rules": infer_annotations_with(tool, rules),
            "features": model_features(tool).entries(),
        });
        writeln!(out, "{line}").with_context(|| format!("writing {}", path.display()))?;
    }
    out.flush().with_context(|| format!("writing {}", path.display()))
}
