//! The layering inside a crate, checked from its source: which module file names which (`crate::…` and `super::…`
//! paths, in `use` items and in code), that no files import each other in a circle, and that no file imports one on
//! a higher floor than its own (`PROXY_FLOORS`, `CONFIG_FLOORS`).
//!
//! A small path reader, not a Rust parser: comments, strings, each item marked `#[cfg(test)]` and `tests.rs` files
//! are skipped (tests may reach anywhere), a path names the longest module file it starts with, and a name
//! re-exported by `lib.rs` counts as an import of `lib.rs`. A checked crate whose directory is missing is a
//! problem, not a pass. It only reads files.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

/// A crate's floors, lowest first: each a name and the modules on it.
type Floors = &'static [(&'static str, &'static [&'static str])];

/// The crates whose module layering is checked (their source directory), with their floors.
const CHECKED_CRATES: &[(&str, Floors)] = &[("crates/proxy/src", PROXY_FLOORS), ("crates/config/src", CONFIG_FLOORS)];

/// The floors of `toolgate-config`, lowest first: what every section names (the lowering context, reading one TOML
/// table, single-value rules, errors), the sections (each its raw type beside its lowering), whole files (the
/// config read into raw sections, its summary, other tools' configs imported), the lowering that drives the
/// sections, and the crate's face.
const CONFIG_FLOORS: Floors = &[
    ("ground", &["error", "rules", "context", "tables"]),
    ("sections", &["sandbox", "credentials", "oauth", "store", "trust", "upstream", "raw", "guardrails", "console"]),
    ("document", &["parse", "summary", "import"]),
    ("lowering", &["lower"]),
    ("facade", &["lib"]),
    // The crate's unit tests (`tests/`, behind `#[cfg(test)]`) reach anywhere, as test code may.
    ("tests", &["tests"]),
];

/// The floors of `toolgate-proxy`, lowest first: a module file may import files on its own floor or lower ones.
/// A module belongs to the first floor naming it or a module above it (`guard` names every `guard/…` file).
/// Modules on no floor are reported, so a new file has to be placed.
const PROXY_FLOORS: Floors = &[
    (
        "data",
        &[
            "session",
            "naming",
            "uri_template",
            "outbox",
            "resource_index",
            "relay_quota",
            "catalog",
            "sandboxing",
            "upstreams",
            "upstream_set",
            "known_tools",
            "metrics/registry",
            "guard/results",
            "guard/selection",
            "guard/request_state",
            "era",
            "mcp_headers",
            "downstream",
        ],
    ),
    ("rules", &["access", "inventory", "guard/approval_quota", "guard/refusal_rows"]),
    ("state", &["state"]),
    (
        "behaviour",
        &[
            "relay",
            "guard",
            "call",
            "methods",
            "listen",
            "upstream_events",
            "upstream_input",
            "upstream_rounds",
            "bridge",
            "lifecycle",
        ],
    ),
    ("facade", &["intake", "gateway", "metrics", "health", "lib"]),
];

/// Every layering problem of the checked crates under `root`, one line each.
pub(crate) fn check(root: &Path) -> Result<Vec<String>> {
    let mut problems = Vec::new();
    for (source, floors) in CHECKED_CRATES {
        let directory = root.join(source);
        // A checked crate that moved would otherwise pass unchecked: say so, so the list follows it.
        if directory.is_dir() {
            problems.extend(check_crate(&directory, source, floors)?);
        } else {
            problems.push(format!("{source} is not a directory; update tidy's checked crates (CHECKED_CRATES)"));
        }
    }
    Ok(problems)
}

/// The problems of one crate's source directory `directory` (shown as `shown`).
fn check_crate(directory: &Path, shown: &str, floors: Floors) -> Result<Vec<String>> {
    let graph = read_graph(directory)?;
    let mut problems = Vec::new();
    for cycle in cycles(&graph) {
        let mut ties = Vec::new();
        for from in &cycle {
            for to in graph.get(from).into_iter().flatten() {
                if cycle.contains(to) {
                    ties.push(format!("{from} -> {to}"));
                }
            }
        }
        problems.push(format!(
            "{shown}: {} module files import each other in a circle ({}); make the data flow one way",
            cycle.len(),
            ties.join(", ")
        ));
    }
    for (from, targets) in &graph {
        let Some(floor) = floor_of(floors, from) else {
            problems.push(format!("{shown}/{from}.rs is on no floor; add it to tidy's floors for this crate"));
            continue;
        };
        for to in targets {
            if let Some(target) = floor_of(floors, to)
                && target > floor
            {
                problems.push(format!(
                    "{shown}: `{from}` (floor {}) must not import `{to}` (floor {}): lower floors never import higher ones",
                    floors[floor].0, floors[target].0
                ));
            }
        }
    }
    Ok(problems)
}

