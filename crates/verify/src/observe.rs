//! One verification run: copy the working directory, start the server in the observing sandbox, list its tools,
//! call each (identically, `calls` times) between snapshots of the scratch tree, then read the trace and give each
//! call the effects that happened while it was in flight.
//!
//! Calls are made one at a time, so the time window of a call owns every effect inside it; a server's own
//! background work in that window is charged to the call (a known limit, docs/verify.md). Every wait is bounded:
//! `initialize`, the listing and each call by `timeout_per_call`, the whole run by `timeout` (tools not reached
//! are reported as not called). The scratch tree is removed when the run ends.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};
use toolgate_core::ToolDefinition;
use toolgate_core::normalize::normalize_annotations;
use toolgate_upstream::{ConnectOptions, Connection, Endpoint, ListKind};

use toolgate_core::display::quoted;

use crate::answer::quiet_error;
use crate::args::{SAMPLE_FILE, SAMPLE_TEXT, arguments_for};
use crate::findings::{findings_for, observed_of};
use crate::sandbox::{Sandbox, missing_tools};
use crate::snapshot::{self, copy_tree};
use crate::strace::{self, Effect, Event, Outcome};
use crate::{CallObservation, ToolReport, Verification, VerifyError, VerifyOptions};

/// How long after an answer effects still count for the call (a child process finishing its write).
const SETTLE: Duration = Duration::from_millis(150);
/// How a call's error starts when the answer was an error without `isError` (the error's first line follows,
/// bounded, escaped and quoted).
pub const QUIET_ERROR: &str = "answered an error without isError:";
/// Most bytes of trace read.
const MAX_TRACE_BYTES: u64 = 256 * 1024 * 1024;

/// Runs the server described by `options` under observation and reports what each tool did.
pub async fn verify(options: &VerifyOptions) -> Result<Verification, VerifyError> {
    if options.command.is_empty() {
        return Err(VerifyError::NoCommand);
    }
    let missing = missing_tools();
    if !missing.is_empty() {
        return Err(VerifyError::Missing(missing.join(" and ")));
    }
    let started = Instant::now();
    let root = tempfile::Builder::new()
        .prefix("toolgate-verify-")
        .tempdir()
        .map_err(|error| VerifyError::io(&std::env::temp_dir(), error))?;
    let scratch = root.path().join("work");
    std::fs::create_dir(&scratch).map_err(|error| VerifyError::io(&scratch, error))?;
    copy_tree(&options.workdir, &scratch)?;
    seed_sample(scratch.as_path())?;
    let scratch_text = scratch.to_string_lossy();
    let env = options.env.iter().map(|(key, value)| (key.clone(), value.replace("{scratch}", &scratch_text))).collect();
    let traces = root.path().join("trace");
    std::fs::create_dir(&traces).map_err(|error| VerifyError::io(&traces, error))?;
    let sandbox = Sandbox { scratch: scratch.clone(), trace: traces.join("trace"), env };
    refresh_git_index(&sandbox).await;
    let (program, args) = sandbox.command_line(&options.command)?;
    let endpoint = Endpoint::Stdio { program, args, env: Vec::new(), cwd: Some(scratch.clone()) };
    let connect_options = ConnectOptions {
        name: "verify".into(),
        initialize_timeout: options.timeout_per_call,
        request_timeout: options.timeout_per_call,
        ..ConnectOptions::default()
    };
    let connection = Connection::connect(&endpoint, connect_options).await?;
    let info = connection.initialize_outcome().server_info.clone();
    let server = [info.get("name"), info.get("version")]
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect::<Vec<_>>()
        .join(" ");
    let listed = match tokio::time::timeout(options.timeout_per_call, connection.list_all(ListKind::Tools)).await {
        Ok(listed) => listed,
        Err(_) => {
            connection.close().await;
            return Err(VerifyError::TimedOut);
        }
    };
    let tools = match listed {
        Ok(tools) => tools,
        Err(error) => {
            connection.close().await;
            return Err(error.into());
        }
    };
    let mut runs = Vec::with_capacity(tools.len());
    for definition in tools {
        let run = call_tool(&connection, options, &scratch, definition, started).await?;
        runs.push(run);
    }
    connection.close().await;
    tokio::time::sleep(SETTLE).await;
    let events = read_trace(&sandbox.trace);
    let tools = runs.into_iter().map(|run| run.report(&events, &scratch)).collect();
    Ok(Verification { command: options.command.clone(), server, calls: options.calls, tools })
}

