//! Locating the real MCP peers installed by `cargo xtask test` and building the command that starts each.
//!
//! Layout under the peers directory (written by `xtask/src/test_run.rs`): `node/node_modules/.bin` (Node 22 and
//! the npm peers), `venv/` (the Python SDK, `mcp-server-git`, `-time` and `-fetch`), and `installed.toml`, a verbatim copy of
//! `peers.toml` written last, as proof the install finished. This module only reads that layout: it never
//! installs, and it panics rather than letting a test skip when something is missing.

use std::path::{Path, PathBuf};

use crate::{PeerCommand, path_with_first, workspace_root};

/// The pinned peer list (`crates/test-support/peers.toml`), shared with the installer in xtask.
pub const PEERS_TOML: &str = include_str!("../peers.toml");

/// The name of the stamp file the installer writes after a complete install.
const STAMP_FILE: &str = "installed.toml";

/// Names the package directory of a 2026 conformance suite installed outside the peers directory.
const CONFORMANCE_2026_ENV: &str = "TOOLGATE_CONFORMANCE_2026";

const INSTALL_HINT: &str = "run `cargo xtask test` (or `cargo xtask test --install-only`)";

/// The installed peers. Every method returns a command that works from any working directory.
#[derive(Debug, Clone)]
pub struct Peers {
    dir: PathBuf,
}

impl Peers {
    /// Finds the peers in `$TOOLGATE_PEERS_DIR`, else in `<workspace root>/.cache/peers`.
    ///
    /// Panics when they are not installed, or were installed from a different `peers.toml`.
    pub fn locate() -> Peers {
        let dir = match std::env::var_os("TOOLGATE_PEERS_DIR") {
            Some(dir) if !dir.is_empty() => {
                std::path::absolute(PathBuf::from(dir)).expect("TOOLGATE_PEERS_DIR can be made absolute")
            }
            _ => workspace_root().join(".cache").join("peers"),
        };
        Self::at(dir)
    }

    /// Uses the peers installed in `dir`, with the same checks as [`Peers::locate`].
    pub fn at(dir: PathBuf) -> Peers {
        let stamp = dir.join(STAMP_FILE);
        match std::fs::read_to_string(&stamp) {
            Err(_) => panic!("peers are not installed: {INSTALL_HINT} (looked for {})", stamp.display()),
            Ok(installed) if installed != PEERS_TOML => panic!(
                "peers in {} were installed from a different peers.toml: {INSTALL_HINT} to reinstall them",
                dir.display()
            ),
            Ok(_) => Peers { dir },
        }
    }

    /// The peers directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The directory to put first on `PATH` so that `node` is Node 22 and the npm peers' commands resolve.
    pub fn node_bin_dir(&self) -> PathBuf {
        self.dir.join("node").join("node_modules").join(".bin")
    }

    /// The Node 22 executable.
    pub fn node(&self) -> PathBuf {
        self.existing(self.node_bin_dir().join("node"))
    }

    /// The virtual environment's Python, which has the `mcp` package (the Python SDK) installed.
    pub fn python(&self) -> PathBuf {
        self.existing(self.venv_bin_dir().join("python"))
    }

    /// `PATH` with Node 22 and the npm peers first, then the venv's scripts, then the inherited `PATH`.
    pub fn path_env(&self) -> String {
        let with_venv = path_with_first(&self.venv_bin_dir());
        let node_first =
            std::env::join_paths(std::iter::once(self.node_bin_dir()).chain(std::env::split_paths(&with_venv)))
                .expect("peer directories contain no path separator");
        node_first.to_string_lossy().into_owned()
    }

    /// `@modelcontextprotocol/server-everything` over stdio (every MCP feature, for protocol tests).
    pub fn server_everything(&self) -> PeerCommand {
        self.node_script("mcp-server-everything")
    }

    /// `server-everything` over Streamable HTTP on `127.0.0.1:port`, endpoint `/mcp`.
    pub fn server_everything_http(&self, port: u16) -> PeerCommand {
        self.node_script("mcp-server-everything").arg("streamableHttp").env("PORT", port.to_string())
    }

    /// `@modelcontextprotocol/server-filesystem` over stdio, allowed to touch only `root`.
    pub fn server_filesystem(&self, root: &Path) -> PeerCommand {
        self.node_script("mcp-server-filesystem").arg(absolute(root).to_string_lossy())
    }

