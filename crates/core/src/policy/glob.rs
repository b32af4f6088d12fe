//! A tiny glob matcher for upstream and tool names: `*` (any run of characters, even none), `?` (one character),
//! everything else literal.
//!
//! No dependency and no allocation while matching. `[`, `]`, `{`, `}` and `\` are reserved (an error today) so that
//! classes, alternatives or escapes can be added later without changing what an existing pattern means. Common
//! shapes (exact, prefix, suffix, anything) get a fast path.

use std::fmt;

/// A compiled glob pattern.
#[derive(Clone, PartialEq, Eq)]
pub struct Glob {
    pattern: Box<str>,
    shape: Shape,
}

#[derive(Clone, PartialEq, Eq)]
enum Shape {
    /// `*`
    Anything,
    /// No wildcard.
    Exact(Box<str>),
    /// `literal*`
    Prefix(Box<str>),
    /// `*literal`
    Suffix(Box<str>),
    /// Anything else: segments separated by `*`, each of literal characters and `?`.
    General { segments: Box<[Box<str>]>, anchored_start: bool, anchored_end: bool },
}

/// Why a pattern is not a glob toolgate accepts.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GlobError {
    /// The pattern is empty (no name is empty, so it would match nothing).
    #[error("an empty pattern matches nothing")]
    Empty,
    /// A reserved character.
    #[error("`{0}` is reserved in patterns (only `*`, `?` and literal characters are supported)")]
    Reserved(char),
}

const RESERVED: [char; 5] = ['[', ']', '{', '}', '\\'];

impl Glob {
    /// Compiles a pattern.
    pub fn new(pattern: &str) -> Result<Glob, GlobError> {
        if pattern.is_empty() {
            return Err(GlobError::Empty);
        }
        if let Some(reserved) = pattern.chars().find(|character| RESERVED.contains(character)) {
            return Err(GlobError::Reserved(reserved));
        }
        let has_one = pattern.contains('?');
        let stars = pattern.matches('*').count();
        let without_stars = || pattern.trim_matches('*').into();
        let shape = if pattern.chars().all(|character| character == '*') {
            Shape::Anything
        } else if stars == 0 && !has_one {
            Shape::Exact(pattern.into())
        } else if !has_one && stars == 1 && pattern.ends_with('*') {
            Shape::Prefix(without_stars())
        } else if !has_one && stars == 1 && pattern.starts_with('*') {
            Shape::Suffix(without_stars())
        } else {
            Shape::General {
                segments: pattern.split('*').filter(|segment| !segment.is_empty()).map(Box::from).collect(),
                anchored_start: !pattern.starts_with('*'),
                anchored_end: !pattern.ends_with('*'),
            }
        };
        Ok(Glob { pattern: pattern.into(), shape })
    }

    /// The pattern as written.
    pub fn as_str(&self) -> &str {
        &self.pattern
    }

    /// True when the whole of `text` matches.
    pub fn matches(&self, text: &str) -> bool {
        match &self.shape {
            Shape::Anything => true,
            Shape::Exact(literal) => text == &**literal,
            Shape::Prefix(prefix) => text.starts_with(&**prefix),
            Shape::Suffix(suffix) => text.ends_with(&**suffix),
            Shape::General { segments, anchored_start, anchored_end } => {
                matches_general(segments, *anchored_start, *anchored_end, text)
            }
        }
    }
}

impl fmt::Debug for Glob {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(formatter, "Glob({:?})", self.pattern)
    }
}

