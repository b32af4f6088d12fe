//! The instance id: which gateway process wrote an audit row or queued an approval, when several share one store,
//! and the lock that makes the id one process's.
//!
//! The one place an id is resolved and validated: `[store] instance_id`, else `$TOOLGATE_INSTANCE_ID`, else an id
//! generated once and kept in the state directory, so a process keeps its id across restarts (and can lapse what its
//! previous run left waiting). The gateway's store holds an exclusive lock on `<state-dir>/instance-<id>.lock` for
//! its lifetime. A configured id that another live process holds is refused at start (two processes were told the
//! same name). Generated ids live in slots: `instance-id`, then `instance-id.2`, `instance-id.3`, ...; a gateway takes
//! the first slot whose id no live process holds, so two MCP clients that each start `toolgate serve` on the default
//! state directory run as two instances (neither lapses the other's approvals as its own restart), and a restarted
//! process finds its own slot free again. This module only names the process; it never decides anything.

use std::fs::{File, TryLockError};
use std::io::{ErrorKind, Read as _, Write as _};
use std::path::{Path, PathBuf};

use crate::error::StoreError;

/// The file in the state directory that keeps a generated id.
pub const INSTANCE_FILE: &str = "instance-id";

/// The environment variable that names this process (each process of a fleet sharing a state directory needs its
/// own); `[store] instance_id` wins over it.
pub const INSTANCE_ENV: &str = "TOOLGATE_INSTANCE_ID";

/// Longest instance id accepted (it is stored in every audit row).
const MAX_LEN: usize = 64;

/// Whether `id` can name an instance: 1 to 64 ASCII letters, digits, `-`, `_` or `.` (it goes into metric labels
/// and log lines unescaped).
pub fn valid_instance_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= MAX_LEN
        && id.bytes().all(|byte| byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'_' | b'.'))
}

/// Most generated-id slots in one state directory: more live gateways than this on one directory is a mistake
/// worth an error, not a new id each.
const MAX_SLOTS: usize = 64;

/// The configured id, else `$TOOLGATE_INSTANCE_ID`, else the one kept in `state_dir`'s first slot (made there
/// when missing). For a store that takes no lock.
pub(crate) fn resolve(state_dir: &Path, configured: Option<&str>) -> Result<String, StoreError> {
    match named(configured)? {
        Some(id) => Ok(id),
        None => slot_id(&state_dir.join(INSTANCE_FILE)),
    }
}

/// The id a gateway runs as, with its lock: a configured id locked or refused; else the first generated slot no
/// live process holds.
pub(crate) fn resolve_locked(state_dir: &Path, configured: Option<&str>) -> Result<(String, InstanceLock), StoreError> {
    if let Some(id) = named(configured)? {
        let lock = InstanceLock::take(state_dir, &id)?;
        return Ok((id, lock));
    }
    let mut last = None;
    for slot in 1..=MAX_SLOTS {
        let file = if slot == 1 { INSTANCE_FILE.to_owned() } else { format!("{INSTANCE_FILE}.{slot}") };
        let id = slot_id(&state_dir.join(file))?;
        match InstanceLock::take(state_dir, &id) {
            Ok(lock) => return Ok((id, lock)),
            Err(error @ StoreError::InstanceInUse { .. }) => last = Some(error),
            Err(error) => return Err(error),
        }
    }
    Err(last.unwrap_or_else(|| StoreError::Corrupt { what: "instance id", detail: "no slot".to_owned() }))
}

/// `[store] instance_id` or `$TOOLGATE_INSTANCE_ID`, checked; `None` when neither names the process.
fn named(configured: Option<&str>) -> Result<Option<String>, StoreError> {
    if let Some(id) = configured {
        return checked(id.to_owned(), "the configured instance id ([store] instance_id)").map(Some);
    }
    match std::env::var(INSTANCE_ENV) {
        Ok(id) => checked(id.trim().to_owned(), "$TOOLGATE_INSTANCE_ID").map(Some),
        Err(_) => Ok(None),
    }
}

