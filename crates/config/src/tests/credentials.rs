//! `[upstream.credentials]`: what a valid table lowers to (secret resolved, resource defaulting to the URL; a token
//! exchange with its audience and token type) and each mistake with the position a user sees, the listener without
//! OAuth callers included; the summary names the kind, issuer and audience, never the secret.

use std::path::Path;

use toolgate_spec::{ACCESS_TOKEN_TYPE, ClientCredentialsSpec, Secret, TokenExchangeSpec, UpstreamCredentials};

use super::errors::{check_error, test_env};
use crate::{CredentialsKind, CredentialsSummary, check_config_text, parse_config_with_env};

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
        "gateway.toml:5:8: upstream \"s\": credentials kind `password` is not supported (expected client_credentials \
         or token_exchange)",
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
        &format!("{HEAD}{TABLE}grant = \"x\"\n"),
        "gateway.toml:9:1: upstream \"s\": unknown key `grant` (expected one of kind, issuer, client_id_env, \
         client_secret_env, scope, resource, token_endpoint, audience, requested_token_type)",
    );
    check_error(
        &format!("{HEAD}{TABLE}audience = \"x\"\n"),
        "gateway.toml:9:12: upstream \"s\": `audience` applies only to kind = \"token_exchange\"",
    );
}

/// An OAuth listener whose callers have tokens to exchange.
const OAUTH: &str = "[listen.http]\n[listen.http.oauth]\nissuer = \"https://login.example\"\n\
                     resource = \"https://gw.example/mcp\"\n";

fn exchange_table() -> String {
    TABLE.replace("client_credentials", "token_exchange")
}

#[test]
fn token_exchange_lowers_with_audience_and_token_type() {
    let text = format!("{HEAD}{}audience = \"search\"\nscope = \"search:read\"\n{OAUTH}", exchange_table());
    let spec = parse_config_with_env(&text, Path::new("gateway.toml"), &test_env).unwrap();
    let expected = TokenExchangeSpec {
        issuer: "https://login.example".into(),
        token_endpoint: None,
        client_id: "toolgate".into(),
        client_secret: Secret::new("cl13nt-s3cret"),
        scope: Some("search:read".into()),
        resource: Some("https://s.example/mcp".into()),
        audience: Some("search".into()),
        requested_token_type: ACCESS_TOKEN_TYPE.into(),
    };
    assert_eq!(spec.upstreams[0].credentials, Some(UpstreamCredentials::TokenExchange(expected.clone())));
    // toolgate's own traffic uses the same client, for the same resource.
    assert_eq!(expected.own_credentials().resource.as_deref(), Some("https://s.example/mcp"));
    let summary = check_config_text(&text, Path::new("gateway.toml"), &test_env).unwrap();
    assert!(!format!("{summary} {summary:?} {spec:?}").contains("cl13nt-s3cret"));

    // A token endpoint alone is used without discovery, and names where toolgate asks.
    let endpoint_only = format!(
        "{HEAD}{}{OAUTH}",
        exchange_table()
            .replace("issuer = \"https://login.example\"", "token_endpoint = \"https://login.example/token\"")
    );
    let spec = parse_config_with_env(&endpoint_only, Path::new("gateway.toml"), &test_env).unwrap();
    let Some(UpstreamCredentials::TokenExchange(exchange)) = &spec.upstreams[0].credentials else {
        panic!("a token exchange: {:?}", spec.upstreams[0].credentials)
    };
    assert_eq!(exchange.issuer, "https://login.example/token");
    assert_eq!(exchange.token_endpoint.as_deref(), Some("https://login.example/token"));
}

