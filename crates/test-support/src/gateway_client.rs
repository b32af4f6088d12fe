//! One in-process MCP client for the gateway's tests: a raw JSON-RPC client on one gateway session.
//!
//! [`Client`] opens a session through the gateway's `SessionFactory` (as a transport would), runs the initialize
//! handshake, keeps every message it received (`all`) and the ones not consumed yet (`stash`), and answers
//! `elicitation/create` as its [`Elicit`] says (a client that did not declare elicitation fails the test when
//! asked). [`Client::open_loop`] hands the session to a task that timestamps answers, for open-loop load. Every
//! wait is bounded by [`HANG_GUARD`]; nothing here asserts how long anything took. Only with the `gateway` feature.

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::sync::mpsc;
use toolgate_proxy::Gateway;
use toolgate_proxy::session::{Caller, ClientBound, ClientSession, SessionFactory, TransportKind};

use crate::HANG_GUARD;

/// How a test client answers `elicitation/create`; `None` means it does not declare elicitation at all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Elicit {
    /// Declares no elicitation; being asked fails the test.
    None,
    /// Declares form elicitation and approves every question.
    Accept,
    /// Declares form elicitation and declines every question.
    Decline,
    /// Declares elicitation, keeps each request (in `elicitations`) and answers none on its own.
    Hold,
    /// Keeps elicitation requests with the other messages (the stash), for a test that reads and answers them
    /// itself; declares only what the capabilities it connects with say.
    Manual,
}

/// A client on one gateway session.
pub struct Client {
    /// The `initialize` response.
    pub initialized: Value,
    /// The gateway's half of the session.
    pub session: Box<dyn ClientSession>,
    receiver: mpsc::Receiver<ClientBound>,
    elicit: Elicit,
    /// Everything received and not consumed yet, in arrival order (answered elicitations are not kept here).
    pub stash: Vec<ClientBound>,
    /// Every message received, in arrival order, never consumed.
    pub all: Vec<ClientBound>,
    /// The elicitation requests answered.
    pub elicitations: Vec<Value>,
}

impl Client {
    /// Opens a session without elicitation and runs the initialize handshake.
    pub async fn connect(gateway: &Gateway) -> Client {
        Client::connect_with(gateway, Elicit::None).await
    }

    /// Opens a session that answers elicitation as `elicit` says, and runs the initialize handshake.
    pub async fn connect_with(gateway: &Gateway, elicit: Elicit) -> Client {
        let capabilities = if elicit == Elicit::None { json!({}) } else { json!({"elicitation": {"form": {}}}) };
        Client::connect_declaring(gateway, elicit, capabilities).await
    }

    /// Opens a session that declares `capabilities` (and answers elicitation as `elicit` says).
    pub async fn connect_declaring(gateway: &Gateway, elicit: Elicit, capabilities: Value) -> Client {
        Client::connect_as(gateway, Caller::anonymous(), elicit, capabilities).await
    }

