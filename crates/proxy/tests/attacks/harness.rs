//! The attack suite's harness: an in-process gateway with a state store, test-support's client (eliciting or not,
//! or declaring any capabilities and reading elicitations itself), and helpers to wait for listings, list changes, pending
//! approvals and fixture calls.

use std::time::Duration;

use serde_json::{Value, json};
use toolgate_core::policy::PolicySpec;
use toolgate_core::trust::TrustLevel;
use toolgate_proxy::Gateway;
use toolgate_proxy::session::ClientBound;
use toolgate_spec::{ConfirmationSpec, GuardrailSpec, UpstreamSpec};
use toolgate_store::{ApprovalRecord, AuditFilter, Store, digest_arguments};

pub(crate) use crate::support::{Client, Elicit};
use crate::support::{FixtureLog, GUARD, start_guarded, upstream};

/// The meta key toolgate adds to every tool definition.
pub(crate) const META_KEY: &str = "toolgate/annotations";

// ---------------------------------------------------------------------------------------------------------------
// Harness

/// A gateway with a store in a temporary state directory.
pub(crate) struct Harness {
    pub(crate) gateway: Gateway,
    pub(crate) store: Store,
    pub(crate) state: tempfile::TempDir,
}

impl Harness {
    /// Starts a gateway for `upstreams` with `guardrails`, keeping its state in a fresh directory.
    pub(crate) async fn start(upstreams: Vec<UpstreamSpec>, guardrails: GuardrailSpec) -> Harness {
        let state = tempfile::tempdir().unwrap();
        let store = crate::support::gateway_store(state.path()).await;
        let gateway = start_gateway(upstreams, guardrails, &store).await;
        Harness { gateway, store, state }
    }

    /// A second, independent handle on the same database: what `toolgate approvals` or `toolgate pins` in another
    /// process would use.
    pub(crate) async fn other_handle(&self) -> Store {
        Store::open(self.state.path()).await.unwrap()
    }

    /// The usual setup: one untrusted `rug-pull` upstream named `rug`, logging to `log`, under the standard policy
    /// with a minute for confirmations.
    pub(crate) async fn untrusted_rug(log: &FixtureLog) -> Harness {
        Harness::start(vec![rug("rug", log, TrustLevel::Untrusted)], standard(Duration::from_secs(60))).await
    }

    /// A person pins `fingerprint` as `tool`'s definition from another process (`toolgate pins approve`).
    pub(crate) async fn approve_pin(&self, upstream: &str, tool: &str, fingerprint: &str) {
        self.other_handle().await.pins().approve_pending(upstream, tool, fingerprint, "tester").await.unwrap();
    }

    pub(crate) async fn client(&self, elicitation: Elicit) -> Client {
        Client::connect_with(&self.gateway, elicitation).await
    }
}

pub(crate) async fn start_gateway(upstreams: Vec<UpstreamSpec>, guardrails: GuardrailSpec, store: &Store) -> Gateway {
    start_guarded(upstreams, guardrails, Some(store.clone())).await
}

/// Guardrails with the standard policy and a confirmation timeout of `timeout`.
pub(crate) fn standard(timeout: Duration) -> GuardrailSpec {
    GuardrailSpec {
        policy: PolicySpec::default(),
        confirmation: ConfirmationSpec { timeout, ..ConfirmationSpec::default() },
        ..GuardrailSpec::default()
    }
}

pub(crate) fn policy(value: Value) -> PolicySpec {
    serde_json::from_value(value).expect("a valid policy spec")
}

/// A `misbehave.py --mode rug-pull` upstream named (and prefixed) `name`, logging to `log`.
pub(crate) fn rug(name: &str, log: &FixtureLog, trust: TrustLevel) -> UpstreamSpec {
    let mut spec = upstream(name, "rug-pull", Duration::from_secs(20), Some(&log.path));
    spec.trust.level = trust;
    spec
}

