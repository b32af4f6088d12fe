//! `cargo xtask tidy`: the conventions that review should not have to catch, checked mechanically.
//!
//! - Every Rust file opens with a `//!` paragraph (what it does and what it must not do).
//! - Crates depend on each other only downwards, as ARCHITECTURE.md draws it (`ALLOWED_EDGES`).
//! - The core stays pure: its dependencies are limited to data crates (`CORE_DEPENDENCIES`), so no IO or async
//!   can creep in through a dependency.
//! - Inside a crate, module files import each other one way, floor by floor (`crate::tidy_layers`).
//! - Files stay readable: no Rust file over `MAX_LINES` lines.
//! - ARCHITECTURE.md names every module file of the proxy, the store and the binary (`crate::tidy_map`).
//! - `cargo run -p toolgate` after `cargo build --workspace` compiles nothing (`crate::features`).
//!
//! It only reads files; it never rewrites them.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

/// Internal crates each crate may depend on (normal dependencies; dev-dependencies may also use test-support).
const ALLOWED_EDGES: &[(&str, &[&str])] = &[
    ("toolgate-core", &[]),
    ("toolgate-spec", &["toolgate-core"]),
    ("toolgate-upstream", &["toolgate-spec"]),
    ("toolgate-sandbox", &["toolgate-spec"]),
    // Token validation only: the proxy maps what it returns to a caller.
    ("toolgate-auth", &["toolgate-spec"]),
    // Observation only: the records it produces are stored by the binary.
    ("toolgate-verify", &["toolgate-core", "toolgate-upstream", "toolgate-sandbox"]),
    ("toolgate-demo", &[]),
    // Optional, behind its `store` and `gateway` features: the fixtures and the client that tests share.
    ("toolgate-test-support", &["toolgate-store", "toolgate-proxy"]),
    ("toolgate-fixture", &[]),
    ("toolgate-bench", &[]),
    ("toolgate-store", &["toolgate-core"]),
    (
        "toolgate-proxy",
        &["toolgate-core", "toolgate-spec", "toolgate-upstream", "toolgate-store", "toolgate-sandbox", "toolgate-auth"],
    ),
    ("toolgate-config", &["toolgate-core", "toolgate-spec"]),
    ("toolgate-web", &["toolgate-core", "toolgate-store", "toolgate-spec", "toolgate-auth"]),
    (
        "toolgate",
        &[
            "toolgate-core",
            "toolgate-spec",
            "toolgate-upstream",
            "toolgate-sandbox",
            "toolgate-demo",
            "toolgate-proxy",
            "toolgate-config",
            "toolgate-store",
            "toolgate-web",
            "toolgate-verify",
        ],
    ),
    ("xtask", &["toolgate-core"]),
];

/// Everything the pure core may depend on.
const CORE_DEPENDENCIES: &[&str] = &["serde", "serde_json", "serde_json_canonicalizer", "sha2", "thiserror"];

/// Longest Rust file allowed.
const MAX_LINES: usize = 700;

pub(crate) fn run(_args: &[String]) -> Result<()> {
    let root = workspace_root();
    let mut problems = check(&root)?;
    problems.extend(crate::features::check(&root)?);
    if problems.is_empty() {
        println!("tidy: ok");
        return Ok(());
    }
    for problem in &problems {
        eprintln!("tidy: {problem}");
    }
    bail!("{} tidy problem(s)", problems.len())
}

pub(crate) fn workspace_root() -> PathBuf {
    let manifest_dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    manifest_dir.parent().map(Path::to_path_buf).unwrap_or(manifest_dir)
}

/// Every problem found under `root`, as one line each.
pub(crate) fn check(root: &Path) -> Result<Vec<String>> {
    let mut problems = Vec::new();
    for directory in ["crates", "xtask", "fuzz"] {
        let mut files = Vec::new();
        collect_rust_files(&root.join(directory), &mut files)?;
        for file in files {
            check_rust_file(root, &file, &mut problems)?;
        }
    }
    check_layering(root, &mut problems)?;
    problems.extend(crate::tidy_layers::check(root)?);
    problems.extend(crate::tidy_map::check(root)?);
    Ok(problems)
}

