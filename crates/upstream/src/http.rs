//! The Streamable HTTP transport (client side): each outgoing message is one POST to the endpoint.
//!
//! A request's answer comes back as a JSON body or as an SSE stream that may carry notifications and server
//! requests before the response; priming events (empty data) are skipped. The `Mcp-Session-Id` issued at
//! initialize and the negotiated `MCP-Protocol-Version` are sent on every later POST, and the session is ended with
//! DELETE on close. Bodies and events larger than the message limit fail the request. Never sends a downstream
//! client's credentials: only the headers configured for this upstream.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use bytes::Bytes;
use futures::{Stream, StreamExt, TryStreamExt};
use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};
use serde_json::Value;
use sse_stream::SseStream;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::endpoint::{ConnectOptions, Endpoint};
use crate::error::UpstreamError;
use crate::jsonrpc::{MessageKind, classify};
use crate::transport::{Closer, Diagnostics, Inbound, PendingResponses, Transport, channel_stream, split_batch};

const SESSION_HEADER: &str = "mcp-session-id";
const VERSION_HEADER: &str = "mcp-protocol-version";
const BODY_SAMPLE_CHARS: usize = 200;

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
    /// Posts `request`, or gives it back when it must go through the queue (not initialized yet, shut down, or not a
    /// request).
    pub(crate) fn post(&self, request: Value) -> Result<(), Value> {
        let queued = !self.ready.load(Ordering::Acquire) || self.stop.is_cancelled();
        if queued || !matches!(classify(&request), MessageKind::Request { .. }) {
            return Err(request);
        }
        tokio::spawn(post_message(Arc::clone(&self.shared), request));
        Ok(())
    }
}

/// Builds the HTTP client and starts the dispatcher task.
pub(crate) fn start(
    endpoint: &Endpoint,
    options: &ConnectOptions,
    pending: Arc<PendingResponses>,
) -> Result<Transport, UpstreamError> {
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
    let (inbound_sender, inbound_receiver) = mpsc::channel::<Inbound>(64);
    let negotiated_version = Arc::new(OnceLock::new());
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
    });
    let ready = Arc::new(AtomicBool::new(false));
    let dispatcher_shared = Arc::clone(&shared);
    let shutdown = CancellationToken::new();
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
            let post = post_message(Arc::clone(&dispatcher_shared), message);
            if runs_concurrently {
                tokio::spawn(post);
            } else {
                post.await;
            }
            if opens_stream {
                tokio::spawn(listen_for_server_messages(Arc::clone(&dispatcher_shared), stop.clone()));
                ready.store(true, Ordering::Release);
            }
        }
    });
    Ok(Transport {
        outbound: outbound_sender,
        inbound: channel_stream(inbound_receiver),
        diagnostics: Arc::new(Diagnostics::default()),
        negotiated_version,
        shutdown,
        closer: Closer::Http(HttpCloser { shared }),
        direct: Some(direct),
    })
}

async fn post_message(shared: Arc<Shared>, message: Value) {
    let request_id = match classify(&message) {
        MessageKind::Request { id, .. } => Some(id.clone()),
        _ => None,
    };
    if let Err(error) = exchange(&shared, &message, request_id.as_ref()).await {
        match request_id {
            Some(id) => {
                let _ = shared.inbound.send(Inbound::RequestFailed { id, error }).await;
            }
            None => tracing::warn!(upstream = %shared.name, %error, "posting a message to the upstream failed"),
        }
    }
}

fn request_builder(shared: &Shared, method: reqwest::Method) -> reqwest::RequestBuilder {
    let mut builder = shared.client.request(method, shared.endpoint.clone()).headers(shared.headers.clone());
    if let Ok(guard) = shared.session_id.lock()
        && let Some(session) = guard.as_deref()
    {
        builder = builder.header(SESSION_HEADER, session);
    }
    if let Some(version) = shared.negotiated_version.get() {
        builder = builder.header(VERSION_HEADER, version);
    }
    builder
}

