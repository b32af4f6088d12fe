//! The observing sandbox's command line: `strace -f` around `bwrap` around the server.
//!
//! bubblewrap gives the server a read-only view of the whole file system, the scratch copy bound writable (at the
//! same path, so paths in arguments mean the same inside and out) as its working directory, and fresh `/dev` and
//! `/proc`; `/tmp` stays read-only, so a temporary file is a refused write strace records. It gets no
//! network (a private network namespace with only loopback), its own process and IPC namespaces, a cleared
//! environment with only what [`Sandbox::env`] lists, and dies with toolgate. strace runs outside the sandbox and
//! follows every process (`-f`), writing absolute timestamps (`-ttt`) so effects can be attributed to the call that
//! was in flight. This builds argument vectors only; it starts nothing.

use std::path::{Path, PathBuf};

use crate::strace::TRACED;

/// Environment variables passed through from toolgate's own environment when set: enough to find programs and
/// read configuration, nothing that grants access.
const PASSED: [&str; 4] = ["PATH", "HOME", "LANG", "TERM"];

/// What the sandbox gives the server.
#[derive(Debug, Clone)]
pub struct Sandbox {
    /// The scratch copy: writable, the working directory.
    pub scratch: PathBuf,
    /// Where strace writes its trace (outside the sandbox's writable tree).
    pub trace: PathBuf,
    /// The server's environment (after the passed-through variables).
    pub env: Vec<(String, String)>,
}

impl Sandbox {
    /// The program and arguments that run `command` observed: `strace ... -- bwrap ... -- command`.
    pub fn command_line(&self, command: &[String]) -> (String, Vec<String>) {
        let mut args: Vec<String> = ["-f", "-ttt", "-qq", "-s", "4096", "-e"].map(str::to_owned).to_vec();
        args.push(format!("trace={TRACED}"));
        args.push("-o".into());
        args.push(path_text(&self.trace));
        args.push("--".into());
        args.push("bwrap".into());
        let scratch = path_text(&self.scratch);
        for part in [
            "--ro-bind",
            "/",
            "/",
            "--dev",
            "/dev",
            "--proc",
            "/proc",
            "--bind",
            &scratch,
            &scratch,
            "--chdir",
            &scratch,
            "--unshare-net",
            "--unshare-pid",
            "--unshare-ipc",
            "--unshare-uts",
            "--die-with-parent",
            "--clearenv",
        ] {
            args.push(part.to_owned());
        }
        let mut env: Vec<(String, String)> = PASSED
            .iter()
            .filter_map(|name| std::env::var(name).ok().map(|value| ((*name).to_owned(), value)))
            .collect();
        // Python would otherwise try to write bytecode caches next to read-only modules: refused writes that say
        // nothing about the tool.
        env.push(("PYTHONDONTWRITEBYTECODE".into(), "1".into()));
        env.extend(self.env.iter().cloned());
        for (name, value) in env {
            args.extend(["--setenv".to_owned(), name, value]);
        }
        args.push("--".into());
        args.extend(command.iter().cloned());
        ("strace".into(), args)
    }
}

fn path_text(path: &Path) -> String {
    path.to_string_lossy().into_owned()
}

/// The programs verify needs that are not on `PATH` (`bwrap`, `strace`).
pub fn missing_tools() -> Vec<&'static str> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    ["bwrap", "strace"]
        .into_iter()
        .filter(|program| !std::env::split_paths(&path).any(|dir| dir.join(program).is_file()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_line_confines_and_traces() {
        let sandbox = Sandbox {
            scratch: "/s/work".into(),
            trace: "/s/trace".into(),
            env: vec![("MEMORY_FILE_PATH".into(), "/s/work/m.json".into())],
        };
        let (program, args) = sandbox.command_line(&["node".into(), "server.js".into()]);
        assert_eq!(program, "strace");
        let text = args.join(" ");
        for part in [
            "-o /s/trace -- bwrap --ro-bind / /",
            "--bind /s/work /s/work --chdir /s/work --unshare-net",
            "--clearenv",
            "--setenv MEMORY_FILE_PATH /s/work/m.json -- node server.js",
        ] {
            assert!(text.contains(part), "{part} in {text}");
        }
    }
}
