//! Errors of loading, checking and importing configuration: each problem names the file, line, column and what
//! is wrong, like a compiler diagnostic.
//!
//! Positions are computed here from byte offsets (TOML spans) or taken from `serde_json` (line, column). Nothing in
//! this module may include a secret (a bearer token's value) in a message: only variable names.

use std::fmt;
use std::path::{Path, PathBuf};

/// Why a configuration could not be loaded, checked or imported.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read (missing, unreadable, not UTF-8).
    #[error("{}: cannot read: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// What the operating system said.
        source: std::io::Error,
    },
    /// The file was read but says something wrong; every problem found is listed, in file order.
    #[error("{}", render_problems(problems))]
    Invalid {
        /// At least one problem.
        problems: Vec<Problem>,
    },
}

impl ConfigError {
    /// The problems in the file (empty for a read error).
    pub fn problems(&self) -> &[Problem] {
        match self {
            ConfigError::Read { .. } => &[],
            ConfigError::Invalid { problems } => problems,
        }
    }
}

/// One thing wrong in a configuration file, at a position.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// The file, as the caller named it.
    pub file: PathBuf,
    /// 1-based line.
    pub line: usize,
    /// 1-based column, in characters.
    pub column: usize,
    /// What is wrong (lowercase, no final period), with what to do when that is known.
    pub message: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(formatter, "{}:{}:{}: {}", self.file.display(), self.line, self.column, self.message)
    }
}

fn render_problems(problems: &[Problem]) -> String {
    let lines: Vec<String> = problems.iter().map(Problem::to_string).collect();
    lines.join("\n")
}

/// Turns byte offsets of one text into problems with line and column.
pub(crate) struct Locator<'a> {
    file: &'a Path,
    text: &'a str,
}

impl<'a> Locator<'a> {
    pub(crate) fn new(file: &'a Path, text: &'a str) -> Self {
        Locator { file, text }
    }

    /// The text positions refer to.
    pub(crate) fn text(&self) -> &'a str {
        self.text
    }

    /// A problem at byte `offset` (clamped to the text, moved back to a character boundary).
    pub(crate) fn problem(&self, offset: usize, message: impl Into<String>) -> Problem {
        let (line, column) = line_and_column(self.text, offset);
        Problem { file: self.file.to_path_buf(), line, column, message: message.into() }
    }
}

/// 1-based line and character column of byte `offset` in `text`.
pub(crate) fn line_and_column(text: &str, offset: usize) -> (usize, usize) {
    let mut offset = offset.min(text.len());
    while !text.is_char_boundary(offset) {
        offset -= 1;
    }
    let before = &text[..offset];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |index| index + 1);
    let column = before[line_start..].chars().count() + 1;
    (line, column)
}

/// The error for a whole set of problems, sorted by position (stable for equal positions).
pub(crate) fn invalid(mut problems: Vec<Problem>) -> ConfigError {
    problems.sort_by_key(|problem| (problem.line, problem.column));
    ConfigError::Invalid { problems }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_are_one_based_and_count_characters() {
        let text = "a = 1\nné = 2\n";
        assert_eq!(line_and_column(text, 0), (1, 1));
        assert_eq!(line_and_column(text, 6), (2, 1));
        // `=` after "né " is the 4th character although the 5th byte.
        assert_eq!(line_and_column(text, 10), (2, 4));
        assert_eq!(line_and_column(text, 999), (3, 1));
    }
}