async fn exchange(shared: &Shared, message: &Value, related: Option<&Value>) -> Result<(), UpstreamError> {
    let connect_error =
        |error: reqwest::Error| UpstreamError::Connect { url: shared.url.clone(), reason: error.to_string() };
    let response = request_builder(shared, reqwest::Method::POST)
        .header(CONTENT_TYPE, "application/json")
        .header(ACCEPT, "application/json, text/event-stream")
        .body(message.to_string())
        .send()
        .await
        .map_err(connect_error)?;
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
        return Err(UpstreamError::HttpStatus { url: shared.url.clone(), status: status.as_u16(), body: sample });
    }
    let content_type =
        response.headers().get(CONTENT_TYPE).and_then(|value| value.to_str().ok()).unwrap_or_default().to_owned();
    let url = shared.url.clone();
    let body_error =
        move |error: reqwest::Error| UpstreamError::Connect { url: url.clone(), reason: error.to_string() };
    let (body, seen) = limited(response.bytes_stream().map_err(body_error), shared.max_message_bytes);
    if content_type.starts_with("text/event-stream") {
        read_event_stream(shared, body, seen, related).await
    } else {
        read_json_body(shared, body, related).await
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

async fn read_event_stream<S>(
    shared: &Shared,
    body: S,
    seen: Arc<AtomicUsize>,
    related: Option<&Value>,
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
        let Some(data) = event.data.filter(|data| !data.trim().is_empty()) else { continue };
        let value: Value = serde_json::from_str(&data)
            .map_err(|error| UpstreamError::Protocol(format!("an SSE event is not JSON: {error}")))?;
        for message in split_batch(value) {
            let _ = shared.inbound.send(Inbound::Message { message, related: related.cloned() }).await;
        }
    }
    Ok(())
}

/// Keeps a GET stream open for messages the server sends outside any request (list_changed, resource updates,
/// server requests). A server that does not offer one (405) is fine; a dropped stream is reopened a few times.
async fn listen_for_server_messages(shared: Arc<Shared>, stop: CancellationToken) {
    const ATTEMPTS: u32 = 5;
    for attempt in 1..=ATTEMPTS {
        let request = request_builder(&shared, reqwest::Method::GET).header(ACCEPT, "text/event-stream").send();
        let response = tokio::select! {
            () = stop.cancelled() => return,
            response = request => response,
        };
        match response {
            Ok(response) if response.status().is_success() => {
                let url = shared.url.clone();
                let body = response
                    .bytes_stream()
                    .map_err(move |error| UpstreamError::Connect { url: url.clone(), reason: error.to_string() });
                let (body, seen) = limited(body, shared.max_message_bytes);
                tokio::select! {
                    () = stop.cancelled() => return,
                    outcome = read_event_stream(&shared, body, seen, None) => {
                        if let Err(error) = outcome {
                            tracing::debug!(upstream = %shared.name, %error, "the GET stream ended with an error");
                        }
                    }
                }
            }
            Ok(response) => {
                tracing::debug!(upstream = %shared.name, status = %response.status(), "the server offers no GET stream");
                return;
            }
            Err(error) => tracing::debug!(upstream = %shared.name, %error, "opening the GET stream failed"),
        }
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(Duration::from_millis(500 * u64::from(attempt))) => {}
        }
    }
}

/// Ends an HTTP session with DELETE (best effort: a server may not support it).
pub(crate) struct HttpCloser {
    shared: Arc<Shared>,
}