/// The generated id kept in `path`, made there when missing.
fn slot_id(path: &Path) -> Result<String, StoreError> {
    let path = path.to_path_buf();
    let io = |source| StoreError::Instance { path: path.clone(), source };
    match read(&path) {
        Ok(id) => return checked(id, "the instance-id file"),
        Err(error) if error.kind() == ErrorKind::NotFound => {}
        Err(source) => return Err(io(source)),
    }
    // 48 random bits: unique enough for a fleet, short enough to read in every row.
    let uuid = uuid::Uuid::new_v4().simple().to_string();
    let id = format!("gw-{}", uuid.get(20..).unwrap_or(&uuid));
    // Written whole under a temporary name, then linked into place (a link never replaces a file): a process that
    // reads the slot sees no id or a whole one, never an empty file a crash or a racing start left behind.
    let temporary = path.with_extension(format!("new-{}", uuid.get(..12).unwrap_or(&uuid)));
    let written = (|| {
        let mut file =
            crate::permissions::private(std::fs::OpenOptions::new().write(true).create_new(true)).open(&temporary)?;
        file.write_all(format!("{id}\n").as_bytes())?;
        file.sync_all()?;
        std::fs::hard_link(&temporary, &path)
    })();
    let _ = std::fs::remove_file(&temporary);
    match written {
        Ok(()) => Ok(id),
        // Another process of this state directory wrote it first: theirs is the id.
        Err(error) if error.kind() == ErrorKind::AlreadyExists => {
            checked(read(&path).map_err(io)?, "the instance-id file")
        }
        Err(source) => Err(io(source)),
    }
}

/// The exclusive lock a live process holds on its id; released when dropped (or when the process dies, however).
#[derive(Debug)]
pub(crate) struct InstanceLock {
    _file: File,
}

/// `<state_dir>/instance-<id>.lock`.
fn lock_path(state_dir: &Path, id: &str) -> PathBuf {
    state_dir.join(format!("instance-{id}.lock"))
}

impl InstanceLock {
    /// Takes the lock of `id` in `state_dir`, or says which id is taken and what to do about it.
    pub(crate) fn take(state_dir: &Path, id: &str) -> Result<InstanceLock, StoreError> {
        let path = lock_path(state_dir, id);
        let file = crate::permissions::private(std::fs::OpenOptions::new().write(true).create(true).truncate(false))
            .open(&path)
            .map_err(|source| StoreError::Instance { path: path.clone(), source })?;
        match file.try_lock() {
            Ok(()) => Ok(InstanceLock { _file: file }),
            Err(TryLockError::WouldBlock) => Err(StoreError::InstanceInUse { id: id.to_owned(), path }),
            Err(TryLockError::Error(source)) => Err(StoreError::Instance { path, source }),
        }
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
        for bad in ["", "a b", "x\"}", &"a".repeat(65), "é"] {
            assert!(!valid_instance_id(bad), "{bad:?}");
        }
        Ok(())
    }

    #[test]
    fn a_second_gateway_without_a_name_takes_the_next_slot_and_a_named_twin_is_refused() -> Result<(), StoreError> {
        let directory = tempfile::tempdir().map_err(|source| StoreError::StateDir { path: "tmp".into(), source })?;
        let (first, first_lock) = resolve_locked(directory.path(), None)?;
        assert_eq!(first, resolve(directory.path(), None)?, "the first slot is the unlocked stores' id");
        let (second, second_lock) = resolve_locked(directory.path(), None)?;
        assert_ne!(first, second, "a live process's generated id is not taken twice");
        assert!(directory.path().join("instance-id.2").exists());
        // A restart finds its own slot free again.
        drop(second_lock);
        let (again, _again_lock) = resolve_locked(directory.path(), None)?;
        assert_eq!(again, second, "the second slot keeps its id across restarts");
        let twin = resolve_locked(directory.path(), Some(first.as_str()));
        assert!(matches!(twin, Err(StoreError::InstanceInUse { .. })), "{twin:?}");
        drop(first_lock);
        Ok(())
    }

    #[test]
    fn an_id_is_held_by_one_lock_at_a_time() -> Result<(), StoreError> {
        let directory = tempfile::tempdir().map_err(|source| StoreError::StateDir { path: "tmp".into(), source })?;
        let lock = InstanceLock::take(directory.path(), "gw-1")?;
        let second = InstanceLock::take(directory.path(), "gw-1");
        assert!(matches!(second, Err(StoreError::InstanceInUse { .. })), "{second:?}");
        assert!(InstanceLock::take(directory.path(), "gw-2").is_ok(), "another id is another lock");
        drop(lock);
        assert!(InstanceLock::take(directory.path(), "gw-1").is_ok());
        Ok(())
    }
}
