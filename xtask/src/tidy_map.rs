//! Part of `cargo xtask tidy`: every module file of the proxy, the store and the binary is named in ARCHITECTURE.md.
//!
//! The map is where a reader finds which file holds a responsibility; a module added without a line there is
//! invisible to them. The check is deliberately plain: the module's name (a file's stem, or a `mod.rs`'s folder)
//! must stand as a whole word somewhere in ARCHITECTURE.md. It cannot tell whether the words around it are true,
//! only that the module was not forgotten. Test files (`tests.rs`, anything under a `tests/` folder) and crate
//! roots are not modules of the map. It only reads files.

use std::path::Path;

use anyhow::Result;

/// The crates whose module files the map must name.
const MAPPED_CRATES: &[&str] = &["proxy", "store", "cli"];

/// One line per module file of a mapped crate whose name ARCHITECTURE.md does not mention.
pub(crate) fn check(root: &Path) -> Result<Vec<String>> {
    let map_path = root.join("ARCHITECTURE.md");
    let Ok(map) = std::fs::read_to_string(&map_path) else {
        return Ok(vec!["ARCHITECTURE.md is missing: the module map must name every module".to_owned()]);
    };
    let mut problems = Vec::new();
    for name in MAPPED_CRATES {
        let source = root.join("crates").join(name).join("src");
        // A missing crate is the layering check's problem (it names the directory); not reported twice.
        if !source.is_dir() {
            continue;
        }
        let mut files = Vec::new();
        crate::tidy_layers::collect(&source, &mut files)?;
        for file in files {
            let Some(module) = module_name(&source, &file) else { continue };
            if !names_word(&map, &module) {
                let shown = file.strip_prefix(root).unwrap_or(&file).display();
                problems.push(format!("{shown}: module `{module}` is not named in ARCHITECTURE.md's map"));
            }
        }
    }
    Ok(problems)
}

/// The module a file under `source` defines, or `None` for a crate root or a test file.
fn module_name(source: &Path, file: &Path) -> Option<String> {
    let stem = file.file_stem()?.to_str()?;
    let parent = file.parent()?;
    if parent.strip_prefix(source).ok()?.components().any(|component| component.as_os_str() == "tests") {
        return None;
    }
    match stem {
        "tests" => None,
        "lib" | "main" if parent == source => None,
        "mod" if parent == source => None,
        "mod" => Some(parent.file_name()?.to_str()?.to_owned()),
        _ => Some(stem.to_owned()),
    }
}

/// Whether `word` stands in `text` with no identifier character right before or after it.
fn names_word(text: &str, word: &str) -> bool {
    let is_ident = |character: char| character.is_ascii_alphanumeric() || character == '_';
    text.match_indices(word).any(|(start, _)| {
        let before = text[..start].chars().next_back();
        let after = text[start + word.len()..].chars().next();
        !before.is_some_and(is_ident) && !after.is_some_and(is_ident)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_counts_only_as_a_whole_word() {
        let map = "`downstream/http` (+ `header_timer`), session_table";
        assert!(names_word(map, "header_timer"));
        assert!(names_word(map, "http"));
        assert!(names_word(map, "session_table"));
        assert!(!names_word(map, "header"), "part of header_timer");
        assert!(!names_word(map, "session"), "part of session_table");
        assert!(!names_word(map, "timer"));
    }

    #[test]
    fn crate_roots_and_tests_are_not_modules() {
        let source = Path::new("crates/proxy/src");
        assert_eq!(module_name(source, &source.join("lib.rs")), None);
        assert_eq!(module_name(source, &source.join("access/tests.rs")), None);
        assert_eq!(module_name(source, &source.join("tests/errors.rs")), None);
        assert_eq!(module_name(source, &source.join("guard/mod.rs")).as_deref(), Some("guard"));
        assert_eq!(
            module_name(source, &source.join("downstream/http/header_timer.rs")).as_deref(),
            Some("header_timer")
        );
    }
}
