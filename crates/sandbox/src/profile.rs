//! What one sandboxed server gets: network, writable and hidden paths, environment, limits, working directory.
//!
//! A profile is plain data decided before the server starts; it never changes a running sandbox (a server that
//! needs another profile is started again). Nothing here spawns or probes anything.

use std::path::{Path, PathBuf};

use toolgate_spec::{SandboxEnvironment, SandboxMode, SandboxSpec};

/// The network a sandbox has.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Network {
    /// A network namespace of its own with only loopback: every connection out fails at once (refused or
    /// unreachable), and toolgate's own listeners are not reachable either.
    None,
    /// The host's network, except TCP connections to these ports (toolgate's own listeners), refused by Landlock.
    Host {
        /// Ports a connection to is refused (on any address).
        deny_ports: Vec<u16>,
        /// The program that applies that refusal (toolgate's own binary, see [`crate::PORT_GUARD_ARG`]); needed
        /// when `deny_ports` is not empty.
        guard: Option<PathBuf>,
    },
}

/// Resource limits; `None` leaves that resource unlimited.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ResourceLimits {
    /// `RLIMIT_DATA` in bytes: heap and private writable mappings (address-space reservations do not count, so
    /// Node's large reservations still start).
    pub memory_bytes: Option<u64>,
    /// Most processes and threads at once, as the `pid_max` of the sandbox's own pid namespace.
    pub max_processes: Option<u32>,
    /// `RLIMIT_NOFILE`.
    pub max_open_files: Option<u64>,
}

/// Where the server starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cwd {
    /// This directory (read-only unless writable), or toolgate's own when `None`.
    Keep(Option<PathBuf>),
    /// An empty private directory: a fresh `/tmp` of the sandbox's own, gone when the server exits.
    Clean,
}

/// Everything one sandboxed server may see and do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Profile {
    /// The network, or none.
    pub network: Network,
    /// Host paths bound read-write at the same place; the rest of the file system is read-only.
    pub writable: Vec<PathBuf>,
    /// Host paths that do not exist inside (an empty directory or an empty file stands in their place).
    pub hidden: Vec<PathBuf>,
    /// The whole environment of the server; nothing else is inherited.
    pub env: Vec<(String, String)>,
    /// Resource limits.
    pub limits: ResourceLimits,
    /// The working directory.
    pub cwd: Cwd,
}

/// What an upstream's effective hints ask of its sandbox in `auto` mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct HintNeeds {
    /// Some tool is open-world.
    pub network: bool,
    /// Some tool is not read-only.
    pub writes: bool,
}

impl Profile {
    /// The profile of an upstream in `auto` or `strict` mode (`off` is the caller's business: no sandbox at all).
    ///
    /// `needs` is what its tools' effective hints ask for (before the first listing, assume writes and no network);
    /// `upstream_env` is the upstream's own `env` table (always set); `read_var` reads toolgate's environment for the
    /// names `pass_env` lists; `cwd` is the configured working directory.
    pub fn for_upstream(
        settings: &SandboxSpec,
        needs: HintNeeds,
        environment: &SandboxEnvironment,
        upstream_env: &[(String, String)],
        cwd: Option<&Path>,
        read_var: impl Fn(&str) -> Option<String>,
    ) -> Profile {
        let network = match (settings.mode, settings.network) {
            (_, Some(granted)) => granted,
            (SandboxMode::Auto, None) => needs.network,
            (SandboxMode::Strict | SandboxMode::Off, None) => false,
        };
        // Auto: an upstream whose every tool is read-only gets no writable path, whatever is listed.
        let writable = match settings.mode {
            SandboxMode::Auto if !needs.writes => Vec::new(),
            _ => settings.writable.clone(),
        };
        let mut env: Vec<(String, String)> = settings
            .pass_env
            .iter()
            .filter(|name| !upstream_env.iter().any(|(key, _)| key == *name))
            .filter_map(|name| read_var(name).map(|value| (name.clone(), value)))
            .collect();
        env.extend(upstream_env.iter().cloned());
        Profile {
            network: if network {
                Network::Host { deny_ports: environment.own_ports.clone(), guard: environment.port_guard.clone() }
            } else {
                Network::None
            },
            writable,
            hidden: environment.hidden_paths.clone(),
            env,
            limits: ResourceLimits {
                memory_bytes: Some(settings.memory_mib.saturating_mul(1024 * 1024)),
                max_processes: Some(settings.max_processes),
                max_open_files: Some(settings.max_open_files),
            },
            cwd: if settings.clean_cwd { Cwd::Clean } else { Cwd::Keep(cwd.map(Path::to_path_buf)) },
        }
    }