/// A tool's calls before the trace is read: each call's tree diff, answer and time window.
struct ToolRun {
    report: ToolReport,
    windows: Vec<(f64, f64)>,
}

impl ToolRun {
    fn report(mut self, events: &[Event], scratch: &Path) -> ToolReport {
        for (observation, (from, to)) in self.report.observations.iter_mut().zip(&self.windows) {
            let inside = events.iter().filter(|event| event.time >= *from && event.time <= *to);
            attribute(observation, inside, scratch);
        }
        let declared = ToolDefinition::from_value(self.report.definition.clone())
            .map(|tool| normalize_annotations(&tool).declared)
            .unwrap_or_default();
        self.report.observed = observed_of(&self.report.observations);
        self.report.findings = findings_for(&declared, &self.report.observations);
        self.report
    }
}

async fn call_tool(
    connection: &Connection,
    options: &VerifyOptions,
    scratch: &Path,
    definition: Value,
    started: Instant,
) -> Result<ToolRun, VerifyError> {
    let name = definition.get("name").and_then(Value::as_str).unwrap_or_default().to_owned();
    let fingerprint = ToolDefinition::from_value(definition.clone())
        .ok()
        .and_then(|tool| toolgate_core::fingerprint::fingerprint_tool(&tool).ok())
        .map(|fingerprint| fingerprint.whole)
        .unwrap_or_default();
    let schema = definition.get("inputSchema").cloned().unwrap_or(Value::Null);
    let arguments = arguments_for(&name, &schema, scratch);
    // As the gateway reads it (other spellings normalized), so a claim verify skips is the claim `serve` sees.
    let declares_read_only = ToolDefinition::from_value(definition.clone())
        .is_ok_and(|tool| normalize_annotations(&tool).declared.read_only == Some(true));
    let mut report = ToolReport {
        name: name.clone(),
        fingerprint,
        definition,
        skipped: None,
        arguments: arguments.clone(),
        observations: Vec::new(),
        findings: Vec::new(),
        observed: crate::Observed::default(),
    };
    let mut windows = Vec::new();
    if !declares_read_only && !options.allow_writes {
        report.skipped = Some("does not declare readOnlyHint: true (call it with --allow-writes)".into());
        return Ok(ToolRun { report, windows });
    }
    // An earlier tool may have moved or removed the sample file: every tool starts with it in place.
    seed_sample(scratch)?;
    for _ in 0..options.calls.max(1) {
        if started.elapsed() >= options.timeout {
            report.skipped = Some("the run's time ran out".into());
            break;
        }
        let before = snapshot::take(scratch)?;
        let from = now();
        let answer = connection.request("tools/call", Some(json!({"name": name, "arguments": arguments}))).await;
        tokio::time::sleep(SETTLE).await;
        let to = now();
        let after = snapshot::take(scratch)?;
        let error = match answer {
            Ok(result) if result.get("isError").and_then(Value::as_bool) == Some(true) => {
                Some(first_text(&result).unwrap_or_else(|| "isError".into()))
            }
            // An error in all but its flag is a failed call: never support, no repeat evidence (crate::answer).
            Ok(result) => quiet_error(&result).map(|said| format!("{QUIET_ERROR} {}", quoted(&said, 160))),
            Err(error) => Some(error.to_string()),
        };
        report.observations.push(CallObservation {
            error,
            tree: snapshot::diff(&before, &after, scratch),
            ..CallObservation::default()
        });
        windows.push((from, to));
    }
    Ok(ToolRun { report, windows })
}