pub(crate) fn is_error(response: &Value) -> bool {
    response["result"]["isError"] == json!(true)
}

pub(crate) fn text(response: &Value) -> String {
    response["result"]["content"][0]["text"].as_str().unwrap_or_default().to_owned()
}

/// Whether the fixture received a `tools/call` of `tool` (its own name).
pub(crate) fn fixture_called(log: &FixtureLog, tool: &str) -> usize {
    log.entries().iter().filter(|entry| entry["method"] == "tools/call" && entry["params"]["name"] == tool).count()
}

/// Waits (bounded) until `condition` holds on the session's tool list.
pub(crate) async fn wait_tools(client: &mut Client, what: &str, condition: impl Fn(&[Value]) -> bool) -> Vec<Value> {
    let deadline = tokio::time::Instant::now() + GUARD;
    loop {
        let tools = client.tools().await;
        if condition(&tools) {
            return tools;
        }
        assert!(tokio::time::Instant::now() < deadline, "never saw {what}; tools: {tools:#?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

pub(crate) fn names(tools: &[Value]) -> Vec<&str> {
    tools.iter().filter_map(|tool| tool["name"].as_str()).collect()
}

/// Calls `hidden` and a name that never existed with `arguments`; asserts `hidden` is not listed and the two results
/// are the same but for the name.
pub(crate) async fn assert_looks_unknown(client: &mut Client, hidden: &str, arguments: Value) {
    let tools = client.tools().await;
    assert!(!names(&tools).contains(&hidden), "{hidden} is not listed: {:?}", names(&tools));
    let response = client.call(json!("hidden"), hidden, arguments.clone()).await;
    let unknown = client.call(json!("unknown"), "never_existed", arguments).await;
    assert!(is_error(&response), "{response}");
    assert_eq!(
        response["result"].to_string().replace(hidden, "NAME"),
        unknown["result"].to_string().replace("never_existed", "NAME"),
        "a hidden tool answers exactly like an unknown one"
    );
}

/// Waits until the queue holds a pending approval for `tool` with these arguments, and returns it.
pub(crate) async fn wait_pending(store: &Store, tool: &str, arguments: &Value) -> ApprovalRecord {
    let digest = digest_arguments(arguments);
    let deadline = tokio::time::Instant::now() + GUARD;
    loop {
        let pending = store.approvals().list_pending().await.unwrap();
        if let Some(record) =
            pending.into_iter().find(|record| record.approval.tool == tool && record.approval.args_digest == digest)
        {
            return record;
        }
        assert!(tokio::time::Instant::now() < deadline, "no pending approval for {tool} {arguments}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Every approval id the audit log mentions.
pub(crate) async fn audited_approval_ids(store: &Store) -> Vec<String> {
    store.audit().flush().await.unwrap();
    let rows = store.query_audit(&AuditFilter::default()).await.unwrap();
    let mut ids: Vec<String> = rows.into_iter().filter_map(|row| row.approval_id).collect();
    ids.sort();
    ids.dedup();
    ids
}

/// How many `notifications/tools/list_changed` the client received so far.
pub(crate) fn list_changes(client: &Client) -> usize {
    client
        .all
        .iter()
        .filter(|bound| {
            matches!(bound, ClientBound::Unsolicited(message)
            if message["method"] == "notifications/tools/list_changed")
        })
        .count()
}

/// Waits until the client has received more than `seen` tool list changes: the gateway rebuilt its catalog after
/// an upstream's `list_changed` (it notifies sessions only once the new catalog is in place).
pub(crate) async fn wait_list_changes(client: &mut Client, seen: usize) {
    while list_changes(client) <= seen {
        assert!(client.receive_one(GUARD).await, "no tools/list_changed within the hang guard");
    }
}

// ---------------------------------------------------------------------------------------------------------------
// 1. An untrusted upstream declaring read-only on a tool that deletes