    /// An observing sandbox (for a verifier): a read-only root, `scratch` writable and the working directory, no
    /// network, exactly `env`, no resource limits (add them to `limits` when wanted).
    pub fn observing(scratch: PathBuf, env: Vec<(String, String)>) -> Profile {
        Profile {
            network: Network::None,
            writable: vec![scratch.clone()],
            hidden: Vec::new(),
            env,
            limits: ResourceLimits::default(),
            cwd: Cwd::Keep(Some(scratch)),
        }
    }

    /// Whether the server has the network.
    pub fn has_network(&self) -> bool {
        matches!(self.network, Network::Host { .. })
    }

    /// The rules in one line, for logs and the notes on refused actions: `network: none; writable: (none); ...`.
    pub fn describe(&self) -> String {
        let network = match &self.network {
            Network::None => "none".to_owned(),
            Network::Host { deny_ports, .. } if deny_ports.is_empty() => "host".to_owned(),
            Network::Host { deny_ports, .. } => format!(
                "host, except toolgate's own ports {}",
                deny_ports.iter().map(u16::to_string).collect::<Vec<_>>().join(", ")
            ),
        };
        format!("network: {network}; writable: {}", describe_paths(&self.writable))
    }
}

/// Paths for a message: at most four, each quoted and cut at 120 characters, so a note stays bounded.
pub(crate) fn describe_paths(paths: &[PathBuf]) -> String {
    if paths.is_empty() {
        return "(none)".to_owned();
    }
    let mut shown: Vec<String> = paths
        .iter()
        .take(4)
        .map(|path| {
            let text = path.to_string_lossy();
            let cut: String = text.chars().take(120).collect();
            format!("{cut:?}")
        })
        .collect();
    if paths.len() > 4 {
        shown.push(format!("and {} more", paths.len() - 4));
    }
    shown.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(mode: SandboxMode) -> SandboxSpec {
        SandboxSpec { writable: vec!["/data".into()], ..SandboxSpec::with_mode(mode) }
    }

    fn profile(settings: &SandboxSpec, needs: HintNeeds) -> Profile {
        let environment = SandboxEnvironment {
            hidden_paths: vec!["/state".into()],
            own_ports: vec![8765],
            port_guard: Some("/bin/toolgate".into()),
        };
        let own = [("TOKEN".to_owned(), "x".to_owned())];
        Profile::for_upstream(settings, needs, &environment, &own, None, |name| {
            (name == "PATH" || name == "SECRET").then(|| format!("{name}-value"))
        })
    }

    #[test]
    fn auto_follows_the_hints_and_strict_ignores_them() {
        let open = HintNeeds { network: true, writes: true };
        let read_only = HintNeeds { network: false, writes: false };
        let auto = profile(&settings(SandboxMode::Auto), open);
        assert_eq!(auto.network, Network::Host { deny_ports: vec![8765], guard: Some("/bin/toolgate".into()) });
        assert_eq!(auto.writable, vec![PathBuf::from("/data")]);
        let auto = profile(&settings(SandboxMode::Auto), read_only);
        assert_eq!((auto.network, auto.writable), (Network::None, Vec::new()));
        let strict = profile(&settings(SandboxMode::Strict), open);
        assert_eq!((strict.network, strict.writable), (Network::None, vec![PathBuf::from("/data")]));
        let granted = SandboxSpec { network: Some(true), ..settings(SandboxMode::Strict) };
        assert!(profile(&granted, read_only).has_network());
        let refused = SandboxSpec { network: Some(false), ..settings(SandboxMode::Auto) };
        assert!(!profile(&refused, open).has_network());
    }

    #[test]
    fn only_passed_variables_and_the_upstreams_own_reach_the_server() {
        let auto = profile(&settings(SandboxMode::Auto), HintNeeds::default());
        assert_eq!(auto.env, vec![("PATH".to_owned(), "PATH-value".to_owned()), ("TOKEN".to_owned(), "x".to_owned())]);
        assert_eq!(auto.hidden, vec![PathBuf::from("/state")]);
    }

    #[test]
    fn descriptions_are_bounded() {
        let paths: Vec<PathBuf> = (0..10).map(|index| PathBuf::from(format!("/{}{index}", "x".repeat(500)))).collect();
        let text = describe_paths(&paths);
        assert!(text.len() < 4 * 130 + 20, "{text}");
        assert!(text.ends_with("and 6 more"));
    }
}
