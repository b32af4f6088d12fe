//! Placeholder for `cargo xtask tidy`; filled in by its owner.

use anyhow::{Result, bail};

pub(crate) fn run(_args: &[String]) -> Result<()> {
    bail!("not implemented yet")
}
