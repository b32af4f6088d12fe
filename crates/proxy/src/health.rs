//! `GET /healthz/live` and `GET /healthz/ready`: what a load balancer checks before it sends a process traffic
//! (docs/deploy.md). Live answers 200 while the process serves HTTP at all; ready answers 200 only while the
//! state store answers a read within [`STORE_CHECK_TIMEOUT`], its audit writer is not failing, every upstream is
//! connected and listed, and the gateway is not stopping; otherwise 503 with the same JSON body saying which part
//! is not.
//!
//! Both are outside the caller tokens and the `Host`/`Origin` rule (a load balancer names no caller and may send
//! any `Host`), so they must say nothing a stranger may not know: counts, the operator's instance id and fixed
//! words only, never an upstream's name, server info, error text or anything else an upstream or a client wrote.
//! Nothing here changes state.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::{Request, State};
use axum::http::header::{ALLOW, CACHE_CONTROL, CONTENT_TYPE};
use axum::http::{Method, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

use crate::gateway::Gateway;
use crate::upstreams::UpstreamStatus;

/// The liveness path.
pub const LIVE_PATH: &str = "/healthz/live";
/// The readiness path.
pub const READY_PATH: &str = "/healthz/ready";
/// A store that takes longer than this to answer one read counts as unusable (a check must not hang the balancer's).
pub const STORE_CHECK_TIMEOUT: Duration = Duration::from_secs(2);

/// What the readiness check found; the body of both answers.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Readiness {
    /// `ready` or `not_ready`.
    pub status: &'static str,
    /// The process's instance id, when `serve` set one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub instance: Option<String>,
    /// `ok`, `failing` (a read failed or timed out, or the audit writer is failing) or `none` (no store).
    pub store: &'static str,
    /// Upstreams connected and listed.
    pub upstreams_ready: usize,
    /// Upstreams configured.
    pub upstreams: usize,
    /// True once the gateway has begun to stop.
    pub stopping: bool,
}

impl Readiness {
    /// True when the process should get traffic.
    pub fn is_ready(&self) -> bool {
        self.status == "ready"
    }
}

impl Gateway {
    /// Checks the store (one read, bounded by [`STORE_CHECK_TIMEOUT`]) and the upstreams, as `/healthz/ready`
    /// reports them.
    pub async fn readiness(&self) -> Readiness {
        let shared = &self.shared;
        let store = match &shared.store {
            None => "none",
            Some(store) if store.audit().stats().failing => "failing",
            Some(store) => match tokio::time::timeout(STORE_CHECK_TIMEOUT, store.ping()).await {
                Ok(Ok(_)) => "ok",
                Ok(Err(error)) => {
                    tracing::warn!(%error, "readiness: the state store does not answer");
                    "failing"
                }
                Err(_) => {
                    tracing::warn!("readiness: the state store took too long to answer");
                    "failing"
                }
            },
        };
        let upstreams = shared.upstreams.live();
        let upstreams_ready =
            upstreams.iter().filter(|runtime| matches!(runtime.status(), UpstreamStatus::Ready { .. })).count();
        let stopping = shared.shutdown.is_cancelled();
        let ready = store != "failing" && upstreams_ready == upstreams.len() && !stopping;
        Readiness {
            status: if ready { "ready" } else { "not_ready" },
            instance: shared.instance_id(),
            store,
            upstreams_ready,
            upstreams: upstreams.len(),
            stopping,
        }
    }
}

/// `GET|HEAD /healthz/live` and `/healthz/ready` for `gateway`; other methods get 405. Merge it into the MCP
/// router; when the MCP endpoint itself is at one of these paths, the endpoint wins and this router is empty.
pub fn router(gateway: Gateway, mcp_path: &str) -> Router {
    if mcp_path == LIVE_PATH || mcp_path == READY_PATH {
        tracing::warn!("the MCP endpoint is at a health path, so the health endpoints are not served");
        return Router::new();
    }
    let gateway = Arc::new(gateway);
    Router::new()
        .route(LIVE_PATH, axum::routing::any(live))
        .route(READY_PATH, axum::routing::any(ready))
        .with_state(gateway)
}

async fn live(request: Request) -> Response {
    if let Some(refused) = refuse_method(request.method()) {
        return refused;
    }
    answer(StatusCode::OK, serde_json::json!({"status": "live"}).to_string())
}

async fn ready(State(gateway): State<Arc<Gateway>>, request: Request) -> Response {
    if let Some(refused) = refuse_method(request.method()) {
        return refused;
    }
    let readiness = gateway.readiness().await;
    let status = if readiness.is_ready() { StatusCode::OK } else { StatusCode::SERVICE_UNAVAILABLE };
    answer(status, serde_json::to_string(&readiness).unwrap_or_default())
}

fn refuse_method(method: &Method) -> Option<Response> {
    (method != Method::GET && method != Method::HEAD).then(|| {
        (StatusCode::METHOD_NOT_ALLOWED, [(ALLOW, "GET, HEAD")], "method not allowed: use GET\n").into_response()
    })
}

fn answer(status: StatusCode, body: String) -> Response {
    (status, [(CONTENT_TYPE, "application/json"), (CACHE_CONTROL, "no-store")], body).into_response()
}
