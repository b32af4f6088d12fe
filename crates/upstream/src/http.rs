//! The Streamable HTTP transport (client side): each outgoing message is one POST to the endpoint.
//!
//! A request's answer comes back as a JSON body or as an SSE stream that may carry notifications and server
//! requests before the response; priming events (empty data) are skipped. The `Mcp-Session-Id` issued at
//! initialize and the negotiated `MCP-Protocol-Version` are sent on every later POST, and the session is ended with
//! DELETE on close. Bodies and events larger than the message limit fail the request. Never sends a downstream
//! client's credentials: only the headers configured for this upstream.
//!
//! The transport ends the connection itself (`Inbound::Ended`, so the runner starts a new session) when the server
//! no longer knows the session (404 to a message carrying its id), when [`UNREACHABLE_POSTS_TO_END`] POSTs in a row
//! get no HTTP answer at all, and when the GET stream cannot be reopened; it never retries a request itself.
//!
//! No POST outlives the time anyone waits for it: a request's POST ends with the request's own time (its waiter is
//! then answered with the timeout), and a notification or response is given the request timeout to be taken. A
//! server that accepts connections and never answers would otherwise keep a socket and a task per call forever.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use bytes::Bytes;
use futures::{Stream, StreamExt, TryStreamExt};
use reqwest::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};
use serde_json::Value;
use sse_stream::SseStream;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use toolgate_spec::{Endpoint, Secret};

use crate::credentials::TokenSource;
use crate::endpoint::ConnectOptions;
use crate::error::UpstreamError;
use crate::jsonrpc::{MessageKind, classify};
use crate::token_exchange::{OnBehalf, TokenExchanger};
use crate::transport::{Behalves, Diagnostics, Inbound, PendingResponses, Transport, channel_stream, split_batch};

const SESSION_HEADER: &str = "mcp-session-id";
const VERSION_HEADER: &str = "mcp-protocol-version";
const BODY_SAMPLE_CHARS: usize = 200;

/// POSTs in a row that got no HTTP answer at all (connection refused or reset, DNS failure) before the connection
/// ends: one may be a blip, several mean the server is gone, and the runner's reconnect backoff should take over.
/// Any answer, whatever its status, starts the count again.
pub(crate) const UNREACHABLE_POSTS_TO_END: u32 = 3;
/// Attempts in a row to (re)open the GET stream that may fail before listening stops.
pub(crate) const GET_STREAM_ATTEMPTS: u32 = 5;
/// The pause before reopening the GET stream, times the failures in a row (at least once).
const GET_STREAM_RETRY_DELAY: Duration = Duration::from_millis(500);
/// A GET stream that stayed open this long counts as working even if it delivered nothing: its end starts the
/// attempt count again.
const GET_STREAM_SETTLED_AFTER: Duration = Duration::from_secs(10);

/// State shared by every POST of one connection.
struct Shared {
    client: reqwest::Client,
    /// Parsed once: reqwest would parse a string on every POST.
    endpoint: reqwest::Url,
    url: String,
    headers: HeaderMap,
    session_id: Mutex<Option<String>>,
    negotiated_version: Arc<OnceLock<String>>,
    max_message_bytes: usize,
    inbound: mpsc::Sender<Inbound>,
    /// The connection's waiting requests: a plain JSON answer to one is delivered here directly.
    pending: Arc<PendingResponses>,
    name: String,
    /// POSTs in a row that got no HTTP answer (see [`UNREACHABLE_POSTS_TO_END`]).
    unreachable_posts: AtomicU32,
    /// Set once the transport has ended the connection, so it is ended (and reported) once.
    ending: AtomicBool,
    /// Fired when the connection shuts down or the transport ends it: stops the GET stream.
    stopped: CancellationToken,
    /// The id of the last event the GET stream carried, sent back as `Last-Event-ID` when it is reopened so a
    /// server that keeps its events can replay what was sent in between.
    last_event_id: Mutex<Option<String>>,
    /// toolgate's own token for this upstream, when it has OAuth credentials.
    credentials: Option<Arc<TokenSource>>,
    /// A token exchange upstream's exchanger: a request sent on a caller's behalf carries that caller's token.
    exchange: Option<Arc<TokenExchanger>>,
    /// The callers of requests about to be posted, by id (filled only when `exchange` is set).
    behalves: Arc<Behalves>,
}

