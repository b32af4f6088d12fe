//! The audit journal: the fast durable path for the row written before a call is forwarded.
//!
//! A journaled row is appended as one JSON line to `<database>.journal-<pid>` (one `write` into the page cache, which
//! survives the death of the process) and then queued for the database like any row. A committed batch removes
//! its journaled rows from the count of outstanding ones; when none is outstanding the journal is truncated. At
//! open, rows still in the journals of dead processes that the database does not hold (by journal id) are appended
//! to the chain and those journals removed, so
//! after `kill -9` every forwarded call has its row, without a SQLite commit on the call path. Surviving a power
//! loss needs [`crate::AuditWriter::record_durable`] (a commit with `synchronous=FULL`).

use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use serde::{Deserialize, Serialize};

use super::AuditRow;
use crate::error::StoreError;

/// One journal line: the row (without chain fields) and its journal id.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct JournalLine {
    pub(crate) id: String,
    pub(crate) row: AuditRow,
}

/// The open journal of one store.
#[derive(Debug)]
pub(crate) struct Journal {
    path: PathBuf,
    file: Mutex<File>,
    outstanding: AtomicUsize,
    prefix: String,
    next: AtomicU64,
}

impl Journal {
    /// The journal of process `pid` beside a database file (`toolgate.db.journal-<pid>`).
    pub(crate) fn path_for(database: &Path, pid: u32) -> PathBuf {
        let mut path = database.as_os_str().to_owned();
        path.push(format!(".journal-{pid}"));
        PathBuf::from(path)
    }

    /// Journals left by processes that are gone (their rows may be missing from the database).
    pub(crate) fn orphans(database: &Path) -> Vec<PathBuf> {
        let (Some(directory), Some(name)) = (database.parent(), database.file_name()) else { return Vec::new() };
        let prefix = format!("{}.journal-", name.to_string_lossy());
        let Ok(entries) = std::fs::read_dir(if directory.as_os_str().is_empty() { Path::new(".") } else { directory })
        else {
            return Vec::new();
        };
        entries
            .filter_map(Result::ok)
            .map(|entry| entry.path())
            .filter(|path| {
                let file = path.file_name().map(|name| name.to_string_lossy().into_owned()).unwrap_or_default();
                file.strip_prefix(&prefix)
                    .and_then(|pid| pid.parse::<u32>().ok())
                    .is_some_and(|pid| pid == std::process::id() || !Path::new(&format!("/proc/{pid}")).exists())
            })
            .collect()
    }

    /// Opens (creating) the journal for appending.
    pub(crate) fn open(path: &Path) -> Result<Journal, StoreError> {
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(|source| StoreError::Journal { path: path.to_path_buf(), source })?;
        Ok(Journal {
            path: path.to_path_buf(),
            file: Mutex::new(file),
            outstanding: AtomicUsize::new(0),
            prefix: uuid::Uuid::new_v4().simple().to_string(),
            next: AtomicU64::new(1),
        })
    }

    /// Appends a row; returns its journal id once the line is written.
    pub(crate) fn append(&self, row: &AuditRow) -> Result<String, StoreError> {
        let id = format!("{}-{}", self.prefix, self.next.fetch_add(1, Ordering::Relaxed));
        let line = JournalLine { id, row: row.clone() };
        let mut text = serde_json::to_vec(&line).map_err(|source| StoreError::Json { what: "journal line", source })?;
        text.push(b'\n');
        let mut file = self.file.lock().map_err(|_| StoreError::AuditWriterStopped)?;
        file.write_all(&text).map_err(|source| StoreError::Journal { path: self.path.clone(), source })?;
        self.outstanding.fetch_add(1, Ordering::AcqRel);
        Ok(line.id)
    }

    /// Notes that `count` journaled rows are now in the database; truncates the journal when none is outstanding.
    pub(crate) fn committed(&self, count: usize) {
        if count == 0 {
            return;
        }
        let Ok(file) = self.file.lock() else { return };
        let left = self.outstanding.fetch_sub(count, Ordering::AcqRel).saturating_sub(count);
        if left == 0
            && let Err(error) = file.set_len(0)
        {
            tracing::warn!(path = %self.path.display(), %error, "the audit journal could not be truncated");
        }
    }
}

/// The journal's lines that parse; a torn last line (a crash mid-write) is skipped.
pub(crate) fn read_lines(path: &Path) -> Vec<JournalLine> {
    let Ok(file) = File::open(path) else { return Vec::new() };
    BufReader::new(file)
        .lines()
        .map_while(Result::ok)
        .filter_map(|line| serde_json::from_str::<JournalLine>(&line).ok())
        .collect()
}
