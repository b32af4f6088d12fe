//! `toolgate check-config` is strict when asked: `--deny warnings` exits 1 on a file that only has warnings (exit 0
//! without it, exit 0 with it on a clean file), and a rule whose `match.upstream` matches no upstream is named by its
//! id. `import` refuses a VS Code input it cannot ask for and warns about a literal secret it copies.

use crate::support::toolgate;

fn config(dir: &tempfile::TempDir, rules: &str) -> String {
    let path = dir.path().join("gateway.toml");
    std::fs::write(
        &path,
        format!("[[upstream]]\nname = \"github\"\ncommand = \"mcp-server-github\"\nargs = []\n\n{rules}"),
    )
    .expect("write the config");
    path.to_string_lossy().into_owned()
}

#[test]
fn deny_warnings_fails_a_file_with_warnings_and_a_rule_that_matches_nothing_is_named_by_its_id() {
    let dir = tempfile::tempdir().expect("tempdir");
    let typo = config(
        &dir,
        "[[policy.rule]]\nid = \"no-github-writes\"\neffect = \"deny\"\nmatch = { upstream = [\"githbu\"] }\n",
    );
    let lenient = toolgate(&["check-config", &typo], None);
    assert_eq!(lenient.code, Some(0), "{lenient:?}");
    assert!(
        lenient.stdout.contains("policy rule 1 (id `no-github-writes`): `match.upstream` pattern `githbu` matches no"),
        "{}",
        lenient.stdout
    );
    let strict = toolgate(&["check-config", "--deny", "warnings", &typo], None);
    assert_eq!(strict.code, Some(1), "{strict:?}");

    let clean = config(
        &dir,
        "[[policy.rule]]\nid = \"no-github-writes\"\neffect = \"deny\"\nmatch = { upstream = [\"github\"] }\n",
    );
    let strict = toolgate(&["check-config", "--deny", "warnings", &clean], None);
    assert_eq!(strict.code, Some(0), "{strict:?}");
}

#[test]
fn import_refuses_an_unresolved_vscode_input_and_warns_about_a_literal_secret() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("mcp.json");
    std::fs::write(
        &path,
        r#"{"inputs": [{"id": "tok", "type": "promptString", "password": true}],
            "servers": {"gh": {"type": "stdio", "command": "gh-mcp", "env": {"GITHUB_TOKEN": "${input:tok}"}}}}"#,
    )
    .expect("write");
    let refused = toolgate(&["import", &path.to_string_lossy()], None);
    assert_eq!(refused.code, Some(2), "{refused:?}");
    assert!(refused.stderr.contains("`${input:tok}` is a VS Code input toolgate cannot ask for"), "{refused:?}");
    assert!(refused.stdout.is_empty(), "no half-usable file is printed: {refused:?}");

    std::fs::write(
        &path,
        r#"{"servers": {"gh": {"type": "stdio", "command": "gh-mcp", "env": {"GITHUB_TOKEN": "ghp-x"}}}}"#,
    )
    .expect("write");
    let imported = toolgate(&["import", &path.to_string_lossy()], None);
    assert_eq!(imported.code, Some(0), "{imported:?}");
    assert!(imported.stdout.contains("# warning: env `GITHUB_TOKEN` is a literal secret"), "{}", imported.stdout);
}