/// The credential one POST carries.
enum Credential<'a> {
    /// toolgate's own token (client credentials).
    Own(&'a TokenSource),
    /// The caller's exchanged token (token exchange).
    Caller(&'a TokenExchanger, &'a OnBehalf),
}

impl Credential<'_> {
    async fn token(&self) -> Result<Secret, UpstreamError> {
        match self {
            Credential::Own(source) => source.token().await,
            Credential::Caller(exchanger, caller) => exchanger.token_for(caller).await,
        }
    }

    /// The upstream refused `token` (HTTP 401): the next [`Credential::token`] asks the issuer.
    async fn reject(&self, token: &Secret) {
        match self {
            Credential::Own(source) => source.reject(token).await,
            Credential::Caller(exchanger, caller) => exchanger.reject(caller, token).await,
        }
    }
}

/// Posts a request from the caller's task (one spawned POST) instead of queueing it for the dispatcher, once the
/// dispatcher has posted `notifications/initialized`: from then on requests need no order among themselves or with
/// notifications, and before it the queue keeps `initialize` → `initialized` → first request in order.
pub(crate) struct DirectPoster {
    shared: Arc<Shared>,
    ready: Arc<AtomicBool>,
    /// The transport's shutdown: after it, requests go to the stopped queue and fail at once.
    stop: CancellationToken,
}

impl DirectPoster {
    /// Posts `request` (a JSON-RPC request: the connection's only caller, `begin_request`, passes nothing else)
    /// for at most `within`, or gives it back when it must go through the queue (not initialized yet, or shut down).
    pub(crate) fn post(&self, request: Value, within: Duration) -> Result<(), Value> {
        if !self.ready.load(Ordering::Acquire) || self.stop.is_cancelled() {
            return Err(request);
        }
        tokio::spawn(post_request_within(Arc::clone(&self.shared), request, within));
        Ok(())
    }
}

/// Builds the HTTP client and starts the dispatcher task; the closer ends the session, the poster sends requests.
pub(crate) fn start(
    endpoint: &Endpoint,
    options: &ConnectOptions,
    pending: Arc<PendingResponses>,
    behalves: Arc<Behalves>,
) -> Result<(Transport, HttpCloser, DirectPoster), UpstreamError> {
    let Endpoint::Http { url, headers } = endpoint else {
        return Err(UpstreamError::InvalidEndpoint("not an HTTP endpoint".into()));
    };
    // reqwest is built without a default TLS provider; ring is installed once per process for https upstreams.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let endpoint = reqwest::Url::parse(url)
        .map_err(|error| UpstreamError::InvalidEndpoint(format!("`{url}` is not a URL: {error}")))?;
    // Redirects are not followed: the endpoint is the configured URL, and a redirect would carry the configured
    // headers (an API key, say) to wherever the server points; a 3xx fails the request with its status instead.
    let client = reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(10))
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .map_err(|error| UpstreamError::Connect { url: url.clone(), reason: error.to_string() })?;
    let mut header_map = HeaderMap::new();
    for (name, value) in headers {
        let name = HeaderName::try_from(name.as_str())
            .map_err(|_| UpstreamError::InvalidEndpoint(format!("invalid header name `{name}`")))?;
        let value = HeaderValue::try_from(value.as_str())
            .map_err(|_| UpstreamError::InvalidEndpoint(format!("invalid value for header `{name}`")))?;
        header_map.insert(name, value);
    }
    let (outbound_sender, mut outbound_receiver) = mpsc::channel::<Value>(64);
    let (request_timeout, initialize_timeout) = (options.request_timeout, options.initialize_timeout);
    let (inbound_sender, inbound_receiver) = mpsc::channel::<Inbound>(64);
    let negotiated_version = Arc::new(OnceLock::new());
    let shutdown = CancellationToken::new();
    let shared = Arc::new(Shared {
        client,
        endpoint,
        url: url.clone(),
        headers: header_map,
        session_id: Mutex::new(None),
        negotiated_version: Arc::clone(&negotiated_version),
        max_message_bytes: options.max_message_bytes,
        inbound: inbound_sender,
        pending,
        name: options.name.clone(),
        unreachable_posts: AtomicU32::new(0),
        ending: AtomicBool::new(false),
        stopped: shutdown.child_token(),
        last_event_id: Mutex::new(None),
        credentials: options.credentials.clone(),
        exchange: options.exchange.clone(),
        behalves,
    });
    let ready = Arc::new(AtomicBool::new(false));
    let dispatcher_shared = Arc::clone(&shared);
    let stop = shutdown.clone();
    let direct = DirectPoster { shared: Arc::clone(&shared), ready: Arc::clone(&ready), stop: shutdown.clone() };
    tokio::spawn(async move {
        loop {
            let message = tokio::select! {
                biased;
                () = stop.cancelled() => break,
                message = outbound_receiver.recv() => match message {
                    Some(message) => message,
                    None => break,
                },
            };
            // Requests run concurrently (an answer may stream for a long time). Everything else is posted in
            // order and awaited: the server acknowledges notifications and responses with 202 once it has taken
            // them, so `notifications/initialized` is known before the next request arrives. `initialize` is
            // awaited too, because later messages need the session id its response carries.
            let kind = classify(&message);
            let runs_concurrently = matches!(kind, MessageKind::Request { method, .. } if method != "initialize");
            let opens_stream = matches!(kind, MessageKind::Notification { method: "notifications/initialized" });
            let is_initialize = matches!(kind, MessageKind::Request { method: "initialize", .. });
            if runs_concurrently {
                tokio::spawn(post_request_within(Arc::clone(&dispatcher_shared), message, request_timeout));
            } else {
                // A server that never acknowledges must not hold every later message: each gets the time a
                // request would (initialize its own), then the dispatcher moves on.
                let within = if is_initialize { initialize_timeout } else { request_timeout };
                let post = post_message(Arc::clone(&dispatcher_shared), message);
                if tokio::time::timeout(within, post).await.is_err() {
                    tracing::warn!(
                        upstream = %dispatcher_shared.name,
                        "the upstream did not take a message within {within:?}; dropped"
                    );
                }
            }
            if opens_stream {
                tokio::spawn(listen_for_server_messages(Arc::clone(&dispatcher_shared)));
                ready.store(true, Ordering::Release);
            }
        }
    });
    let transport = Transport {
        outbound: outbound_sender,
        inbound: channel_stream(inbound_receiver),
        diagnostics: Arc::new(Diagnostics::default()),
        negotiated_version,
        shutdown,
    };
    Ok((transport, HttpCloser { shared }, direct))
}

