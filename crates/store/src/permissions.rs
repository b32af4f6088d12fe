//! Who may read the state: the state directory is created `0700`, and the database, its WAL and shared-memory
//! files, its lock and the audit journals are `0600`, because they hold tool arguments, approvals and the audit
//! trail. Files an older toolgate left readable by others are tightened when the store opens, with a log line.
//!
//! Unix only (elsewhere these are no-ops); it changes modes, never owners, and never touches a file the store does
//! not own.

use std::fs::OpenOptions;
use std::path::{Path, PathBuf};

use crate::error::StoreError;

/// The mode of every file the store writes.
#[cfg(unix)]
const PRIVATE_FILE: u32 = 0o600;
/// The mode of a state directory the store creates.
#[cfg(unix)]
const PRIVATE_DIR: u32 = 0o700;

/// Creates `path` and its missing parents, new directories `0700` (an existing directory keeps its mode).
pub fn create_state_dir(path: &Path) -> Result<(), StoreError> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, PRIVATE_DIR);
    builder.create(path).map_err(|source| StoreError::StateDir { path: path.to_path_buf(), source })
}

/// Makes `options` create files readable and writable by the owner only.
pub(crate) fn private(options: &mut OpenOptions) -> &mut OpenOptions {
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(options, PRIVATE_FILE);
    options
}

/// Creates the database file `0600` when it does not exist yet, so SQLite (which gives its WAL and shared-memory
/// files the database's mode) never creates any of them readable by others.
pub(crate) fn create_database(path: &Path) -> Result<(), StoreError> {
    if path.exists() {
        return Ok(());
    }
    match private(OpenOptions::new().write(true).create_new(true)).open(path) {
        Ok(_) => Ok(()),
        Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(source) => Err(StoreError::StateDir { path: path.to_path_buf(), source }),
    }
}

/// The database's companion files: WAL, shared memory, the open lock.
pub(crate) fn companions(database: &Path) -> Vec<PathBuf> {
    ["-wal", "-shm", ".lock"]
        .iter()
        .map(|suffix| {
            let mut path = database.as_os_str().to_owned();
            path.push(suffix);
            PathBuf::from(path)
        })
        .collect()
}

/// Sets each existing file in `paths` to `0600` when group or others may access it, logging each one changed. A
/// file that cannot be changed is logged and left as it is (the store still opens).
pub(crate) fn tighten<'a>(paths: impl IntoIterator<Item = &'a Path>) {
    #[cfg(unix)]
    for path in paths {
        use std::os::unix::fs::PermissionsExt;
        let Ok(metadata) = std::fs::metadata(path) else { continue };
        let mode = metadata.permissions().mode() & 0o777;
        if mode & 0o077 == 0 {
            continue;
        }
        match std::fs::set_permissions(path, std::fs::Permissions::from_mode(PRIVATE_FILE)) {
            Ok(()) => tracing::info!(
                path = %path.display(),
                from = format!("{mode:o}"),
                "tightened the permissions of a state file to 600 (it holds arguments and the audit trail)"
            ),
            Err(error) => tracing::warn!(
                path = %path.display(),
                %error,
                "a state file is readable by others and its permissions could not be tightened"
            ),
        }
    }
    #[cfg(not(unix))]
    let _ = paths.into_iter().count();
}
