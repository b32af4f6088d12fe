//! The Streamable HTTP transport toward clients (legacy era: protocol 2025-03-26 to 2025-11-25), on axum.
//!
//! One endpoint (`spec.path`) takes POST (one JSON-RPC message), GET (the session's stream of unsolicited
//! messages) and DELETE (end the session). Every request first passes the DNS-rebinding checks (`Host`, `Origin`:
//! 403), then the method, `MCP-Protocol-Version`, media-type, size and session checks; each rejection is an HTTP
//! status with a JSON-RPC error body. A POSTed request is answered with its response as JSON when the response
//! comes first, or as an SSE stream when related messages (progress, elicitation) come before it.
//!
//! The transport is generic over [`SessionFactory`]: it reads a message's method only to spot `initialize` (which
//! opens a session and gets the `Mcp-Session-Id` header); everything else, `server/discover` included, is delivered
//! as is. It never logs headers (an `Authorization` header must not reach a log) and never treats a client that
//! disconnects as cancelling its request.
//!
//! Layout: `checks` (headers and rejections), `message` (body framing), `session_table` (sessions and
//! their demultiplexer tasks), `sse` (event-stream bodies), `listener` (the accept loop: connection cap,
//! header-read timeout, refusals when descriptors run out), `header_timer` (that timeout's one timer per
//! connection), `warning` (rate-limited warnings).

mod auth;
mod checks;
mod header_timer;
mod listener;
mod message;
mod session_table;
mod sse;
mod warning;

pub use self::listener::{RefusalHook, ServeOptions};

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::header::CONTENT_TYPE;
use axum::http::request::Parts;
use axum::http::{HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Router};
use serde_json::Value;
use tokio_util::sync::CancellationToken;
use toolgate_spec::{CallerSpec, HttpListenerSpec, Limits};
use tracing::{Instrument, debug, debug_span};

use self::checks::{DEFAULT_VERSION, INVALID_REQUEST, Rejection, SESSION_HEADER};
use self::message::Incoming;
use self::session_table::{HttpSession, InitGuard, RequestEvent, SessionTable, request_key};
use crate::era;
use crate::session::{Caller, SessionFactory};

/// After shutdown is signalled, connections still open this long are abandoned.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);
/// The first protocol version whose SSE streams open with a priming event.
const PRIMING_SINCE: &str = "2025-11-25";

/// Everything a request to the endpoint needs.
#[derive(Clone)]
struct Endpoint {
    spec: Arc<HttpListenerSpec>,
    sessions: Arc<SessionTable>,
    max_message_bytes: usize,
    /// How long a POST body may take to arrive once its headers are in (the header-read timeout).
    body_read_timeout: Duration,
    callers: Arc<Vec<CallerSpec>>,
    /// OAuth access tokens (`[oauth]`), besides the static callers.
    oauth: auth::OAuth,
    /// Told about requests refused at authentication (their audit rows).
    factory: Arc<dyn SessionFactory>,
}

/// True when a request's `Host` and `Origin` pass the endpoint's DNS-rebinding rule (for other routes on the same
/// listener, such as `/metrics`).
pub(crate) fn check_host_and_origin(
    headers: &axum::http::HeaderMap,
    uri: &axum::http::Uri,
    spec: &HttpListenerSpec,
) -> bool {
    checks::check_host_and_origin(headers, uri, spec).is_ok()
}

/// True when the request authenticates as a configured static caller, or when neither callers nor OAuth are
/// configured (for other routes on the same listener, such as `/metrics`, which take no OAuth token: with OAuth
/// and no static caller they are closed).
pub(crate) fn is_authenticated(headers: &axum::http::HeaderMap, callers: &[CallerSpec], oauth: bool) -> bool {
    (callers.is_empty() && !oauth) || auth::is_static_caller(headers, callers)
}

/// Fired by [`serve`] when the server stops: streams end and sessions close.
///
/// Behind an `Arc` because the extension is cloned into every request: cloning or dropping a
/// `CancellationToken` takes its tree's lock, and this token is the same for every request of the server.
#[derive(Clone)]
struct Shutdown(Arc<CancellationToken>);

