//! The documentation and examples stay true: every `toml` block in docs/config.md and examples/gateway.toml
//! parses, and every key the parser accepts is documented.

use std::path::Path;

use toolgate_core::trust::TrustLevel;
use toolgate_spec::Prefix;

use super::errors::test_env;
use crate::parse_config_with_env;

fn repository_file(path: &str) -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").join(path)).unwrap()
}

fn docs_env(name: &str) -> Option<String> {
    test_env(name).or_else(|| {
        matches!(name, "GITHUB_TOKEN" | "CI_TOKEN" | "BOB_CONSOLE_TOKEN" | "SEARCH_CLIENT_ID" | "SEARCH_CLIENT_SECRET")
            .then(|| format!("{name}-value"))
    })
}

/// The fenced blocks of `language` in a Markdown text.
fn fenced_blocks<'a>(markdown: &'a str, language: &str) -> Vec<&'a str> {
    let opening = format!("```{language}\n");
    let mut blocks = Vec::new();
    let mut rest = markdown;
    while let Some(start) = rest.find(&opening) {
        let body = &rest[start + opening.len()..];
        let end = body.find("```\n").unwrap();
        blocks.push(&body[..end]);
        rest = &body[end..];
    }
    blocks
}

#[test]
fn example_gateway_toml_parses() {
    let text = repository_file("examples/gateway.toml");
    let spec = parse_config_with_env(&text, Path::new("examples/gateway.toml"), &docs_env).unwrap();
    let prefixes: Vec<Prefix> = spec.upstreams.iter().map(|upstream| upstream.prefix.clone()).collect();
    assert_eq!(
        prefixes,
        [Prefix::With("git".into()), Prefix::With("mem".into()), Prefix::With("search".into()), Prefix::None]
    );
    assert_eq!(spec.upstreams[0].overrides.len(), 2);
    assert!(spec.http.is_some() && spec.stdio.is_some());
    let levels: Vec<TrustLevel> = spec.upstreams.iter().map(|upstream| upstream.trust.level).collect();
    assert_eq!(levels, [TrustLevel::Pinned, TrustLevel::Verified, TrustLevel::Untrusted, TrustLevel::Untrusted]);
    let manifest = spec.upstreams[1].trust.manifest.as_ref().unwrap();
    assert_eq!(manifest.path, Path::new("examples/manifests/memory.json"));
    assert_eq!(spec.guardrails.policy.rules.len(), 3);
    let callers: Vec<&str> = spec.guardrails.callers.iter().map(|caller| caller.name.as_str()).collect();
    assert_eq!(callers, ["alice", "ci"]);
    assert_eq!(spec.guardrails.selection.max_tools, Some(40));
}

#[test]
fn every_toml_block_in_the_docs_parses() {
    let docs = repository_file("docs/config.md");
    let blocks = fenced_blocks(&docs, "toml");
    assert!(blocks.len() >= 12, "found only {} toml blocks", blocks.len());
    for block in blocks {
        if let Err(error) = parse_config_with_env(block, Path::new("docs/config.md"), &docs_env) {
            panic!("a docs/config.md example does not parse:\n{error}\n---\n{block}");
        }
    }
}

/// The keys a table accepts, read from the parser's own "unknown key" message so no list is kept twice
/// (`expected one of a, b, c`, `expected a or b`, `expected a`).
fn accepted_keys(text_with_unknown_key: &str) -> Vec<String> {
    let error = parse_config_with_env(text_with_unknown_key, Path::new("probe.toml"), &test_env).unwrap_err();
    let message = &error.problems()[0].message;
    assert!(message.contains("unknown key `probe`"), "{message}");
    let list = message.split("(expected ").nth(1).unwrap().split([')', ';']).next().unwrap();
    let list = list.strip_prefix("one of ").unwrap_or(list);
    list.split(", ").flat_map(|item| item.split(" or ")).map(str::to_owned).collect()
}

#[test]
fn every_key_is_documented() {
    let docs = repository_file("docs/config.md");
    let stdio = "[[upstream]]\nname = \"a\"\ncommand = \"x\"\n";
    let probes = [
        format!("{stdio}probe = 1\n"),
        format!("{stdio}[upstream.tools.t]\nprobe = 1\n"),
        format!("{stdio}[upstream.sandbox]\nprobe = 1\n"),
        format!("{stdio}[listen.http]\nprobe = 1\n"),
        format!("{stdio}[listen.http.oauth]\nprobe = 1\n"),
        format!("{stdio}[listen]\nprobe = 1\n"),
        format!("{stdio}[limits]\nprobe = 1\n"),
        format!("{stdio}[listen.stdio]\nprobe = 1\n"),
        format!("{stdio}trust = \"verified\"\n[upstream.manifest]\nprobe = 1\n"),
        format!("{stdio}[policy]\nprobe = 1\n"),
        format!("{stdio}[[policy.rule]]\neffect = \"deny\"\nprobe = 1\n"),
        format!("{stdio}[[policy.rule]]\neffect = \"deny\"\nmatch.probe = 1\n"),
        format!("{stdio}[confirmation]\nprobe = 1\n"),
        format!("{stdio}[pins]\nprobe = 1\n"),
        format!("{stdio}[results]\nprobe = 1\n"),
        format!("{stdio}[retries]\nprobe = 1\n"),
        format!("{stdio}[audit]\nprobe = 1\n"),
        format!("{stdio}[[caller]]\nname = \"c\"\nprobe = 1\n"),
        format!("{stdio}[selection]\nprobe = 1\n"),
        format!("{stdio}[console]\nprobe = 1\n"),
        format!("{stdio}[[console.user]]\nname = \"c\"\nprobe = 1\n"),
        format!("{stdio}[console.sso]\nissuer = \"https://i\"\nprobe = 1\n"),
        format!("{stdio}[store]\nprobe = 1\n"),
        "probe = 1\n".to_owned(),
    ];
    let mut keys = Vec::new();
    for probe in &probes {
        keys.extend(accepted_keys(probe));
    }
    assert!(keys.len() > 80, "{} keys: {keys:?}", keys.len());
    for key in keys {
        let documented = docs.contains(&format!("`{key}`"))
            || docs.contains(&format!("{key}]`"))
            || docs.contains(&format!("{key}]]`"));
        assert!(documented, "docs/config.md does not document `{key}`");
    }
}
