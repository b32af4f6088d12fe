//! The HTTP sessions of one endpoint and the task per session that routes what the gateway sends.
//!
//! [`SessionTable`] opens sessions through the [`SessionFactory`] (bounded by `max_sessions` and
//! `max_sessions_per_caller`, making room by closing the least recently used idle session; a 2026-07-28 request's
//! one-request session is outside the table and those bounds), finds them by
//! `Mcp-Session-Id` and forgets them when closed. Each session runs one demultiplexer task over its
//! `Receiver<ClientBound>`: `Response`/`Related` go to the POST waiting for that request id (a [`Pending`],
//! registered before the request is delivered), `Unsolicited` goes to the GET stream or a small backlog. The same
//! task closes the session when it idles past the limit, when the gateway ends it, or when the server shuts down.
//! Every message taken from the receiver carries a [`Held`] of its estimated size in the session's [`HeldBytes`]
//! until a stream writes it out or it is dropped, so what waits here counts against the client's one byte budget
//! (`crate::outbox`): a client that stops reading cannot grow the per-request, GET-stream or backlog queues past it.
//! Nothing here parses HTTP or knows MCP methods; locks are never held across an `.await`.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::time::Duration;

use axum::http::StatusCode;
use serde_json::Value;
use tokio::sync::mpsc::{self, error::TrySendError};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use toolgate_spec::Limits;
use tracing::{debug, warn};

use super::checks::{INTERNAL_ERROR, Rejection, TRANSPORT_ERROR};
use super::warning::RateLimitedWarning;
use crate::outbox::approximate_bytes;
use crate::session::{Caller, ClientBound, ClientSession, Held, HeldBytes, Refusal, SessionFactory, TransportKind};

/// Messages buffered for one POST's answer before the demultiplexer waits for the client to read them (then the
/// session's byte-bounded outbox fills, and drops notifications, behind it).
const REQUEST_CAPACITY: usize = 16;
/// Unsolicited messages queued on an open GET stream; more are dropped (a client that does not read its GET
/// stream must not stall the answers to its requests).
const STREAM_CAPACITY: usize = 256;
/// Unsolicited messages kept while no GET stream is open; the oldest are dropped first.
const BACKLOG_CAPACITY: usize = 64;
/// Idle checks never run more often than this, whatever the configured timeout.
const MIN_IDLE_TIMEOUT: Duration = Duration::from_secs(1);
/// A full table closes another caller's idle session only once it has been unused this long (or the idle timeout,
/// when shorter).
const EVICTABLE_AFTER: Duration = Duration::from_secs(60);
/// What a refused `initialize` is told to wait before trying again.
const SESSION_RETRY_AFTER_SECONDS: u64 = 5;
/// At most one warning per this interval about refused sessions; the rest are counted in the next one.
const REFUSAL_WARNING_INTERVAL: Duration = Duration::from_secs(10);

/// A message for the POST that sent request `request_id`.
#[derive(Debug)]
pub(super) enum RequestEvent {
    /// A notification or request about the request in flight.
    Related(Value),
    /// The response; nothing follows it.
    Response(Value),
}

/// A message with its bytes counted in the session's budget while it waits here.
struct Charged<T> {
    value: T,
    _held: Held,
}

/// The key a request id is found by (its JSON text, so `1` and `"1"` stay apart).
pub(super) fn request_key(id: &Value) -> String {
    id.to_string()
}

/// Every live session of one endpoint.
pub(super) struct SessionTable {
    factory: Arc<dyn SessionFactory>,
    sessions: Mutex<Sessions>,
    max_sessions: usize,
    max_per_caller: usize,
    /// Whether callers are configured: without them every client is the same anonymous caller, so "the caller's
    /// own" sessions are anybody's.
    callers_configured: bool,
    idle_timeout: Duration,
    refusal_warning: RateLimitedWarning,
}

/// The sessions by id, and how many each caller has open (so the per-caller check costs no scan).
#[derive(Default)]
struct Sessions {
    by_id: HashMap<String, Arc<HttpSession>>,
    per_caller: HashMap<String, usize>,
}

impl Sessions {
    fn insert(&mut self, id: String, session: Arc<HttpSession>) {
        *self.per_caller.entry(session.caller.clone()).or_default() += 1;
        self.by_id.insert(id, session);
    }

