//! The HTTP listener's accept loop: one hyper HTTP/1.1 connection per accepted socket, under a cap on concurrent
//! connections, with a header-read timeout, and with a clear refusal instead of a hang when the cap or the
//! process's file descriptors run out.
//!
//! A client that opens a connection and never finishes its request's headers (or keeps an idle keep-alive
//! connection) is closed after `header_read_timeout`; a response being streamed (SSE) is not affected. Past
//! `max_connections` a connection is answered `503` with `Retry-After` and closed. When `accept` fails with
//! `EMFILE`/`ENFILE`, a descriptor held in reserve is released so the waiting connection can be accepted, answered
//! `503` and closed, and the reserve is taken back; the loop never spins on the error. Nothing here routes
//! requests or knows MCP: every request goes to the axum router with its peer address as `ConnectInfo`.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::ConnectInfo;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper_util::rt::TokioIo;
use hyper_util::service::TowerToHyperService;
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;
use toolgate_spec::Limits;
use tracing::{debug, warn};

use super::header_timer::ConnectionTimer;
use super::warning::RateLimitedWarning;
use crate::session::Refusal;

/// What a refused connection is told to wait before trying again.
const CONNECTION_RETRY_AFTER_SECONDS: u64 = 1;
/// A refused connection gets this long to take its answer before it is closed.
const REFUSAL_WRITE_TIMEOUT: Duration = Duration::from_secs(1);
/// After an accept error that a reserve descriptor cannot help with, the loop waits this long before the next
/// accept (so it never spins).
const ACCEPT_ERROR_PAUSE: Duration = Duration::from_millis(100);
/// At most one warning per this interval about refused connections or accept errors.
const WARNING_INTERVAL: Duration = Duration::from_secs(10);

/// Told about each connection the listener refuses (the gateway counts them in its metrics).
pub type RefusalHook = Arc<dyn Fn(Refusal) + Send + Sync>;

/// How the listener treats connections.
#[derive(Clone)]
pub struct ServeOptions {
    /// Most concurrent connections; more are answered 503 and closed.
    pub max_connections: usize,
    /// A connection must send a request's headers within this long (idle keep-alive connections included).
    pub header_read_timeout: Duration,
    /// Told about every refused connection.
    pub on_refusal: Option<RefusalHook>,
}

impl ServeOptions {
    /// The options `limits` asks for, with no refusal hook.
    pub fn from_limits(limits: &Limits) -> Self {
        ServeOptions {
            max_connections: limits.max_connections,
            header_read_timeout: limits.header_read_timeout,
            on_refusal: None,
        }
    }
}

impl std::fmt::Debug for ServeOptions {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("ServeOptions")
            .field("max_connections", &self.max_connections)
            .field("header_read_timeout", &self.header_read_timeout)
            .finish_non_exhaustive()
    }
}

/// Accepts connections until `stop` is cancelled, then waits up to `grace` for open connections to finish (they
/// are told to close after their current response).
pub(super) async fn accept_loop(
    listener: TcpListener,
    router: Router,
    stop: CancellationToken,
    options: ServeOptions,
    grace: Duration,
) {
    let max_connections = options.max_connections.clamp(1, u32::MAX as usize);
    let header_read_timeout = options.header_read_timeout;
    let slots = Arc::new(Semaphore::new(max_connections));
    let mut reserve = Reserve::take();
    let warning = RateLimitedWarning::new(WARNING_INTERVAL);
    let refused = |refusal: Refusal| {
        if let Some(hook) = &options.on_refusal {
            hook(refusal);
        }
    };
    loop {
        let accepted = tokio::select! {
            () = stop.cancelled() => break,
            accepted = listener.accept() => accepted,
        };
        let (stream, peer) = match accepted {
            Ok(accepted) => accepted,
            Err(error) if is_descriptor_exhaustion(&error) => {
                refused(Refusal::DescriptorLimit);
                warning.warn(|suppressed| {
                    warn!(
                        %error,
                        suppressed,
                        "refusing connections: no file descriptor left (raise the open-files limit, `ulimit -n`, or \
                         lower [limits] max_connections)"
                    );
                });
                refuse_without_descriptors(&listener, &mut reserve).await;
                continue;
            }
            Err(error) if is_connection_error(&error) => continue,
            Err(error) => {
                warning.warn(|suppressed| warn!(%error, suppressed, "accepting a connection failed"));
                tokio::time::sleep(ACCEPT_ERROR_PAUSE).await;
                continue;
            }
        };
        if let Err(error) = stream.set_nodelay(true) {
            // Without TCP_NODELAY an SSE answer written as several small events meets delayed ACKs: ~40 ms each.
            debug!(%error, "could not set TCP_NODELAY");
        }
        match Arc::clone(&slots).try_acquire_owned() {
            Ok(slot) => {
                let connection =
                    serve_connection(stream, peer, router.clone(), stop.clone(), header_read_timeout, slot);
                tokio::spawn(connection);
            }
            Err(_) => {
                refused(Refusal::ConnectionLimit);
                warning.warn(|suppressed| {
                    warn!(
                        max_connections,
                        suppressed,
                        "refused a connection: {max_connections} connections are open (raise [limits] max_connections)"
                    );
                });
                let message = format!(
                    "service unavailable: {max_connections} connections are open, the most this server allows \
                     (raise [limits] max_connections)"
                );
                tokio::spawn(refuse(stream, message, true));
            }
        }
    }
    drop(listener);
    // Every connection holds a slot until it ends; having them all back means every connection has closed.
    let all = u32::try_from(max_connections).unwrap_or(u32::MAX);
    if tokio::time::timeout(grace, slots.acquire_many(all)).await.is_err() {
        debug!("stopped waiting for open connections after the shutdown grace period");
    }
}

