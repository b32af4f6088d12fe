//! `toolgate serve` as an OAuth 2.1 resource server (`[listen.http.oauth]`) in front of the bundled demo server,
//! against a real OpenID provider (npm `oidc-provider`, started by the test-support harness): opaque tokens asked
//! about by introspection (scope, revocation, expiry, the provider down and back), keys fetched again on a timer so
//! a key the issuer stopped publishing stops working, ID tokens and other JWTs not typed `at+jwt` refused, and a
//! flood of bad tokens that writes a bounded number of audit rows while a valid call's rows are all there, and a
//! flood of made-up opaque tokens that holds a bounded number of the provider's introspections.
//!
//! Real processes on loopback only. Waits are hang guards; no test asserts how long anything took.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod introspection;
mod introspection_flood;
mod keys;
mod refusal_flood;
mod token_types;

use std::time::Duration;

use serde_json::{Value, json};
use toolgate_core::decision::Verdict;
use toolgate_store::{AuditFilter, AuditKind, AuditRow, InventoryTool, Store};
use toolgate_test_support::HANG_GUARD;
use toolgate_test_support::oidc::{OidcProvider, ProviderConfig};
use toolgate_test_support::toolgate::raw_http::{self, Reply, post};
use toolgate_test_support::toolgate::{Serving, Setup, binary, start_serve};

/// The static caller that may read `/metrics` (OAuth tokens never may).
const OPS_TOKEN: &str = "ops-metrics-token-0123456789";

/// The provider, and `toolgate serve` accepting its tokens for `resource`.
struct Scene {
    provider: OidcProvider,
    config: ProviderConfig,
    resource: String,
    setup: Setup,
    serving: Serving,
}

impl Scene {
    /// Starts the provider with `config(resource)`, then toolgate with `[listen.http.oauth]` for it (requiring
    /// `tools:call`) plus `oauth_extra` lines, and the static caller `ops`, with `env` in its environment.
    fn start(config: impl Fn(&str) -> ProviderConfig, oauth_extra: &str, env: &[(&str, &str)]) -> Scene {
        Scene::start_with(config, oauth_extra, env, true)
    }

    /// [`Scene::start`], with or without the static caller `ops` (without it, OAuth tokens are the only callers).
    fn start_with(
        config: impl Fn(&str) -> ProviderConfig,
        oauth_extra: &str,
        env: &[(&str, &str)],
        static_caller: bool,
    ) -> Scene {
        let port = toolgate_test_support::toolgate::fleet::free_port();
        let resource = format!("http://127.0.0.1:{port}/mcp");
        let config = config(&resource);
        let provider = OidcProvider::start(&config);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("gateway.toml");
        let text = format!(
            "[[upstream]]\nname = \"demo\"\ncommand = {binary:?}\nargs = [\"demo-server\"]\n\n\
             [listen.http]\nbind = \"127.0.0.1:{port}\"\n\n\
             [listen.http.oauth]\nissuer = \"{issuer}\"\nresource = \"{resource}\"\nrequired_scopes = [\"tools:call\"]\n\
             {oauth_extra}\n\n{caller}",
            binary = binary(),
            issuer = provider.issuer(),
            caller = if static_caller { "[[caller]]\nname = \"ops\"\ntoken_env = \"OPS_TOKEN\"\n" } else { "" },
        );
        std::fs::write(&path, text).unwrap();
        let setup = Setup { dir, config: path };
        let mut env = env.to_vec();
        env.push(("OPS_TOKEN", OPS_TOKEN));
        let serving = start_serve(&setup, &env);
        Scene { provider, config, resource, setup, serving }
    }