    /// Opens a session for `caller` (its name and scopes, as a transport would authenticate it).
    pub async fn connect_as(gateway: &Gateway, caller: Caller, elicit: Elicit, capabilities: Value) -> Client {
        let (session, receiver) = gateway.open_session(TransportKind::Stdio, caller);
        let mut client = Client {
            initialized: Value::Null,
            session,
            receiver,
            elicit,
            stash: Vec::new(),
            all: Vec::new(),
            elicitations: Vec::new(),
        };
        let params =
            json!({"protocolVersion": "2025-11-25", "capabilities": capabilities, "clientInfo": {"name": "tests"}});
        let response = client.request(json!("init"), "initialize", params).await;
        assert!(response["result"]["protocolVersion"].is_string(), "initialize failed: {response}");
        client.session.deliver(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        client.initialized = response;
        client
    }

    /// Delivers one raw message (a request, a notification or an answer to the gateway's request) as the client.
    pub fn deliver(&self, message: Value) {
        self.session.deliver(message);
    }

    /// Sends a request without waiting.
    pub fn send(&self, id: Value, method: &str, params: Value) {
        self.session.deliver(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
    }

    /// Sends a request and waits for its response.
    pub async fn request(&mut self, id: Value, method: &str, params: Value) -> Value {
        self.send(id.clone(), method, params);
        self.response(&id).await
    }

    /// Sends a `tools/call` without waiting.
    pub fn start_call(&self, id: Value, tool: &str, arguments: Value) {
        self.send(id, "tools/call", json!({"name": tool, "arguments": arguments}));
    }

    /// Calls a tool and waits for the response.
    pub async fn call(&mut self, id: Value, tool: &str, arguments: Value) -> Value {
        self.start_call(id.clone(), tool, arguments);
        self.response(&id).await
    }

    /// Every tool the session sees.
    pub async fn tools(&mut self) -> Vec<Value> {
        let id = json!(format!("list-{}", self.all.len()));
        let response = self.request(id, "tools/list", json!({})).await;
        response["result"]["tools"].as_array().cloned().unwrap_or_else(|| panic!("no tools in {response}"))
    }

    /// The tool named `name`, if the session sees it.
    pub async fn tool(&mut self, name: &str) -> Option<Value> {
        self.tools().await.into_iter().find(|tool| tool["name"] == name)
    }

    /// Waits for the response to the request `id` (taking it from the stash when it already arrived), answering
    /// elicitation requests on the way.
    pub async fn response(&mut self, id: &Value) -> Value {
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
            assert!(self.receive_one(HANG_GUARD).await, "no response to {id} within the hang guard");
        }
    }

    /// Receives one message; false when nothing came within `wait`.
    pub async fn receive_one(&mut self, wait: Duration) -> bool {
        let bound = match tokio::time::timeout(wait, self.receiver.recv()).await {
            Ok(Some(bound)) => bound,
            Ok(None) => panic!("the session's outbox closed"),
            Err(_) => return false,
        };
        self.all.push(bound.clone());
        match &bound {
            ClientBound::Related { message, .. } | ClientBound::Unsolicited(message)
                if message["method"] == "elicitation/create" && self.elicit != Elicit::Manual =>
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
            Elicit::Hold | Elicit::Manual => return,
            Elicit::None => panic!("an elicitation reached a client that did not declare it: {request}"),
        };
        self.session.deliver(json!({"jsonrpc": "2.0", "id": request["id"], "result": result}));
    }

    /// Takes the first message (stashed, or arriving within [`HANG_GUARD`]) that satisfies `predicate`; the others
    /// stay in the stash. `what` names it in the failure message.
    pub async fn wait_for(&mut self, what: &str, predicate: impl Fn(&Value) -> bool) -> Value {
        loop {
            if let Some(position) = self.stash.iter().position(|bound| predicate(message_of(bound))) {
                return message_of(&self.stash.remove(position)).clone();
            }
            assert!(self.receive_one(HANG_GUARD).await, "never saw {what}");
        }
    }

    /// The oldest message not taken yet, waiting at most `wait` for one; `None` when nothing came.
    pub async fn next_message(&mut self, wait: Duration) -> Option<Value> {
        if self.stash.is_empty() && !self.receive_one(wait).await {
            return None;
        }
        (!self.stash.is_empty()).then(|| message_of(&self.stash.remove(0)).clone())
    }

    /// Hands the session to a task that timestamps every response as it arrives, for tests that send open-loop (at
    /// a fixed rate, whatever the answers do) and measure each answer's time.
    pub fn open_loop(self) -> OpenLoop {
        let Client { session, mut receiver, .. } = self;
        let (sender, arrivals) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            while let Some(bound) = receiver.recv().await {
                if let ClientBound::Response { message, .. } = bound {
                    let _ = sender.send((message, Instant::now()));
                }
            }
        });
        OpenLoop { session, arrivals }
    }

    /// Receives until nothing more arrives within `quiet`: whatever is queued, and stragglers.
    pub async fn receive_until_quiet(&mut self, quiet: Duration) {
        while self.receive_one(quiet).await {}
    }

    /// Moves everything already queued into the stash, without waiting.
    pub fn drain(&mut self) {
        while let Ok(bound) = self.receiver.try_recv() {
            self.all.push(bound.clone());
            self.stash.push(bound);
        }
    }

    /// Stashed responses to the request `id`.
    pub fn stashed_responses(&self, id: &Value) -> usize {
        self.stash
            .iter()
            .filter(|bound| matches!(bound, ClientBound::Response { request_id, .. } if request_id == id))
            .count()
    }

    /// Responses received and not taken yet.
    pub fn waiting_responses(&self) -> usize {
        self.stash.iter().filter(|bound| matches!(bound, ClientBound::Response { .. })).count()
    }

    /// Waits until an unsolicited `notifications/tools/list_changed` arrives.
    pub async fn wait_list_changed(&mut self) {
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
            assert!(self.receive_one(HANG_GUARD).await, "no tools/list_changed within the hang guard");
        }
    }

    /// Everything received, as one string, for searching.
    pub fn everything(&self) -> String {
        self.all.iter().map(|bound| message_of(bound).to_string()).collect::<Vec<_>>().join("\n")
    }
}

/// The JSON-RPC message a [`ClientBound`] carries, wherever it belongs.
pub fn message_of(bound: &ClientBound) -> &Value {
    match bound {
        ClientBound::Response { message, .. }
        | ClientBound::Related { message, .. }
        | ClientBound::Unsolicited(message) => message,
    }
}

/// A session whose responses a task of its own collects with the instant each arrived ([`Client::open_loop`]).
pub struct OpenLoop {
    session: Box<dyn ClientSession>,
    arrivals: mpsc::UnboundedReceiver<(Value, Instant)>,
}

impl OpenLoop {
    /// Sends a request without waiting.
    pub fn send(&self, id: Value, method: &str, params: Value) {
        self.session.deliver(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
    }

    /// The next response and when it arrived, waiting at most [`HANG_GUARD`]; `None` when none came.
    pub async fn arrival(&mut self) -> Option<(Value, Instant)> {
        tokio::time::timeout(HANG_GUARD, self.arrivals.recv()).await.ok().flatten()
    }
}