fn collect_rust_files(directory: &Path, files: &mut Vec<PathBuf>) -> Result<()> {
    if !directory.is_dir() {
        return Ok(());
    }
    for entry in std::fs::read_dir(directory).with_context(|| format!("cannot list {}", directory.display()))? {
        let path = entry?.path();
        let name = path.file_name().and_then(|name| name.to_str()).unwrap_or_default();
        if path.is_dir() {
            if !matches!(name, "target" | "snapshots" | "node_modules") && !name.starts_with('.') {
                collect_rust_files(&path, files)?;
            }
        } else if name.ends_with(".rs") {
            files.push(path);
        }
    }
    files.sort();
    Ok(())
}

fn check_rust_file(root: &Path, file: &Path, problems: &mut Vec<String>) -> Result<()> {
    let text = std::fs::read_to_string(file).with_context(|| format!("cannot read {}", file.display()))?;
    let shown = file.strip_prefix(root).unwrap_or(file).display().to_string();
    let first = text.lines().find(|line| !line.trim().is_empty()).unwrap_or_default();
    if !first.starts_with("//!") {
        problems.push(format!("{shown}: must start with a `//!` paragraph saying what the file does"));
    }
    let lines = text.lines().count();
    if lines > MAX_LINES {
        problems.push(format!("{shown}: {lines} lines; split it by responsibility (limit {MAX_LINES})"));
    }
    Ok(())
}

fn check_layering(root: &Path, problems: &mut Vec<String>) -> Result<()> {
    let mut manifests = vec![root.join("xtask/Cargo.toml")];
    for entry in std::fs::read_dir(root.join("crates"))? {
        let manifest = entry?.path().join("Cargo.toml");
        if manifest.is_file() {
            manifests.push(manifest);
        }
    }
    manifests.sort();
    for manifest in manifests {
        let text = std::fs::read_to_string(&manifest)?;
        let parsed: toml::Table =
            toml::from_str(&text).with_context(|| format!("{} is not valid TOML", manifest.display()))?;
        let name = parsed
            .get("package")
            .and_then(|package| package.get("name"))
            .and_then(toml::Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let dependencies: Vec<String> = parsed
            .get("dependencies")
            .and_then(toml::Value::as_table)
            .map(|table| table.keys().cloned().collect())
            .unwrap_or_default();
        let Some((_, allowed)) = ALLOWED_EDGES.iter().find(|(crate_name, _)| *crate_name == name) else {
            problems.push(format!("crate `{name}` is not in tidy's ALLOWED_EDGES; add it (and to ARCHITECTURE.md)"));
            continue;
        };
        for dependency in &dependencies {
            let internal = dependency.starts_with("toolgate");
            if internal && !allowed.contains(&dependency.as_str()) {
                problems.push(format!("crate `{name}` must not depend on `{dependency}` (see ARCHITECTURE.md)"));
            }
            if name == "toolgate-core" && !CORE_DEPENDENCIES.contains(&dependency.as_str()) {
                problems.push(format!(
                    "the core must stay pure: dependency `{dependency}` is not in tidy's CORE_DEPENDENCIES"
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_workspace_is_tidy() -> Result<()> {
        let problems = check(&workspace_root())?;
        assert!(problems.is_empty(), "tidy problems:\n{}", problems.join("\n"));
        Ok(())
    }

    #[test]
    fn a_file_without_module_docs_is_reported() -> Result<()> {
        let directory = std::env::temp_dir().join(format!("toolgate-tidy-{}", std::process::id()));
        std::fs::create_dir_all(directory.join("crates/x/src"))?;
        std::fs::write(directory.join("crates/x/src/lib.rs"), "fn main() {}\n")?;
        std::fs::write(
            directory.join("crates/x/Cargo.toml"),
            "[package]\nname = \"toolgate-core\"\n[dependencies]\ntokio = \"1\"\ntoolgate-upstream = \"0\"\n",
        )?;
        std::fs::create_dir_all(directory.join("xtask"))?;
        std::fs::write(directory.join("xtask/Cargo.toml"), "[package]\nname = \"xtask\"\n")?;
        let problems = check(&directory)?;
        std::fs::remove_dir_all(&directory)?;
        // The four above, the layering check's crates (`crates/proxy/src`, `crates/config/src`) missing from this
        // tree, and its missing map.
        assert_eq!(problems.len(), 7, "{problems:?}");
        assert!(problems.iter().any(|problem| problem.contains("ARCHITECTURE.md is missing")), "{problems:?}");
        assert!(problems.iter().any(|problem| problem.contains("crates/proxy/src is not a directory")), "{problems:?}");
        Ok(())
    }
}
