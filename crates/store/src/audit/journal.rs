//! The audit journal: the fast durable path for the row written before a call is forwarded.
//!
//! A journaled row is appended as one JSON line to `<database>.journal-<pid>` (one `write` into the page cache, which
//! survives the death of the process); the database gets the row when the call ends, with its outcome
//! ([`crate::PendingCall`]). A committed batch removes its journaled rows from the count of outstanding ones; a file
//! with none outstanding is truncated, and past a few MiB appends move on to `<database>.journal-<pid>.<n>` so a
//! long call does not keep one file growing; earlier files are removed once their rows are in. At
//! open, rows still in the journals of dead processes that the database does not hold (by content: time, kind,
//! session, tool, arguments digest) are appended to the chain and those journals removed, so after `kill -9` every
//! forwarded call has its row, without a SQLite commit on the call path. The row of a call that waits for a person
//! is journaled as it is asked, marked `waiting`; approved, it is journaled again under the same id without the
//! mark, and recovery keeps that line. A row recovered from a waiting line only was never forwarded. A write cut
//! short (a full disk) is taken back before the error is returned, so a torn line is never glued to the next call's;
//! a line that still does not parse is skipped and reported at recovery. Surviving a power loss needs [`crate::AuditWriter::record_durable`]
//! (a commit with `synchronous=FULL`).

use std::collections::{BTreeMap, BTreeSet};
use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use serde::Deserialize;

use super::AuditRow;
use super::chain::PreparedRow;
use crate::error::StoreError;

/// One journal line: the row (without chain fields), its journal id, and whether the call was still waiting for a
/// person (not forwarded) when the line was written. A call approved after waiting is journaled again under the
/// same id without `waiting`; that line supersedes the waiting one at recovery.
#[derive(Debug, Deserialize)]
pub(crate) struct JournalLine {
    pub(crate) id: String,
    /// Absent in lines of forwarded calls (and in every line an older version wrote).
    #[serde(default)]
    pub(crate) waiting: bool,
    pub(crate) row: AuditRow,
}

/// Bytes a journal file may hold before appends move to a new file: rows of long calls keep their file alive
/// while later files are emptied and removed as their rows are committed, so a gateway that is never idle does
/// not grow one journal without end.
const ROTATE_BYTES: u64 = 4 << 20;

/// The open journal of one store.
#[derive(Debug)]
pub(crate) struct Journal {
    base: PathBuf,
    state: Mutex<State>,
    prefix: String,
    next: AtomicU64,
    /// `<base>.lock`, exclusively locked while this journal is open: another process tells a live writer's journal
    /// from a dead one's by this lock, not by its pid (a pid is reused; a lock dies with its process).
    _lock: File,
}

/// The file appended to now, and the rows not yet committed per file (generation).
#[derive(Debug)]
struct State {
    file: File,
    generation: u64,
    written: u64,
    outstanding: BTreeMap<u64, usize>,
    /// A write failed part-way and the file may end in part of a line (see [`repair`]).
    torn: bool,
}

/// Ends a torn write: truncates the file back to its last whole line (`written` bytes, all whole lines), or, when
/// that fails, ends the torn part with a newline so the next line starts fresh (recovery skips and reports the
/// torn one). Stays torn while neither works.
fn repair(state: &mut State) {
    if state.file.set_len(state.written).is_ok() {
        state.torn = false;
    } else if state.file.write_all(b"\n").is_ok() {
        // The torn bytes and this newline now count as written: the file holds exactly that many bytes (append).
        if let Ok(metadata) = state.file.metadata() {
            state.written = metadata.len();
            state.torn = false;
        }
    }
}

/// Where a journaled row is: the journal file holding it, whose count of rows not yet in the database it is part
/// of, and its journal id (a row journaled again keeps its id). Recovery recognises a row already committed by its
/// content, so no id is kept with the committed row.
#[derive(Debug)]
pub(crate) struct JournalTicket {
    generation: u64,
    id: String,
}