/// Why a POST failed, which decides whether the connection outlives it.
enum PostFailure {
    /// No HTTP answer at all (refused, reset, unreachable): counts towards [`UNREACHABLE_POSTS_TO_END`].
    Unreachable(String),
    /// HTTP 404 to a POST that carried the session id: the server no longer knows the session.
    SessionUnknown(UpstreamError),
    /// Anything else (another status, a bad body): only this message fails.
    Failed(UpstreamError),
}

impl From<UpstreamError> for PostFailure {
    fn from(error: UpstreamError) -> Self {
        PostFailure::Failed(error)
    }
}

/// Posts a request for at most `within`: past it nobody waits for the answer, so the POST (and its connection) is
/// dropped and a waiter still registered hears of the timeout at once.
async fn post_request_within(shared: Arc<Shared>, request: Value, within: Duration) {
    let id = request.get("id").and_then(Value::as_u64);
    let method = request.get("method").and_then(Value::as_str).unwrap_or_default().to_owned();
    if tokio::time::timeout(within, post_message(Arc::clone(&shared), request)).await.is_err()
        && let Some(sender) = id.and_then(|id| shared.pending.take(id))
    {
        let _ = sender.send(Err(UpstreamError::Timeout { method, after: within, diagnostics: String::new() }));
    }
}

