//! `[listen.http.oauth]`: what a valid table lowers to, and each mistake at the position a user sees (an http://
//! issuer off loopback, `alg: none`, a missing resource, half an introspection client).

use std::path::Path;
use std::time::Duration;

use super::errors::{check_error, test_env};
use crate::parse_config_with_env;

const HEAD: &str = "[[upstream]]\nname = \"s\"\ncommand = \"x\"\n[listen.http]\n[listen.http.oauth]\n";

#[test]
fn an_oauth_table_lowers_onto_the_http_listener() {
    let text = format!(
        "{HEAD}issuer = \"https://login.example\"\nresource = \"https://gw.example/mcp\"\n\
         required_scopes = [\"tools:call\"]\ngroup_claims = [\"groups\"]\nclock_skew_seconds = 5\n"
    );
    let spec = parse_config_with_env(&text, Path::new("gateway.toml"), &test_env).unwrap();
    let oauth = spec.http.unwrap().oauth.unwrap();
    assert_eq!(oauth.issuer, "https://login.example");
    assert_eq!(oauth.resource, "https://gw.example/mcp");
    assert_eq!(oauth.required_scopes, vec!["tools:call"]);
    assert_eq!(oauth.group_claims, vec!["groups"]);
    assert_eq!(oauth.clock_skew, Duration::from_secs(5));
    assert!(oauth.algorithms.iter().all(|alg| !alg.starts_with("HS")));
    assert!(oauth.require_at_jwt, "RFC 9068 typing is required unless turned off");
    assert_eq!(oauth.introspection, None);
    let introspected = format!(
        "{HEAD}issuer = \"https://login.example\"\nresource = \"https://gw.example/mcp\"\nrequire_at_jwt = false\n\
         introspection_client_id_env = \"CLIENT_ID\"\nintrospection_client_secret_env = \"CLIENT_SECRET\"\n\
         introspection_cache_seconds = 7\n"
    );
    let oauth = parse_config_with_env(&introspected, Path::new("gateway.toml"), &test_env).unwrap().http.unwrap().oauth;
    let oauth = oauth.unwrap();
    assert!(!oauth.require_at_jwt);
    assert_eq!(oauth.introspection.map(|introspection| introspection.cache), Some(Duration::from_secs(7)));
    let loopback = format!("{HEAD}issuer = \"http://127.0.0.1:9000\"\nresource = \"http://localhost:8765/mcp\"\n");
    assert!(parse_config_with_env(&loopback, Path::new("gateway.toml"), &test_env).is_ok());
}

#[test]
fn oauth_mistakes_are_errors_at_their_line() {
    check_error(
        &format!("{HEAD}issuer = \"http://login.example\"\nresource = \"https://gw.example/mcp\"\n"),
        "gateway.toml:6:10: [listen.http.oauth]: `issuer` must use https:// (http:// only on loopback: the ID token \
         and code would travel in the clear)",
    );
    check_error(
        &format!(
            "{HEAD}issuer = \"https://login.example\"\nresource = \"https://gw.example/mcp\"\nalgorithms = [\"none\"]\n"
        ),
        "gateway.toml:8:14: [listen.http.oauth]: `algorithms` may never contain `none` (unsigned tokens)",
    );
    check_error(
        &format!("{HEAD}issuer = \"https://login.example\"\n"),
        "gateway.toml:5:1: [listen.http.oauth] needs `resource`",
    );
    check_error(
        &format!(
            "{HEAD}issuer = \"https://login.example\"\nresource = \"https://gw.example/mcp\"\n\
             introspection_client_id_env = \"X\"\n"
        ),
        "gateway.toml:5:1: [listen.http.oauth]: set both `introspection_client_id_env` and \
         `introspection_client_secret_env`, or neither",
    );
    check_error(
        &format!(
            "{HEAD}issuer = \"https://login.example\"\nresource = \"https://gw.example/mcp\"\n\
             introspection_client_id_env = \"CLIENT_ID\"\nintrospection_client_secret_env = \"CLIENT_SECRET\"\n\
             introspection_cache_seconds = 3600\n"
        ),
        "gateway.toml:10:31: [listen.http.oauth]: `introspection_cache_seconds` is at most 300 (a revoked token stays \
         accepted that long)",
    );
}

#[test]
fn check_config_names_the_oauth_tokens_as_the_callers_and_nobody_anonymous() {
    let text = format!(
        "{HEAD}issuer = \"https://login.example\"\nresource = \"https://gw.example/mcp\"\n\
         required_scopes = [\"tools:call\"]\n"
    );
    let summary = crate::summary::summarize(
        &parse_config_with_env(&text, Path::new("gateway.toml"), &test_env).unwrap(),
        &[None],
        Vec::new(),
    );
    let shown = summary.to_string();
    assert!(
        shown.ends_with(
            "callers:\n  OAuth access tokens from https://login.example for https://gw.example/mcp (required scopes: \
             tools:call; opaque tokens refused)"
        ),
        "{shown}"
    );
    assert!(!shown.contains("anonymous") && !shown.contains("callers: none"), "{shown}");
}