/// The MCP endpoint at `spec.path` as an axum router (any other path answers 404). Sessions are opened through
/// `factory` and bounded by `limits`. Serve it with [`serve`] so open streams end on shutdown.
pub fn router(
    factory: Arc<dyn SessionFactory>,
    spec: &HttpListenerSpec,
    limits: &Limits,
    callers: &[CallerSpec],
) -> Router {
    let oauth = auth::OAuth::from_spec(spec.oauth.as_ref());
    let authenticated = !callers.is_empty() || oauth.is_configured();
    let endpoint = Endpoint {
        spec: Arc::new(spec.clone()),
        sessions: Arc::new(SessionTable::new(Arc::clone(&factory), limits, authenticated)),
        max_message_bytes: limits.max_message_bytes,
        body_read_timeout: limits.header_read_timeout,
        callers: Arc::new(callers.to_vec()),
        oauth: oauth.clone(),
        factory,
    };
    let router = Router::new();
    let router = match oauth.validator() {
        // RFC 9728: the metadata at the well-known prefix followed by the resource's path (what the 401 names),
        // and at the bare prefix for clients that look there first. Public, like the issuer's own metadata.
        Some(validator) => {
            let document = Arc::new(validator.metadata());
            let serve = move || {
                let document = Arc::clone(&document);
                async move { axum::Json((*document).clone()) }
            };
            let router = router.route(toolgate_auth::METADATA_PREFIX, axum::routing::get(serve.clone()));
            if validator.metadata_path() == toolgate_auth::METADATA_PREFIX {
                router
            } else {
                router.route(validator.metadata_path(), axum::routing::get(serve))
            }
        }
        None => router,
    };
    router.fallback(handle).with_state(endpoint)
}

/// Serves `router` on `listener` until `shutdown` completes; then open SSE streams end, sessions close, and
/// connections get a short grace period to finish. Requests carry their peer address as `ConnectInfo<SocketAddr>`.
/// Connections are bounded and timed as [`Limits::default`] says; [`serve_with`] takes other options.
pub async fn serve(
    listener: tokio::net::TcpListener,
    router: Router,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    serve_with(listener, router, shutdown, ServeOptions::from_limits(&Limits::default())).await
}

/// [`serve`] with a connection cap, header-read timeout and refusal hook of the caller's choosing.
pub async fn serve_with(
    listener: tokio::net::TcpListener,
    router: Router,
    shutdown: impl Future<Output = ()> + Send + 'static,
    options: ServeOptions,
) -> std::io::Result<()> {
    let token = CancellationToken::new();
    let router = router.layer(Extension(Shutdown(Arc::new(token.clone()))));
    let signal_token = token.clone();
    tokio::spawn(async move {
        shutdown.await;
        signal_token.cancel();
    });
    listener::accept_loop(listener, router, token, options, SHUTDOWN_GRACE).await;
    Ok(())
}

async fn handle(State(endpoint): State<Endpoint>, request: Request) -> Response {
    if request.uri().path() != endpoint.spec.path {
        return StatusCode::NOT_FOUND.into_response();
    }
    let shutdown = request.extensions().get::<Shutdown>().map(|shutdown| Arc::clone(&shutdown.0)).unwrap_or_default();
    let (parts, body) = request.into_parts();
    match dispatch(&endpoint, parts, body, &shutdown).await {
        Ok(response) => response,
        Err(rejection) => {
            debug!(status = rejection.status.as_u16(), reason = %rejection.message, "request rejected");
            rejection.into_response()
        }
    }
}

async fn dispatch(
    endpoint: &Endpoint,
    parts: Parts,
    body: Body,
    shutdown: &CancellationToken,
) -> Result<Response, Rejection> {
    checks::check_host_and_origin(&parts.headers, &parts.uri, &endpoint.spec)?;
    if !matches!(parts.method, Method::POST | Method::GET | Method::DELETE) {
        return Err(Rejection::method_not_allowed());
    }
    // The peer's address only bounds how many audit rows a flood of refusals writes (`guard::refusal_rows`).
    let remote = parts.extensions.get::<axum::extract::ConnectInfo<std::net::SocketAddr>>().map(|info| info.0.ip());
    let caller =
        auth::authenticate(&parts.headers, remote, &endpoint.callers, &endpoint.oauth, endpoint.factory.as_ref())
            .await?;
    match parts.method {
        // A POST's era is known only from its body: its version header is checked there.
        Method::POST => post(endpoint, &parts, body, shutdown, caller).await,
        Method::GET => {
            checks::protocol_version(&parts.headers)?;
            open_unsolicited_stream(endpoint, &parts, shutdown, &caller)
        }
        _ => {
            checks::protocol_version(&parts.headers)?;
            delete(endpoint, &parts, &caller)
        }
    }
}

