//! `[upstream.credentials]`: what a valid table lowers to (secret resolved, resource defaulting to the URL) and each
//! mistake with the position a user sees; the secret never appears in a message or the summary.

use std::path::Path;

use toolgate_spec::{ClientCredentialsSpec, Secret, UpstreamCredentials};

use super::errors::{check_error, test_env};
use crate::{check_config_text, parse_config_with_env};

const HEAD: &str = "[[upstream]]\nname = \"s\"\nurl = \"https://s.example/mcp\"\n";
const TABLE: &str = "[upstream.credentials]\nkind = \"client_credentials\"\nissuer = \"https://login.example\"\n\
                     client_id_env = \"CLIENT_ID\"\nclient_secret_env = \"CLIENT_SECRET\"\n";

#[test]
fn client_credentials_lower_with_the_secret_resolved_and_the_upstream_as_resource() {
    let text = format!("{HEAD}{TABLE}scope = \"tools:read\"\n");
    let spec = parse_config_with_env(&text, Path::new("gateway.toml"), &test_env).unwrap();
    assert_eq!(
        spec.upstreams[0].credentials,
        Some(UpstreamCredentials::ClientCredentials(ClientCredentialsSpec {
            issuer: "https://login.example".into(),
            client_id: "toolgate".into(),
            client_secret: Secret::new("cl13nt-s3cret"),
            scope: Some("tools:read".into()),
            resource: Some("https://s.example/mcp".into()),
        }))
    );
    let summary = check_config_text(&text, Path::new("gateway.toml"), &test_env).unwrap();
    assert!(!summary.to_string().contains("cl13nt-s3cret"));
    assert!(!format!("{summary:?} {spec:?}").contains("cl13nt-s3cret"));
}

#[test]
fn credential_mistakes_are_errors_at_their_line() {
    check_error(
        &format!("{HEAD}{}", TABLE.replace("client_credentials", "password")),
        "gateway.toml:5:8: upstream \"s\": credentials kind `password` is not supported (expected client_credentials)",
    );
    check_error(
        &format!("{HEAD}{}", TABLE.replace("CLIENT_SECRET", "MISSING_SECRET")),
        "gateway.toml:8:21: upstream \"s\": environment variable `MISSING_SECRET` (client_secret_env) is not set",
    );
    check_error(
        &format!("{HEAD}{}", TABLE.replace("issuer = \"https://login.example\"\n", "")),
        "gateway.toml:4:1: upstream \"s\": `[upstream.credentials]` needs `issuer`",
    );
    check_error(
        &format!("{HEAD}bearer_token_env = \"SEARCH_TOKEN\"\n{TABLE}"),
        "gateway.toml:5:1: upstream \"s\": set `[upstream.credentials]`, `bearer_token_env` or an `Authorization` \
         header, not two",
    );
    check_error(
        &format!("[[upstream]]\nname = \"s\"\ncommand = \"x\"\n{TABLE}"),
        "gateway.toml:4:1: upstream \"s\": `[upstream.credentials]` applies only to `url` upstreams",
    );
    check_error(
        &format!("{HEAD}{TABLE}audience = \"x\"\n"),
        "gateway.toml:9:1: upstream \"s\": unknown key `audience` (expected one of kind, issuer, client_id_env, \
         client_secret_env, scope, resource)",
    );
}
