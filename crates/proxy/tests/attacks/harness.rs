//! The attack suite's harness: an in-process gateway with a state store, raw JSON-RPC clients that can or cannot
//! elicit, and helpers to wait for listings, pending approvals and fixture calls.

use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::mpsc;
use toolgate_core::policy::PolicySpec;
use toolgate_core::trust::TrustLevel;
use toolgate_proxy::Gateway;
use toolgate_proxy::session::{Caller, ClientBound, ClientSession, SessionFactory, TransportKind};
use toolgate_proxy::spec::{ConfirmationSpec, GatewaySpec, GuardrailSpec, Limits, UpstreamSpec};
use toolgate_proxy::upstreams::UpstreamStatus;
use toolgate_store::{ApprovalRecord, AuditFilter, Store, digest_arguments};

use crate::support::{FixtureLog, GUARD, upstream};

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
        let store = Store::open(state.path()).await.unwrap();
        let gateway = start_gateway(upstreams, guardrails, &store).await;
        Harness { gateway, store, state }
    }

    /// A second, independent handle on the same database: what `toolgate approvals` or `toolgate pins` in another
    /// process would use.
    pub(crate) async fn other_handle(&self) -> Store {
        Store::open(self.state.path()).await.unwrap()
    }

    pub(crate) async fn client(&self, elicitation: Elicit) -> Client {
        Client::connect(&self.gateway, elicitation).await
    }
}

pub(crate) async fn start_gateway(upstreams: Vec<UpstreamSpec>, guardrails: GuardrailSpec, store: &Store) -> Gateway {
    let spec = GatewaySpec { upstreams, stdio: None, http: None, limits: Limits::default(), guardrails, source: None };
    let gateway = Gateway::with_store(spec, Some(store.clone())).expect("the gateway spec is valid");
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

/// How a test client answers `elicitation/create`; `None` means it does not declare elicitation at all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Elicit {
    None,
    Accept,
    Decline,
}

/// A raw JSON-RPC client on one gateway session that keeps every message it received.
pub(crate) struct Client {
    pub(crate) session: Box<dyn ClientSession>,
    pub(crate) receiver: mpsc::Receiver<ClientBound>,
    pub(crate) elicit: Elicit,
    /// Every message received, in arrival order (never consumed).
    pub(crate) all: Vec<ClientBound>,
    /// Responses not taken yet.
    pub(crate) responses: Vec<Value>,
    /// The elicitation requests answered.
    pub(crate) elicitations: Vec<Value>,
}

impl Client {
    pub(crate) async fn connect(gateway: &Gateway, elicit: Elicit) -> Client {
        let (session, receiver) = gateway.open_session(TransportKind::Stdio, Caller::anonymous());
        let mut client =
            Client { session, receiver, elicit, all: Vec::new(), responses: Vec::new(), elicitations: Vec::new() };
        let capabilities = if elicit == Elicit::None { json!({}) } else { json!({"elicitation": {"form": {}}}) };
        let response = client
            .request(
                json!("init"),
                "initialize",
                json!({"protocolVersion": "2025-11-25", "capabilities": capabilities, "clientInfo": {"name": "attacks"}}),
            )
            .await;
        assert!(response["result"]["protocolVersion"].is_string(), "initialize failed: {response}");
        client.session.deliver(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        client
    }

    pub(crate) fn send(&self, id: Value, method: &str, params: Value) {
        self.session.deliver(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
    }

    pub(crate) async fn request(&mut self, id: Value, method: &str, params: Value) -> Value {
        self.send(id.clone(), method, params);
        self.response(&id).await
    }

    /// Sends a `tools/call` without waiting.
    pub(crate) fn start_call(&self, id: Value, tool: &str, arguments: Value) {
        self.send(id, "tools/call", json!({"name": tool, "arguments": arguments}));
    }

    pub(crate) async fn call(&mut self, id: Value, tool: &str, arguments: Value) -> Value {
        self.start_call(id.clone(), tool, arguments);
        self.response(&id).await
    }

    /// Every tool the session sees.
    pub(crate) async fn tools(&mut self) -> Vec<Value> {
        let id = json!(format!("list-{}", self.all.len()));
        let response = self.request(id, "tools/list", json!({})).await;
        response["result"]["tools"].as_array().cloned().unwrap_or_else(|| panic!("no tools in {response}"))
    }

    pub(crate) async fn tool(&mut self, name: &str) -> Option<Value> {
        self.tools().await.into_iter().find(|tool| tool["name"] == name)
    }

    /// Waits for the response to `id`, answering elicitation requests on the way.
    pub(crate) async fn response(&mut self, id: &Value) -> Value {
        loop {
            if let Some(position) = self.responses.iter().position(|response| &response["id"] == id) {
                return self.responses.remove(position);
            }
            assert!(self.receive_one(GUARD).await, "no response to {id} within the hang guard");
        }
    }

    /// Receives one message; false when nothing came within `wait`.
    pub(crate) async fn receive_one(&mut self, wait: Duration) -> bool {
        let bound = match tokio::time::timeout(wait, self.receiver.recv()).await {
            Ok(Some(bound)) => bound,
            Ok(None) => panic!("the session's outbox closed"),
            Err(_) => return false,
        };
        self.all.push(bound.clone());
        match bound {
            ClientBound::Response { message, .. } => self.responses.push(message),
            ClientBound::Related { message, .. } | ClientBound::Unsolicited(message) => {
                if message["method"] == "elicitation/create" {
                    self.answer_elicitation(&message);
                }
            }
        }
        true
    }

    pub(crate) fn answer_elicitation(&mut self, request: &Value) {
        self.elicitations.push(request.clone());
        let result = match self.elicit {
            Elicit::Accept => json!({"action": "accept", "content": {"approve": true}}),
            Elicit::Decline => json!({"action": "decline"}),
            Elicit::None => panic!("an elicitation reached a client that did not declare it: {request}"),
        };
        self.session.deliver(json!({"jsonrpc": "2.0", "id": request["id"], "result": result}));
    }

    /// Waits until an unsolicited `notifications/tools/list_changed` arrives.
    pub(crate) async fn wait_list_changed(&mut self) {
        let seen = |all: &[ClientBound]| {
            all.iter().filter(|bound| {
                matches!(bound, ClientBound::Unsolicited(message) if message["method"] == "notifications/tools/list_changed")
            })
            .count()
        };
        let before = seen(&self.all);
        while seen(&self.all) == before {
            assert!(self.receive_one(GUARD).await, "no tools/list_changed within the hang guard");
        }
    }

    /// Everything received, as one string, for searching.
    pub(crate) fn everything(&self) -> String {
        self.all
            .iter()
            .map(|bound| match bound {
                ClientBound::Response { message, .. }
                | ClientBound::Related { message, .. }
                | ClientBound::Unsolicited(message) => message.to_string(),
            })
            .collect::<Vec<_>>()
            .join("\n")
    }
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

// ---------------------------------------------------------------------------------------------------------------
// 1. An untrusted upstream declaring read-only on a tool that deletes