/// Posts one message; a failure goes to its request (or the log, for a notification or a response), and ends the
/// connection when it shows the session or the server is gone. The message's own failure is delivered first, so
/// a request that met the 404 reports that status and the requests still waiting report why the connection ended.
async fn post_message(shared: Arc<Shared>, message: Value) {
    let request_id = match classify(&message) {
        MessageKind::Request { id, .. } => Some(id.clone()),
        _ => None,
    };
    let failure = match exchange(&shared, &message, request_id.as_ref()).await {
        Ok(()) => {
            shared.unreachable_posts.store(0, Ordering::Relaxed);
            return;
        }
        Err(failure) => failure,
    };
    let (error, ending) = match failure {
        PostFailure::Unreachable(reason) => {
            let in_a_row = shared.unreachable_posts.fetch_add(1, Ordering::Relaxed) + 1;
            let ending = (in_a_row >= UNREACHABLE_POSTS_TO_END).then(|| UpstreamError::Connect {
                url: shared.url.clone(),
                reason: format!("{in_a_row} messages in a row got no answer (last: {reason})"),
            });
            (UpstreamError::Connect { url: shared.url.clone(), reason }, ending)
        }
        PostFailure::SessionUnknown(error) => {
            shared.unreachable_posts.store(0, Ordering::Relaxed);
            (error, Some(session_unknown(&shared)))
        }
        PostFailure::Failed(error) => {
            shared.unreachable_posts.store(0, Ordering::Relaxed);
            (error, None)
        }
    };
    match request_id {
        Some(id) => {
            let _ = shared.inbound.send(Inbound::RequestFailed { id, error }).await;
        }
        None => tracing::warn!(upstream = %shared.name, %error, "posting a message to the upstream failed"),
    }
    if let Some(ending) = ending {
        end_connection(&shared, ending).await;
    }
}

/// Why the connection ends when the server answers 404 to its session id.
fn session_unknown(shared: &Shared) -> UpstreamError {
    UpstreamError::Closed {
        detail: format!(
            "{} no longer knows this session (HTTP 404 to its Mcp-Session-Id); a new session must be initialized",
            shared.url
        ),
    }
}

/// Ends the connection from the transport's side, once: the router fails every waiting request with `error` and
/// tells the runner, which reconnects with a fresh `initialize`. The GET stream stops; later requests are refused
/// by the connection without being posted.
async fn end_connection(shared: &Shared, error: UpstreamError) {
    if shared.ending.swap(true, Ordering::AcqRel) {
        return;
    }
    shared.stopped.cancel();
    let _ = shared.inbound.send(Inbound::Ended(error)).await;
}

/// A request to the endpoint with the configured headers, the session id and the protocol version, and whether it
/// carries a session id (a 404 then means the session is gone).
fn request_builder(shared: &Shared, method: reqwest::Method) -> (reqwest::RequestBuilder, bool) {
    request_builder_versioned(shared, method, true)
}

/// [`request_builder`], with the negotiated version header only when `with_version`.
fn request_builder_versioned(
    shared: &Shared,
    method: reqwest::Method,
    with_version: bool,
) -> (reqwest::RequestBuilder, bool) {
    let mut builder = shared.client.request(method, shared.endpoint.clone()).headers(shared.headers.clone());
    let mut carries_session = false;
    if let Ok(guard) = shared.session_id.lock()
        && let Some(session) = guard.as_deref()
    {
        builder = builder.header(SESSION_HEADER, session);
        carries_session = true;
    }
    if with_version && let Some(version) = shared.negotiated_version.get() {
        builder = builder.header(VERSION_HEADER, version);
    }
    (builder, carries_session)
}

