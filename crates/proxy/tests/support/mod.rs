//! Shared helpers for the proxy's integration tests: an in-process gateway over `misbehave.py` upstreams, the
//! fixture's message log, and the test process's memory figures. The client is test-support's one in-process
//! client (`toolgate_test_support::gateway_client`).
//!
//! Everything waits under [`GUARD`], a hang guard only: tests assert what arrived, never how long it took.

#![allow(dead_code)]

#[allow(unused_imports, reason = "each test binary uses its own part")]
pub(crate) use toolgate_test_support::gateway_client::{Client, Elicit, message_of};

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};
use toolgate_proxy::Gateway;
use toolgate_proxy::upstreams::UpstreamStatus;
use toolgate_spec::{GatewaySpec, GuardrailSpec, Limits, Prefix, UpstreamSpec};
use toolgate_upstream::Endpoint;

/// The longest any single wait may take before the test fails as hung.
pub(crate) const GUARD: Duration = Duration::from_secs(30);

/// An upstream running `misbehave.py --mode MODE`, exposed with the prefix `name`.
pub(crate) fn upstream(name: &str, mode: &str, request_timeout: Duration, log: Option<&Path>) -> UpstreamSpec {
    let command = toolgate_test_support::misbehave(mode);
    let mut env = command.env.clone();
    if let Some(log) = log {
        env.push(("MISBEHAVE_LOG".to_owned(), log.to_string_lossy().into_owned()));
    }
    UpstreamSpec {
        name: name.to_owned(),
        endpoint: Endpoint::Stdio {
            program: command.program.to_string_lossy().into_owned(),
            args: command.args.clone(),
            env,
            cwd: None,
        },
        prefix: Prefix::With(name.to_owned()),
        overrides: Default::default(),
        initialize_timeout: Duration::from_secs(20),
        request_timeout,
        max_in_flight: toolgate_spec::DEFAULT_MAX_IN_FLIGHT,
        trust: Default::default(),
        sandbox: Default::default(),
        era: Default::default(),
        credentials: None,
    }
}

/// The gateway's state store in `state` (a directory), opened as `toolgate serve` opens it: with the audit journal
/// every call's row goes through.
pub(crate) async fn gateway_store(state: &Path) -> toolgate_store::Store {
    let database = state.join(toolgate_store::DATABASE_FILE);
    toolgate_store::Store::open_file(&database, toolgate_store::StoreOptions::gateway()).await.expect("the store opens")
}

/// What the store's failure says in [`break_used_nonces`]: text only the operator may read (the log, the audit).
pub(crate) const STORE_SECRET: &str = "disk /srv/secret-volume-7 of db-host.internal is failing";

/// Makes the store in `state` (a directory) fail every use of a request state's nonce from now on, as a broken
/// database would, with an error naming [`STORE_SECRET`].
pub(crate) async fn break_used_nonces(state: &Path) {
    break_store(state, "broken_nonces", "INSERT ON used_request_states").await;
}

/// Makes the store in `state` fail every statement `event` names (`INSERT ON approvals`, say, with a `WHEN` clause
/// if need be) from now on, as a broken database would, with an error naming [`STORE_SECRET`]: a raw connection adds
/// the trigger `name` that aborts it.
pub(crate) async fn break_store(state: &Path, name: &str, event: &str) {
    use sqlx::sqlite::{SqliteConnectOptions, SqlitePool};
    let options = SqliteConnectOptions::new().filename(state.join(toolgate_store::DATABASE_FILE));
    let pool = SqlitePool::connect_with(options).await.expect("a raw connection to the store");
    let statement = format!("CREATE TRIGGER {name} BEFORE {event} BEGIN SELECT RAISE(ABORT, '{STORE_SECRET}'); END");
    // Audited: the text is the tests' own constants, no input.
    sqlx::query(sqlx::AssertSqlSafe(statement)).execute(&pool).await.expect("the trigger is created");
    pool.close().await;
}

/// Starts a gateway for `upstreams` (permissive policy, no store) and waits until every one of them is ready.
pub(crate) async fn start(upstreams: Vec<UpstreamSpec>, limits: Limits) -> Gateway {
    let guardrails = GuardrailSpec { policy: toolgate_core::policy::PolicySpec::permissive(), ..Default::default() };
    let spec = GatewaySpec { limits, guardrails, ..GatewaySpec::new(upstreams) };
    start_spec(spec, None).await
}