/// The floor of a module (its path without `.rs`), by its longest listed prefix.
fn floor_of(floors: Floors, module: &str) -> Option<usize> {
    let mut best: Option<(usize, usize)> = None;
    for (index, (_, modules)) in floors.iter().enumerate() {
        for prefix in *modules {
            let matches = module == *prefix || module.starts_with(&format!("{prefix}/"));
            if matches && best.is_none_or(|(length, _)| prefix.len() > length) {
                best = Some((prefix.len(), index));
            }
        }
    }
    best.map(|(_, index)| index)
}

/// Module file (`lib`, `gateway`, `guard/audit`; `mod.rs` files by their directory) → the module files it imports.
type Graph = BTreeMap<String, BTreeSet<String>>;

fn read_graph(directory: &Path) -> Result<Graph> {
    let mut files = Vec::new();
    collect(directory, &mut files)?;
    let modules: BTreeMap<Vec<String>, String> = files
        .iter()
        .map(|file| {
            let segments = module_path(directory, file);
            let name = if segments.is_empty() { "lib".to_owned() } else { segments.join("/") };
            (segments, name)
        })
        .collect();
    let mut graph = Graph::new();
    for file in &files {
        let text = std::fs::read_to_string(file).with_context(|| format!("cannot read {}", file.display()))?;
        // A module's unit tests in a file of their own are test code, which may reach anywhere.
        if file.file_name().is_some_and(|name| name == "tests.rs") {
            continue;
        }
        let here = module_path(directory, file);
        let Some(name) = modules.get(&here) else { continue };
        let targets = graph.entry(name.clone()).or_default();
        let is_module = |path: &[String]| modules.contains_key(path);
        for path in paths(&code_only(&text), &here, &is_module) {
            let mut prefix = path.as_slice();
            let target = loop {
                if let Some(target) = modules.get(prefix) {
                    break target;
                }
                match prefix.split_last() {
                    Some((_, rest)) => prefix = rest,
                    None => break &modules[&Vec::new()],
                }
            };
            if target != name {
                targets.insert(target.clone());
            }
        }
    }
    Ok(graph)
}

/// Every `.rs` file below `directory`, sorted (also `crate::tidy_map`'s list of module files).
pub(crate) fn collect(directory: &Path, files: &mut Vec<PathBuf>) -> Result<()> {
    for entry in std::fs::read_dir(directory).with_context(|| format!("cannot list {}", directory.display()))? {
        let path = entry?.path();
        if path.is_dir() {
            collect(&path, files)?;
        } else if path.extension().is_some_and(|extension| extension == "rs") {
            files.push(path);
        }
    }
    files.sort();
    Ok(())
}

/// The module path of a source file: `lib.rs` → `[]`, `a/mod.rs` and `a.rs` → `[a]`, `a/b.rs` → `[a, b]`.
/// A file of a module's unit tests (`catalog/tests.rs`) is the module it tests (and is not read: test code).
fn module_path(directory: &Path, file: &Path) -> Vec<String> {
    let relative = file.strip_prefix(directory).unwrap_or(file).with_extension("");
    let mut segments: Vec<String> =
        relative.components().map(|component| component.as_os_str().to_string_lossy().into_owned()).collect();
    let last = segments.last().map(String::as_str);
    if matches!(last, Some("mod" | "tests")) || segments == ["lib"] {
        segments.pop();
    }
    segments
}

/// The text of `source` without comments, string and character literals, and without each item marked
/// `#[cfg(test)]` (test code may reach anywhere; the code after such an item is checked as any other).
fn code_only(source: &str) -> String {
    without_test_items(&without_literals(source))
}

/// `code` (comments and literals already blanked, so braces and semicolons are the code's own) without each
/// `#[cfg(test)]` and the one item it marks: up to its first `;` outside brackets, or through the matching `}` of
/// its first `{` outside brackets, whichever comes first.
fn without_test_items(code: &str) -> String {
    const MARK: &str = "#[cfg(test)]";
    let mut kept = String::with_capacity(code.len());
    let mut rest = code;
    while let Some(start) = rest.find(MARK) {
        kept.push_str(&rest[..start]);
        let item = &rest[start + MARK.len()..];
        let (mut brackets, mut braces) = (0usize, 0usize);
        let mut end = item.len();
        for (index, character) in item.char_indices() {
            match character {
                '(' | '[' => brackets += 1,
                ')' | ']' => brackets = brackets.saturating_sub(1),
                '{' if brackets == 0 => braces += 1,
                '}' if brackets == 0 && braces > 0 => {
                    braces -= 1;
                    if braces == 0 {
                        end = index + 1;
                        break;
                    }
                }
                ';' if brackets == 0 && braces == 0 => {
                    end = index + 1;
                    break;
                }
                _ => {}
            }
        }
        // Keep the item's line breaks, so the lines after it stay where they were.
        kept.extend(item[..end].chars().filter(|character| *character == '\n'));
        rest = &item[end..];
    }
    kept.push_str(rest);
    kept
}