#[test]
fn token_exchange_mistakes_are_errors_at_their_line() {
    check_error(
        &format!("{HEAD}{}", exchange_table()),
        "gateway.toml:5:8: upstream \"s\": credentials kind `token_exchange` trades each caller's OAuth access \
         token, but the HTTP listener does not authenticate callers by OAuth: add `[listen.http.oauth]`, or use kind \
         = \"client_credentials\" for toolgate's own token",
    );
    check_error(
        &format!(
            "{HEAD}{}requested_token_type = \"urn:ietf:params:oauth:token-type:id_token\"\n{OAUTH}",
            exchange_table()
        ),
        "gateway.toml:9:24: upstream \"s\": `requested_token_type` `urn:ietf:params:oauth:token-type:id_token` is \
         not a token toolgate can send as a bearer (expected urn:ietf:params:oauth:token-type:access_token or \
         urn:ietf:params:oauth:token-type:jwt)",
    );
    check_error(
        &format!("{HEAD}{}{OAUTH}", exchange_table().replace("issuer = \"https://login.example\"\n", "")),
        "gateway.toml:4:1: upstream \"s\": `[upstream.credentials]` needs `issuer` or `token_endpoint`",
    );
    check_error(
        &format!("[[upstream]]\nname = \"s\"\ncommand = \"x\"\n{}{OAUTH}", exchange_table()),
        "gateway.toml:4:1: upstream \"s\": `[upstream.credentials]` applies only to `url` upstreams",
    );
}

#[test]
fn callers_without_oauth_tokens_beside_a_token_exchange_are_warned_about() {
    let text = format!(
        "{HEAD}{}{OAUTH}[listen.stdio]\n[[caller]]\nname = \"ops\"\ntoken_env = \"SEARCH_TOKEN\"\n",
        exchange_table()
    );
    let summary = check_config_text(&text, Path::new("gateway.toml"), &test_env).unwrap();
    let warnings: Vec<String> = summary.warnings.iter().map(ToString::to_string).collect();
    assert!(
        warnings
            .iter()
            .any(|warning| warning.starts_with("gateway.toml:5:8: upstream \"s\": stdio clients present no")),
        "{warnings:?}"
    );
    assert!(
        warnings.iter().any(|warning| warning.contains("`[[caller]]` tokens are not OAuth access tokens")),
        "{warnings:?}"
    );
}

#[test]
fn the_summary_names_each_upstreams_credentials_kind_issuer_and_audience_never_the_secret() {
    let summarize = |text: &str| check_config_text(text, Path::new("gateway.toml"), &test_env).unwrap();
    let line = |text: &str| {
        let shown = summarize(text).to_string();
        shown.lines().find(|line| line.contains("https://s.example/mcp")).unwrap_or_default().to_owned()
    };

    let grant = format!("{HEAD}{TABLE}");
    assert_eq!(
        summarize(&grant).upstreams[0].credentials,
        Some(CredentialsSummary {
            kind: CredentialsKind::ClientCredentials,
            issuer: Some("https://login.example".into()),
            audience: None,
        })
    );
    assert!(line(&grant).ends_with("; credentials client_credentials from https://login.example)"), "{}", line(&grant));

    let exchange = format!("{HEAD}{}audience = \"search\"\n{OAUTH}", exchange_table());
    let summary = summarize(&exchange);
    assert_eq!(
        summary.upstreams[0].credentials,
        Some(CredentialsSummary {
            kind: CredentialsKind::TokenExchange,
            issuer: Some("https://login.example".into()),
            audience: Some("search".into()),
        })
    );
    assert!(
        line(&exchange).ends_with("; credentials token_exchange from https://login.example for audience search)"),
        "{}",
        line(&exchange)
    );
    assert!(!format!("{summary} {summary:?}").contains("cl13nt-s3cret"));

    let bearer = format!("{HEAD}bearer_token_env = \"SEARCH_TOKEN\"\n");
    let summary = summarize(&bearer);
    assert_eq!(
        summary.upstreams[0].credentials.as_ref().map(|credentials| credentials.kind),
        Some(CredentialsKind::Static)
    );
    assert!(line(&bearer).ends_with("; credentials static, bearer token from $SEARCH_TOKEN)"), "{}", line(&bearer));
    assert!(!format!("{summary} {summary:?}").contains("s3cret-token"));

    // Headers alone are not credentials toolgate obtains.
    assert_eq!(summarize(HEAD).upstreams[0].credentials, None);
}
