//! The scratch tree before and after a call: a bounded snapshot (path → size and SHA-256) and the difference
//! between two (created, changed, removed), with a changed file told apart as appended (the old content is still
//! its start) or rewritten.
//!
//! It also makes the scratch copy of the working directory. It reads and copies only below the roots it is given,
//! never follows a symbolic link out of them (links are recorded and copied as links), and refuses a tree larger
//! than its bounds instead of hashing without end.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};

use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::VerifyError;

/// Most entries a snapshot or a copy holds.
pub const MAX_ENTRIES: usize = 20_000;
/// Most bytes a snapshot reads (or a copy writes).
pub const MAX_BYTES: u64 = 256 * 1024 * 1024;

/// One entry of the tree.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Entry {
    File { size: u64, digest: [u8; 32] },
    Directory,
    Link(PathBuf),
}

/// What a tree held at one moment, by path relative to its root.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Snapshot {
    entries: BTreeMap<PathBuf, Entry>,
}

/// How an existing file changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ChangeKind {
    /// New bytes after the old content, which is unchanged.
    Appended,
    /// The old content is gone or altered (overwritten, truncated, replaced by another kind of entry).
    Rewritten,
}

/// One changed entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Change {
    /// The path, relative to the scratch root.
    pub path: String,
    /// Appended or rewritten.
    pub kind: ChangeKind,
}

/// The difference between two snapshots of the same tree.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct TreeDiff {
    /// Entries that did not exist before.
    pub created: Vec<String>,
    /// Entries whose content changed.
    pub changed: Vec<Change>,
    /// Entries that no longer exist.
    pub removed: Vec<String>,
}

impl TreeDiff {
    /// True when nothing changed.
    pub fn is_empty(&self) -> bool {
        self.created.is_empty() && self.changed.is_empty() && self.removed.is_empty()
    }

    /// True when existing data was removed or overwritten (what a destructive tool does). A version-control
    /// system's own bookkeeping (`.git/index`, `.git/HEAD`) does not count: it is rewritten whole by additive
    /// operations (staging, switching branches) and the history it keeps is not lost; files it tracks do count.
    pub fn destroyed(&self) -> bool {
        self.removed.iter().any(|path| !bookkeeping(path))
            || self.changed.iter().any(|change| change.kind == ChangeKind::Rewritten && !bookkeeping(&change.path))
    }
}

/// True for a path inside a version-control system's metadata directory.
fn bookkeeping(path: &str) -> bool {
    matches!(Path::new(path).components().next(), Some(std::path::Component::Normal(first)) if [".git", ".hg", ".svn"].iter().any(|name| first == *name))
}

/// Reads the tree under `root`.
pub fn take(root: &Path) -> Result<Snapshot, VerifyError> {
    let mut snapshot = Snapshot::default();
    let mut budget = MAX_BYTES;
    let mut pending = vec![PathBuf::new()];
    while let Some(relative) = pending.pop() {
        let directory = root.join(&relative);
        let listing = std::fs::read_dir(&directory).map_err(|error| VerifyError::io(&directory, error))?;
        for item in listing {
            let item = item.map_err(|error| VerifyError::io(&directory, error))?;
            let path = relative.join(item.file_name());
            let kind = item.file_type().map_err(|error| VerifyError::io(&item.path(), error))?;
            let entry = if kind.is_symlink() {
                Entry::Link(std::fs::read_link(item.path()).unwrap_or_default())
            } else if kind.is_dir() {
                pending.push(path.clone());
                Entry::Directory
            } else if kind.is_file() {
                // Swapped for a link or a FIFO since the listing: not a file any more, and not read.
                let Some((size, digest)) = digest_file(&item.path(), None, &mut budget)? else { continue };
                Entry::File { size, digest }
            } else {
                continue;
            };
            snapshot.entries.insert(path, entry);
            if snapshot.entries.len() > MAX_ENTRIES {
                return Err(VerifyError::TreeTooLarge { root: root.to_path_buf() });
            }
        }
    }
    Ok(snapshot)
}

