//! The instance id: which gateway process wrote an audit row or queued an approval, when several share one store.
//!
//! Configured (`[store] instance_id`), or generated once and kept in `<state-dir>/instance-id`, so a process keeps its
//! id across restarts (and can lapse what its previous run left waiting). Two processes must not share a state
//! directory without configuring distinct ids. This module only names the process; it never decides anything.

use std::io::{ErrorKind, Read as _, Write as _};
use std::path::{Path, PathBuf};

use crate::error::StoreError;

/// The file in the state directory that keeps a generated id.
pub const INSTANCE_FILE: &str = "instance-id";

/// Longest instance id accepted (it is stored in every audit row).
const MAX_LEN: usize = 64;

/// Whether `id` can name an instance: 1 to 64 ASCII letters, digits, `-`, `_` or `.`.
pub fn valid_instance_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= MAX_LEN
        && id.bytes().all(|byte| byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'_' | b'.'))
}

/// The configured id, else the one kept in `state_dir`, else a new one written there.
pub(crate) fn resolve(state_dir: &Path, configured: Option<&str>) -> Result<String, StoreError> {
    if let Some(id) = configured {
        return checked(id.to_owned(), "the configured instance id");
    }
    let path = state_dir.join(INSTANCE_FILE);
    let io = |source| StoreError::Instance { path: path.clone(), source };
    match read(&path) {
        Ok(id) => return checked(id, "the instance-id file"),
        Err(error) if error.kind() == ErrorKind::NotFound => {}
        Err(source) => return Err(io(source)),
    }
    // 48 random bits: unique enough for a fleet, short enough to read in every row.
    let uuid = uuid::Uuid::new_v4().simple().to_string();
    let id = format!("gw-{}", uuid.get(20..).unwrap_or(&uuid));
    let created = crate::permissions::private(std::fs::OpenOptions::new().write(true).create_new(true)).open(&path);
    match created {
        Ok(mut file) => {
            file.write_all(format!("{id}\n").as_bytes()).map_err(io)?;
            file.sync_all().map_err(io)?;
            Ok(id)
        }
        // Another process of this state directory wrote it first: theirs is the id.
        Err(error) if error.kind() == ErrorKind::AlreadyExists => {
            checked(read(&path).map_err(io)?, "the instance-id file")
        }
        Err(source) => Err(io(source)),
    }
}

fn read(path: &PathBuf) -> std::io::Result<String> {
    let mut text = String::new();
    std::fs::File::open(path)?.read_to_string(&mut text)?;
    Ok(text.trim().to_owned())
}

fn checked(id: String, what: &'static str) -> Result<String, StoreError> {
    if valid_instance_id(&id) {
        Ok(id)
    } else {
        Err(StoreError::Corrupt {
            what: "instance id",
            detail: format!("{what} {id:?} is not 1 to 64 letters, digits, '-', '_' or '.'"),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_generated_id_is_kept_and_a_configured_one_wins() -> Result<(), StoreError> {
        let directory = tempfile::tempdir().map_err(|source| StoreError::StateDir { path: "tmp".into(), source })?;
        let first = resolve(directory.path(), None)?;
        assert!(first.starts_with("gw-") && valid_instance_id(&first), "{first}");
        assert_eq!(resolve(directory.path(), None)?, first, "stable across opens");
        assert_eq!(resolve(directory.path(), Some("eu-1"))?, "eu-1");
        assert!(resolve(directory.path(), Some("no spaces")).is_err());
        Ok(())
    }
}
