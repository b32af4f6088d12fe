//! Project automation, run as `cargo xtask <command>`.
//!
//! - `tidy`: checks the conventions (module docs, crate layering, file length, one feature set for the binary).
//! - `eval`: scores inference on labelled corpora next to the baseline verb map, and the trust rule and the
//!   standard policy built on it; `--check` holds each corpus to `xtask/eval-thresholds.toml`.
//! - `train`: fits inference's learned layer on the labelled corpora and writes its checked-in weights.
//! - `infer-cost`: times inference per tool over a corpus (the release driver of the cost figures) and, with
//!   `--dump`, writes every inference in full to compare before and after a change.
//! - `lint-eval`: measures lint on a labelled corpus (flagged mis-declarations, false-alarm rate).
//! - `test`: installs the real peers into `.cache/` and runs every test.
//! - `screenshots`: runs the console's browser tests with screenshots on, into `docs/screenshots/`.
//!
//! xtask is the imperative shell around the project; it never ships in the `toolgate` binary.

// A command-line tool: printing its results is its job.
#![allow(clippy::print_stdout)]

mod eval;
mod eval_base;
mod eval_check;
mod eval_convention;
mod eval_observed;
mod eval_trust;
mod features;
mod infer_cost;
mod lint_eval;
mod screenshots;
mod test_run;
mod tidy;
mod tidy_layers;
mod tidy_map;
mod train;

use anyhow::{Result, bail};

fn main() -> Result<()> {
    let mut args = std::env::args().skip(1);
    let command = args.next().unwrap_or_default();
    let rest: Vec<String> = args.collect();
    match command.as_str() {
        "tidy" => tidy::run(&rest),
        "train" => train::run(&rest),
        "eval" => eval::run(&rest),
        "infer-cost" => infer_cost::run(&rest),
        "lint-eval" => lint_eval::run(&rest),
        "test" => test_run::run(&rest),
        "screenshots" => screenshots::run(&rest),
        _ => bail!("usage: cargo xtask <tidy|eval|train|infer-cost|lint-eval|test|screenshots> [options]"),
    }
}
