//! Placeholder for `cargo xtask lint_eval`; filled in by its owner.

use anyhow::{Result, bail};

pub(crate) fn run(_args: &[String]) -> Result<()> {
    bail!("not implemented yet")
}
