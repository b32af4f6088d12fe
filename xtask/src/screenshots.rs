//! `cargo xtask screenshots`: the console's pages as PNGs in `docs/screenshots/`, taken by the browser tests
//! themselves (`crates/cli/tests/console_browser`) with `TOOLGATE_SCREENSHOTS` set, so every picture shows a real
//! `toolgate serve` with a real pending call, a real quarantined definition and the audit rows they left.
//!
//! Needs what the tests need: the peers (installed here as `cargo xtask test` does), Chromium and chromedriver.
//! Fails when a page's picture was not written. Never edits anything but the PNGs.

use std::process::Command;

use anyhow::{Result, bail};

use crate::test_run::{TestEnv, cargo, install_peers, peers_dir, run_command, workspace_root};

/// The pictures the browser tests take, by file stem.
const PAGES: [&str; 5] = ["pending-approvals", "tools-quarantine", "tools-inventory", "audit-log", "activity"];

pub(crate) fn run(args: &[String]) -> Result<()> {
    if let Some(unknown) = args.first() {
        bail!("usage: cargo xtask screenshots (no options; got {unknown:?})");
    }
    let root = workspace_root();
    let peers = peers_dir(&root)?;
    install_peers(&peers)?;
    let out = root.join("docs").join("screenshots");
    std::fs::create_dir_all(&out)?;
    for page in PAGES {
        let path = out.join(format!("{page}.png"));
        if path.exists() {
            std::fs::remove_file(&path)?;
        }
    }
    let mut command = Command::new(cargo());
    command.args(["test", "-p", "toolgate", "--test", "console_browser"]).env("TOOLGATE_SCREENSHOTS", &out);
    let (_, ok) = run_command("console browser tests with screenshots", command, &root, &TestEnv::new(&peers)?);
    if !ok {
        bail!("the browser tests failed; no screenshots were kept");
    }
    let missing: Vec<&str> = PAGES.into_iter().filter(|page| !out.join(format!("{page}.png")).is_file()).collect();
    if !missing.is_empty() {
        bail!("the tests ran but these screenshots are missing: {}", missing.join(", "));
    }
    for page in PAGES {
        let size = std::fs::metadata(out.join(format!("{page}.png")))?.len();
        println!("docs/screenshots/{page}.png  {} KiB", size.div_ceil(1024));
    }
    Ok(())
}