async fn exchange(shared: &Shared, message: &Value, related: Option<&Value>) -> Result<(), PostFailure> {
    // A request made on a caller's behalf carries that caller's exchanged token; everything else toolgate's own.
    let caller = shared
        .exchange
        .as_ref()
        .zip(related.and_then(Value::as_u64))
        .and_then(|(exchanger, id)| shared.behalves.take(id).map(|caller| (exchanger, caller)));
    let credential = match &caller {
        Some((exchanger, caller)) => Some(Credential::Caller(exchanger, caller)),
        None => shared.credentials.as_deref().map(Credential::Own),
    };
    let (response, carries_session) = match credential {
        None => post_once(shared, message, None).await?,
        Some(credential) => {
            // No token, no request: the message fails closed rather than going out without credentials.
            let token = credential.token().await?;
            let (response, carries_session) = post_once(shared, message, Some(&token)).await?;
            if response.status() != reqwest::StatusCode::UNAUTHORIZED {
                (response, carries_session)
            } else {
                // The upstream refused the token (revoked, or expired early): one fresh token, one more try.
                credential.reject(&token).await;
                let token = credential.token().await?;
                post_once(shared, message, Some(&token)).await?
            }
        }
    };
    if let Some(session) = response.headers().get(SESSION_HEADER).and_then(|value| value.to_str().ok())
        && let Ok(mut guard) = shared.session_id.lock()
    {
        *guard = Some(session.to_owned());
    }
    let status = response.status();
    if status == reqwest::StatusCode::ACCEPTED || status == reqwest::StatusCode::NO_CONTENT {
        return Ok(());
    }
    if !status.is_success() {
        let body = response.text().await.unwrap_or_default();
        let sample: String = body.chars().take(BODY_SAMPLE_CHARS).collect();
        let error = UpstreamError::HttpStatus { url: shared.url.clone(), status: status.as_u16(), body: sample };
        return Err(if status == reqwest::StatusCode::NOT_FOUND && carries_session {
            PostFailure::SessionUnknown(error)
        } else {
            PostFailure::Failed(error)
        });
    }
    let content_type =
        response.headers().get(CONTENT_TYPE).and_then(|value| value.to_str().ok()).unwrap_or_default().to_owned();
    let url = shared.url.clone();
    let body_error =
        move |error: reqwest::Error| UpstreamError::Connect { url: url.clone(), reason: error.to_string() };
    let (body, seen) = limited(response.bytes_stream().map_err(body_error), shared.max_message_bytes);
    if content_type.starts_with("text/event-stream") {
        read_event_stream(shared, body, seen, related, &mut 0, None).await?;
    } else {
        read_json_body(shared, body, related).await?;
    }
    Ok(())
}

/// POSTs `message` once, with toolgate's `token` when it has one; the response and whether the POST carried a
/// session id.
async fn post_once(
    shared: &Shared,
    message: &Value,
    token: Option<&Secret>,
) -> Result<(reqwest::Response, bool), PostFailure> {
    // A modern request's headers come from its own body, the version included (the negotiated one is left out,
    // so it is never sent twice).
    let modern_headers = crate::modern::modern_headers(message);
    let (mut request, carries_session) =
        request_builder_versioned(shared, reqwest::Method::POST, modern_headers.is_empty());
    for (name, value) in modern_headers {
        request = request.header(name, value);
    }
    if let Some(token) = token {
        request = request.header(AUTHORIZATION, format!("Bearer {}", token.expose()));
    }
    let response = request
        .header(CONTENT_TYPE, "application/json")
        .header(ACCEPT, "application/json, text/event-stream")
        .body(message.to_string())
        .send()
        .await
        .map_err(|error| PostFailure::Unreachable(unreachable_reason(&error)))?;
    Ok((response, carries_session))
}

/// Why a request got no answer, with the innermost cause: reqwest's own text names only the URL, while the status
/// a person reads should say "Connection refused".
fn unreachable_reason(error: &reqwest::Error) -> String {
    let root = std::iter::successors(std::error::Error::source(error), |cause| cause.source()).last();
    match root {
        Some(root) => format!("{error}: {root}"),
        None => error.to_string(),
    }
}

/// Counts body bytes and fails once more than `limit` arrive without the counter being reset.
fn limited<S>(stream: S, limit: usize) -> (impl Stream<Item = Result<Bytes, UpstreamError>>, Arc<AtomicUsize>)
where
    S: Stream<Item = Result<Bytes, UpstreamError>>,
{
    let seen = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&seen);
    let stream = stream.map(move |chunk| {
        let chunk = chunk?;
        let total = counter.fetch_add(chunk.len(), Ordering::Relaxed) + chunk.len();
        if total > limit { Err(UpstreamError::MessageTooLarge { limit }) } else { Ok(chunk) }
    });
    (stream, seen)
}

async fn read_json_body<S>(shared: &Shared, body: S, related: Option<&Value>) -> Result<(), UpstreamError>
where
    S: Stream<Item = Result<Bytes, UpstreamError>>,
{
    let chunks: Vec<Bytes> = body.try_collect().await?;
    let bytes: Vec<u8> = chunks.concat();
    let value: Value = serde_json::from_slice(&bytes)
        .map_err(|error| UpstreamError::Protocol(format!("the HTTP response body is not JSON: {error}")))?;
    // The usual answer, one response to the request this POST carried, goes straight to its waiter.
    if let (Value::Object(object), Some(request_id)) = (&value, related.and_then(Value::as_u64))
        && object.get("id").and_then(Value::as_u64) == Some(request_id)
        && matches!(classify(&value), MessageKind::Response { .. })
    {
        if let Some(sender) = shared.pending.take(request_id) {
            let _ = sender.send(Ok(value));
        }
        return Ok(());
    }
    for message in split_batch(value) {
        let _ = shared.inbound.send(Inbound::Message { message, related: related.cloned() }).await;
    }
    Ok(())
}

