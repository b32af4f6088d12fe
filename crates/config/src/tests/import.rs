//! Importing Claude Desktop and VS Code configurations: the generated text (snapshots) and that it round-trips
//! through the parser into the endpoints the client would have run.

use std::path::{Path, PathBuf};

use toolgate_spec::Endpoint;
use toolgate_spec::{GatewaySpec, Prefix};

use super::errors::test_env;
use crate::import::import_text;
use crate::parse_config_with_env;

fn example(name: &str) -> (PathBuf, String) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples").join(name);
    let text = std::fs::read_to_string(&path).unwrap();
    (PathBuf::from("examples").join(name), text)
}

fn import_example(name: &str) -> (String, GatewaySpec) {
    let (path, text) = example(name);
    // The VS Code example asks for a token with an input, which toolgate refuses (below): here the person has put
    // the value in.
    let text = text.replace("${input:github-token}", "ghp-typed-in");
    let toml = import_text(&text, &path).unwrap();
    let env = |name: &str| test_env(name).or_else(|| (name == "LINEAR_TOKEN").then(|| "lin-token".to_owned()));
    let spec = parse_config_with_env(&toml, Path::new("gateway.toml"), &env)
        .unwrap_or_else(|error| panic!("imported text does not parse:\n{error}\n---\n{toml}"));
    (toml, spec)
}

#[track_caller]
fn check_import_error(json: &str, expected: &str) {
    let error = import_text(json, Path::new("mcp.json")).unwrap_err();
    assert_eq!(error.to_string(), expected);
}

#[test]
fn claude_desktop_config_round_trips() {
    let (toml, spec) = import_example("claude_desktop_config.json");
    insta::assert_snapshot!("claude_desktop_import", toml);
    let names: Vec<&str> = spec.upstreams.iter().map(|upstream| upstream.name.as_str()).collect();
    assert_eq!(names, ["filesystem", "memory", "git", "Linear_Issues"]);
    assert_eq!(
        spec.upstreams[2].endpoint,
        Endpoint::stdio("uvx", ["mcp-server-git", "--repository", "/Users/me/src/project"])
    );
    assert_eq!(
        spec.upstreams[3].endpoint,
        Endpoint::Http {
            url: "https://mcp.linear.app/mcp".into(),
            headers: vec![("Authorization".into(), "Bearer lin-token".into())],
        }
    );
    assert_eq!(spec.upstreams[0].prefix, Prefix::With("filesystem".into()));
    assert_eq!(spec.stdio.unwrap().identity, "claude-desktop");
    assert!(spec.http.is_none());
}

#[test]
fn vscode_mcp_json_round_trips() {
    let (toml, spec) = import_example("vscode_mcp.json");
    insta::assert_snapshot!("vscode_import", toml);
    let names: Vec<&str> = spec.upstreams.iter().map(|upstream| upstream.name.as_str()).collect();
    assert_eq!(names, ["github", "time", "fetch", "search"]);
    // A literal credential is kept with a note; `Bearer ${env:VAR}` became bearer_token_env.
    let Endpoint::Http { headers, .. } = &spec.upstreams[0].endpoint else { panic!("not http") };
    assert_eq!(headers, &[("Authorization".to_owned(), "Bearer ghp-typed-in".to_owned())]);
    assert!(toml.contains("# the Authorization header holds a literal credential"));
    let Endpoint::Http { headers, .. } = &spec.upstreams[3].endpoint else { panic!("not http") };
    assert_eq!(
        headers,
        &[("X-Client".to_owned(), "vscode".to_owned()), ("Authorization".to_owned(), "Bearer s3cret-token".to_owned())]
    );
    // The same-name `${env:...}` is inherited rather than copied.
    let Endpoint::Stdio { env, .. } = &spec.upstreams[2].endpoint else { panic!("not stdio") };
    assert_eq!(env, &[("FETCH_USER_AGENT".to_owned(), "toolgate-demo".to_owned())]);
    assert!(toml.contains("# [[upstream]]\n# name = \"old_events\"\n# url = \"https://legacy.example.com/sse\"\n"));
    assert_eq!(spec.http.unwrap().bind.to_string(), "127.0.0.1:8765");
}