/// The text of `source` without comments, string and character literals.
fn without_literals(source: &str) -> String {
    let mut code = String::with_capacity(source.len());
    let mut characters = source.chars().peekable();
    while let Some(character) = characters.next() {
        match character {
            '/' if characters.peek() == Some(&'/') => {
                for skipped in characters.by_ref() {
                    if skipped == '\n' {
                        code.push('\n');
                        break;
                    }
                }
            }
            '/' if characters.peek() == Some(&'*') => {
                let mut previous = ' ';
                for skipped in characters.by_ref() {
                    if previous == '*' && skipped == '/' {
                        break;
                    }
                    previous = skipped;
                }
            }
            '"' => {
                let mut escaped = false;
                for skipped in characters.by_ref() {
                    match skipped {
                        '\\' if !escaped => escaped = true,
                        '"' if !escaped => break,
                        _ => escaped = false,
                    }
                }
                code.push_str("\"\"");
            }
            // A character literal (`'a'`, `'\n'`), not a lifetime (`'a` without a closing quote right after).
            '\'' => {
                let lookahead: String = characters.clone().take(3).collect();
                let literal = lookahead.starts_with('\\')
                    || lookahead.chars().nth(1) == Some('\'')
                    || (lookahead.starts_with('"') && lookahead.chars().nth(1) == Some('\''));
                if literal {
                    let mut escaped = false;
                    for skipped in characters.by_ref() {
                        match skipped {
                            '\\' if !escaped => escaped = true,
                            '\'' if !escaped => break,
                            _ => escaped = false,
                        }
                    }
                    code.push_str("' '");
                } else {
                    code.push('\'');
                }
            }
            other => code.push(other),
        }
    }
    code
}

/// Every crate-internal path in `code` (a file of module `here`), as absolute module segments: `crate::a::b`,
/// `super::b`, `self::b`, and `use b::…` where `b` is a child module of `here` (`is_module` says which module paths
/// exist), with `use` groups (`a::{b, c::d, self}`) expanded.
fn paths(code: &str, here: &[String], is_module: &dyn Fn(&[String]) -> bool) -> Vec<Vec<String>> {
    let tokens = tokenize(code);
    let mut found = Vec::new();
    let mut index = 0;
    while index < tokens.len() {
        let start = tokens[index].as_str();
        if start == "use"
            && let Some(child) = tokens.get(index + 1).filter(|child| is_identifier(child))
            && !matches!(child.as_str(), "crate" | "super" | "self")
            && is_module(&[here, std::slice::from_ref(child)].concat())
        {
            index = read_tree(&tokens, index + 1, here.to_vec(), &mut found);
            continue;
        }
        let preceded_by_path = index > 0 && tokens[index - 1] == "::";
        if !preceded_by_path
            && matches!(start, "crate" | "super" | "self")
            && tokens.get(index + 1).is_some_and(|t| t == "::")
        {
            let mut base: Vec<String> = if start == "crate" { Vec::new() } else { here.to_vec() };
            if start == "super" {
                base.pop();
            }
            index += 2;
            while tokens.get(index).is_some_and(|t| t == "super") && tokens.get(index + 1).is_some_and(|t| t == "::") {
                base.pop();
                index += 2;
            }
            index = read_tree(&tokens, index, base, &mut found);
        } else {
            index += 1;
        }
    }
    found
}

/// Reads one use tree (or plain path) at `index` under `base`; returns the index after it.
fn read_tree(tokens: &[String], mut index: usize, mut base: Vec<String>, found: &mut Vec<Vec<String>>) -> usize {
    loop {
        match tokens.get(index).map(String::as_str) {
            Some("{") => {
                index += 1;
                while let Some(token) = tokens.get(index) {
                    match token.as_str() {
                        "}" => return index + 1,
                        "," => index += 1,
                        "self" => {
                            found.push(base.clone());
                            index += 1;
                        }
                        _ => index = read_tree(tokens, index, base.clone(), found),
                    }
                }
                return index;
            }
            Some(token) if is_identifier(token) => {
                base.push(token.to_owned());
                index += 1;
                if tokens.get(index).is_some_and(|t| t == "::") {
                    index += 1;
                    continue;
                }
                found.push(base);
                return index;
            }
            _ => {
                if !base.is_empty() {
                    found.push(base);
                }
                return index;
            }
        }
    }
}

fn is_identifier(token: &str) -> bool {
    token.chars().next().is_some_and(|first| first.is_alphabetic() || first == '_')
        && token.chars().all(|character| character.is_alphanumeric() || character == '_')
}