    /// `@modelcontextprotocol/server-memory` over stdio, keeping its knowledge graph in `memory_file`.
    pub fn server_memory(&self, memory_file: &Path) -> PeerCommand {
        // The server resolves a relative MEMORY_FILE_PATH against its own install directory, not the cwd.
        self.node_script("mcp-server-memory").env("MEMORY_FILE_PATH", absolute(memory_file).to_string_lossy())
    }

    /// `mcp-server-git` (Python) over stdio, serving the git repository at `repo`.
    pub fn mcp_server_git(&self, repo: &Path) -> PeerCommand {
        PeerCommand::new(self.existing(self.venv_bin_dir().join("mcp-server-git")))
            .arg("--repository")
            .arg(absolute(repo).to_string_lossy())
            .env("PATH", self.path_env())
    }

    /// `mcp-server-time` (Python) over stdio, installed beside `mcp-server-git`.
    pub fn mcp_server_time(&self) -> PeerCommand {
        PeerCommand::new(self.existing(self.venv_bin_dir().join("mcp-server-time"))).env("PATH", self.path_env())
    }

    /// `mcp-server-fetch` (Python) over stdio, installed beside `mcp-server-git`. It fetches URLs: open-world.
    pub fn mcp_server_fetch(&self) -> PeerCommand {
        PeerCommand::new(self.existing(self.venv_bin_dir().join("mcp-server-fetch"))).env("PATH", self.path_env())
    }

    /// The MCP Inspector in CLI mode (`inspector --cli`). Append the server command, then e.g.
    /// `--method tools/list`; npm peers can be named by their command (`mcp-server-everything`).
    pub fn inspector_cli(&self) -> PeerCommand {
        self.node_script("mcp-inspector").arg("--cli")
    }

    /// The conformance suite (`@modelcontextprotocol/conformance` 0.1.16); append `server --url ...` or `list`.
    /// Started by its package's entry script, not through `.bin/conformance`: the 2026 suite's alias declares the
    /// same command name, and which package npm links there depends on the install's order.
    pub fn conformance(&self) -> PeerCommand {
        self.package_script(&self.node_modules().join("@modelcontextprotocol").join("conformance"))
    }

    /// The 2026-07-28 conformance suite (`@modelcontextprotocol/conformance` 0.2.x), installed beside 0.1.16 under
    /// the npm alias `conformance-2026`. Its command name collides with 0.1.16's, so it is started by its package's
    /// entry script, not through `.bin`. `TOOLGATE_CONFORMANCE_2026` may name another install's package directory
    /// (the folder holding its `package.json`), for a developer trying a version before it is pinned.
    pub fn conformance_2026(&self) -> PeerCommand {
        let package = match std::env::var_os(CONFORMANCE_2026_ENV) {
            Some(dir) if !dir.is_empty() => PathBuf::from(dir),
            _ => self.node_modules().join("conformance-2026"),
        };
        self.package_script(&package)
    }

    fn node_modules(&self) -> PathBuf {
        self.dir.join("node").join("node_modules")
    }

    /// A conformance suite package's `bin.conformance` entry (`dist/index.js`), run with Node 22.
    fn package_script(&self, package: &Path) -> PeerCommand {
        let script = self.existing(package.join("dist").join("index.js"));
        PeerCommand::new(self.node()).arg(script.to_string_lossy()).env("PATH", self.path_env())
    }

    fn venv_bin_dir(&self) -> PathBuf {
        self.dir.join("venv").join("bin")
    }

    /// Runs an npm package's command with Node 22 explicitly, so the machine's older `node` is never used.
    fn node_script(&self, bin: &str) -> PeerCommand {
        let link = self.existing(self.node_bin_dir().join(bin));
        let script =
            std::fs::canonicalize(&link).unwrap_or_else(|error| panic!("cannot resolve {}: {error}", link.display()));
        PeerCommand::new(self.node()).arg(script.to_string_lossy()).env("PATH", self.path_env())
    }

    fn existing(&self, path: PathBuf) -> PathBuf {
        if !path.exists() {
            panic!(
                "peer {} is missing although {} says the install finished: {INSTALL_HINT}",
                path.display(),
                self.dir.join(STAMP_FILE).display()
            );
        }
        path
    }
}

fn absolute(path: &Path) -> PathBuf {
    std::path::absolute(path).unwrap_or_else(|error| panic!("cannot make {} absolute: {error}", path.display()))
}