impl HttpCloser {
    pub(crate) async fn close(self) {
        let has_session = self.shared.session_id.lock().map(|guard| guard.is_some()).unwrap_or(false);
        if has_session {
            let request = request_builder(&self.shared, reqwest::Method::DELETE).timeout(Duration::from_secs(2));
            let _ = request.send().await;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    use serde_json::{Value, json};
    use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
    use tokio::net::{TcpListener, TcpStream};

    use crate::connection::Connection;
    use crate::endpoint::{ConnectOptions, Endpoint};
    use crate::error::UpstreamError;

    /// A server that redirects the initialize POST elsewhere: toolgate refuses with the status and never sends the
    /// configured header (an upstream's credential) to the redirect target.
    #[tokio::test]
    async fn a_redirect_is_refused_and_never_followed() -> Result<(), Box<dyn std::error::Error>> {
        let elsewhere = TcpListener::bind("127.0.0.1:0").await?;
        let target = format!("http://{}/mcp", elsewhere.local_addr()?);
        let redirecting = TcpListener::bind("127.0.0.1:0").await?;
        let url = format!("http://{}/mcp", redirecting.local_addr()?);
        tokio::spawn(async move {
            let Ok((mut stream, _)) = redirecting.accept().await else { return };
            let mut request = vec![0u8; 8192];
            let _ = stream.read(&mut request).await;
            let answer = format!("HTTP/1.1 307 Temporary Redirect\r\nLocation: {target}\r\nContent-Length: 0\r\n\r\n");
            let _ = stream.write_all(answer.as_bytes()).await;
        });
        let endpoint =
            Endpoint::Http { url: url.clone(), headers: vec![("x-api-key".to_owned(), "upstream-secret".to_owned())] };
        let options = ConnectOptions { initialize_timeout: Duration::from_secs(5), ..ConnectOptions::default() };
        let Err(error) = Connection::connect(&endpoint, options).await else {
            return Err("a redirect must fail the connect".into());
        };
        assert!(
            matches!(&error, UpstreamError::HttpStatus { status: 307, url: failed, .. } if *failed == url),
            "unexpected error: {error}"
        );
        let followed = tokio::time::timeout(Duration::from_millis(300), elsewhere.accept()).await;
        assert!(followed.is_err(), "the redirect target was contacted");
        Ok(())
    }

    /// A bare Streamable HTTP server (JSON answers only, keep-alive): `initialize` gets a session, notifications 202,
    /// any other request an empty `tools` result, DELETE 200. Every request line and JSON-RPC method is recorded.
    async fn serve_minimal(listener: TcpListener, seen: Arc<Mutex<Vec<String>>>) {
        while let Ok((stream, _)) = listener.accept().await {
            tokio::spawn(serve_connection(stream, Arc::clone(&seen)));
        }
    }

    async fn serve_connection(stream: TcpStream, seen: Arc<Mutex<Vec<String>>>) -> std::io::Result<()> {
        let mut stream = BufReader::new(stream);
        loop {
            let mut request_line = String::new();
            if stream.read_line(&mut request_line).await? == 0 {
                return Ok(());
            }
            let mut length = 0;
            loop {
                let mut header = String::new();
                stream.read_line(&mut header).await?;
                let header = header.trim_end();
                if header.is_empty() {
                    break;
                }
                if let Some((name, value)) = header.split_once(':')
                    && name.eq_ignore_ascii_case("content-length")
                {
                    length = value.trim().parse().unwrap_or(0);
                }
            }
            let mut body = vec![0u8; length];
            stream.read_exact(&mut body).await?;
            let message: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
            let method = message["method"].as_str().unwrap_or_default().to_owned();
            let verb = request_line.split(' ').next().unwrap_or_default().to_owned();
            if let Ok(mut seen) = seen.lock() {
                seen.push(format!("{verb} {method}").trim_end().to_owned());
            }
            let (status, extra, reply) = match (verb.as_str(), &message["id"]) {
                ("POST", Value::Null) => ("202 Accepted", "", String::new()),
                ("POST", id) if method == "initialize" => {
                    let result =
                        json!({"protocolVersion": "2025-11-25", "capabilities": {}, "serverInfo": {"name": "t"}});
                    (
                        "200 OK",
                        "Mcp-Session-Id: s1\r\n",
                        json!({"jsonrpc": "2.0", "id": id, "result": result}).to_string(),
                    )
                }
                ("POST", id) => {
                    ("200 OK", "", json!({"jsonrpc": "2.0", "id": id, "result": {"tools": []}}).to_string())
                }
                ("GET", _) => ("405 Method Not Allowed", "", String::new()),
                _ => ("200 OK", "", String::new()),
            };
            let head = format!(
                "HTTP/1.1 {status}\r\nContent-Type: application/json\r\n{extra}Content-Length: {}\r\n\r\n",
                reply.len()
            );
            stream.get_mut().write_all(head.as_bytes()).await?;
            stream.get_mut().write_all(reply.as_bytes()).await?;
        }
    }

    /// Requests after the handshake take the direct path (posted from the caller, answered from the POST task); after
    /// `close` a request fails at once instead of being posted to a session that was just deleted.
    #[tokio::test]
    async fn requests_are_answered_directly_and_refused_after_close() -> Result<(), Box<dyn std::error::Error>> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let url = format!("http://{}/mcp", listener.local_addr()?);
        let seen = Arc::new(Mutex::new(Vec::new()));
        tokio::spawn(serve_minimal(listener, Arc::clone(&seen)));
        let options = ConnectOptions { request_timeout: Duration::from_secs(30), ..ConnectOptions::default() };
        let connection = Connection::connect(&Endpoint::http(url), options).await?;
        for _ in 0..3 {
            let result = connection.request("tools/list", None).await?;
            assert_eq!(result, json!({"tools": []}));
        }
        connection.close().await;
        let after = tokio::time::timeout(Duration::from_secs(5), connection.request("tools/list", None)).await;
        match after {
            Ok(Err(UpstreamError::Closed { .. })) => {}
            Ok(other) => return Err(format!("a request after close: {other:?}").into()),
            Err(_) => return Err("a request after close hung instead of failing".into()),
        }
        let seen = seen.lock().map(|seen| seen.clone()).unwrap_or_default();
        let lists = seen.iter().filter(|line| *line == "POST tools/list").count();
        assert_eq!(lists, 3, "nothing is posted after close: {seen:?}");
        assert_eq!(seen.first().map(String::as_str), Some("POST initialize"), "{seen:?}");
        assert!(seen.iter().any(|line| line == "DELETE"), "the session is deleted: {seen:?}");
        Ok(())
    }
}
