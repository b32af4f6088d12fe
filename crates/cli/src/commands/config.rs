//! `toolgate check-config FILE` and `toolgate import PATH`: config validation and conversion, no running.
//!
//! Both print to stdout and fail with exit 2 and every problem (file:line:column: what is wrong) on stderr.
//! `check-config --deny warnings` also exits 1 when the file only has warnings.

use std::io::Write;

use anyhow::{Result, anyhow};

use crate::Outcome;
use crate::cli::{CheckConfigArgs, ConfigDeny, ImportArgs};

pub(crate) fn check(args: CheckConfigArgs) -> Result<Outcome> {
    let summary = toolgate_config::check_config(&args.file).map_err(|error| anyhow!("{error}"))?;
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "{summary}")?;
    // The summary lists the warnings; with `--deny warnings` they fail the check (exit 1), as lint findings do.
    if args.deny == Some(ConfigDeny::Warnings) && !summary.warnings.is_empty() {
        return Ok(Outcome::Findings);
    }
    Ok(Outcome::Clean)
}

pub(crate) fn import(args: ImportArgs) -> Result<Outcome> {
    let text = toolgate_config::import_config(&args.path).map_err(|error| anyhow!("{error}"))?;
    let mut stdout = std::io::stdout().lock();
    stdout.write_all(text.as_bytes())?;
    Ok(Outcome::Clean)
}