/// Identifiers, `::` and single punctuation characters.
fn tokenize(code: &str) -> Vec<String> {
    let mut tokens = Vec::new();
    let mut characters = code.chars().peekable();
    while let Some(character) = characters.next() {
        if character.is_alphanumeric() || character == '_' {
            let mut word = character.to_string();
            while let Some(next) = characters.peek().copied().filter(|next| next.is_alphanumeric() || *next == '_') {
                word.push(next);
                characters.next();
            }
            tokens.push(word);
        } else if character == ':' && characters.peek() == Some(&':') {
            characters.next();
            tokens.push("::".to_owned());
        } else if !character.is_whitespace() {
            tokens.push(character.to_string());
        }
    }
    tokens
}

/// The sets of two or more module files that import each other, each sorted (strongly connected components).
fn cycles(graph: &Graph) -> Vec<BTreeSet<String>> {
    let reach = |from: &String| -> BTreeSet<String> {
        let mut seen = BTreeSet::new();
        let mut stack = vec![from.clone()];
        while let Some(node) = stack.pop() {
            for next in graph.get(&node).into_iter().flatten() {
                if seen.insert(next.clone()) {
                    stack.push(next.clone());
                }
            }
        }
        seen
    };
    let reachable: BTreeMap<&String, BTreeSet<String>> = graph.keys().map(|node| (node, reach(node))).collect();
    let mut placed = BTreeSet::new();
    let mut found = Vec::new();
    for node in graph.keys() {
        if placed.contains(node) {
            continue;
        }
        let component: BTreeSet<String> = reachable[node]
            .iter()
            .filter(|other| *other != node && reachable.get(other).is_some_and(|back| back.contains(node)))
            .cloned()
            .chain(std::iter::once(node.clone()))
            .collect();
        if component.len() > 1 {
            placed.extend(component.iter().cloned());
            found.push(component);
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(directory: &Path, file: &str, text: &str) -> Result<()> {
        let path = directory.join(file);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(path, text)?;
        Ok(())
    }

    #[test]
    fn a_circle_and_an_import_from_a_lower_floor_are_reported() -> Result<()> {
        let directory = std::env::temp_dir().join(format!("toolgate-layers-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&directory);
        write(&directory, "lib.rs", "//! root\nmod a;\nmod b;\nmod state;\npub use a::A;\nuse std::sync::Arc;\n")?;
        write(&directory, "a.rs", "//! a\nuse crate::{b::{self, B}, state::shared::S};\n")?;
        // A comment naming crate::state is no import; a string neither.
        write(&directory, "b.rs", "//! b\n// crate::state\nfn f() { let _ = \"crate::lib\"; super::a::g(); }\n")?;
        write(&directory, "state/mod.rs", "//! state\nmod shared;\n")?;
        write(&directory, "state/shared.rs", "//! shared\nuse super::super::b;\n#[cfg(test)]\nuse crate::a;\n")?;
        let floors: Floors = &[("state", &["state"]), ("behaviour", &["a", "b", "lib"])];
        let problems = check_crate(&directory, "x", floors)?;
        std::fs::remove_dir_all(&directory)?;
        assert_eq!(problems.len(), 2, "{problems:#?}");
        assert!(problems[0].contains("3 module files") && problems[0].contains("state/shared -> b"), "{problems:#?}");
        assert!(problems[1].contains("`state/shared` (floor state) must not import `b`"), "{problems:#?}");
        Ok(())
    }

    #[test]
    fn only_the_item_cfg_test_marks_is_skipped() {
        let source = "use crate::a;\n#[cfg(test)]\nfn helper() -> [u8; 2] { crate::b::f(); [0; 2] }\n\
                      #[cfg(test)]\nuse crate::c;\n// #[cfg(test)] in a comment marks nothing\n\
                      fn later() { crate::d::g(); }\n#[cfg(test)]\nmod tests { use crate::e; }\n";
        let code = code_only(source);
        let found = paths(&code, &[], &|_| true);
        let names: Vec<String> = found.iter().map(|path| path.join("::")).collect();
        assert_eq!(names, ["a", "d::g"], "{code}");
    }

    #[test]
    fn a_checked_crate_that_is_missing_is_reported() -> Result<()> {
        let root = std::env::temp_dir().join(format!("toolgate-layers-missing-{}", std::process::id()));
        std::fs::create_dir_all(&root)?;
        let problems = check(&root)?;
        std::fs::remove_dir_all(&root)?;
        assert_eq!(problems.len(), CHECKED_CRATES.len(), "{problems:#?}");
        assert!(problems[0].contains("crates/proxy/src is not a directory"), "{problems:#?}");
        Ok(())
    }
}
