//! Locating the built `toolgate-fixture` binary (the conformance fixture MCP server; the CLI tests find `toolgate`
//! the same way) and building the commands that start it over stdio or Streamable HTTP.
//!
//! The binary is found next to the running test executable (`target/<profile>/`, one level above `deps/`):
//! `cargo test --workspace` builds every workspace binary before running tests. This module never builds it;
//! a missing binary is a test failure with the command that builds it, never a skip.

use std::path::{Path, PathBuf};

use crate::PeerCommand;

/// The fixture binary's file name on this platform.
const BINARY_NAME: &str = if cfg!(windows) { "toolgate-fixture.exe" } else { "toolgate-fixture" };

/// The built `toolgate-fixture` binary next to the running test executable.
///
/// Panics when it is not there, with the command that builds it.
pub fn fixture_binary() -> PathBuf {
    built_binary(BINARY_NAME, "toolgate-fixture")
}

/// The binary `file_name` of the workspace package `package`, built next to the running test executable.
///
/// Panics when it is not there, with the command that builds it.
pub(crate) fn built_binary(file_name: &str, package: &str) -> PathBuf {
    let test_executable = std::env::current_exe().expect("the running test executable has a path");
    let candidates = binary_candidates(&test_executable, file_name);
    candidates.iter().find(|candidate| candidate.is_file()).cloned().unwrap_or_else(|| {
        panic!(
            "{package} is not built (looked for {}): build it with `cargo build -p {package}`",
            candidates.iter().map(|candidate| candidate.display().to_string()).collect::<Vec<_>>().join(", ")
        )
    })
}

/// Where a binary may be for a test executable at `test_executable`: its own directory, then the parent of a
/// `deps/` directory (integration and unit tests live in `target/<profile>/deps/`).
fn binary_candidates(test_executable: &Path, file_name: &str) -> Vec<PathBuf> {
    let Some(directory) = test_executable.parent() else { return Vec::new() };
    let mut candidates = vec![directory.join(file_name)];
    if directory.file_name().is_some_and(|name| name == "deps")
        && let Some(profile_directory) = directory.parent()
    {
        candidates.push(profile_directory.join(file_name));
    }
    candidates
}

/// The fixture serving one MCP session over stdin/stdout.
pub fn fixture_stdio() -> PeerCommand {
    PeerCommand::new(fixture_binary()).arg("--stdio")
}

/// The fixture serving Streamable HTTP at `http://127.0.0.1:{port}/mcp` (port 0 picks a free port; the fixture
/// then prints `toolgate-fixture listening on http://127.0.0.1:PORT/mcp` on stderr).
pub fn fixture_http(port: u16) -> PeerCommand {
    PeerCommand::new(fixture_binary()).arg("--http").arg(format!("127.0.0.1:{port}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn candidates_cover_the_profile_directory_above_deps() {
        let candidates = binary_candidates(Path::new("/w/target/debug/deps/peers-0123"), BINARY_NAME);
        assert_eq!(
            candidates,
            vec![
                PathBuf::from("/w/target/debug/deps").join(BINARY_NAME),
                PathBuf::from("/w/target/debug").join(BINARY_NAME)
            ]
        );
        let candidates = binary_candidates(Path::new("/w/target/debug/toolgate"), BINARY_NAME);
        assert_eq!(candidates, vec![PathBuf::from("/w/target/debug").join(BINARY_NAME)]);
    }
}