    /// One 2026-07-28 `tools/call` of the demo's read-only `list_notes` with `token` as the bearer.
    fn call(&self, token: &str) -> Reply {
        let meta = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {}});
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "list_notes", "arguments": {}, "_meta": meta}});
        let bearer = format!("Bearer {token}");
        let headers = [
            ("Authorization", bearer.as_str()),
            ("MCP-Protocol-Version", "2026-07-28"),
            ("Mcp-Method", "tools/call"),
            ("Mcp-Name", "list_notes"),
        ];
        post(&self.serving.authority, &headers, &body).unwrap()
    }

    /// Asserts `token` is refused with 401 `invalid_token` for `reason`.
    fn assert_refused(&self, token: &str, reason: &str) {
        let reply = self.call(token);
        let challenge = reply.header("www-authenticate").unwrap_or_default().to_owned();
        assert_eq!(reply.status, 401, "{reason}: {} {}", reply.status, reply.body);
        assert!(challenge.contains(&format!("error_description=\"{reason}\"")), "{reason}: {challenge}");
    }

    /// Asserts `token` is accepted: the call answered 200 with the demo's notes.
    fn assert_accepted(&self, token: &str) {
        let reply = self.call(token);
        assert_eq!(reply.status, 200, "{}", reply.body);
        assert!(!reply.body.contains("\"isError\":true"), "{}", reply.body);
    }

    /// `GET /metrics` as the static caller.
    fn metrics(&self) -> String {
        let reply = raw_http::metrics(&self.serving.authority, OPS_TOKEN).unwrap();
        assert_eq!(reply.status, 200, "{}", reply.body);
        reply.body
    }

    /// Who the console's inventory says may do what with `tool`, once it has been written.
    fn inventory_access(&self, tool: &str) -> Vec<(String, Verdict)> {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        runtime.block_on(async {
            let store = Store::open(&self.setup.state()).await.unwrap();
            let started = std::time::Instant::now();
            loop {
                let tools: Vec<InventoryTool> = store.inventory().await.unwrap();
                if let Some(found) = tools.iter().find(|found| found.tool == tool && !found.access.is_empty()) {
                    let access = found.access.iter().map(|access| (access.caller.clone(), access.verdict)).collect();
                    store.close().await.unwrap();
                    return access;
                }
                assert!(started.elapsed() < HANG_GUARD, "no inventory of {tool}: {tools:#?}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
    }

    /// `toolgate check-config` of the scene's file: its summary.
    fn check_config(&self) -> String {
        let mut command = toolgate_test_support::toolgate::command();
        command.arg("check-config").arg(&self.setup.config).env("OPS_TOKEN", OPS_TOKEN);
        let checked = toolgate_test_support::run_guarded(command, "toolgate check-config");
        assert_eq!(checked.code, Some(0), "{checked:?}");
        checked.stdout
    }

    /// The audit rows of `kind` once `done` holds for them (the audit writer batches), oldest first.
    fn audit_when(&self, kind: AuditKind, done: impl Fn(&[AuditRow]) -> bool) -> Vec<AuditRow> {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        runtime.block_on(async {
            let store = Store::open(&self.setup.state()).await.unwrap();
            let started = std::time::Instant::now();
            loop {
                let filter = AuditFilter { kind: Some(kind), ..AuditFilter::default() };
                let mut rows = store.query_audit(&filter).await.unwrap();
                rows.sort_by_key(|row| row.seq);
                if done(&rows) {
                    store.close().await.unwrap();
                    return rows;
                }
                assert!(started.elapsed() < HANG_GUARD, "the audit never got there: {rows:#?}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
    }
}

/// The identity an audit row names.
fn identity(row: &AuditRow) -> Option<String> {
    row.caller.as_ref().and_then(|caller| caller["identity"].as_str()).map(str::to_owned)
}

/// A provider signing with `keys`, with a client-credentials service `svc` (both scopes), `reader` (without
/// `tools:call`), and JWT access tokens for `resource`.
fn jwt_provider(keys: &Value, resource: &str) -> ProviderConfig {
    ProviderConfig::new(keys.clone())
        .scopes(&["tools:call", "tools:admin"])
        .service_client("svc", "svc-secret", "tools:call tools:admin")
        .service_client("reader", "reader-secret", "tools:admin")
        .resource(resource, "tools:call tools:admin", 300)
}
