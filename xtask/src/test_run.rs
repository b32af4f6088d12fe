//! Placeholder for `cargo xtask test_run`; filled in by its owner.

use anyhow::{Result, bail};

pub(crate) fn run(_args: &[String]) -> Result<()> {
    bail!("not implemented yet")
}