/// The live session named by `Mcp-Session-Id` and opened by this caller: 400 when the header is missing, 404 when
/// unknown, closed, or another caller's (a session id is never authentication).
fn find_session(endpoint: &Endpoint, parts: &Parts, caller: &Caller) -> Result<Arc<HttpSession>, Rejection> {
    let id = checks::session_id(&parts.headers)?.ok_or_else(checks::session_missing)?;
    endpoint.sessions.get(id).filter(|session| session.caller() == caller.name).ok_or_else(checks::session_not_found)
}

async fn post(
    endpoint: &Endpoint,
    parts: &Parts,
    body: Body,
    shutdown: &CancellationToken,
    caller: Caller,
) -> Result<Response, Rejection> {
    checks::check_content_type(&parts.headers)?;
    checks::check_accept(&parts.headers, &["application/json", "text/event-stream"])?;
    let bytes =
        message::read_body(&parts.headers, body, endpoint.max_message_bytes, endpoint.body_read_timeout).await?;
    let (message, incoming) = message::parse(&bytes)?;
    if checks::names_modern_version(&parts.headers) || era::is_modern(message.get("params")) {
        return match incoming {
            Incoming::Request { id, method } => {
                modern_request(endpoint, parts, message, id, &method, shutdown, caller).await
            }
            // A modern notification or response belongs to no session: there is nothing to deliver it to (a
            // modern request is cancelled by closing its stream).
            _ => Ok(StatusCode::ACCEPTED.into_response()),
        };
    }
    let version = checks::protocol_version(&parts.headers)?;
    let opens_session = matches!(&incoming, Incoming::Request { method, .. } if method == "initialize")
        && checks::session_id(&parts.headers)?.is_none();
    let (session, init) = if opens_session {
        let session = endpoint.sessions.open(shutdown.clone(), caller)?;
        let init = InitGuard::new(&endpoint.sessions, &session);
        (session, Some(init))
    } else {
        let session = find_session(endpoint, parts, &caller)?;
        // Same caller (find_session checked): a refreshed OAuth token is the one to exchange from now on.
        if let Some(token) = &caller.token {
            session.present_token(token);
        }
        (session, None)
    };
    let Incoming::Request { id, method } = incoming else {
        session.deliver(message);
        return Ok(StatusCode::ACCEPTED.into_response());
    };
    let version = match version {
        Some(version) => version.to_owned(),
        None => session.protocol_version().unwrap_or_else(|| DEFAULT_VERSION.to_owned()),
    };
    let span = debug_span!("request", session = session.id(), method = %method, request_id = %id);
    let prefers_sse = checks::prefers_event_stream(&parts.headers);
    answer_request(session, id, message, None, &version, init, shutdown, prefers_sse).instrument(span).await
}

/// A 2026-07-28 request: the spec's checks in its order (`_meta`, headers, version and method; first failure
/// wins, the error echoes the id), then the request runs in a session opened for it alone, whose id the client
/// never sees and which closes when the answer is out. The gateway answers it exactly as a legacy session's
/// request, in the modern envelope; an unknown method is a 404.
async fn modern_request(
    endpoint: &Endpoint,
    parts: &Parts,
    message: Value,
    id: Value,
    method: &str,
    shutdown: &CancellationToken,
    caller: Caller,
) -> Result<Response, Rejection> {
    let params = message.get("params");
    let refuse = |error: era::EraError| Rejection::era(&id, &error);
    era::check_meta(params).map_err(refuse)?;
    checks::check_modern_headers(&parts.headers, method, params).map_err(refuse)?;
    era::check_version_and_method(method, params).map_err(refuse)?;
    let session = endpoint.sessions.open_ephemeral(shutdown.clone(), caller)?;
    let init = InitGuard::ephemeral(&endpoint.sessions, &session);
    let span = debug_span!("request", era = era::MODERN_VERSION, method = %method, request_id = %id);
    let prefers_sse = checks::prefers_event_stream(&parts.headers);
    let param_headers = Some(checks::param_headers(&parts.headers));
    answer_request(session, id, message, param_headers, era::MODERN_VERSION, Some(init), shutdown, prefers_sse)
        .instrument(span)
        .await
}