impl Journal {
    /// The journal of process `pid` beside a database file (`toolgate.db.journal-<pid>`; later files of the same
    /// process add `.<n>`).
    pub(crate) fn path_for(database: &Path, pid: u32) -> PathBuf {
        let mut path = database.as_os_str().to_owned();
        path.push(format!(".journal-{pid}"));
        PathBuf::from(path)
    }

    fn generation_path(&self, generation: u64) -> PathBuf {
        if generation == 0 {
            return self.base.clone();
        }
        let mut path = self.base.as_os_str().to_owned();
        path.push(format!(".{generation}"));
        PathBuf::from(path)
    }

    /// Journals left by processes that are gone (their rows may be missing from the database), and this process's
    /// own unless a store open now holds it (a second handle on the same database, in the same process, must not
    /// take the rows of calls in flight: they would be appended twice).
    pub(crate) fn orphans(database: &Path) -> Vec<PathBuf> {
        let own = std::process::id();
        let own_held = held(&Journal::path_for(database, own));
        let (Some(directory), Some(name)) = (database.parent(), database.file_name()) else { return Vec::new() };
        let prefix = format!("{}.journal-", name.to_string_lossy());
        let Ok(entries) = std::fs::read_dir(if directory.as_os_str().is_empty() { Path::new(".") } else { directory })
        else {
            return Vec::new();
        };
        let mut orphans: Vec<PathBuf> = entries
            .filter_map(Result::ok)
            .map(|entry| entry.path())
            .filter(|path| {
                let file = path.file_name().map(|name| name.to_string_lossy().into_owned()).unwrap_or_default();
                file.strip_prefix(&prefix)
                    .and_then(|rest| rest.split('.').next())
                    .and_then(|pid| pid.parse::<u32>().ok())
                    .filter(|_| !file.ends_with(LOCK_SUFFIX))
                    .is_some_and(|pid| {
                        if pid == own {
                            return !own_held;
                        }
                        // A journal whose lock is free belongs to a process that is gone; one from a version
                        // without locks is judged by its pid.
                        let lock = lock_path(&Journal::path_for(database, pid));
                        lock_is_free(&lock).unwrap_or_else(|| !Path::new(&format!("/proc/{pid}")).exists())
                    })
            })
            .collect();
        orphans.sort();
        orphans
    }

    /// Opens (creating) the journal for appending.
    pub(crate) fn open(path: &Path) -> Result<Journal, StoreError> {
        // The lock before the journal: a recovering process that finds the journal finds it locked. Another handle
        // of this process holds it already (flock conflicts between two opens in one process too); anyone else
        // holding it is a recovery trying it for an instant, waited out, or a live twin, refused.
        let lock = crate::permissions::private(OpenOptions::new().create(true).truncate(false).write(true))
            .open(lock_path(path))
            .map_err(|source| StoreError::Journal { path: lock_path(path), source })?;
        if !held(path) {
            take_lock(&lock, &lock_path(path))?;
        }
        let file = open_append(path)?;
        if let Ok(mut held) = HELD.lock() {
            held.insert(path.to_path_buf());
        }
        let written = file.metadata().map_err(|source| StoreError::Journal { path: path.to_path_buf(), source })?.len();
        Ok(Journal {
            base: path.to_path_buf(),
            state: Mutex::new(State { file, generation: 0, written, outstanding: BTreeMap::new(), torn: false }),
            prefix: uuid::Uuid::new_v4().simple().to_string(),
            next: AtomicU64::new(1),
            _lock: lock,
        })
    }

    /// Appends a row (`waiting`: of a call that waits for a person); returns its ticket once the line is written.
    pub(crate) fn append(&self, row: &PreparedRow, waiting: bool) -> Result<JournalTicket, StoreError> {
        let id = format!("{}-{}", self.prefix, self.next.fetch_add(1, Ordering::Relaxed));
        self.append_line(row, id, waiting)
    }