/// The copy gave every file a new inode and change time, so git's stat cache in a copied repository is stale and
/// the first `git status` or `git diff` inside the sandbox would rewrite `.git/index`: a write the copy caused, not
/// the tool. The cache is refreshed before the server starts, a second after the copy, so no entry is "racily
/// clean" (as new as the index) and read again later. Best effort: without git, nothing happens.
///
/// The copy's `.git/config` and `.gitattributes` are the user's repository's, so whatever they configure to run
/// (`core.fsmonitor`, a `filter.*.clean` command a refresh runs to compare contents) is untrusted: git runs in the
/// observing sandbox (no network, nothing writable but the copy), with the fsmonitor and hooks switched off and no
/// system or global configuration read.
async fn refresh_git_index(sandbox: &Sandbox) {
    if !sandbox.scratch.join(".git").exists() {
        return;
    }
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let scratch = sandbox.scratch.to_string_lossy().into_owned();
    let git = ["git", "-c", "core.fsmonitor=", "-c", "core.hooksPath=/dev/null", "-C", &scratch, "update-index"];
    let argv: Vec<String> = git.iter().chain(&["-q", "--really-refresh"]).map(|part| (*part).to_owned()).collect();
    let Ok((program, mut args)) = sandbox.confined(&argv) else { return };
    // bwrap's `--setenv` pairs come before `--`: the variables go in front of the git command itself.
    let Some(split) = args.iter().rposition(|arg| arg == "--") else { return };
    for (key, value) in [("GIT_CONFIG_NOSYSTEM", "1"), ("GIT_CONFIG_GLOBAL", "/dev/null")] {
        args.splice(split..split, ["--setenv".to_owned(), key.to_owned(), value.to_owned()]);
    }
    let refreshed = tokio::process::Command::new(program)
        .args(args)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .status();
    if let Ok(Err(error)) = tokio::time::timeout(Duration::from_secs(30), refreshed).await {
        tracing::debug!(%error, "could not refresh the git index of the scratch copy");
    }
}

/// Writes the sample file that generated file paths name, unless the copy already has one.
fn seed_sample(scratch: &Path) -> Result<(), VerifyError> {
    let sample = scratch.join(SAMPLE_FILE);
    if !sample.exists() {
        std::fs::write(&sample, SAMPLE_TEXT).map_err(|error| VerifyError::io(&sample, error))?;
    }
    Ok(())
}

fn first_text(result: &Value) -> Option<String> {
    let text = result.get("content")?.as_array()?.iter().find_map(|item| item.get("text")?.as_str())?;
    Some(text.chars().take(200).collect())
}

fn now() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|elapsed| elapsed.as_secs_f64()).unwrap_or(0.0)
}

fn read_trace(path: &Path) -> Vec<Event> {
    use std::io::Read;
    let mut text = String::new();
    if let Ok(file) = std::fs::File::open(path) {
        let mut bytes = Vec::new();
        let _ = file.take(MAX_TRACE_BYTES).read_to_end(&mut bytes);
        text = String::from_utf8_lossy(&bytes).into_owned();
    }
    after_server_start(strace::parse(&text))
}

/// The trace's events from the server's start on. strace runs outside the sandbox and traces bwrap too: the first
/// successful `execve` is bwrap's, the second the server's, and everything before it is bwrap building the sandbox
/// (mounts, `/proc/<pid>/uid_map` writes), not the server. A trace without two starts is kept whole: dropping
/// evidence is worse than counting setup, which happens before any call's window anyway.
fn after_server_start(events: Vec<Event>) -> Vec<Event> {
    let started = events
        .iter()
        .enumerate()
        .filter(|(_, event)| matches!(&event.effect, Effect::Exec { outcome: Outcome::Done, .. }))
        .nth(1)
        .map(|(index, _)| index);
    match started {
        Some(index) => events.into_iter().skip(index).collect(),
        None => events,
    }
}

