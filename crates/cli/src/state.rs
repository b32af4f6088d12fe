//! toolgate's per-user state directory and the run files through which `toolgate status` sees running gateways.
//!
//! The state directory is `--state-dir`, else `$TOOLGATE_STATE_DIR`, else `$XDG_STATE_HOME/toolgate`, else
//! `~/.local/state/toolgate`. Each running `serve` keeps `run/<pid>.json` there up to date (upstream states,
//! listeners) and removes it on exit; status is read from files, never from a network port.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

/// What a running gateway publishes about itself.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct RunFile {
    /// The gateway's process id.
    pub(crate) pid: u32,
    /// Where clients reach it (`stdio`, or the HTTP URL).
    pub(crate) listeners: Vec<String>,
    /// The config file, when one was used.
    pub(crate) config: Option<String>,
    /// Which process of a fleet it is (absent in files of older versions).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) instance: Option<String>,
    /// `toolgate_proxy::GatewayStatus`, as JSON.
    pub(crate) status: serde_json::Value,
}

/// The state directory for this invocation.
pub(crate) fn state_dir(explicit: Option<&Path>) -> Result<PathBuf> {
    if let Some(path) = explicit {
        return Ok(path.to_path_buf());
    }
    if let Some(path) = std::env::var_os("TOOLGATE_STATE_DIR").filter(|value| !value.is_empty()) {
        return Ok(PathBuf::from(path));
    }
    if let Some(path) = std::env::var_os("XDG_STATE_HOME").filter(|value| !value.is_empty()) {
        return Ok(PathBuf::from(path).join("toolgate"));
    }
    let home = std::env::var_os("HOME")
        .filter(|value| !value.is_empty())
        .context("cannot find a state directory: set --state-dir, TOOLGATE_STATE_DIR, XDG_STATE_HOME or HOME")?;
    Ok(PathBuf::from(home).join(".local").join("state").join("toolgate"))
}

fn run_dir(state: &Path) -> PathBuf {
    state.join("run")
}

/// Writes (atomically) this process's run file.
pub(crate) fn write_run_file(state: &Path, run: &RunFile) -> Result<()> {
    let directory = run_dir(state);
    std::fs::create_dir_all(&directory).with_context(|| format!("cannot create {}", directory.display()))?;
    let path = directory.join(format!("{}.json", run.pid));
    let temporary = directory.join(format!(".{}.json.tmp", run.pid));
    std::fs::write(&temporary, serde_json::to_vec_pretty(run)?)
        .with_context(|| format!("cannot write {}", temporary.display()))?;
    std::fs::rename(&temporary, &path).with_context(|| format!("cannot write {}", path.display()))?;
    Ok(())
}

/// Removes this process's run file.
pub(crate) fn remove_run_file(state: &Path, pid: u32) {
    let _ = std::fs::remove_file(run_dir(state).join(format!("{pid}.json")));
}

/// Every run file of a live process; files of processes that are gone are removed.
pub(crate) fn read_run_files(state: &Path) -> Result<Vec<RunFile>> {
    let directory = run_dir(state);
    let entries = match std::fs::read_dir(&directory) {
        Ok(entries) => entries,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(error) => return Err(error).with_context(|| format!("cannot read {}", directory.display())),
    };
    let mut runs = Vec::new();
    for entry in entries {
        let path = entry?.path();
        if path.extension().and_then(|extension| extension.to_str()) != Some("json") {
            continue;
        }
        let Ok(text) = std::fs::read_to_string(&path) else { continue };
        let Ok(run) = serde_json::from_str::<RunFile>(&text) else { continue };
        if Path::new(&format!("/proc/{}", run.pid)).exists() {
            runs.push(run);
        } else {
            let _ = std::fs::remove_file(&path);
        }
    }
    runs.sort_by_key(|run| run.pid);
    Ok(runs)
}
