//! `cargo xtask test`: installs the real MCP peers into `<repo>/.cache/peers` and runs every kind of test.
//!
//! Steps: install peers (skipped when the stamp matches `crates/test-support/peers.toml`), unit and integration
//! tests (nextest when installed, else `cargo test`), doc tests, `xtask eval --check`, `xtask eval --observations
//! corpus/observations` (the checked-in verify recordings), `xtask lint-eval --check`,
//! `xtask tidy`. Each step sees `TOOLGATE_PEERS_DIR` and a `PATH` with Node 22 first. A failed install stops the
//! run; a failed test step is reported and the remaining steps still run, and the run then exits non-zero.
//!
//! This module installs only the pinned packages, through npm and pip, into the git-ignored cache; it never
//! touches files outside `.cache/peers`, and it never lets a test skip because a peer is absent.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

/// The pinned peer list; test-support compares the install stamp with the same text.
const PEERS_TOML: &str = include_str!("../../crates/test-support/peers.toml");

/// Written into the peers directory, verbatim `PEERS_TOML`, once an install has fully succeeded.
const STAMP_FILE: &str = "installed.toml";

const USAGE: &str = "usage: cargo xtask test [--skip-install | --install-only] [--only FILTER]\n\
    \n\
    --skip-install   use the peers already installed in .cache/peers\n\
    --install-only   install the peers, run no tests\n\
    --only FILTER    run only the unit/integration tests matching FILTER (no doc tests, eval, lint-eval, tidy)";

#[derive(Debug, Default)]
struct Options {
    skip_install: bool,
    install_only: bool,
    only: Option<String>,
}

fn parse_options(args: &[String]) -> Result<Options> {
    let mut options = Options::default();
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--skip-install" => options.skip_install = true,
            "--install-only" => options.install_only = true,
            "--only" => {
                let filter = args.next().context("--only needs a filter")?;
                options.only = Some(filter.clone());
            }
            "-h" | "--help" => bail!("{USAGE}"),
            other => bail!("unknown option {other:?}\n{USAGE}"),
        }
    }
    if options.skip_install && options.install_only {
        bail!("--skip-install and --install-only exclude each other\n{USAGE}");
    }
    Ok(options)
}

/// The pinned packages, by registry.
#[derive(Debug, serde::Deserialize)]
struct PeerPins {
    npm: BTreeMap<String, String>,
    pypi: BTreeMap<String, String>,
}

pub(crate) fn run(args: &[String]) -> Result<()> {
    let options = parse_options(args)?;
    let root = workspace_root();
    let peers_dir = peers_dir(&root)?;
    let started = Instant::now();

    if options.skip_install {
        eprintln!("==> peers: not installing (--skip-install); using {}", peers_dir.display());
    } else {
        install_peers(&peers_dir)?;
    }
    if options.install_only {
        eprintln!("==> peers installed in {}", peers_dir.display());
        return Ok(());
    }

    let env = TestEnv::new(&peers_dir)?;
    let mut outcomes: Vec<(String, Duration, bool)> = Vec::new();
    let mut run_step = |name: &str, command: Command| {
        let (elapsed, ok) = run_command(name, command, &root, &env);
        outcomes.push((name.to_owned(), elapsed, ok));
    };

    let nextest = has_nextest(&root);
    let mut tests = Command::new(cargo());
    if nextest {
        tests.args(["nextest", "run", "--workspace", "--all-targets", "--no-fail-fast"]);
        if let Some(filter) = &options.only {
            tests.args(["--no-tests", "warn", filter]);
        }
    } else {
        eprintln!("==> cargo-nextest is not installed: falling back to `cargo test`");
        tests.args(["test", "--workspace", "--all-targets", "--no-fail-fast"]);
        if let Some(filter) = &options.only {
            tests.args(["--", filter]);
        }
    }
    run_step("tests", tests);

    if options.only.is_none() {
        let mut doc = Command::new(cargo());
        doc.args(["test", "--workspace", "--doc"]);
        run_step("doc tests", doc);
        for (name, xtask_args) in [
            ("eval", &["eval", "--check"][..]),
            // The checked-in `toolgate verify` recordings, weighed on their tools (seconds).
            ("eval-observed", &["eval", "--observations", "corpus/observations"][..]),
            ("lint-eval", &["lint-eval", "--check"][..]),
            ("tidy", &["tidy"][..]),
        ] {
            let mut command = Command::new(cargo());
            command.args(["run", "-q", "-p", "xtask", "--"]).args(xtask_args);
            run_step(name, command);
        }
    }

    eprintln!("\n==> summary");
    for (name, elapsed, ok) in &outcomes {
        let verdict = if *ok { "ok" } else { "FAILED" };
        eprintln!("    {verdict:<6} {name:<10} {:>7.1}s", elapsed.as_secs_f64());
    }
    eprintln!("    total {:.1}s", started.elapsed().as_secs_f64());
    let failed: Vec<&str> = outcomes.iter().filter(|(_, _, ok)| !ok).map(|(name, _, _)| name.as_str()).collect();
    if !failed.is_empty() {
        bail!("failed steps: {}", failed.join(", "));
    }
    Ok(())
}

