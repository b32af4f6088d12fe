//! A raw JSON-RPC client on one in-process gateway session: what the fault, metrics and attack tests talk through.
//!
//! It keeps every message it received (`all`), the ones not consumed yet (`stash`), and answers
//! `elicitation/create` as its [`Elicit`] says; a client that did not declare elicitation fails the test when asked.

use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::mpsc;
use toolgate_proxy::Gateway;
use toolgate_proxy::session::{Caller, ClientBound, ClientSession, SessionFactory, TransportKind};

use super::GUARD;

/// How a test client answers `elicitation/create`; `None` means it does not declare elicitation at all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Elicit {
    None,
    Accept,
    Decline,
    /// Declares elicitation, keeps each request (in `elicitations`) and answers none on its own.
    Hold,
}

/// A client on one gateway session.
pub(crate) struct Client {
    /// The gateway's half of the session.
    pub(crate) session: Box<dyn ClientSession>,
    receiver: mpsc::Receiver<ClientBound>,
    elicit: Elicit,
    /// Everything received and not consumed yet, in arrival order (answered elicitations are not kept here).
    pub(crate) stash: Vec<ClientBound>,
    /// Every message received, in arrival order, never consumed.
    pub(crate) all: Vec<ClientBound>,
    /// The elicitation requests answered.
    pub(crate) elicitations: Vec<Value>,
}

impl Client {
    /// Opens a session without elicitation and runs the initialize handshake.
    pub(crate) async fn connect(gateway: &Gateway) -> Client {
        Client::connect_with(gateway, Elicit::None).await
    }

    /// Opens a session that answers elicitation as `elicit` says, and runs the initialize handshake.
    pub(crate) async fn connect_with(gateway: &Gateway, elicit: Elicit) -> Client {
        let capabilities = if elicit == Elicit::None { json!({}) } else { json!({"elicitation": {"form": {}}}) };
        Client::connect_declaring(gateway, elicit, capabilities).await
    }

    /// Opens a session that declares `capabilities` (and answers elicitation as `elicit` says).
    pub(crate) async fn connect_declaring(gateway: &Gateway, elicit: Elicit, capabilities: Value) -> Client {
        Client::connect_as(gateway, Caller::anonymous(), elicit, capabilities).await
    }

    /// Opens a session for `caller` (its name and scopes, as a transport would authenticate it).
    pub(crate) async fn connect_as(gateway: &Gateway, caller: Caller, elicit: Elicit, capabilities: Value) -> Client {
        let (session, receiver) = gateway.open_session(TransportKind::Stdio, caller);
        let mut client =
            Client { session, receiver, elicit, stash: Vec::new(), all: Vec::new(), elicitations: Vec::new() };
        let params =
            json!({"protocolVersion": "2025-11-25", "capabilities": capabilities, "clientInfo": {"name": "tests"}});
        let response = client.request(json!("init"), "initialize", params).await;
        assert!(response["result"]["protocolVersion"].is_string(), "initialize failed: {response}");
        client.session.deliver(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        client
    }

    /// Sends a request without waiting.
    pub(crate) fn send(&self, id: Value, method: &str, params: Value) {
        self.session.deliver(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
    }

    /// Sends a request and waits for its response.
    pub(crate) async fn request(&mut self, id: Value, method: &str, params: Value) -> Value {
        self.send(id.clone(), method, params);
        self.response(&id).await
    }

    /// Sends a `tools/call` without waiting.
    pub(crate) fn start_call(&self, id: Value, tool: &str, arguments: Value) {
        self.send(id, "tools/call", json!({"name": tool, "arguments": arguments}));
    }

    /// Calls a tool and waits for the response.
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

    /// The tool named `name`, if the session sees it.
    pub(crate) async fn tool(&mut self, name: &str) -> Option<Value> {
        self.tools().await.into_iter().find(|tool| tool["name"] == name)
    }

    /// Waits for the response to the request `id` (taking it from the stash when it already arrived), answering
    /// elicitation requests on the way.
    pub(crate) async fn response(&mut self, id: &Value) -> Value {
        loop {
            let position = self
                .stash
                .iter()
                .position(|bound| matches!(bound, ClientBound::Response { request_id, .. } if request_id == id));
            if let Some(position) = position {
                let ClientBound::Response { message, .. } = self.stash.remove(position) else { unreachable!() };
                assert_eq!(&message["id"], id, "a response carries the client's id");
                return message;
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
        match &bound {
            ClientBound::Related { message, .. } | ClientBound::Unsolicited(message)
                if message["method"] == "elicitation/create" =>
            {
                let request = message.clone();
                self.answer_elicitation(&request);
            }
            _ => self.stash.push(bound),
        }
        true
    }

    fn answer_elicitation(&mut self, request: &Value) {
        self.elicitations.push(request.clone());
        let result = match self.elicit {
            Elicit::Accept => json!({"action": "accept", "content": {"approve": true}}),
            Elicit::Decline => json!({"action": "decline"}),
            Elicit::Hold => return,
            Elicit::None => panic!("an elicitation reached a client that did not declare it: {request}"),
        };
        self.session.deliver(json!({"jsonrpc": "2.0", "id": request["id"], "result": result}));
    }

    /// Moves everything already queued into the stash, without waiting.
    pub(crate) fn drain(&mut self) {
        while let Ok(bound) = self.receiver.try_recv() {
            self.all.push(bound.clone());
            self.stash.push(bound);
        }
    }

    /// Stashed responses to the request `id`.
    pub(crate) fn stashed_responses(&self, id: &Value) -> usize {
        self.stash
            .iter()
            .filter(|bound| matches!(bound, ClientBound::Response { request_id, .. } if request_id == id))
            .count()
    }

    /// Responses received and not taken yet.
    pub(crate) fn waiting_responses(&self) -> usize {
        self.stash.iter().filter(|bound| matches!(bound, ClientBound::Response { .. })).count()
    }

    /// Waits until an unsolicited `notifications/tools/list_changed` arrives.
    pub(crate) async fn wait_list_changed(&mut self) {
        let seen = |all: &[ClientBound]| {
            all.iter()
                .filter(|bound| {
                    matches!(bound, ClientBound::Unsolicited(message)
                        if message["method"] == "notifications/tools/list_changed")
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