/// Gives a call the effects of its window: writes inside the copy, refused writes outside, connections, programs.
fn attribute<'a>(observation: &mut CallObservation, events: impl Iterator<Item = &'a Event>, scratch: &Path) {
    for event in events {
        let (syscall, paths, outcome) = match &event.effect {
            Effect::Connect { address, outcome } => {
                push_once(&mut observation.connections, format!("{address} ({})", describe(outcome)));
                continue;
            }
            Effect::LocalConnect { address, outcome } => {
                push_once(&mut observation.local_connections, format!("{address} ({})", describe(outcome)));
                continue;
            }
            Effect::Exec { program, outcome } => {
                if *outcome == Outcome::Done {
                    observation.processes.push(program.clone());
                }
                continue;
            }
            Effect::Write { path, outcome } => ("open-for-write", vec![path.clone()], outcome),
            Effect::Remove { path, outcome } => ("remove", vec![path.clone()], outcome),
            Effect::MakeDirectory { path, outcome } => ("mkdir", vec![path.clone()], outcome),
            Effect::Rename { from, to, outcome } => ("rename", vec![from.clone(), to.clone()], outcome),
        };
        // `/proc/self/root/x` is `/x` and `/proc/self/cwd/x` is `x`: a path through the process's own view of the
        // file system is the file it names, not a process file.
        let paths: Vec<String> = paths.iter().filter_map(|path| through_proc(path)).collect();
        if paths.is_empty() || paths.iter().all(|path| ignored(path)) {
            continue;
        }
        let shown = paths.join(" -> ");
        let is_inside = paths.iter().all(|path| inside(path, scratch));
        match outcome {
            Outcome::Failed(errno) if outcome.refused() => {
                push_once(&mut observation.refused_writes, format!("{syscall} {shown} {errno}"));
            }
            Outcome::Done if is_inside => push_once(&mut observation.writes_inside, format!("{syscall} {shown}")),
            // Outside the copy and let through: only the trace's own directory is writable there, and a write to
            // it is a write all the same.
            Outcome::Done => push_once(&mut observation.refused_writes, format!("{syscall} {shown} (not refused)")),
            Outcome::Failed(_) => {}
        }
    }
}

fn push_once(list: &mut Vec<String>, item: String) {
    if !list.contains(&item) {
        list.push(item);
    }
}

fn describe(outcome: &Outcome) -> String {
    match outcome {
        Outcome::Done => "attempted".into(),
        Outcome::Failed(errno) => format!("refused: {errno}"),
    }
}

/// Device and process files (`/dev/null`, `/dev/tty`, `/proc/self/fd/1`) are not data.
fn ignored(path: &str) -> bool {
    path.is_empty() || path.starts_with("/dev/") || path.starts_with("/proc/")
}

/// The path a `/proc/<pid|self|thread-self>[/task/<tid>]/{root,cwd}/...` prefix names (repeatedly: the prefix can
/// be nested); any other path as it is. `cwd` is taken as the server's working directory, the copy, like any
/// relative path. Never `None` for a non-empty path.
fn through_proc(path: &str) -> Option<String> {
    let mut path = path.to_owned();
    for _ in 0..64 {
        let Some(rest) = path.strip_prefix("/proc/") else { break };
        let process = |part: &str| {
            part == "self" || part == "thread-self" || (!part.is_empty() && part.bytes().all(|b| b.is_ascii_digit()))
        };
        let mut parts = rest.splitn(2, '/');
        let (Some(who), Some(mut rest)) = (parts.next(), parts.next()) else { break };
        if !process(who) {
            break;
        }
        if let Some(task) = rest.strip_prefix("task/")
            && let Some((tid, tail)) = task.split_once('/')
            && process(tid)
        {
            rest = tail;
        }
        let (kind, tail) = rest.split_once('/').unwrap_or((rest, ""));
        path = match kind {
            "root" => format!("/{tail}"),
            "cwd" if tail.is_empty() => ".".to_owned(),
            "cwd" => tail.to_owned(),
            _ => break,
        };
    }
    (!path.is_empty()).then_some(path)
}

