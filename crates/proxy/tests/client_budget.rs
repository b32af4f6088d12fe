//! Issue 10 (review): one byte budget per client session across every queue that holds bytes for it. An in-process
//! gateway serves Streamable HTTP on loopback in front of `misbehave.py --mode tool-faults`; a client POSTs a call
//! whose upstream sends large progress notifications on the call's SSE stream and never reads a byte of it. What
//! the gateway holds for that client (`toolgate_client_queued_bytes` on `/metrics`, and the process's memory) stays
//! near the budget; what does not fit is dropped and counted.
//!
//! Waits are hang guards; nothing asserts how long anything took.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::net::SocketAddr;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;
use toolgate_proxy::Gateway;
use toolgate_proxy::session::SessionFactory;
use toolgate_spec::{HttpListenerSpec, Limits};

use support::{FixtureLog, GUARD, memory_kib, start, upstream};

/// The client's budget in this test, far below the bytes the upstream sends.
const BUDGET: usize = 1024 * 1024;
/// Each progress notification's padding, and how many the upstream sends.
const NOTE_BYTES: usize = 6 * 1024 * 1024;
const NOTES: usize = 30;

/// The value of the exposition line whose name (and labels) are exactly `series`.
fn value(exposition: &str, series: &str) -> Option<f64> {
    exposition.lines().find_map(|line| line.strip_prefix(series)?.strip_prefix(' ')?.trim().parse().ok())
}

/// Serves the MCP endpoint and `/metrics` of `gateway` on loopback; returns the address.
async fn serve(gateway: &Gateway, limits: &Limits) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let spec = HttpListenerSpec {
        bind: addr,
        path: "/mcp".into(),
        allowed_origins: Vec::new(),
        allowed_hosts: Vec::new(),
        oauth: None,
    };
    let factory: std::sync::Arc<dyn SessionFactory> = std::sync::Arc::new(gateway.clone());
    let router = toolgate_proxy::downstream::http::router(factory, &spec, limits, &[])
        .merge(toolgate_proxy::metrics::router(gateway.clone(), &spec));
    tokio::spawn(toolgate_proxy::downstream::http::serve(listener, router, std::future::pending()));
    addr
}

/// Opens an MCP session over HTTP (initialize, initialized); returns its id.
async fn open_session(client: &reqwest::Client, url: &str) -> String {
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "tests", "version": "0"}}});
    let response = client
        .post(url)
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .body(init.to_string())
        .send()
        .await
        .unwrap();
    let session = response.headers()["mcp-session-id"].to_str().unwrap().to_owned();
    let answer: Value = response.json().await.unwrap();
    assert!(answer["result"]["protocolVersion"].is_string(), "initialize failed: {answer}");
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let response = client
        .post(url)
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .header("mcp-session-id", &session)
        .header("mcp-protocol-version", "2025-11-25")
        .body(initialized.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), reqwest::StatusCode::ACCEPTED);
    session
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_never_reads_its_sse_stream_holds_no_more_than_its_byte_budget_in_the_gateway() {
    let log = FixtureLog::new();
    let limits = Limits { max_client_queue_bytes: BUDGET, ..Limits::default() };
    let gateway = start(vec![upstream("faulty", "tool-faults", GUARD, Some(&log.path))], limits.clone()).await;
    let addr = serve(&gateway, &limits).await;
    let _ = rustls::crypto::ring::default_provider().install_default();
    let http = reqwest::Client::builder().no_proxy().build().unwrap();
    let url = format!("http://{addr}/mcp");
    let session = open_session(&http, &url).await;

    let _memory = support::MEMORY_TESTS.lock().await;
    support::reset_peak_memory();
    let (rss_before, _) = memory_kib();

    // A raw connection with a small receive buffer that posts the call, asking for SSE, and never reads.
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(64 * 1024).unwrap();
    let mut stalled = socket.connect(addr).await.unwrap();
    let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "faulty_progress",
        "arguments": {"n": 0, "count": NOTES, "bytes": NOTE_BYTES, "text": "budget"},
        "_meta": {"progressToken": "p"}}})
    .to_string();
    let request = format!(
        "POST /mcp HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\n\
         accept: text/event-stream, application/json\r\nmcp-session-id: {session}\r\n\
         mcp-protocol-version: 2025-11-25\r\ncontent-length: {}\r\n\r\n{call}",
        call.len()
    );
    stalled.write_all(request.as_bytes()).await.unwrap();
    let upstream_id = log.call_id("progress", "budget").await;
    log.wait_for("every progress notification sent", |entry| entry["sent-progress"] == upstream_id).await;
    // Give the relay time to take in whatever it will take in (a hang guard, not a measurement).
    tokio::time::sleep(Duration::from_secs(1)).await;

    let (rss_stalled, _) = memory_kib();
    let exposition = http.get(format!("http://{addr}/metrics")).send().await.unwrap().text().await.unwrap();
    let queued = value(&exposition, "toolgate_client_queued_bytes").unwrap_or(f64::NAN);
    let dropped = value(&exposition, "toolgate_client_messages_dropped_total").unwrap_or(0.0);
    eprintln!(
        "{NOTES} notes of {NOTE_BYTES} bytes to a client that reads nothing, budget {BUDGET}: VmRSS {rss_before} KiB \
         -> {rss_stalled} KiB; queued {queued} bytes; {dropped} dropped"
    );
    // Without one budget, the call's SSE queue alone held 16 such notes (~96 MiB; measured +131 MiB) beside the
    // gateway's queue; with it, about +32 MiB (two notes in hand, the reader's and the allocator's share).
    assert!(
        rss_stalled < rss_before + 64 * 1024,
        "the relay buffered for the stalled client: {rss_before} -> {rss_stalled} KiB"
    );
    // The budget, plus the one message that may always go through an empty queue and the one being written out.
    let bound = (BUDGET + 2 * (NOTE_BYTES + 1024)) as f64;
    assert!(queued <= bound, "{queued} bytes queued for one client, over {bound}:\n{exposition}");
    assert!(dropped >= 1.0, "what did not fit was not counted:\n{exposition}");
    drop(stalled);
    gateway.shutdown().await;
}