/// Delivers the messages of an SSE body in order, counting them in `delivered`.
async fn read_event_stream<S>(
    shared: &Shared,
    body: S,
    seen: Arc<AtomicUsize>,
    related: Option<&Value>,
    delivered: &mut usize,
    last_event_id: Option<&Mutex<Option<String>>>,
) -> Result<(), UpstreamError>
where
    S: Stream<Item = Result<Bytes, UpstreamError>>,
{
    let mut events = Box::pin(SseStream::from_bytes_stream(body));
    while let Some(event) = events.next().await {
        let event = event.map_err(|error| match error {
            sse_stream::Error::Body(inner) => match inner.downcast::<UpstreamError>() {
                Ok(upstream_error) => *upstream_error,
                Err(other) => UpstreamError::Protocol(format!("reading the SSE stream failed: {other}")),
            },
            other => UpstreamError::Protocol(format!("malformed SSE stream: {other}")),
        })?;
        // Each event may use the whole limit; the count restarts at every event boundary.
        seen.store(0, Ordering::Relaxed);
        // Priming events (no data) carry an id too: they are where a resumed stream starts.
        if let (Some(last), Some(id)) = (last_event_id, event.id.as_ref().filter(|id| !id.is_empty()))
            && let Ok(mut last) = last.lock()
        {
            *last = Some(id.clone());
        }
        let Some(data) = event.data.filter(|data| !data.trim().is_empty()) else { continue };
        let value: Value = serde_json::from_str(&data)
            .map_err(|error| UpstreamError::Protocol(format!("an SSE event is not JSON: {error}")))?;
        for message in split_batch(value) {
            *delivered += 1;
            let _ = shared.inbound.send(Inbound::Message { message, related: related.cloned() }).await;
        }
    }
    Ok(())
}

/// How one opening of the GET stream went.
enum StreamOutcome {
    /// It delivered messages or stayed open [`GET_STREAM_SETTLED_AFTER`]: the server keeps one, reopen it afresh.
    Served,
    /// The server does not offer one (405, or another client error).
    NotOffered(reqwest::StatusCode),
    /// HTTP 404 to the session id: the server no longer knows the session.
    SessionUnknown,
    /// No HTTP answer at all.
    Unreachable(String),
    /// An answer, but a server error or a stream that ended at once with nothing.
    Failed(String),
}

/// Keeps a GET stream open for messages the server sends outside any request (list_changed, resource updates,
/// server requests), reopening it whenever it ends.
///
/// A server that does not offer one (405) is fine. A stream that delivered or stayed open starts the attempt count
/// again, so the stream lives as long as the connection. After [`GET_STREAM_ATTEMPTS`] failures in a row it stops:
/// when the last found nobody answering, the connection ends (the runner reconnects, and a new session reopens the
/// stream); when the server answers but will not keep a stream, a new session would do the same, so it only stops
/// listening, with a warning. A 404 to the session id ends the connection at once.
async fn listen_for_server_messages(shared: Arc<Shared>) {
    let mut failures: u32 = 0;
    loop {
        let outcome = tokio::select! {
            biased;
            () = shared.stopped.cancelled() => return,
            outcome = open_server_stream(&shared) => outcome,
        };
        let (reason, reachable) = match outcome {
            StreamOutcome::Served => {
                failures = 0;
                tracing::debug!(upstream = %shared.name, "the GET stream ended; reopening it");
                wait_before_reopening(&shared, failures).await;
                continue;
            }
            StreamOutcome::NotOffered(status) => {
                tracing::debug!(upstream = %shared.name, %status, "the server offers no GET stream");
                return;
            }
            StreamOutcome::SessionUnknown => {
                end_connection(&shared, session_unknown(&shared)).await;
                return;
            }
            StreamOutcome::Unreachable(reason) => (reason, false),
            StreamOutcome::Failed(reason) => (reason, true),
        };
        failures += 1;
        tracing::debug!(upstream = %shared.name, %reason, failures, "the GET stream could not be (re)opened");
        if failures < GET_STREAM_ATTEMPTS {
            wait_before_reopening(&shared, failures).await;
            continue;
        }
        if reachable {
            tracing::warn!(
                upstream = %shared.name,
                %reason,
                failures,
                "the server keeps failing the GET stream; its list_changed and resource updates outside requests \
                 are no longer received on this connection"
            );
        } else {
            // The router logs the end at warn with this reason, and the runner shows it as the upstream's status.
            let reason =
                format!("the GET stream for server messages could not be reopened in {failures} attempts: {reason}");
            end_connection(&shared, UpstreamError::Connect { url: shared.url.clone(), reason }).await;
        }
        return;
    }
}