/// What changed from `before` to `after`; `root` is read again to tell an append from a rewrite.
pub fn diff(before: &Snapshot, after: &Snapshot, root: &Path) -> TreeDiff {
    let mut diff = TreeDiff::default();
    let name = |path: &Path| path.to_string_lossy().into_owned();
    for (path, old) in &before.entries {
        match after.entries.get(path) {
            None => diff.removed.push(name(path)),
            Some(new) if new == old => {}
            Some(new) => {
                let kind = match (old, new) {
                    (Entry::File { size: old_size, digest: old_digest }, Entry::File { size: new_size, .. })
                        if new_size > old_size =>
                    {
                        let mut budget = MAX_BYTES;
                        match digest_file(&root.join(path), Some(*old_size), &mut budget) {
                            Ok(Some((_, prefix))) if prefix == *old_digest => ChangeKind::Appended,
                            _ => ChangeKind::Rewritten,
                        }
                    }
                    _ => ChangeKind::Rewritten,
                };
                diff.changed.push(Change { path: name(path), kind });
            }
        }
    }
    for path in after.entries.keys() {
        if !before.entries.contains_key(path) {
            diff.created.push(name(path));
        }
    }
    diff
}

/// Opens `path` for reading only if it is a regular file, without following a symbolic link (`O_NOFOLLOW`) and
/// without blocking on a FIFO or device (`O_NONBLOCK`), then checks the open descriptor (`fstat`): the server runs
/// while the tree is read and may swap a file for a link out of the tree or a FIFO between the listing and the
/// open. `None` when it is no longer a regular file.
fn open_regular(path: &Path) -> Result<Option<File>, VerifyError> {
    use std::os::unix::fs::OpenOptionsExt;
    let flags = rustix::fs::OFlags::NOFOLLOW | rustix::fs::OFlags::NONBLOCK | rustix::fs::OFlags::CLOEXEC;
    let file = match std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(i32::try_from(flags.bits()).unwrap_or_default())
        .open(path)
    {
        Ok(file) => file,
        // ELOOP: a symbolic link, not followed. ENXIO: a socket or a FIFO that cannot be opened.
        Err(error) if matches!(error.raw_os_error(), Some(code) if code == rustix::io::Errno::LOOP.raw_os_error() || code == rustix::io::Errno::NXIO.raw_os_error()) =>
        {
            return Ok(None);
        }
        Err(error) => return Err(VerifyError::io(path, error)),
    };
    let metadata = file.metadata().map_err(|error| VerifyError::io(path, error))?;
    Ok(metadata.is_file().then_some(file))
}

/// Size and SHA-256 of a regular file (of its first `limit` bytes when given), charged to `budget`; `None` when
/// the path is no longer a regular file ([`open_regular`]).
fn digest_file(path: &Path, limit: Option<u64>, budget: &mut u64) -> Result<Option<(u64, [u8; 32])>, VerifyError> {
    let Some(file) = open_regular(path)? else { return Ok(None) };
    // One byte past the budget is enough to know it is exceeded: a file growing while read is never read on.
    let mut reader = file.take(limit.unwrap_or(u64::MAX).min(budget.saturating_add(1)));
    let mut hasher = Sha256::new();
    let mut buffer = vec![0u8; 64 * 1024];
    let mut size = 0u64;
    loop {
        let read = reader.read(&mut buffer).map_err(|error| VerifyError::io(path, error))?;
        if read == 0 {
            break;
        }
        size += read as u64;
        *budget =
            budget.checked_sub(read as u64).ok_or_else(|| VerifyError::TreeTooLarge { root: path.to_path_buf() })?;
        hasher.update(&buffer[..read]);
    }
    Ok(Some((size, hasher.finalize().into())))
}

/// Copies the tree under `from` into `to` (which exists and is empty): files, directories and links as links.
pub fn copy_tree(from: &Path, to: &Path) -> Result<(), VerifyError> {
    let mut entries = 0usize;
    let mut bytes = 0u64;
    let mut pending = vec![PathBuf::new()];
    while let Some(relative) = pending.pop() {
        let source = from.join(&relative);
        let listing = std::fs::read_dir(&source).map_err(|error| VerifyError::io(&source, error))?;
        for item in listing {
            let item = item.map_err(|error| VerifyError::io(&source, error))?;
            let path = relative.join(item.file_name());
            let target = to.join(&path);
            let kind = item.file_type().map_err(|error| VerifyError::io(&item.path(), error))?;
            entries += 1;
            if entries > MAX_ENTRIES {
                return Err(VerifyError::TreeTooLarge { root: from.to_path_buf() });
            }
            if kind.is_symlink() {
                let link = std::fs::read_link(item.path()).map_err(|error| VerifyError::io(&item.path(), error))?;
                std::os::unix::fs::symlink(&link, &target).map_err(|error| VerifyError::io(&target, error))?;
            } else if kind.is_dir() {
                std::fs::create_dir(&target).map_err(|error| VerifyError::io(&target, error))?;
                pending.push(path);
            } else if kind.is_file() {
                bytes += copy_file(&item.path(), &target, MAX_BYTES.saturating_sub(bytes))?;
                if bytes > MAX_BYTES {
                    return Err(VerifyError::TreeTooLarge { root: from.to_path_buf() });
                }
            }
        }
    }
    Ok(())
}

