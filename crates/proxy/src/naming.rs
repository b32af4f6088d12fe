//! How upstream tool and prompt names are exposed to clients: deterministic prefixes, kept within 64 characters of
//! `[A-Za-z0-9_-]` (the charset and length clients accept everywhere).
//!
//! Pure functions. A name that would be too long keeps its start and ends with a short digest of the whole, so two
//! long names never collapse into one and the same input always gives the same output. A name that already starts
//! with the prefix and `_` keeps it once (`git`'s `git_status` is `git_status`, not `git_git_status`): it already
//! says whose it is. Should the same upstream also list the unprefixed twin (`status`), the two collide like any
//! two names, the first listed wins and the collision is reported.

use toolgate_core::fingerprint::digest_bytes;
use toolgate_spec::Prefix;

/// Longest exposed name.
pub const MAX_NAME_LEN: usize = 64;

/// The name a client sees for an upstream's tool or prompt.
pub fn exposed_name(prefix: &Prefix, name: &str) -> String {
    match prefix {
        Prefix::None | Prefix::Passthrough => name.to_owned(),
        Prefix::With(prefix) => {
            let own = format!("{prefix}_");
            if name.starts_with(&own) && name.len() > own.len() {
                bounded(&sanitize(name))
            } else {
                bounded(&sanitize(&format!("{own}{name}")))
            }
        }
    }
}

/// Replaces every character outside `[A-Za-z0-9_-]` with `_`.
pub fn sanitize(name: &str) -> String {
    name.chars()
        .map(|character| if character.is_ascii_alphanumeric() || character == '-' { character } else { '_' })
        .collect()
}

fn bounded(name: &str) -> String {
    if name.len() <= MAX_NAME_LEN {
        return name.to_owned();
    }
    // sha256:<hex>: the first 8 hex digits are plenty to keep distinct names distinct in one catalog.
    let digest = digest_bytes(name.as_bytes());
    let short = digest.trim_start_matches("sha256:").get(..8).unwrap_or_default().to_owned();
    let keep = MAX_NAME_LEN - short.len() - 1;
    format!("{}_{short}", name.get(..keep).unwrap_or(name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_and_sanitizes() {
        assert_eq!(exposed_name(&Prefix::With("git".into()), "git_status"), "git_status", "the prefix once");
        assert_eq!(exposed_name(&Prefix::With("git".into()), "status"), "git_status");
        assert_eq!(exposed_name(&Prefix::With("git".into()), "gitlog"), "git_gitlog", "only a whole prefix counts");
        assert_eq!(exposed_name(&Prefix::With("git".into()), "git_"), "git_git_");
        assert_eq!(exposed_name(&Prefix::With("fs".into()), "read.file"), "fs_read_file");
        assert_eq!(exposed_name(&Prefix::None, "read.file"), "read.file");
        assert_eq!(exposed_name(&Prefix::Passthrough, "read.file"), "read.file");
    }

    #[test]
    fn long_names_stay_distinct_and_bounded() {
        let prefix = Prefix::With("upstream".into());
        let one = exposed_name(&prefix, &"a".repeat(80));
        let two = exposed_name(&prefix, &format!("{}b", "a".repeat(79)));
        assert_eq!(one.len(), MAX_NAME_LEN);
        assert_eq!(two.len(), MAX_NAME_LEN);
        assert_ne!(one, two);
        assert_eq!(one, exposed_name(&prefix, &"a".repeat(80)), "deterministic");
        assert!(one.chars().all(|character| character.is_ascii_alphanumeric() || "_-".contains(character)));
    }
}