    fn remove(&mut self, id: &str) -> Option<Arc<HttpSession>> {
        let session = self.by_id.remove(id)?;
        if let Some(count) = self.per_caller.get_mut(&session.caller) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                self.per_caller.remove(&session.caller);
            }
        }
        Some(session)
    }

    fn count_of(&self, caller: &str) -> usize {
        self.per_caller.get(caller).copied().unwrap_or(0)
    }

    /// The idle session (nothing in flight, no GET stream) unused longest among those `eligible` picks, if it has
    /// been unused at least `min_idle`.
    fn least_recently_used_idle(
        &self,
        eligible: impl Fn(&HttpSession) -> bool,
        min_idle: Duration,
    ) -> Option<Arc<HttpSession>> {
        self.by_id
            .values()
            .filter(|session| eligible(session))
            .filter_map(|session| session.idle_since().map(|since| (since, session)))
            .filter(|(since, _)| since.elapsed() >= min_idle)
            .min_by_key(|(since, _)| *since)
            .map(|(_, session)| Arc::clone(session))
    }
}

impl SessionTable {
    pub(super) fn new(factory: Arc<dyn SessionFactory>, limits: &Limits, callers_configured: bool) -> Self {
        SessionTable {
            factory,
            sessions: Mutex::new(Sessions::default()),
            max_sessions: limits.max_sessions.max(1),
            max_per_caller: limits.max_sessions_per_caller.max(1),
            callers_configured,
            idle_timeout: limits.session_idle_timeout.max(MIN_IDLE_TIMEOUT),
            refusal_warning: RateLimitedWarning::new(REFUSAL_WARNING_INTERVAL),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Sessions> {
        self.sessions.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Opens a session and starts its demultiplexer. When the caller is at `max_sessions_per_caller`, its least
    /// recently used idle session is closed to make room (without configured callers, only one idle for
    /// [`EVICTABLE_AFTER`]); when the table is at `max_sessions`, the least recently used session idle for
    /// [`EVICTABLE_AFTER`] is; with none to close, 503 naming the limit. Must run inside a
    /// tokio runtime. `shutdown` closes the session when the server stops.
    pub(super) fn open(
        self: &Arc<Self>,
        shutdown: CancellationToken,
        caller: Caller,
    ) -> Result<Arc<HttpSession>, Rejection> {
        let mut sessions = self.lock();
        let mut evicted = Vec::new();
        if sessions.count_of(&caller.name) >= self.max_per_caller {
            // The caller's own sessions only, whatever their age: a client that forgets to DELETE its sessions
            // pays for it itself. Without configured callers "own" means every client's, so the same wait as for
            // another caller's applies: otherwise one client could close everybody's sessions between two requests.
            let own = |session: &HttpSession| session.caller == caller.name;
            let min_idle = if self.callers_configured { Duration::ZERO } else { self.evictable_after() };
            match sessions.least_recently_used_idle(own, min_idle) {
                Some(oldest) => evicted.extend(sessions.remove(oldest.id())),
                None => {
                    drop(sessions);
                    return Err(self.refuse(Refusal::SessionsPerCaller, &caller.name));
                }
            }
        }
        if sessions.by_id.len() >= self.max_sessions {
            // Another caller's session goes only after a while unused, so a burst cannot push out sessions that
            // are merely between two requests.
            match sessions.least_recently_used_idle(|_| true, self.evictable_after()) {
                Some(oldest) => evicted.extend(sessions.remove(oldest.id())),
                None => {
                    drop(sessions);
                    for session in evicted {
                        session.close();
                    }
                    return Err(self.refuse(Refusal::SessionsTotal, &caller.name));
                }
            }
        }
        // Under the table lock so two initializes cannot both take the last slot; open_session is synchronous.
        let caller_name = caller.name.clone();
        let (inner, receiver) = self.factory.open_session(TransportKind::Http, caller);
        let id = inner.id().to_owned();
        let usable = !id.is_empty() && id.bytes().all(|byte| (0x21..=0x7e).contains(&byte));
        if !usable || sessions.by_id.contains_key(&id) {
            drop(sessions);
            warn!("the gateway issued an unusable or duplicate session id; session closed");
            inner.close();
            for session in evicted {
                session.close();
            }
            return Err(Rejection::new(StatusCode::INTERNAL_SERVER_ERROR, INTERNAL_ERROR, "internal error"));
        }
        let session = Arc::new(HttpSession::new(inner, caller_name));
        sessions.insert(id, Arc::clone(&session));
        drop(sessions);
        for old in evicted {
            debug!(session = old.id(), caller = old.caller(), "closing the least recently used idle session");
            old.close();
        }
        debug!(session = session.id(), "session opened");
        tokio::spawn(demultiplex(Arc::downgrade(self), Arc::clone(&session), receiver, shutdown, self.idle_timeout));
        Ok(session)
    }

    /// Opens the session of one 2026-07-28 request: never entered in the table (nobody can name it: its id is
    /// never sent), so it neither counts against `max_sessions` nor `max_sessions_per_caller` nor makes room by
    /// closing a legacy session; modern requests in flight are bounded by the connections they hold
    /// (`max_connections`), one each, as legacy requests in flight are. Its demultiplexer closes it like any
    /// other session's; the request's [`InitGuard::ephemeral`] closes it when the answer is out or the client
    /// goes away. Its taint is its caller's (`SessionFactory::open_request_session`), so it outlives the session.
    pub(super) fn open_ephemeral(
        self: &Arc<Self>,
        shutdown: CancellationToken,
        caller: Caller,
    ) -> Result<Arc<HttpSession>, Rejection> {
        let caller_name = caller.name.clone();
        let (inner, receiver) = self.factory.open_request_session(TransportKind::Http, caller);
        if inner.id().is_empty() {
            inner.close();
            return Err(Rejection::new(StatusCode::INTERNAL_SERVER_ERROR, INTERNAL_ERROR, "internal error"));
        }
        let session = Arc::new(HttpSession::new(inner, caller_name));
        tokio::spawn(demultiplex(Arc::downgrade(self), Arc::clone(&session), receiver, shutdown, self.idle_timeout));
        Ok(session)
    }

    /// How long a session must have been unused before a session of another client may take its place.
    fn evictable_after(&self) -> Duration {
        EVICTABLE_AFTER.min(self.idle_timeout)
    }

    /// Counts and logs (rate-limited) a refused session, and the 503 that says which limit and how to raise it.
    fn refuse(&self, refusal: Refusal, caller: &str) -> Rejection {
        self.factory.count_refusal(refusal);
        let message = match refusal {
            Refusal::SessionsPerCaller => format!(
                "service unavailable: caller `{caller}` has {} sessions open, the most one caller may have, and none \
                 is idle (end unused sessions with DELETE, or raise [limits] max_sessions_per_caller)",
                self.max_per_caller
            ),
            _ => format!(
                "service unavailable: {} sessions are open, the most this server allows, and none is idle (raise \
                 [limits] max_sessions)",
                self.max_sessions
            ),
        };
        self.refusal_warning.warn(|suppressed| {
            warn!(
                reason = refusal.label(),
                caller,
                max_sessions = self.max_sessions,
                max_sessions_per_caller = self.max_per_caller,
                suppressed,
                "refused a new session: {message}"
            );
        });
        let mut rejection = Rejection::new(StatusCode::SERVICE_UNAVAILABLE, TRANSPORT_ERROR, message);
        rejection.retry_after = Some(SESSION_RETRY_AFTER_SECONDS);
        rejection
    }

    /// The live session with this id, marked as used now.
    pub(super) fn get(&self, id: &str) -> Option<Arc<HttpSession>> {
        let session = self.lock().by_id.get(id).cloned()?;
        if session.is_closed() {
            return None;
        }
        session.touch();
        Some(session)
    }

    /// Closes a session (once) and forgets it.
    pub(super) fn close(&self, session: &HttpSession) {
        session.close();
        let mut sessions = self.lock();
        if sessions.by_id.get(session.id()).is_some_and(|known| std::ptr::eq(Arc::as_ptr(known), session)) {
            sessions.remove(session.id());
        }
    }
}

/// Where the POST waiting for a request id gets its messages.
#[derive(Clone)]
struct Waiter {
    serial: u64,
    sender: mpsc::Sender<Charged<RequestEvent>>,
}

/// The GET stream's end of the session.
struct StreamSlot {
    serial: u64,
    sender: mpsc::Sender<Charged<Value>>,
}

struct SessionState {
    waiters: HashMap<String, Waiter>,
    stream: Option<StreamSlot>,
    backlog: VecDeque<Charged<Value>>,
    last_used: Instant,
    next_serial: u64,
}

/// One open session as the HTTP transport sees it.
pub(super) struct HttpSession {
    inner: Box<dyn ClientSession>,
    /// What this transport holds for the client, counted in the gateway's budget for it.
    held: HeldBytes,
    /// The caller that opened it: every later request must authenticate as the same caller.
    caller: String,
    state: Mutex<SessionState>,
    closed: CancellationToken,
    close_once: AtomicBool,
    next_event: AtomicU64,
}

impl HttpSession {
    /// The caller that opened the session.
    pub(super) fn caller(&self) -> &str {
        &self.caller
    }

    fn new(inner: Box<dyn ClientSession>, caller: String) -> Self {
        HttpSession {
            held: inner.held_bytes(),
            inner,
            caller,
            state: Mutex::new(SessionState {
                waiters: HashMap::new(),
                stream: None,
                backlog: VecDeque::new(),
                last_used: Instant::now(),
                next_serial: 0,
            }),
            closed: CancellationToken::new(),
            close_once: AtomicBool::new(false),
            next_event: AtomicU64::new(0),
        }
    }

    fn lock(&self) -> MutexGuard<'_, SessionState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(super) fn id(&self) -> &str {
        self.inner.id()
    }

    pub(super) fn deliver(&self, message: Value) {
        self.inner.deliver(message);
    }

    /// A request of the session's own caller presented `token` (see `ClientSession::present_token`).
    pub(super) fn present_token(&self, token: &toolgate_spec::SubjectToken) {
        self.inner.present_token(token);
    }

    pub(super) fn deliver_with_param_headers(&self, message: Value, param_headers: Vec<(String, String)>) {
        self.inner.deliver_with_param_headers(message, param_headers);
    }

    pub(super) fn protocol_version(&self) -> Option<String> {
        self.inner.protocol_version()
    }

    pub(super) fn is_closed(&self) -> bool {
        self.closed.is_cancelled()
    }

    /// A fresh SSE event id, unique within the session across all its streams.
    pub(super) fn next_event_id(&self) -> String {
        format!("e{}", self.next_event.fetch_add(1, Ordering::Relaxed))
    }

    fn touch(&self) {
        self.lock().last_used = Instant::now();
    }

    /// Ends the session once: the gateway's half is closed, waiting POSTs and the GET stream see their channels
    /// end.
    fn close(&self) {
        if self.close_once.swap(true, Ordering::AcqRel) {
            return;
        }
        self.closed.cancel();
        self.inner.close();
        let mut state = self.lock();
        state.waiters.clear();
        state.stream = None;
        state.backlog.clear();
        drop(state);
        debug!(session = self.id(), "session closed");
    }

    /// Registers the POST waiting for request `key`; `None` when a request with that id is already in flight.
    pub(super) fn wait_for(self: &Arc<Self>, key: String) -> Option<Pending> {
        let mut state = self.lock();
        if state.waiters.get(&key).is_some_and(|waiter| !waiter.sender.is_closed()) {
            return None;
        }
        let serial = state.next_serial;
        state.next_serial += 1;
        let (sender, receiver) = mpsc::channel(REQUEST_CAPACITY);
        state.waiters.insert(key.clone(), Waiter { serial, sender });
        Some(Pending { session: Arc::clone(self), key, serial, receiver })
    }

    /// Opens the session's GET stream, handing it the backlog; `None` when one is already open.
    pub(super) fn open_stream(self: &Arc<Self>) -> Option<UnsolicitedStream> {
        let mut state = self.lock();
        if state.stream.as_ref().is_some_and(|slot| !slot.sender.is_closed()) {
            return None;
        }
        let serial = state.next_serial;
        state.next_serial += 1;
        let (sender, receiver) = mpsc::channel(STREAM_CAPACITY);
        for message in state.backlog.drain(..) {
            // The backlog is smaller than the channel, so this never drops.
            let _ = sender.try_send(message);
        }
        state.stream = Some(StreamSlot { serial, sender });
        Some(UnsolicitedStream { session: Arc::clone(self), serial, receiver })
    }

    /// Idle means: nothing in flight, no GET stream, and unused for `timeout`. A busy session counts as used now.
    fn is_idle(&self, timeout: Duration) -> bool {
        let mut state = self.lock();
        let busy = !state.waiters.is_empty() || state.stream.as_ref().is_some_and(|slot| !slot.sender.is_closed());
        if busy {
            state.last_used = Instant::now();
            return false;
        }
        state.last_used.elapsed() >= timeout
    }

    /// When the session was last used, if it is idle now (nothing in flight, no GET stream).
    fn idle_since(&self) -> Option<Instant> {
        let state = self.lock();
        let busy = !state.waiters.is_empty() || state.stream.as_ref().is_some_and(|slot| !slot.sender.is_closed());
        (!busy && !self.is_closed()).then_some(state.last_used)
    }

    fn idle_deadline(&self, timeout: Duration) -> Instant {
        let last_used = self.lock().last_used;
        last_used.checked_add(timeout).unwrap_or_else(|| Instant::now() + Duration::from_secs(365 * 24 * 3600))
    }

    /// Routes one message from the gateway to where it belongs.
    async fn route(&self, message: ClientBound) {
        let (request_id, event) = match message {
            ClientBound::Response { request_id, message } => (request_id, RequestEvent::Response(message)),
            ClientBound::Related { request_id, message } => (request_id, RequestEvent::Related(message)),
            ClientBound::Unsolicited(message) => {
                let held = self.held.hold(approximate_bytes(&message));
                self.send_unsolicited(Charged { value: message, _held: held });
                return;
            }
        };
        let size = match &event {
            RequestEvent::Response(message) | RequestEvent::Related(message) => approximate_bytes(message),
        };
        let held = self.held.hold(size);
        let key = request_key(&request_id);
        let waiter = {
            let mut state = self.lock();
            match event {
                RequestEvent::Response(_) => state.waiters.remove(&key),
                RequestEvent::Related(_) => state.waiters.get(&key).cloned(),
            }
        };
        let event = Charged { value: event, _held: held };
        let Some(waiter) = waiter else {
            debug!(session = self.id(), request_id = %key, "dropped a message for a request nobody is waiting for");
            return;
        };
        tokio::select! {
            sent = waiter.sender.send(event) => if sent.is_err() {
                // The client went away (legacy HTTP: not a cancel); the rest of this request's messages are dropped.
                self.forget_waiter(&key, waiter.serial);
                debug!(session = self.id(), request_id = %key, "dropped a message: the client stopped reading");
            },
            () = self.closed.cancelled() => {}
        }
    }

    fn send_unsolicited(&self, message: Charged<Value>) {
        let mut state = self.lock();
        let message = match state.stream.as_ref() {
            None => message,
            Some(slot) => match slot.sender.try_send(message) {
                Ok(()) => return,
                Err(TrySendError::Full(_)) => {
                    warn!(session = self.id(), "dropped an unsolicited message: the GET stream is not being read");
                    return;
                }
                Err(TrySendError::Closed(message)) => message,
            },
        };
        state.stream = None;
        push_backlog(&mut state, self.id(), message);
    }

    fn forget_waiter(&self, key: &str, serial: u64) {
        let mut state = self.lock();
        if state.waiters.get(key).is_some_and(|waiter| waiter.serial == serial) {
            state.waiters.remove(key);
        }
    }
}

fn push_backlog(state: &mut SessionState, session: &str, message: Charged<Value>) {
    if state.backlog.len() >= BACKLOG_CAPACITY {
        state.backlog.pop_front();
        debug!(session, "dropped the oldest unsolicited message: no GET stream is open");
    }
    state.backlog.push_back(message);
}

/// The POST side of one request in flight; dropping it (client gone) stops routing to it.
pub(super) struct Pending {
    session: Arc<HttpSession>,
    key: String,
    serial: u64,
    receiver: mpsc::Receiver<Charged<RequestEvent>>,
}

impl Pending {
    /// The next message for this request; `None` when the session ended before the response. It leaves the
    /// client's budget here: the caller writes it out at once.
    pub(super) async fn next(&mut self) -> Option<RequestEvent> {
        self.receiver.recv().await.map(|charged| charged.value)
    }

    pub(super) fn session(&self) -> &Arc<HttpSession> {
        &self.session
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        self.session.forget_waiter(&self.key, self.serial);
    }
}

/// The GET stream's receiving end; dropping it frees the slot for a new GET.
pub(super) struct UnsolicitedStream {
    session: Arc<HttpSession>,
    serial: u64,
    receiver: mpsc::Receiver<Charged<Value>>,
}

impl UnsolicitedStream {
    /// The next unsolicited message; `None` when the session closed. It leaves the client's budget here: the
    /// caller writes it out at once.
    pub(super) async fn next(&mut self) -> Option<Value> {
        self.receiver.recv().await.map(|charged| charged.value)
    }
}

impl Drop for UnsolicitedStream {
    fn drop(&mut self) {
        let mut state = self.session.lock();
        if state.stream.as_ref().is_some_and(|slot| slot.serial == self.serial) {
            state.stream = None;
        }
    }
}

/// Closes an `initialize`'s session unless its response turns out to be a success (an error, or a client gone
/// before the answer, leaves a session nobody can use).
/// A modern (2026-07-28) request's guard is ephemeral: its session serves that one request and always closes when
/// the answer is out; its id is never sent to the client.
pub(super) struct InitGuard {
    table: Weak<SessionTable>,
    session: Arc<HttpSession>,
    armed: bool,
    ephemeral: bool,
}

impl InitGuard {
    pub(super) fn new(table: &Arc<SessionTable>, session: &Arc<HttpSession>) -> Self {
        InitGuard { table: Arc::downgrade(table), session: Arc::clone(session), armed: true, ephemeral: false }
    }

    /// The guard of a session opened for one modern request only.
    pub(super) fn ephemeral(table: &Arc<SessionTable>, session: &Arc<HttpSession>) -> Self {
        InitGuard { table: Arc::downgrade(table), session: Arc::clone(session), armed: true, ephemeral: true }
    }

    /// True for a modern request's one-request session (no `Mcp-Session-Id` goes out).
    pub(super) fn is_ephemeral(&self) -> bool {
        self.ephemeral
    }

    /// Looks at the initialize response; returns whether the session lives on.
    pub(super) fn settle(&mut self, response: &Value) -> bool {
        self.armed = self.ephemeral || response.get("error").is_some() || response.get("result").is_none();
        !self.armed
    }
}

impl Drop for InitGuard {
    fn drop(&mut self) {
        if self.armed {
            match self.table.upgrade() {
                Some(table) => table.close(&self.session),
                None => self.session.close(),
            }
        }
    }
}

/// The per-session task: routes the gateway's messages and closes the session when it ends, idles or the server
/// stops.
///
/// The three waits are made once and kept across messages: a `cancelled()` future made per message registered with
/// the server's one shutdown token (shared by every session: a process-wide lock per message), and an idle timer
/// made per message registered in the runtime's timer wheel and cancelled again (its lock, twice). The idle timer
/// is moved to the new deadline instead, which tokio does without its lock when the deadline is later.
async fn demultiplex(
    table: Weak<SessionTable>,
    session: Arc<HttpSession>,
    mut receiver: mpsc::Receiver<ClientBound>,
    shutdown: CancellationToken,
    idle_timeout: Duration,
) {
    let closed = session.closed.cancelled();
    let stopping = shutdown.cancelled();
    let idle = tokio::time::sleep_until(session.idle_deadline(idle_timeout));
    tokio::pin!(closed, stopping, idle);
    loop {
        tokio::select! {
            () = &mut closed => break,
            () = &mut stopping => {
                debug!(session = session.id(), "closing the session: the server is shutting down");
                break;
            }
            message = receiver.recv() => match message {
                Some(message) => session.route(message).await,
                None => {
                    debug!(session = session.id(), "the gateway ended the session");
                    break;
                }
            },
            () = &mut idle => if session.is_idle(idle_timeout) {
                debug!(session = session.id(), "closing the session: idle timeout");
                break;
            },
        }
        idle.as_mut().reset(session.idle_deadline(idle_timeout));
    }
    match table.upgrade() {
        Some(table) => table.close(&session),
        None => session.close(),
    }
}
