//! `GET /metrics`: the gateway's Prometheus metrics over HTTP (docs/metrics.md), under the MCP endpoint's
//! `Host`/`Origin` rules and caller tokens. The recorder and what is counted live in `registry`; this file only
//! serves them and must not count anything itself.

pub(crate) mod registry;

use std::sync::Arc;

use axum::Router;
use axum::extract::{Request, State};
use axum::http::header::{ALLOW, CONTENT_TYPE, WWW_AUTHENTICATE};
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use toolgate_spec::HttpListenerSpec;

pub use self::registry::{
    AUDIT_BYTES, AUDIT_DISK_FREE, AUDIT_FAILED, AUDIT_FAILING, AUDIT_PRUNED, AUDIT_QUEUED, AUDIT_REJECTED,
    AUDIT_WRITTEN, AUTHENTICATION_REFUSED, AUTHENTICATION_ROWS_SUPPRESSED, CALL_DURATION, CLIENT_MESSAGES_DROPPED,
    CLIENT_QUEUED_BYTES, CLIENT_SESSIONS_STALLED, CONNECTIONS_REFUSED, INSTANCE_INFO, LIST_ITEMS_DROPPED,
    PENDING_APPROVALS, RELAYED_REFUSED, RELIST_FAILURES, RELISTS, SESSIONS_REFUSED, TOKEN_EXCHANGE_CACHE_HITS,
    TOKEN_EXCHANGE_FAILURES, TOKEN_EXCHANGES, TOOL_CALLS, TOOLS_DROPPED, UPSTREAM_CANCELS_DROPPED,
    UPSTREAM_DISCONNECTS, UPSTREAM_IN_FLIGHT, UPSTREAM_SATURATED, UPSTREAM_UP,
};
use crate::gateway::Gateway;

impl Gateway {
    /// The gateway's metrics in the Prometheus text format: counters and histograms as recorded, gauges read now.
    pub async fn render_metrics(&self) -> String {
        let shared = &self.shared;
        let queued: usize = shared.sessions().iter().map(|session| session.queued_bytes()).sum();
        shared.metrics.render(&shared.upstreams.all(), shared.store.as_ref(), queued, shared.instance_id()).await
    }
}

/// `GET /metrics` for `gateway`, under the listener's `Host`/`Origin` rules (403 otherwise) and, when callers are
/// configured, with a caller's token (401 otherwise); other methods get 405.
/// Merge it into the MCP router (which only answers its own path).
/// When the MCP endpoint itself is at `/metrics`, the endpoint wins and this router is empty.
pub fn router(gateway: Gateway, spec: &HttpListenerSpec) -> Router {
    if spec.path == "/metrics" {
        tracing::warn!("the MCP endpoint is at /metrics, so Prometheus metrics are not served");
        return Router::new();
    }
    let state = Arc::new((gateway, spec.clone()));
    Router::new().route("/metrics", axum::routing::any(serve_metrics)).with_state(state)
}

async fn serve_metrics(State(state): State<Arc<(Gateway, HttpListenerSpec)>>, request: Request) -> Response {
    let (gateway, spec) = &*state;
    if !host_and_origin_allowed(request.headers(), request.uri(), spec) {
        return (StatusCode::FORBIDDEN, "forbidden: host or origin not allowed\n").into_response();
    }
    if request.method() != axum::http::Method::GET {
        return (StatusCode::METHOD_NOT_ALLOWED, [(ALLOW, "GET")], "method not allowed: use GET\n").into_response();
    }
    // Callers, sessions refused, tool names and upstreams are the operator's business: with callers configured the
    // listener is meant to be reached by others, so a scrape needs a caller's token like the MCP endpoint.
    let callers = &gateway.shared.spec.guardrails.callers;
    if !crate::downstream::http::is_authenticated(request.headers(), callers, spec.oauth.is_some()) {
        return (
            StatusCode::UNAUTHORIZED,
            [(WWW_AUTHENTICATE, "Bearer realm=\"toolgate\"")],
            "unauthorized: send `Authorization: Bearer <token>` of a configured caller\n",
        )
            .into_response();
    }
    let body = gateway.render_metrics().await;
    (StatusCode::OK, [(CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")], body).into_response()
}

/// The MCP endpoint's rule: `Host` loopback or a configured extra, an `Origin` (when present) loopback over
/// http(s) or a configured one.
fn host_and_origin_allowed(headers: &HeaderMap, uri: &Uri, spec: &HttpListenerSpec) -> bool {
    crate::downstream::http::check_host_and_origin(headers, uri, spec)
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;
    use axum::http::header::{HOST, ORIGIN};

    fn allowed(host: &str, origin: Option<&str>) -> bool {
        let mut headers = HeaderMap::new();
        headers.insert(HOST, HeaderValue::from_str(host).unwrap_or(HeaderValue::from_static("invalid")));
        if let Some(origin) = origin {
            headers.insert(ORIGIN, HeaderValue::from_str(origin).unwrap_or(HeaderValue::from_static("x")));
        }
        let spec = HttpListenerSpec {
            bind: std::net::SocketAddr::from(([127, 0, 0, 1], 0)),
            path: "/mcp".into(),
            allowed_origins: vec!["https://app.example:*".into()],
            allowed_hosts: vec!["gw.internal".into()],
            oauth: None,
        };
        host_and_origin_allowed(&headers, &Uri::from_static("/metrics"), &spec)
    }

    #[test]
    fn the_mcp_endpoint_rule_applies() {
        assert!(allowed("127.0.0.1:8765", None));
        assert!(allowed("gw.internal:80", Some("https://app.example:8443")));
        assert!(!allowed("evil.example", None));
        assert!(!allowed("localhost", Some("https://evil.example")));
    }
}