/// Copies one regular file (opened as [`open_regular`] does: never through a link, never blocking) with its
/// permissions, reading at most one byte past `room`; 0 bytes and no copy when it is not a regular file.
fn copy_file(source: &Path, target: &Path, room: u64) -> Result<u64, VerifyError> {
    let Some(file) = open_regular(source)? else { return Ok(0) };
    let permissions = file.metadata().map_err(|error| VerifyError::io(source, error))?.permissions();
    let mut copy = File::create(target).map_err(|error| VerifyError::io(target, error))?;
    let copied = std::io::copy(&mut file.take(room.saturating_add(1)), &mut copy)
        .map_err(|error| VerifyError::io(target, error))?;
    std::fs::set_permissions(target, permissions).map_err(|error| VerifyError::io(target, error))?;
    Ok(copied)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_diff_tells_created_appended_rewritten_and_removed_apart() -> Result<(), VerifyError> {
        let dir = tempfile::tempdir().map_err(|error| VerifyError::io(Path::new("tempdir"), error))?;
        let root = dir.path();
        let write = |name: &str, text: &str| {
            std::fs::write(root.join(name), text).map_err(|error| VerifyError::io(&root.join(name), error))
        };
        write("log", "one\n")?;
        write("config", "a=1\n")?;
        write("gone", "x")?;
        write("same", "same")?;
        let before = take(root)?;
        write("log", "one\ntwo\n")?;
        write("config", "a=22\n")?;
        std::fs::remove_file(root.join("gone")).map_err(|error| VerifyError::io(root, error))?;
        write("new", "n")?;
        let after = take(root)?;
        let diff = diff(&before, &after, root);
        assert_eq!(diff.created, vec!["new".to_owned()]);
        assert_eq!(diff.removed, vec!["gone".to_owned()]);
        assert_eq!(
            diff.changed,
            vec![
                Change { path: "config".into(), kind: ChangeKind::Rewritten },
                Change { path: "log".into(), kind: ChangeKind::Appended },
            ]
        );
        assert!(diff.destroyed());
        let staged = TreeDiff {
            changed: vec![Change { path: ".git/index".into(), kind: ChangeKind::Rewritten }],
            removed: vec![".git/index.lock".into()],
            ..TreeDiff::default()
        };
        assert!(!staged.destroyed() && !staged.is_empty(), "git's bookkeeping is a write, not a destruction");
        assert!(self::diff(&after, &take(root)?, root).is_empty());
        Ok(())
    }

    /// A FIFO and a link to a file outside the tree: the copy and the snapshot finish, the link stays a link and
    /// nothing outside is read; a path swapped for either between listing and open is not read either.
    #[test]
    fn links_and_fifos_are_never_followed_or_opened_blocking() -> Result<(), VerifyError> {
        let dir = tempfile::tempdir().map_err(|error| VerifyError::io(Path::new("tempdir"), error))?;
        let (source, copy, outside) = (dir.path().join("source"), dir.path().join("copy"), dir.path().join("secret"));
        for path in [&source, &copy] {
            std::fs::create_dir(path).map_err(|error| VerifyError::io(path, error))?;
        }
        std::fs::write(&outside, "secret").map_err(|error| VerifyError::io(&outside, error))?;
        std::os::unix::fs::symlink(&outside, source.join("link")).map_err(|error| VerifyError::io(&source, error))?;
        rustix::fs::mknodat(
            rustix::fs::CWD,
            source.join("fifo"),
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::from_raw_mode(0o600),
            0,
        )
        .map_err(|error| VerifyError::io(&source, error.into()))?;
        copy_tree(&source, &copy)?;
        let link = std::fs::read_link(copy.join("link")).map_err(|error| VerifyError::io(&copy, error))?;
        assert_eq!(link, outside, "copied as a link");
        assert!(!copy.join("fifo").exists(), "a FIFO is not copied");
        let snapshot = take(&source)?;
        assert_eq!(snapshot.entries.get(Path::new("link")), Some(&Entry::Link(outside.clone())));
        assert_eq!(snapshot.entries.len(), 1, "the FIFO is not an entry");
        let mut budget = MAX_BYTES;
        assert_eq!(digest_file(&source.join("link"), None, &mut budget)?, None, "a link is never followed");
        assert_eq!(digest_file(&source.join("fifo"), None, &mut budget)?, None, "a FIFO is never opened blocking");
        assert_eq!(budget, MAX_BYTES);
        Ok(())
    }
}