/// Serves one connection until it ends, or until `stop` (then after its current response).
async fn serve_connection(
    stream: TcpStream,
    peer: SocketAddr,
    router: Router,
    stop: CancellationToken,
    header_read_timeout: Duration,
    slot: OwnedSemaphorePermit,
) {
    let inner = TowerToHyperService::new(router);
    // Each request carries its connection's peer address for the routes that key on it (the console's failed-login
    // limit); the MCP endpoint never reads it.
    let service = hyper::service::service_fn(move |mut request: axum::http::Request<Incoming>| {
        request.extensions_mut().insert(ConnectInfo(peer));
        hyper::service::Service::call(&inner, request)
    });
    let mut builder = http1::Builder::new();
    // One timer per connection, moved forward per request (`header_timer`): hyper-util's timer registered and
    // cancelled one in the runtime's shared timer wheel for every request.
    builder.timer(ConnectionTimer::new()).header_read_timeout(header_read_timeout).keep_alive(true);
    let connection = builder.serve_connection(TokioIo::new(stream), service);
    let mut connection = std::pin::pin!(connection);
    let result = tokio::select! {
        result = connection.as_mut() => result,
        () = stop.cancelled() => {
            connection.as_mut().graceful_shutdown();
            connection.await
        }
    };
    if let Err(error) = result {
        // A header-read timeout, a client gone mid-request: the client's affair, not the operator's.
        debug!(%peer, %error, "connection ended with an error");
    }
    drop(slot);
}

/// Answers `503` with `message` as a JSON-RPC error and closes the connection. With `drain`, what the client
/// already sent is read (briefly) before closing, so the close is not a reset that could discard the answer.
async fn refuse(mut stream: TcpStream, message: String, drain: bool) {
    let body = serde_json::json!({
        "jsonrpc": "2.0",
        "id": null,
        "error": {"code": super::checks::TRANSPORT_ERROR, "message": message},
    })
    .to_string();
    let response = format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\nretry-after: \
         {CONNECTION_RETRY_AFTER_SECONDS}\r\nconnection: close\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    let answered = async {
        stream.write_all(response.as_bytes()).await?;
        stream.shutdown().await
    };
    if !matches!(tokio::time::timeout(REFUSAL_WRITE_TIMEOUT, answered).await, Ok(Ok(()))) {
        return;
    }
    if drain {
        let mut scratch = [0u8; 4096];
        let drained = async {
            loop {
                stream.readable().await?;
                match stream.try_read(&mut scratch) {
                    Ok(0) => return Ok::<(), std::io::Error>(()),
                    Ok(_) => {}
                    Err(error) if error.kind() == std::io::ErrorKind::WouldBlock => {}
                    Err(error) => return Err(error),
                }
            }
        };
        let _ = tokio::time::timeout(REFUSAL_WRITE_TIMEOUT, drained).await;
    } else {
        // No time to wait: take what already arrived without blocking.
        let mut scratch = [0u8; 4096];
        while matches!(stream.try_read(&mut scratch), Ok(read) if read > 0) {}
    }
}

/// With no descriptor left: gives back the reserve, accepts the waiting connection, answers it `503` and closes
/// it, then takes the reserve again. Without a reserve (it could not be taken back yet), waits a moment instead
/// of spinning on the same error.
async fn refuse_without_descriptors(listener: &TcpListener, reserve: &mut Reserve) {
    if !reserve.release() {
        tokio::time::sleep(ACCEPT_ERROR_PAUSE).await;
        *reserve = Reserve::take();
        return;
    }
    let accepted = tokio::time::timeout(ACCEPT_ERROR_PAUSE, listener.accept()).await;
    if let Ok(Ok((stream, _))) = accepted {
        let message = "service unavailable: toolgate has no file descriptor left for this connection (the operator \
                       can raise the open-files limit)"
            .to_owned();
        // Inline, so the descriptor is free again before the reserve is taken back.
        refuse(stream, message, false).await;
    }
    *reserve = Reserve::take();
}

/// One open file kept only so it can be closed when `accept` runs out of descriptors.
struct Reserve(Option<std::fs::File>);

impl Reserve {
    fn take() -> Reserve {
        let file = std::fs::File::open(RESERVE_PATH).ok();
        if file.is_none() {
            debug!("could not open a reserve file descriptor");
        }
        Reserve(file)
    }

    /// Closes the reserve; false when there was none.
    fn release(&mut self) -> bool {
        self.0.take().is_some()
    }
}

#[cfg(unix)]
const RESERVE_PATH: &str = "/dev/null";
#[cfg(not(unix))]
const RESERVE_PATH: &str = "NUL";

/// `EMFILE` (the process's limit) and `ENFILE` (the system's): 24 and 23 on Linux, the BSDs and macOS. The standard
/// library has no `ErrorKind` for them.
const DESCRIPTOR_ERRORS: [i32; 2] = [24, 23];

fn is_descriptor_exhaustion(error: &std::io::Error) -> bool {
    cfg!(unix) && error.raw_os_error().is_some_and(|code| DESCRIPTOR_ERRORS.contains(&code))
}

fn is_connection_error(error: &std::io::Error) -> bool {
    matches!(
        error.kind(),
        std::io::ErrorKind::ConnectionRefused
            | std::io::ErrorKind::ConnectionAborted
            | std::io::ErrorKind::ConnectionReset
    )
}
