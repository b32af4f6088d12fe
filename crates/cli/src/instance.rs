//! Which process of a fleet this `serve` is: its instance id, shown by `toolgate status`, `/metrics` and the
//! health endpoints (docs/deploy.md). `$TOOLGATE_INSTANCE_ID` when set (each process of a fleet sharing one state
//! directory needs its own), else the id kept in `<state>/instance-id`, made once from the host name and a random
//! suffix, so a single process keeps its id across restarts.
//!
//! An id is 1 to 64 characters of letters, digits, `.`, `_` and `-` (it goes into metric labels and log lines
//! unescaped); anything else is refused with the reason. This file must not decide anything from the id.

use std::path::Path;

use anyhow::{Context, Result, bail};

/// The environment variable that names this process.
pub(crate) const INSTANCE_ENV: &str = "TOOLGATE_INSTANCE_ID";
/// The file in the state directory that keeps a generated id.
const INSTANCE_FILE: &str = "instance-id";
const MAX_CHARS: usize = 64;

/// This process's instance id: the environment's, else the state directory's (made on first use).
pub(crate) fn instance_id(state: &Path) -> Result<String> {
    if let Ok(id) = std::env::var(INSTANCE_ENV) {
        return checked(id.trim()).with_context(|| format!("${INSTANCE_ENV} is not a usable instance id"));
    }
    let path = state.join(INSTANCE_FILE);
    match std::fs::read_to_string(&path) {
        Ok(text) => return checked(text.trim()).with_context(|| format!("{} holds no usable id", path.display())),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
        Err(error) => return Err(error).with_context(|| format!("cannot read {}", path.display())),
    }
    let suffix = toolgate_web::random_token().context("cannot make an instance id")?;
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    let host: String = host.trim().chars().filter(|c| allowed(*c)).take(40).collect();
    let id = format!("{}-{}", if host.is_empty() { "toolgate" } else { &host }, &suffix[..8]);
    std::fs::write(&path, format!("{id}\n")).with_context(|| format!("cannot write {}", path.display()))?;
    Ok(id)
}

fn allowed(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')
}

fn checked(id: &str) -> Result<String> {
    if id.is_empty() || id.chars().count() > MAX_CHARS {
        bail!("an instance id has 1 to {MAX_CHARS} characters");
    }
    if let Some(bad) = id.chars().find(|c| !allowed(*c)) {
        bail!("an instance id holds only letters, digits, `.`, `_` and `-`, not {bad:?}");
    }
    Ok(id.to_owned())
}

#[cfg(test)]
mod tests {
    use super::checked;

    #[test]
    fn ids_are_short_plain_words() {
        assert_eq!(checked("gw-1.eu_west").ok().as_deref(), Some("gw-1.eu_west"));
        for bad in ["", "a b", "x\"}", &"a".repeat(65), "é"] {
            assert!(checked(bad).is_err(), "{bad:?}");
        }
    }
}