/// Starts a gateway for `upstreams` under `guardrails` (default limits, no listener), with `store` when given, and
/// waits until every upstream is ready.
pub(crate) async fn start_guarded(
    upstreams: Vec<UpstreamSpec>,
    guardrails: GuardrailSpec,
    store: Option<toolgate_store::Store>,
) -> Gateway {
    let spec = GatewaySpec { guardrails, ..GatewaySpec::new(upstreams) };
    start_spec(spec, store).await
}

/// Starts a gateway for `spec`, with `store` when given, and waits until every upstream is ready.
pub(crate) async fn start_spec(spec: GatewaySpec, store: Option<toolgate_store::Store>) -> Gateway {
    let gateway = Gateway::with_store(spec, store).expect("the gateway spec is valid");
    gateway.start();
    gateway.wait_settled(GUARD).await;
    for upstream in gateway.status().upstreams {
        assert!(
            matches!(upstream.status, UpstreamStatus::Ready { .. }),
            "upstream {} did not start: {:?}",
            upstream.name,
            upstream.status
        );
    }
    gateway
}

/// The current status of the upstream `name`.
pub(crate) fn status_of(gateway: &Gateway, name: &str) -> UpstreamStatus {
    gateway
        .status()
        .upstreams
        .into_iter()
        .find(|upstream| upstream.name == name)
        .map(|upstream| upstream.status)
        .unwrap_or_else(|| panic!("no upstream named {name}"))
}

/// The text of a tool result's first content item.
pub(crate) fn text_of(response: &Value) -> &str {
    response["result"]["content"][0]["text"].as_str().unwrap_or_else(|| panic!("no text content in {response}"))
}

/// Asserts a tool call failed as an `isError` result and returns its text.
pub(crate) fn tool_error(response: &Value) -> String {
    assert_eq!(response["result"]["isError"], json!(true), "expected an isError result: {response}");
    text_of(response).to_owned()
}

/// The log `misbehave.py` writes when `MISBEHAVE_LOG` names a file: every message it read, one JSON line each.
pub(crate) struct FixtureLog {
    _dir: tempfile::TempDir,
    /// The file to pass to [`upstream`].
    pub(crate) path: PathBuf,
}

impl FixtureLog {
    /// A fresh, empty log location.
    pub(crate) fn new() -> FixtureLog {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("misbehave.log");
        FixtureLog { _dir: dir, path }
    }

    /// Every entry logged so far.
    pub(crate) fn entries(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.path)
            .unwrap_or_default()
            .lines()
            .filter_map(|line| serde_json::from_str(line).ok())
            .collect()
    }

    /// Waits until an entry matches `predicate` and returns it.
    pub(crate) async fn wait_for(&self, what: &str, predicate: impl Fn(&Value) -> bool) -> Value {
        let deadline = tokio::time::Instant::now() + GUARD;
        loop {
            if let Some(entry) = self.entries().into_iter().find(&predicate) {
                return entry;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "the fixture never logged {what}; it logged: {:?}",
                self.entries()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Waits until the fixture received a `tools/call` of `tool` with `arguments.text == text`; returns its id.
    pub(crate) async fn call_id(&self, tool: &str, text: &str) -> Value {
        let entry = self
            .wait_for(&format!("a call of {tool} ({text})"), |entry| {
                entry["method"] == "tools/call"
                    && entry["params"]["name"] == tool
                    && entry["params"]["arguments"]["text"] == text
            })
            .await;
        entry["id"].clone()
    }
}

/// Held by tests that measure the process's memory, so their figures do not include each other's work.
pub(crate) static MEMORY_TESTS: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Resets the process's peak RSS (`VmHWM`) to its current RSS, so a later reading is the peak since now.
///
/// Linux only; when the kernel refuses, `VmHWM` stays the peak since start, which only makes bounds stricter.
pub(crate) fn reset_peak_memory() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

/// `VmRSS` and `VmHWM` of the test process, in KiB.
pub(crate) fn memory_kib() -> (u64, u64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|line| line.strip_prefix(name))
            .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or_else(|| panic!("no {name} in /proc/self/status"))
    };
    (field("VmRSS:"), field("VmHWM:"))
}
