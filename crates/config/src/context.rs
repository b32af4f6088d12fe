//! The lowering context ([`Context`]): where problems and warnings accumulate while the raw sections are lowered,
//! and what lowering may consult (the file's text for positions, its directory, the environment); and [`anchor`],
//! which places a path the file names relative to that directory.
//!
//! Below every section that lowers (`lower`, `upstream`, `guardrails`, `console`, ...), so a section names the
//! context without naming the module that drives the lowering. It reads nothing itself: the environment comes in
//! as a function.

use std::ops::RangeInclusive;
use std::path::{Path, PathBuf};

use toml::Spanned;

use crate::error::{Locator, Problem, line_and_column};

/// Where problems and warnings accumulate while lowering, and what lowering may consult.
pub(crate) struct Context<'a> {
    pub(crate) locator: &'a Locator<'a>,
    /// Directory relative `command` and `cwd` paths are anchored at (the config file's).
    pub(crate) base_dir: &'a Path,
    /// Environment lookup (the process environment outside tests).
    pub(crate) env: &'a dyn Fn(&str) -> Option<String>,
    pub(crate) problems: Vec<Problem>,
    pub(crate) warnings: Vec<Problem>,
}

impl Context<'_> {
    pub(crate) fn error(&mut self, offset: usize, message: impl Into<String>) {
        self.problems.push(self.locator.problem(offset, message));
    }

    pub(crate) fn warn(&mut self, offset: usize, message: impl Into<String>) {
        self.warnings.push(self.locator.problem(offset, message));
    }

    pub(crate) fn problem_count(&self) -> usize {
        self.problems.len()
    }

    pub(crate) fn line_of(&self, offset: usize) -> usize {
        let (line, _) = line_and_column(self.locator.text(), offset);
        line
    }

    /// The number when it lies in `range`; else an error at its position, "`{subject}` must be between A and B",
    /// and `None`. `subject` names the key the way its section does (`[store]: `max_connections``), so every
    /// range check in a file reads alike without each section keeping its own copy of this check.
    pub(crate) fn in_range(
        &mut self,
        value: Option<&Spanned<u64>>,
        range: RangeInclusive<u64>,
        subject: impl std::fmt::Display,
    ) -> Option<u64> {
        let value = value?;
        let number = *value.get_ref();
        if range.contains(&number) {
            return Some(number);
        }
        self.error(value.span().start, format!("{subject} must be between {} and {}", range.start(), range.end()));
        None
    }
}

/// `path` as written when absolute, else relative to the config file's directory.
pub(crate) fn anchor(base_dir: &Path, path: &str) -> PathBuf {
    let path = Path::new(path);
    if path.is_absolute() {
        return path.to_path_buf();
    }
    base_dir.join(path.strip_prefix("./").unwrap_or(path))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::*;

    #[test]
    fn in_range_keeps_bounds_and_reports_outside_at_the_value() {
        let text = "a = 1\nb = 7\n";
        let locator = Locator::new(Path::new("gateway.toml"), text);
        let no_env = |_: &str| None;
        let mut cx =
            Context { locator: &locator, base_dir: Path::new(""), env: &no_env, problems: vec![], warnings: vec![] };
        let at = |offset: usize, number: u64| Spanned::new(offset..offset + 1, number);
        assert_eq!(cx.in_range(None, 1..=5, "[x]: `a`"), None);
        assert_eq!(cx.in_range(Some(&at(4, 1)), 1..=5, "[x]: `a`"), Some(1));
        assert_eq!(cx.in_range(Some(&at(4, 5)), 1..=5, "[x]: `a`"), Some(5));
        assert!(cx.problems.is_empty());
        assert_eq!(cx.in_range(Some(&at(10, 7)), 1..=5, format_args!("{}: `b`", "[y]")), None);
        assert_eq!(cx.problems.len(), 1);
        let problem = &cx.problems[0];
        assert_eq!((problem.line, problem.message.as_str()), (2, "[y]: `b` must be between 1 and 5"));
    }
}