/// The environment every test step gets on top of the inherited one.
pub(crate) struct TestEnv {
    peers_dir: PathBuf,
    path: OsString,
}

impl TestEnv {
    pub(crate) fn new(peers_dir: &Path) -> Result<TestEnv> {
        let node_bin = node_bin_dir(peers_dir);
        let inherited = std::env::var_os("PATH").unwrap_or_default();
        let path = std::env::join_paths(std::iter::once(node_bin).chain(std::env::split_paths(&inherited)))
            .context("cannot build PATH with Node 22 first")?;
        Ok(TestEnv { peers_dir: peers_dir.to_path_buf(), path })
    }
}

/// Runs one step with inherited stdio; returns how long it took and whether it succeeded.
pub(crate) fn run_command(name: &str, mut command: Command, root: &Path, env: &TestEnv) -> (Duration, bool) {
    eprintln!("\n==> {name}: {}", describe(&command));
    command.current_dir(root).env("TOOLGATE_PEERS_DIR", &env.peers_dir).env("PATH", &env.path);
    let started = Instant::now();
    let ok = match command.status() {
        Ok(status) if status.success() => true,
        Ok(status) => {
            eprintln!("==> {name} failed: {status}");
            false
        }
        Err(error) => {
            eprintln!("==> {name} could not start: {error}");
            false
        }
    };
    (started.elapsed(), ok)
}

/// Installs the pinned peers unless the stamp says exactly this list is already installed.
pub(crate) fn install_peers(peers_dir: &Path) -> Result<()> {
    let pins: PeerPins = toml::from_str(PEERS_TOML).context("crates/test-support/peers.toml is not valid")?;
    let stamp = peers_dir.join(STAMP_FILE);
    let installed = std::fs::read_to_string(&stamp).unwrap_or_default();
    if installed == PEERS_TOML && node_bin_dir(peers_dir).join("node").exists() {
        eprintln!("==> peers: up to date in {}", peers_dir.display());
        return Ok(());
    }

    let started = Instant::now();
    if peers_dir.exists() {
        eprintln!("==> peers: the pinned list changed or an install was incomplete; reinstalling");
        std::fs::remove_dir_all(peers_dir)
            .with_context(|| format!("cannot remove the old peers in {}", peers_dir.display()))?;
    }
    std::fs::create_dir_all(peers_dir).with_context(|| format!("cannot create {}", peers_dir.display()))?;

    let node_prefix = peers_dir.join("node");
    std::fs::create_dir_all(&node_prefix)?;
    let npm_specs: Vec<String> = pins.npm.iter().map(|(name, version)| format!("{name}@{version}")).collect();
    eprintln!("==> peers: npm install {}", npm_specs.join(" "));
    let mut npm = Command::new("npm");
    npm.arg("install")
        .arg("--prefix")
        .arg(&node_prefix)
        .args(["--no-audit", "--no-fund", "--save-exact", "--loglevel=error"])
        .args(&npm_specs)
        .current_dir(&node_prefix);
    run_install(npm, "npm install")?;

    let venv = peers_dir.join("venv");
    eprintln!("==> peers: python3 -m venv {}", venv.display());
    let mut make_venv = Command::new("python3");
    make_venv.arg("-m").arg("venv").arg(&venv);
    run_install(make_venv, "python3 -m venv")?;

    let pip_specs: Vec<String> = pins.pypi.iter().map(|(name, version)| format!("{name}=={version}")).collect();
    eprintln!("==> peers: pip install {}", pip_specs.join(" "));
    let mut pip = Command::new(venv.join("bin").join("python"));
    pip.args(["-m", "pip", "install", "--disable-pip-version-check", "--no-input", "--quiet"]).args(&pip_specs);
    run_install(pip, "pip install")?;

    let node = node_bin_dir(peers_dir).join("node");
    let output = Command::new(&node)
        .arg("--version")
        .output()
        .with_context(|| format!("npm installed no usable node at {}", node.display()))?;
    let version = String::from_utf8_lossy(&output.stdout).trim().to_owned();
    if !version.starts_with("v22.") {
        bail!("{} is {version:?}, not Node 22: check the `node` pin in peers.toml", node.display());
    }

    std::fs::write(&stamp, PEERS_TOML).with_context(|| format!("cannot write {}", stamp.display()))?;
    eprintln!("==> peers: installed in {:.1}s (node {version})", started.elapsed().as_secs_f64());
    Ok(())
}