    /// Journals a row again under the id of `earlier` (a waiting call about to be forwarded: the new line, without
    /// `waiting`, supersedes the earlier one at recovery), then releases `earlier`. The earlier line is released
    /// only once the new one is written, so its file is never truncated or removed while the row is in neither.
    pub(crate) fn append_again(
        &self,
        row: &PreparedRow,
        earlier: &JournalTicket,
        waiting: bool,
    ) -> Result<JournalTicket, StoreError> {
        let ticket = self.append_line(row, earlier.id.clone(), waiting)?;
        self.committed([earlier]);
        Ok(ticket)
    }

    fn append_line(&self, row: &PreparedRow, id: String, waiting: bool) -> Result<JournalTicket, StoreError> {
        let text = row.journal_line(&id, waiting);
        let mut state = self.state.lock().map_err(|_| StoreError::AuditWriterStopped)?;
        if state.written >= ROTATE_BYTES {
            self.rotate(&mut state)?;
        }
        let generation = state.generation;
        if state.torn {
            repair(&mut state);
        }
        if let Err(source) = state.file.write_all(&text) {
            // A short write (a full disk) leaves part of a line that the next append would be glued to, and the
            // next call's row would then not parse at recovery: cut the file back to where this line began, or,
            // if even that fails, start the next append on a fresh line.
            state.torn = true;
            repair(&mut state);
            return Err(StoreError::Journal { path: self.generation_path(generation), source });
        }
        state.written += text.len() as u64;
        *state.outstanding.entry(generation).or_insert(0) += 1;
        Ok(JournalTicket { generation, id })
    }

    /// Moves appends to the next file; the current one stays until its rows are committed.
    fn rotate(&self, state: &mut State) -> Result<(), StoreError> {
        let generation = state.generation + 1;
        let path = self.generation_path(generation);
        state.file = open_append(&path)?;
        let old = std::mem::replace(&mut state.generation, generation);
        state.written = 0;
        state.torn = false;
        if !state.outstanding.contains_key(&old) {
            self.remove(old);
        }
        Ok(())
    }

    /// Notes that the journaled rows of these tickets are now in the database: a file whose rows are all in is
    /// truncated (the current one) or removed (an earlier one).
    pub(crate) fn committed<'a>(&self, tickets: impl IntoIterator<Item = &'a JournalTicket>) {
        let Ok(mut state) = self.state.lock() else { return };
        let mut emptied = Vec::new();
        for ticket in tickets {
            if let Some(count) = state.outstanding.get_mut(&ticket.generation) {
                *count = count.saturating_sub(1);
                if *count == 0 {
                    state.outstanding.remove(&ticket.generation);
                    emptied.push(ticket.generation);
                }
            }
        }
        for generation in emptied {
            if generation != state.generation {
                self.remove(generation);
            } else if let Err(error) = state.file.set_len(0) {
                tracing::warn!(path = %self.base.display(), %error, "the audit journal could not be truncated");
            } else {
                state.written = 0;
                state.torn = false;
            }
        }
    }

    fn remove(&self, generation: u64) {
        let path = self.generation_path(generation);
        if let Err(error) = std::fs::remove_file(&path) {
            tracing::warn!(path = %path.display(), %error, "an emptied audit journal could not be removed");
        }
    }
}

impl Drop for Journal {
    fn drop(&mut self) {
        if let Ok(mut held) = HELD.lock() {
            held.remove(&self.base);
        }
    }
}

/// What follows a journal's first file name to name its lock.
const LOCK_SUFFIX: &str = ".lock";

/// The lock of the journal whose first file is `base`.
pub(crate) fn lock_path(base: &Path) -> PathBuf {
    let mut path = base.as_os_str().to_owned();
    path.push(LOCK_SUFFIX);
    PathBuf::from(path)
}

