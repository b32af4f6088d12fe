//! The `toolgate` binary builds with the same dependency features as the whole workspace.
//!
//! Cargo unifies features over the packages a command selects, so a feature that only a test peer (the fixture, the
//! bench) turns on made `cargo run --release -p toolgate` rebuild that dependency and everything above it after
//! `cargo build --release --workspace`: two trees for one binary, and minutes of a 2-core machine. The cure is to
//! name such features once in `[workspace.dependencies]`; this check keeps it cured. It compares what
//! `cargo tree` resolves for `-p toolgate` with what it resolves for `--workspace`, package by package, for the
//! packages both contain, for the host. It reads the lock file offline and builds nothing.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use anyhow::{Context, Result, bail};

/// The package the README's run command builds.
const BINARY_PACKAGE: &str = "toolgate";

/// One line per package where the binary's features differ from the workspace's.
pub(crate) fn check(root: &Path) -> Result<Vec<String>> {
    let binary = resolved_features(root, &["-p", BINARY_PACKAGE])?;
    let workspace = resolved_features(root, &["--workspace"])?;
    let mut problems = Vec::new();
    for (package, features) in &binary {
        match workspace.get(package) {
            Some(workspace_features) if workspace_features == features => {}
            Some(workspace_features) => problems.push(format!(
                "{package}: `-p {BINARY_PACKAGE}` builds it with [{features}] but `--workspace` with \
                 [{workspace_features}], so one of the two commands rebuilds it: name the missing features in \
                 [workspace.dependencies]"
            )),
            None => problems.push(format!("{package}: in `-p {BINARY_PACKAGE}`'s tree but not in the workspace's")),
        }
    }
    Ok(problems)
}

/// Package (`name version`) → its enabled features, for the packages that `selection` builds.
fn resolved_features(root: &Path, selection: &[&str]) -> Result<BTreeMap<String, String>> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let output = Command::new(cargo)
        .current_dir(root)
        // The host's tree only (cargo tree's default target): the rebuild this guards against happens on the machine
        // that runs the README's commands, and `--target all` would need the sources of every other platform's
        // dependencies, which an offline machine that only built for itself does not have.
        .args(["tree", "--offline", "--locked", "-e", "normal,build", "--prefix", "none"])
        .args(["-f", "{p}|{f}"])
        .args(selection)
        .output()
        .context("cannot run `cargo tree`")?;
    if !output.status.success() {
        bail!("`cargo tree {}` failed: {}", selection.join(" "), String::from_utf8_lossy(&output.stderr).trim());
    }
    Ok(parse_tree(&String::from_utf8_lossy(&output.stdout)))
}

/// Parses `name vX (source)|features` lines; a package seen twice (cargo marks repeats with `(*)`) keeps one entry.
fn parse_tree(text: &str) -> BTreeMap<String, String> {
    let mut packages = BTreeMap::new();
    for line in text.lines() {
        let line = line.trim_end().trim_end_matches(" (*)");
        let Some((package, features)) = line.split_once('|') else { continue };
        // The path of a workspace member is not part of its identity here: worktrees differ only in it.
        let identity: Vec<&str> = package.split_whitespace().take(2).collect();
        if identity.len() == 2 {
            packages.insert(identity.join(" "), features.trim().to_owned());
        }
    }
    packages
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_binary_builds_with_the_workspace_features() -> Result<()> {
        let problems = check(&crate::tidy::workspace_root())?;
        assert!(problems.is_empty(), "feature sets differ:\n{}", problems.join("\n"));
        Ok(())
    }

    #[test]
    fn tree_lines_parse_into_packages_and_features() {
        let parsed = parse_tree("rmcp v3.11.0|base64,server\nrmcp v3.11.0|base64,server (*)\nx v1.0.0 (/a/b)|\n");
        assert_eq!(parsed.get("rmcp v3.11.0").map(String::as_str), Some("base64,server"));
        assert_eq!(parsed.get("x v1.0.0").map(String::as_str), Some(""));
        assert_eq!(parsed.len(), 2);
    }
}