fn run_install(mut command: Command, what: &str) -> Result<()> {
    let status = command.status().with_context(|| format!("cannot start {what}: is it installed on this machine?"))?;
    if !status.success() {
        bail!("{what} failed ({status}): see its output above; peers were not installed");
    }
    Ok(())
}

fn has_nextest(root: &Path) -> bool {
    Command::new(cargo())
        .args(["nextest", "--version"])
        .current_dir(root)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|status| status.success())
}

/// The cargo that runs this xtask, so steps use the same toolchain.
pub(crate) fn cargo() -> OsString {
    std::env::var_os("CARGO").unwrap_or_else(|| OsString::from("cargo"))
}

pub(crate) fn workspace_root() -> PathBuf {
    let xtask_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    xtask_dir.parent().unwrap_or(xtask_dir).to_path_buf()
}

/// `$TOOLGATE_PEERS_DIR` when set (made absolute), else `<repo>/.cache/peers`.
pub(crate) fn peers_dir(root: &Path) -> Result<PathBuf> {
    match std::env::var_os("TOOLGATE_PEERS_DIR") {
        Some(dir) if !dir.is_empty() => {
            std::path::absolute(PathBuf::from(dir)).context("cannot make TOOLGATE_PEERS_DIR absolute")
        }
        _ => Ok(root.join(".cache").join("peers")),
    }
}

fn node_bin_dir(peers_dir: &Path) -> PathBuf {
    peers_dir.join("node").join("node_modules").join(".bin")
}

fn describe(command: &Command) -> String {
    std::iter::once(command.get_program())
        .chain(command.get_args())
        .map(|part| part.to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pinned_peers_parse_and_are_exact_versions() {
        let pins: PeerPins = toml::from_str(PEERS_TOML).unwrap_or_else(|error| {
            unreachable!("peers.toml must parse: {error}");
        });
        assert!(pins.npm.contains_key("node"));
        assert!(pins.pypi.contains_key("mcp"));
        for version in pins.npm.values().chain(pins.pypi.values()) {
            // An npm alias (`npm:PACKAGE@VERSION`, two versions of one package side by side) pins its version
            // after the last `@`.
            let exact = version
                .strip_prefix("npm:")
                .and_then(|alias| alias.rsplit_once('@'))
                .map_or(version.as_str(), |(_, exact)| exact);
            let numeric = |part: &str| !part.is_empty() && part.chars().all(|c| c.is_ascii_digit());
            let (release, pre) = exact.split_once('-').unwrap_or((exact, ""));
            assert!(
                release.split('.').all(numeric) && pre.chars().all(|c| c.is_ascii_alphanumeric() || c == '.'),
                "{version} is not an exact version"
            );
        }
    }

    #[test]
    fn options_parse() {
        let args = |list: &[&str]| list.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        let options = parse_options(&args(&["--skip-install", "--only", "demo"]));
        assert!(options.is_ok_and(|o| o.skip_install && o.only.as_deref() == Some("demo")));
        assert!(parse_options(&args(&["--only"])).is_err());
        assert!(parse_options(&args(&["--skip-install", "--install-only"])).is_err());
        assert!(parse_options(&args(&["--bogus"])).is_err());
    }
}
