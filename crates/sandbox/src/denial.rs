//! Naming the sandbox rule behind a server's error: a refused write or connection comes back from the server as its
//! own error text (EROFS, EACCES, ECONNREFUSED, ...); toolgate adds a note saying which rule of the sandbox most
//! likely refused it, so the person and the model see a denial rather than a mysterious failure.
//!
//! The note is built only from toolgate's own words and the profile; nothing of the server's text is repeated, so
//! the note needs no escaping beyond the configured paths, which are quoted and bounded.

use crate::profile::{Network, Profile, describe_paths};

/// What an error text shows, in the words servers (Node, Python, libc) use, and the rule it points to.
const SIGNS: [(&str, Rule); 19] = [
    ("EROFS", Rule::ReadOnly),
    ("Read-only file system", Rule::ReadOnly),
    ("EACCES", Rule::Denied),
    ("Permission denied", Rule::Denied),
    ("EPERM", Rule::Denied),
    ("Operation not permitted", Rule::Denied),
    ("ECONNREFUSED", Rule::Network),
    ("Connection refused", Rule::Network),
    ("ENETUNREACH", Rule::Network),
    ("Network is unreachable", Rule::Network),
    ("EAI_AGAIN", Rule::Network),
    ("ENOTFOUND", Rule::Network),
    ("Temporary failure in name resolution", Rule::Network),
    ("Name or service not known", Rule::Network),
    ("EMFILE", Rule::Limits),
    ("Too many open files", Rule::Limits),
    ("ENOMEM", Rule::Limits),
    ("Cannot allocate memory", Rule::Limits),
    ("Resource temporarily unavailable", Rule::Limits),
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Rule {
    ReadOnly,
    Denied,
    Network,
    Limits,
}

/// toolgate's note for an error `text` of a server running under `profile`, or `None` when the text shows no sign
/// of a sandbox refusal (or the profile allows what it shows). `upstream` and `mode` name the sandbox.
pub fn explain_denial(text: &str, profile: &Profile, upstream: &str, mode: &str) -> Option<String> {
    // Only the start of a long text is searched: a bounded cost per result.
    let head: String = text.chars().take(16 * 1024).collect();
    let (sign, rule) = SIGNS.iter().find(|(sign, rule)| head.contains(sign) && applies(*rule, profile))?;
    let refused = match rule {
        Rule::ReadOnly => format!(
            "a write outside the writable paths (the file system is read-only except: {})",
            describe_paths(&profile.writable)
        ),
        Rule::Denied => format!(
            "an access it may not make (the file system is read-only except: {}; toolgate's own files are hidden{})",
            describe_paths(&profile.writable),
            match &profile.network {
                Network::Host { deny_ports, .. } if !deny_ports.is_empty() => format!(
                    "; connections to toolgate's own ports {} are refused",
                    deny_ports.iter().map(u16::to_string).collect::<Vec<_>>().join(", ")
                ),
                _ => String::new(),
            }
        ),
        Rule::Network => match &profile.network {
            Network::None => "a network connection (the sandbox has no network)".to_owned(),
            Network::Host { deny_ports, .. } => format!(
                "a connection to toolgate's own port (refused: {})",
                deny_ports.iter().map(u16::to_string).collect::<Vec<_>>().join(", ")
            ),
        },
        Rule::Limits => {
            let limits = profile.limits;
            let part = |name: &str, value: Option<String>| value.map(|value| format!("{name} {value}"));
            let parts: Vec<String> = [
                part("memory", limits.memory_bytes.map(|bytes| format!("{} MiB", bytes / (1024 * 1024)))),
                part("processes", limits.max_processes.map(|count| count.to_string())),
                part("open files", limits.max_open_files.map(|count| count.to_string())),
            ]
            .into_iter()
            .flatten()
            .collect();
            format!("a resource beyond the sandbox's limits ({})", parts.join(", "))
        }
    };
    Some(format!(
        "toolgate: upstream {upstream:?} runs in a sandbox (mode {mode}); its error ({sign}) is what the sandbox \
         answers to {refused}"
    ))
}

fn applies(rule: Rule, profile: &Profile) -> bool {
    match rule {
        Rule::ReadOnly | Rule::Denied | Rule::Limits => true,
        Rule::Network => match &profile.network {
            Network::None => true,
            Network::Host { deny_ports, .. } => !deny_ports.is_empty(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::{Cwd, ResourceLimits};

    fn profile(network: Network) -> Profile {
        Profile {
            network,
            writable: vec!["/data".into()],
            hidden: Vec::new(),
            env: Vec::new(),
            limits: ResourceLimits::default(),
            cwd: Cwd::Keep(None),
        }
    }

    #[test]
    fn names_the_rule_and_never_repeats_the_servers_text() {
        let note = explain_denial(
            "read_status failed: [Errno 30] Read-only file system: 'status.log'\n\u{1b}[31m",
            &profile(Network::None),
            "liar",
            "strict",
        );
        let note = note.unwrap_or_default();
        assert!(note.contains("read-only except: \"/data\""), "{note}");
        assert!(!note.contains("status.log") && !note.contains('\u{1b}'), "{note}");
        let note = explain_denial("[Errno 111] Connection refused", &profile(Network::None), "liar", "strict");
        assert!(note.unwrap_or_default().contains("has no network"));
    }

    #[test]
    fn a_network_error_with_the_network_granted_is_not_the_sandboxs() {
        let host = Network::Host { deny_ports: Vec::new(), guard: None };
        assert_eq!(explain_denial("ECONNREFUSED", &profile(host), "web", "auto"), None);
        assert_eq!(explain_denial("all good", &profile(Network::None), "web", "auto"), None);
    }
}