/// Segments split by `*`: the first must match at the start unless the pattern starts with `*`, the last at the end
/// unless it ends with `*`, and the ones between at their leftmost place (leftmost is always safe for `*`-only
/// wildcards, since a later segment can only gain room from it).
fn matches_general(segments: &[Box<str>], anchored_start: bool, anchored_end: bool, text: &str) -> bool {
    let mut position = 0;
    for (index, segment) in segments.iter().enumerate() {
        let is_first = index == 0;
        let is_last = index + 1 == segments.len();
        if is_last && anchored_end {
            // The last segment must end the text: try the one start that puts it there, no earlier than `position`.
            let Some(start) = start_for_suffix(segment, text) else {
                return false;
            };
            if start < position || (is_first && anchored_start && start != 0) {
                return false;
            }
            return segment_matches_at(segment, text, start).is_some();
        }
        if is_first && anchored_start {
            match segment_matches_at(segment, text, 0) {
                Some(end) => position = end,
                None => return false,
            }
            continue;
        }
        match find_segment(segment, text, position) {
            Some(end) => position = end,
            None => return false,
        }
    }
    !anchored_end || position == text.len()
}

/// Where a segment would have to start to end exactly at the end of `text` (it has a fixed length in characters).
fn start_for_suffix(segment: &str, text: &str) -> Option<usize> {
    let characters = segment.chars().count();
    if characters == 0 {
        return Some(text.len());
    }
    text.char_indices().rev().nth(characters - 1).map(|(start, _)| start)
}

/// The end of the leftmost match of `segment` in `text` at or after byte `from`.
fn find_segment(segment: &str, text: &str, from: usize) -> Option<usize> {
    let rest = text.get(from..)?;
    rest.char_indices()
        .map(|(offset, _)| from + offset)
        .chain(std::iter::once(text.len()))
        .find_map(|start| segment_matches_at(segment, text, start))
}

/// The end of `segment` (literal characters and `?`) matched at byte `start` of `text`, if it matches there.
fn segment_matches_at(segment: &str, text: &str, start: usize) -> Option<usize> {
    let mut rest = text.get(start..)?.chars();
    let mut end = start;
    for wanted in segment.chars() {
        let found = rest.next()?;
        if wanted != '?' && wanted != found {
            return None;
        }
        end += found.len_utf8();
    }
    Some(end)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(pattern: &str, text: &str, expected: bool) {
        let glob = Glob::new(pattern).unwrap_or_else(|error| unreachable!("{pattern}: {error}"));
        assert_eq!(glob.matches(text), expected, "{pattern:?} against {text:?}");
    }

    #[test]
    fn shapes() {
        check("*", "", true);
        check("*", "anything", true);
        check("**", "x", true);
        check("delete_customer", "delete_customer", true);
        check("delete_customer", "delete_customers", false);
        check("delete_*", "delete_", true);
        check("delete_*", "delete_repo", true);
        check("delete_*", "undelete_repo", false);
        check("*_delete", "storage_delete", true);
        check("*_delete", "storage_deleted", false);
        check("*issue*", "list_issues", true);
        check("*issue*", "issue", true);
        check("*issue*", "isue", false);
    }

    #[test]
    fn question_marks_take_one_character() {
        check("get_?", "get_a", true);
        check("get_?", "get_", false);
        check("get_?", "get_ab", false);
        check("?et_*", "set_x", true);
        check("*_v?", "tool_v2", true);
        check("*_v?", "tool_v", false);
        check("é?", "éà", true);
        check("*?", "", false);
        check("*?", "ü", true);
    }

    #[test]
    fn stars_in_the_middle_backtrack_correctly() {
        check("a*b*c", "abc", true);
        check("a*b*c", "aXbYc", true);
        check("a*b*c", "abcbc", true);
        check("a*b*c", "acb", false);
        check("a*bc", "abcbc", true);
        check("a*a", "a", false);
        check("a*a", "aa", true);
        check("ab*ba", "aba", false);
        check("*a*b", "xaxbxb", true);
        check("*ab*ab", "abab", true);
        check("?*?", "a", false);
        check("?*?", "ab", true);
    }

    #[test]
    fn reserved_and_empty_patterns_are_errors() {
        assert_eq!(Glob::new(""), Err(GlobError::Empty));
        assert_eq!(Glob::new("tool[0-9]"), Err(GlobError::Reserved('[')));
        assert_eq!(Glob::new("{a,b}"), Err(GlobError::Reserved('{')));
        assert_eq!(Glob::new(r"a\*"), Err(GlobError::Reserved('\\')));
    }
}
