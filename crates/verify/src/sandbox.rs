//! The observing sandbox's command line: `strace -f` around bubblewrap (built by `toolgate_sandbox`, the same
//! builder `serve` uses) around the server.
//!
//! [`toolgate_sandbox::Profile::observing`] gives the server a read-only view of the whole file system, the scratch
//! copy bound writable (at the same path, so paths in arguments mean the same inside and out) as its working
//! directory, fresh `/dev` and `/proc`, no network (a private network namespace with only loopback), its own pid,
//! IPC and UTS namespaces, no capabilities, a cleared environment with only what [`Sandbox::env`] lists, and it dies
//! with toolgate. `/tmp` stays read-only, so a temporary file is a refused write strace records. strace runs OUTSIDE
//! the sandbox, as bwrap's parent, follows every process (`-f`: bwrap and all it starts) and writes absolute
//! timestamps (`-ttt`), so effects can be attributed to the call in flight. Its trace goes to a directory of its
//! own beside the copy that the sandbox never binds writable and hides (an empty directory stands in its place), so
//! the observed server can neither truncate nor read it, not even through `/proc/self/root`. bwrap's own setup
//! syscalls are in the trace too; the reader drops everything before the server's program starts
//! ([`crate::observe`]). This builds argument vectors only; it starts nothing.

use std::path::{Path, PathBuf};

use toolgate_sandbox::{Profile, command, probe};

use crate::VerifyError;
use crate::strace::TRACED;

/// Environment variables passed through from toolgate's own environment when set: enough to find programs and
/// read configuration, nothing that grants access.
const PASSED: [&str; 4] = ["PATH", "HOME", "LANG", "TERM"];

/// What the sandbox gives the server.
#[derive(Debug, Clone)]
pub struct Sandbox {
    /// The scratch copy: writable, the working directory.
    pub scratch: PathBuf,
    /// Where strace writes its trace: a file in a directory of its own, not inside the scratch copy.
    pub trace: PathBuf,
    /// The server's environment (after the passed-through variables).
    pub env: Vec<(String, String)>,
}

impl Sandbox {
    /// The program and arguments that run `command` observed: `bwrap ... -- strace ... -- command`.
    pub fn command_line(&self, command_line: &[String]) -> Result<(String, Vec<String>), VerifyError> {
        let (bwrap, confined) = self.confined(command_line)?;
        let mut traced: Vec<String> = ["-f", "-ttt", "-qq", "-s", "4096", "-e"].map(str::to_owned).to_vec();
        traced.push(format!("trace={TRACED}"));
        traced.push("-o".into());
        traced.push(path_text(&self.trace));
        traced.push("--".into());
        traced.push(bwrap);
        traced.extend(confined);
        Ok(("strace".to_owned(), traced))
    }

    /// The program and arguments that run `command` in the same sandbox, untraced: `bwrap ... -- command` (for
    /// the preparation verify does in the copy, which must not run anything the copy configures outside it).
    pub fn confined(&self, command_line: &[String]) -> Result<(String, Vec<String>), VerifyError> {
        let (program, args) = command_line.split_first().ok_or(VerifyError::NoCommand)?;
        let mut env: Vec<(String, String)> = PASSED
            .iter()
            .filter_map(|name| std::env::var(name).ok().map(|value| ((*name).to_owned(), value)))
            .collect();
        // Python would otherwise try to write bytecode caches next to read-only modules: refused writes that say
        // nothing about the tool.
        env.push(("PYTHONDONTWRITEBYTECODE".into(), "1".into()));
        env.extend(self.env.iter().cloned());
        let mut profile = Profile::observing(self.scratch.clone(), env);
        // Never writable inside: the trace is evidence against the server, which must not reach it.
        if let Some(trace_dir) = self.trace.parent() {
            profile.hidden.push(trace_dir.to_path_buf());
        }
        let sandboxed =
            command(&profile, probe(), &[], program, args).map_err(|error| VerifyError::Missing(error.to_string()))?;
        Ok((sandboxed.program, sandboxed.args))
    }
}

fn path_text(path: &Path) -> String {
    path.to_string_lossy().into_owned()
}

/// What verify needs that this machine lacks: bubblewrap able to build a sandbox, and `strace` on `PATH`.
pub fn missing_tools() -> Vec<String> {
    let mut missing = Vec::new();
    if let Err(reason) = &probe().bubblewrap {
        missing.push(format!("bubblewrap ({reason})"));
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    if !std::env::split_paths(&path).any(|dir| dir.join("strace").is_file()) {
        missing.push("strace".to_owned());
    }
    missing
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_line_confines_and_traces() -> Result<(), VerifyError> {
        if !missing_tools().is_empty() {
            return Ok(());
        }
        let scratch = tempfile::tempdir().map_err(|error| VerifyError::io(Path::new("tempdir"), error))?;
        let work = scratch.path().join("work");
        let traces = scratch.path().join("trace");
        for dir in [&work, &traces] {
            std::fs::create_dir(dir).map_err(|error| VerifyError::io(dir, error))?;
        }
        let sandbox = Sandbox {
            scratch: work.clone(),
            trace: traces.join("trace"),
            env: vec![("MEMORY_FILE_PATH".into(), "/s/work/m.json".into())],
        };
        let (program, args) = sandbox.command_line(&["node".into(), "server.js".into()])?;
        assert_eq!(program, "strace");
        let text = args.join(" ");
        let work = work.display();
        let traces = traces.display();
        for part in [
            format!("-o {traces}/trace -- "),
            "bwrap --ro-bind / /".to_owned(),
            format!("--bind {work} {work}"),
            format!("--tmpfs {traces}"),
            "--unshare-net".to_owned(),
            "--clearenv".to_owned(),
            "--setenv MEMORY_FILE_PATH /s/work/m.json".to_owned(),
        ] {
            assert!(text.contains(&part), "{part} in {text}");
        }
        assert!(text.ends_with(" -- node server.js"), "{text}");
        assert!(!text.contains(&format!("--bind {traces}")), "the trace is never writable inside: {text}");
        Ok(())
    }
}
