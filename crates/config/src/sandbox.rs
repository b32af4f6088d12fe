//! An upstream's `[upstream.sandbox]` table: how its process is confined (docs/sandbox.md).
//!
//! Only shapes and ranges are checked here, each with its file:line; whether this machine can enforce the settings
//! is the runtime's question (`toolgate-sandbox`'s probe at start). Relative writable paths are anchored at the
//! config file's directory, like `command` and `cwd`. No table means mode "off": a plain child, as before.

use serde::Deserialize;
use toml::Spanned;
use toolgate_spec::{
    DEFAULT_SANDBOX_MAX_OPEN_FILES, DEFAULT_SANDBOX_MAX_PROCESSES, DEFAULT_SANDBOX_MEMORY_MIB,
    MIN_SANDBOX_MAX_PROCESSES, SandboxMode, SandboxSpec,
};

use crate::context::Context;
use crate::context::anchor;
use crate::rules;

/// Largest `memory_mib` (1 TiB).
const MAX_MEMORY_MIB: u64 = 1024 * 1024;
/// Smallest `memory_mib`: less does not start an interpreter.
const MIN_MEMORY_MIB: u64 = 64;
/// Largest `max_processes`: the kernel's own largest `pid_max`, less the sandbox's own processes.
const MAX_PROCESSES: u32 = 4_194_300;
/// Open-file limits accepted.
const OPEN_FILES_RANGE: std::ops::RangeInclusive<u64> = 16..=1_048_576;

/// `[upstream.sandbox]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawSandbox {
    pub(crate) mode: Option<Spanned<RawSandboxMode>>,
    pub(crate) writable: Option<Vec<Spanned<String>>>,
    pub(crate) network: Option<Spanned<bool>>,
    pub(crate) pass_env: Option<Vec<Spanned<String>>>,
    pub(crate) memory_mib: Option<Spanned<u64>>,
    pub(crate) max_processes: Option<Spanned<u64>>,
    pub(crate) max_open_files: Option<Spanned<u64>>,
    pub(crate) clean_cwd: Option<bool>,
}

/// `mode = "off" | "auto" | "strict"`.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum RawSandboxMode {
    Off,
    Auto,
    Strict,
}

/// Lowers the sandbox table of a stdio upstream (`None`: no table, mode off).
pub(crate) fn lower_sandbox(raw: Option<&Spanned<RawSandbox>>, label: &str, cx: &mut Context<'_>) -> SandboxSpec {
    let Some(raw) = raw else { return SandboxSpec::default() };
    let table = raw.span().start;
    let raw = raw.get_ref();
    let mode = match raw.mode.as_ref().map(|mode| *mode.get_ref()) {
        Some(RawSandboxMode::Off) => SandboxMode::Off,
        Some(RawSandboxMode::Auto) => SandboxMode::Auto,
        Some(RawSandboxMode::Strict) => SandboxMode::Strict,
        None => {
            cx.error(table, format!("{label}: `[upstream.sandbox]` needs `mode` (\"off\", \"auto\" or \"strict\")"));
            SandboxMode::Off
        }
    };
    let mut spec = SandboxSpec::with_mode(mode);
    for path in raw.writable.iter().flatten() {
        let text = path.get_ref();
        if text.trim().is_empty() {
            cx.error(path.span().start, format!("{label}: a `sandbox.writable` path is empty"));
        } else if text.starts_with('~') {
            let message = format!("{label}: `sandbox.writable` path starts with `~`, which only a shell expands");
            cx.error(path.span().start, message);
        } else if text.contains('\0') {
            cx.error(path.span().start, format!("{label}: a `sandbox.writable` path contains a NUL character"));
        } else if anchor(cx.base_dir, text) == std::path::Path::new("/") {
            cx.error(path.span().start, format!("{label}: `sandbox.writable` may not be `/` (use mode = \"off\")"));
        } else {
            spec.writable.push(anchor(cx.base_dir, text));
        }
    }
    spec.network = raw.network.as_ref().map(|network| *network.get_ref());
    if let Some(names) = &raw.pass_env {
        spec.pass_env.clear();
        for name in names {
            match rules::check_env_var_name(name.get_ref()) {
                Ok(()) => spec.pass_env.push(name.get_ref().clone()),
                Err(message) => cx.error(name.span().start, format!("{label}: `sandbox.pass_env`: {message}")),
            }
        }
    }
    spec.memory_mib = cx
        .in_range(
            raw.memory_mib.as_ref(),
            MIN_MEMORY_MIB..=MAX_MEMORY_MIB,
            format_args!("{label}: `sandbox.memory_mib`"),
        )
        .unwrap_or(DEFAULT_SANDBOX_MEMORY_MIB);
    let processes = u64::from(MIN_SANDBOX_MAX_PROCESSES)..=u64::from(MAX_PROCESSES);
    spec.max_processes = cx
        .in_range(raw.max_processes.as_ref(), processes, format_args!("{label}: `sandbox.max_processes`"))
        .and_then(|count| u32::try_from(count).ok())
        .unwrap_or(DEFAULT_SANDBOX_MAX_PROCESSES);
    spec.max_open_files = cx
        .in_range(raw.max_open_files.as_ref(), OPEN_FILES_RANGE, format_args!("{label}: `sandbox.max_open_files`"))
        .unwrap_or(DEFAULT_SANDBOX_MAX_OPEN_FILES);
    spec.clean_cwd = raw.clean_cwd.unwrap_or(false);
    if mode == SandboxMode::Off && (raw.writable.is_some() || raw.network.is_some() || raw.pass_env.is_some()) {
        cx.warn(table, format!("{label}: sandbox mode is \"off\": its other settings have no effect"));
    }
    spec
}
