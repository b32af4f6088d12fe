//! `toolgate check-config FILE` and `toolgate import PATH`: config validation and conversion, no running.
//!
//! Both print to stdout and fail with exit 2 and every problem (file:line:column: what is wrong) on stderr.

use std::io::Write;

use anyhow::{Result, anyhow};

use crate::Outcome;
use crate::cli::{CheckConfigArgs, ImportArgs};

pub(crate) fn check(args: CheckConfigArgs) -> Result<Outcome> {
    let summary = toolgate_config::check_config(&args.file).map_err(|error| anyhow!("{error}"))?;
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "{summary}")?;
    Ok(Outcome::Clean)
}

pub(crate) fn import(args: ImportArgs) -> Result<Outcome> {
    let text = toolgate_config::import_config(&args.path).map_err(|error| anyhow!("{error}"))?;
    let mut stdout = std::io::stdout().lock();
    stdout.write_all(text.as_bytes())?;
    Ok(Outcome::Clean)
}