/// Takes the journal lock `lock` (at `path`), waiting out a recovery that tries it for an instant.
fn take_lock(lock: &File, path: &Path) -> Result<(), StoreError> {
    for _ in 0..50 {
        match lock.try_lock() {
            Ok(()) => return Ok(()),
            Err(std::fs::TryLockError::WouldBlock) => std::thread::sleep(std::time::Duration::from_millis(20)),
            Err(std::fs::TryLockError::Error(source)) => {
                return Err(StoreError::Journal { path: path.to_path_buf(), source });
            }
        }
    }
    let source = std::io::Error::other("held by another running process");
    Err(StoreError::Journal { path: path.to_path_buf(), source })
}

/// Whether the journal lock `path` is free (`None` when there is no such file: a journal of a version without
/// locks). A lock that cannot be tried counts as held: a live process's journal must never be taken.
fn lock_is_free(path: &Path) -> Option<bool> {
    let file = match OpenOptions::new().write(true).open(path) {
        Ok(file) => file,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return None,
        Err(_) => return Some(false),
    };
    Some(file.try_lock().is_ok())
}

/// The journals this process has open (their first file's path), so recovery never takes one that is in use.
static HELD: Mutex<BTreeSet<PathBuf>> = Mutex::new(BTreeSet::new());

/// Whether this process has the journal `base` open.
fn held(base: &Path) -> bool {
    HELD.lock().map(|held| held.contains(base)).unwrap_or(true)
}

fn open_append(path: &Path) -> Result<File, StoreError> {
    // Owner only: a journal line holds what the audit row holds.
    crate::permissions::private(OpenOptions::new().create(true).append(true))
        .open(path)
        .map_err(|source| StoreError::Journal { path: path.to_path_buf(), source })
}

/// What a journal file holds: the lines that parse, and how many did not (a crash mid-write, or a write a full
/// disk cut short and [`repair`] could not take back).
#[derive(Debug, Default)]
pub(crate) struct JournalContents {
    pub(crate) lines: Vec<JournalLine>,
    pub(crate) torn: usize,
}

/// Reads a journal file; a line that does not parse is skipped and counted, never glued to the next.
pub(crate) fn read_lines(path: &Path) -> JournalContents {
    let mut contents = JournalContents::default();
    let Ok(file) = File::open(path) else { return contents };
    for line in BufReader::new(file).split(b'\n').map_while(Result::ok) {
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        match serde_json::from_slice::<JournalLine>(&line) {
            Ok(parsed) => contents.lines.push(parsed),
            Err(_) => contents.torn += 1,
        }
    }
    contents
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::panic)]
mod tests {
    use super::*;

    fn row(tool: &str) -> PreparedRow {
        let mut row: AuditRow = serde_json::from_value(serde_json::json!({
            "seq": 0, "time": "2026-01-01T00:00:00.000000Z", "kind": "call", "prev_hash": "", "hash": ""
        }))
        .map_err(|error| error.to_string())
        .unwrap_or_else(|error| panic!("{error}"));
        row.tool = Some(tool.to_owned());
        PreparedRow::from_row(row).unwrap_or_else(|error| panic!("{error}"))
    }

    #[test]
    fn a_torn_write_is_cut_back_so_the_next_line_is_whole() {
        let directory = tempfile::tempdir().unwrap_or_else(|error| panic!("{error}"));
        let path = directory.path().join("toolgate.db.journal-1");
        let journal = Journal::open(&path).unwrap_or_else(|error| panic!("{error}"));
        journal.append(&row("first"), false).unwrap_or_else(|error| panic!("{error}"));
        // What a write cut short by a full disk leaves: part of a line, and the journal knowing it.
        std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .and_then(|mut file| file.write_all(b"{\"id\":\"torn"))
            .unwrap_or_else(|error| panic!("{error}"));
        if let Ok(mut state) = journal.state.lock() {
            state.torn = true;
        }
        journal.append(&row("second"), false).unwrap_or_else(|error| panic!("{error}"));
        let contents = read_lines(&path);
        let tools: Vec<Option<String>> = contents.lines.into_iter().map(|line| line.row.tool).collect();
        assert_eq!(tools, [Some("first".to_owned()), Some("second".to_owned())]);
        assert_eq!(contents.torn, 0, "the torn bytes were cut back");
    }
}