/// Delivers a request (a modern one with its `Mcp-Param-*` headers) and answers the POST with what the gateway
/// sends for it: JSON when the response comes first, an SSE stream when a related message does (or when the
/// client lists `text/event-stream` first).
#[allow(clippy::too_many_arguments, reason = "one call site per era; a struct would only rename them")]
async fn answer_request(
    session: Arc<HttpSession>,
    request_id: Value,
    message: Value,
    param_headers: Option<Vec<(String, String)>>,
    version: &str,
    mut init: Option<InitGuard>,
    shutdown: &CancellationToken,
    prefers_sse: bool,
) -> Result<Response, Rejection> {
    // Registered before delivery, so an immediate answer cannot be missed.
    let mut pending = session.wait_for(request_key(&request_id)).ok_or_else(|| {
        Rejection::new(StatusCode::BAD_REQUEST, INVALID_REQUEST, "invalid request: a request with this id is in flight")
    })?;
    match param_headers {
        Some(param_headers) => session.deliver_with_param_headers(message, param_headers),
        None => session.deliver(message),
    }
    let ephemeral = init.as_ref().is_some_and(InitGuard::is_ephemeral);
    let session_header =
        init.as_ref().filter(|init| !init.is_ephemeral()).and_then(|_| HeaderValue::from_str(session.id()).ok());
    let mut response = match pending.next().await {
        Some(RequestEvent::Response(response)) => {
            let keep = init.as_mut().is_none_or(|init| init.settle(&response));
            let mut reply = if prefers_sse {
                let priming = version >= PRIMING_SINCE;
                let stream = sse::RequestStream::answered(pending, request_id, &response, priming, shutdown.clone());
                sse::response(stream.into_body())
            } else if let Some(status) = response
                .pointer("/error/code")
                .and_then(Value::as_i64)
                .and_then(era::error_status)
                .filter(|_| ephemeral)
            {
                // 2026-07-28: an error's HTTP status follows its code (404 for an unknown method, 400 for a
                // request the spec refuses), wherever in the gateway it was decided.
                let mut reply = json_response(&response);
                *reply.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_REQUEST);
                reply
            } else {
                json_response(&response)
            };
            if let (true, Some(value)) = (keep, session_header) {
                reply.headers_mut().insert(SESSION_HEADER, value);
            }
            return Ok(reply);
        }
        None => return Ok(json_response(&checks::unanswered(&request_id))),
        Some(RequestEvent::Related(first)) => {
            let priming = version >= PRIMING_SINCE;
            let stream = sse::RequestStream::new(pending, request_id, &first, priming, init, shutdown.clone());
            sse::response(stream.into_body())
        }
    };
    if let Some(value) = session_header {
        response.headers_mut().insert(SESSION_HEADER, value);
    }
    Ok(response)
}

fn json_response(message: &Value) -> Response {
    (StatusCode::OK, [(CONTENT_TYPE, "application/json")], message.to_string()).into_response()
}

fn open_unsolicited_stream(
    endpoint: &Endpoint,
    parts: &Parts,
    shutdown: &CancellationToken,
    caller: &Caller,
) -> Result<Response, Rejection> {
    checks::check_accept(&parts.headers, &["text/event-stream"])?;
    let session = find_session(endpoint, parts, caller)?;
    let stream = session.open_stream().ok_or_else(|| {
        Rejection::new(StatusCode::CONFLICT, checks::TRANSPORT_ERROR, "conflict: this session's GET stream is open")
    })?;
    debug!(session = session.id(), "GET stream opened");
    Ok(sse::response(sse::unsolicited_body(stream, shutdown.clone())))
}

fn delete(endpoint: &Endpoint, parts: &Parts, caller: &Caller) -> Result<Response, Rejection> {
    let session = find_session(endpoint, parts, caller)?;
    endpoint.sessions.close(&session);
    Ok(StatusCode::OK.into_response())
}