#[test]
fn json_errors_have_positions() {
    check_import_error(
        "{\n  \"servers\": {\n    \"a\": {\"command\": 1}\n  }\n}\n",
        "mcp.json:3:22: invalid JSON: invalid type: integer `1`, expected a string",
    );
    check_import_error(
        "{\n  \"servers\": {\n    \"a\": {\"command\": \"x\"\n  }\n",
        "mcp.json:5:1: invalid JSON: EOF while parsing an object",
    );
    check_import_error(
        "{\"settings\": {}}",
        "mcp.json:1:1: no `mcpServers` (Claude Desktop) or `servers` (VS Code mcp.json) object in this file",
    );
    check_import_error("{\"mcpServers\": {}}", "mcp.json:1:1: the file lists no servers: nothing to import");
    check_import_error(
        "{\"mcpServers\": {\"a\": {\"type\": \"sse\", \"url\": \"http://x/sse\"}}}",
        "mcp.json:1:1: none of the 1 servers can run behind toolgate (legacy SSE, disabled or incomplete): nothing to import",
    );
}

#[test]
fn awkward_entries_are_commented_out_not_lost() {
    let json = r#"{"mcpServers": {
        "ok": {"command": "srv"},
        "off": {"command": "srv2", "disabled": true},
        "home": {"command": "~/bin/srv"},
        "both": {"command": "srv3", "url": "http://localhost/mcp"},
        "ftp": {"url": "ftp://x/mcp"},
        "x": {"type": "websocket", "url": "ws://x"}
    }}"#;
    let toml = import_text(json, Path::new("claude.json")).unwrap();
    let spec = parse_config_with_env(&toml, Path::new("gateway.toml"), &test_env).unwrap();
    assert_eq!(spec.upstreams.len(), 1, "{toml}");
    for expected in [
        "# disabled in the source file: left commented out\n# [[upstream]]\n# name = \"off\"",
        "# `~` is only expanded by a shell: write the full path and uncomment\n# [[upstream]]\n# name = \"home\"",
        "# has both `command` and `url` and no `type`: left commented out; keep one",
        "# url scheme `ftp` is not supported: use http or https: left commented out",
        "# unknown transport type \"websocket\": left commented out",
    ] {
        assert!(toml.contains(expected), "missing {expected:?} in\n{toml}");
    }
}

#[test]
fn names_are_sanitized_and_kept_unique() {
    let json = r#"{"servers": {"a.b": {"command": "x"}, "a_b": {"command": "y"}, "A B": {"command": "z"}}}"#;
    let toml = import_text(json, Path::new("mcp.json")).unwrap();
    let spec = parse_config_with_env(&toml, Path::new("gateway.toml"), &test_env).unwrap();
    let names: Vec<&str> = spec.upstreams.iter().map(|upstream| upstream.name.as_str()).collect();
    assert_eq!(names, ["a_b", "a_b-2", "A_B-3"]);
    assert!(toml.contains("# named \"a.b\" in the source file\n"));
}

#[test]
fn an_unresolved_vscode_input_refuses_the_import_and_a_literal_secret_is_warned_about() {
    let (path, text) = example("vscode_mcp.json");
    let error = import_text(&text, &path).unwrap_err().to_string();
    assert!(
        error.contains("`${input:github-token}` is a VS Code input toolgate cannot ask for; put the value in"),
        "{error}"
    );
    assert!(error.starts_with("examples/vscode_mcp.json:10:"), "the placeholder's position: {error}");
    let json = r#"{"servers": {"gh": {"command": "gh-mcp", "env": {"GITHUB_TOKEN": "ghp-literal", "LOG": "1"},
                    "type": "stdio"}, "api": {"type": "http", "url": "https://a.example/mcp",
                    "headers": {"X-Api-Key": "k-literal"}}}}"#;
    let toml = import_text(json, Path::new("mcp.json")).unwrap();
    assert!(toml.contains("# warning: env `GITHUB_TOKEN` is a literal secret copied into this file"), "{toml}");
    assert!(!toml.contains("env `LOG` is a literal secret"), "{toml}");
    assert!(toml.contains("# warning: header `X-Api-Key` is a literal secret copied into this file"), "{toml}");
}
