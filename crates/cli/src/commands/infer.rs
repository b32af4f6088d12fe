//! `toolgate infer --corpus FILE.jsonl`: one JSON object per input line with the inferred hints.
//!
//! Labels in the input (`annotations`, `explicit_hints`, ...) are never read: the corpus parser rebuilds each tool
//! without them. A malformed line stops the run with its line number (exit 2).

use std::io::{BufRead, BufReader, Write};

use anyhow::{Context, Result, anyhow};
use serde_json::{Map, Value, json};
use toolgate_core::Hint;
use toolgate_core::corpus::parse_corpus_line;
use toolgate_core::infer::infer_annotations;

use crate::Outcome;
use crate::cli::InferArgs;

pub(crate) fn run(args: InferArgs) -> Result<Outcome> {
    let path = &args.corpus;
    let file = std::fs::File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
    let mut stdout = std::io::BufWriter::new(std::io::stdout().lock());
    for (index, line) in BufReader::new(file).lines().enumerate() {
        let number = index + 1;
        let line = line.with_context(|| format!("{}:{number}: cannot read the line", path.display()))?;
        if line.trim().is_empty() {
            continue;
        }
        let entry = parse_corpus_line(&line).map_err(|error| anyhow!("{}:{number}: {error}", path.display()))?;
        let inference = infer_annotations(&entry.tool);
        let mut inferred = Map::new();
        let mut confidence = Map::new();
        let mut evidence = Map::new();
        for hint in Hint::ALL {
            let guess = inference.get(hint);
            inferred.insert(hint.wire_key().into(), Value::Bool(guess.value));
            confidence.insert(hint.wire_key().into(), json!(round(guess.confidence)));
            evidence.insert(hint.wire_key().into(), serde_json::to_value(&guess.evidence)?);
        }
        let output = json!({
            "server": entry.server,
            "name": entry.name,
            "variant": entry.variant,
            "inferred": inferred,
            "confidence": confidence,
            "evidence": evidence,
        });
        writeln!(stdout, "{output}")?;
    }
    stdout.flush()?;
    Ok(Outcome::Clean)
}

fn round(value: f32) -> f64 {
    (f64::from(value) * 1000.0).round() / 1000.0
}