/// True for a path inside the scratch copy (relative paths are: the server's working directory is the copy).
fn inside(path: &str, scratch: &Path) -> bool {
    !path.starts_with('/') || PathBuf::from(path).starts_with(scratch)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn effects_are_sorted_into_what_a_call_did() {
        let scratch = Path::new("/s/work");
        let event = |effect| Event { pid: 1, time: 1.0, effect };
        let events = [
            event(Effect::Write { path: "/dev/null".into(), outcome: Outcome::Done }),
            event(Effect::Write { path: "status.log".into(), outcome: Outcome::Done }),
            event(Effect::Write { path: "/etc/x".into(), outcome: Outcome::Failed("EROFS".into()) }),
            event(Effect::Write { path: "/etc/x".into(), outcome: Outcome::Failed("EROFS".into()) }),
            event(Effect::Write { path: "/nowhere/x".into(), outcome: Outcome::Failed("ENOENT".into()) }),
            event(Effect::Connect { address: "127.0.0.1:9".into(), outcome: Outcome::Failed("ECONNREFUSED".into()) }),
            event(Effect::Exec { program: "/usr/bin/git".into(), outcome: Outcome::Done }),
        ];
        let mut observation = CallObservation::default();
        attribute(&mut observation, events.iter(), scratch);
        assert_eq!(observation.writes_inside, vec!["open-for-write status.log".to_owned()]);
        assert_eq!(observation.refused_writes, vec!["open-for-write /etc/x EROFS".to_owned()]);
        assert_eq!(observation.connections, vec!["127.0.0.1:9 (refused: ECONNREFUSED)".to_owned()]);
        assert_eq!(observation.processes, vec!["/usr/bin/git".to_owned()]);
        assert!(observation.wrote() && observation.connected());
    }

    /// A write through the process's own view of the file system is the file it names: truncating
    /// `/proc/self/root/<trace>` is a write outside the copy, not a process file.
    #[test]
    fn paths_through_proc_are_the_files_they_name() {
        assert_eq!(through_proc("/proc/self/root/tmp/t/trace").as_deref(), Some("/tmp/t/trace"));
        assert_eq!(through_proc("/proc/12/task/12/root/proc/self/root/etc/x").as_deref(), Some("/etc/x"));
        assert_eq!(through_proc("/proc/thread-self/cwd/notes.txt").as_deref(), Some("notes.txt"));
        assert_eq!(through_proc("/proc/self/fd/1").as_deref(), Some("/proc/self/fd/1"));
        let event = |path: &str| Event {
            pid: 1,
            time: 1.0,
            effect: Effect::Write { path: path.into(), outcome: Outcome::Done },
        };
        let events =
            [event("/proc/self/root/tmp/t/trace"), event("/proc/self/cwd/status.log"), event("/proc/self/fd/1")];
        let mut observation = CallObservation::default();
        attribute(&mut observation, events.iter(), Path::new("/s/work"));
        assert_eq!(observation.refused_writes, vec!["open-for-write /tmp/t/trace (not refused)".to_owned()]);
        assert_eq!(observation.writes_inside, vec!["open-for-write status.log".to_owned()]);
    }

    /// bwrap's own setup, traced because strace runs outside the sandbox, is not the server's.
    #[test]
    fn the_trace_starts_at_the_server() {
        let at = |time: f64, effect| Event { pid: 1, time, effect };
        let exec = |program: &str| Effect::Exec { program: program.into(), outcome: Outcome::Done };
        let setup = Effect::MakeDirectory { path: "/newroot".into(), outcome: Outcome::Done };
        let events = vec![at(1.0, exec("/usr/bin/bwrap")), at(2.0, setup), at(3.0, exec("/usr/bin/python3"))];
        let kept = after_server_start(events.clone());
        assert_eq!(kept.iter().map(|event| event.time).collect::<Vec<_>>(), [3.0]);
        assert_eq!(after_server_start(events[..2].to_vec()).len(), 2, "a trace without a server start is kept");
    }
}