/// Sleeps [`GET_STREAM_RETRY_DELAY`] times the failures in a row (at least once), or until the connection stops.
async fn wait_before_reopening(shared: &Shared, failures: u32) {
    tokio::select! {
        () = shared.stopped.cancelled() => {}
        () = tokio::time::sleep(GET_STREAM_RETRY_DELAY * failures.max(1)) => {}
    }
}

/// Opens the GET stream once and reads it until it ends.
async fn open_server_stream(shared: &Shared) -> StreamOutcome {
    let (mut request, carries_session) = request_builder(shared, reqwest::Method::GET);
    let token = match &shared.credentials {
        Some(source) => match source.token().await {
            Ok(token) => Some(token),
            Err(error) => return StreamOutcome::Failed(error.to_string()),
        },
        None => None,
    };
    if let Some(token) = &token {
        request = request.header(AUTHORIZATION, format!("Bearer {}", token.expose()));
    }
    let resume = shared.last_event_id.lock().ok().and_then(|last| last.clone());
    if let Some(last) = resume {
        request = request.header("last-event-id", last);
    }
    let response = match request.header(ACCEPT, "text/event-stream").send().await {
        Ok(response) => response,
        Err(error) => return StreamOutcome::Unreachable(unreachable_reason(&error)),
    };
    let status = response.status();
    if status == reqwest::StatusCode::NOT_FOUND && carries_session {
        return StreamOutcome::SessionUnknown;
    }
    if let (reqwest::StatusCode::UNAUTHORIZED, Some(source), Some(token)) = (status, &shared.credentials, &token) {
        // A refused token is renewed for the next opening, not taken as "no stream offered".
        source.reject(token).await;
        return StreamOutcome::Failed(format!("HTTP {status}"));
    }
    if status.is_server_error() {
        return StreamOutcome::Failed(format!("HTTP {status}"));
    }
    if !status.is_success() {
        return StreamOutcome::NotOffered(status);
    }
    let opened = tokio::time::Instant::now();
    let url = shared.url.clone();
    let body = response
        .bytes_stream()
        .map_err(move |error| UpstreamError::Connect { url: url.clone(), reason: error.to_string() });
    let (body, seen) = limited(body, shared.max_message_bytes);
    let mut delivered = 0;
    let outcome = read_event_stream(shared, body, seen, None, &mut delivered, Some(&shared.last_event_id)).await;
    if delivered > 0 || opened.elapsed() >= GET_STREAM_SETTLED_AFTER {
        if let Err(error) = outcome {
            tracing::debug!(upstream = %shared.name, %error, "the GET stream ended with an error");
        }
        return StreamOutcome::Served;
    }
    StreamOutcome::Failed(match outcome {
        Ok(()) => "the stream ended at once without a message".to_owned(),
        Err(error) => error.to_string(),
    })
}

/// Ends an HTTP session with DELETE (best effort: a server may not support it).
pub(crate) struct HttpCloser {
    shared: Arc<Shared>,
}

impl HttpCloser {
    pub(crate) async fn close(self) {
        let has_session = self.shared.session_id.lock().map(|guard| guard.is_some()).unwrap_or(false);
        if has_session {
            let (mut request, _) = request_builder(&self.shared, reqwest::Method::DELETE);
            if let Some(source) = &self.shared.credentials
                && let Ok(Ok(token)) = tokio::time::timeout(Duration::from_secs(2), source.token()).await
            {
                request = request.header(AUTHORIZATION, format!("Bearer {}", token.expose()));
            }
            let request = request.timeout(Duration::from_secs(2));
            let _ = request.send().await;
        }
    }
}

#[cfg(test)]
mod test_server;
#[cfg(test)]
mod tests;
