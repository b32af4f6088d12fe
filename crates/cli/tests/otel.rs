//! OpenTelemetry export (built only with `--features otel`): `toolgate serve` with `OTEL_EXPORTER_OTLP_ENDPOINT`
//! sends its per-request spans over OTLP/HTTP to a collector on loopback. The collector here is a minimal HTTP
//! endpoint that answers `200` and keeps each POST; the spans are protobuf, whose strings are plain bytes, so the
//! test looks for the span's name, its `method` value and the service name in what arrived.
//!
//! Loopback only; every wait is a hang guard, never a timing assertion.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::TcpListener;
use std::sync::mpsc;

use serde_json::json;

use toolgate_test_support::HANG_GUARD;
use toolgate_test_support::toolgate::raw_http::HttpSession;
use toolgate_test_support::toolgate::{Setup, start_serve};

/// One POST the collector received: its path, content type and body.
struct Export {
    path: String,
    content_type: String,
    body: Vec<u8>,
}

/// Accepts OTLP/HTTP exports on loopback until the test ends, sending each to the returned channel.
fn collector() -> (String, mpsc::Receiver<Export>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let endpoint = format!("http://{}", listener.local_addr().unwrap());
    let (sender, receiver) = mpsc::channel();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut request_line = String::new();
            reader.read_line(&mut request_line).unwrap_or_default();
            let path = request_line.split(' ').nth(1).unwrap_or_default().to_owned();
            let (mut length, mut content_type) = (0, String::new());
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or_default() == 0 || line.trim().is_empty() {
                    break;
                }
                if let Some((name, value)) = line.split_once(':') {
                    match name.trim().to_ascii_lowercase().as_str() {
                        "content-length" => length = value.trim().parse().unwrap_or_default(),
                        "content-type" => content_type = value.trim().to_owned(),
                        _ => {}
                    }
                }
            }
            let mut body = vec![0; length];
            reader.read_exact(&mut body).unwrap_or_default();
            let _ = stream.write_all(b"HTTP/1.1 200 OK\r\nContent-Type: application/x-protobuf\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
            if sender.send(Export { path, content_type, body }).is_err() {
                return;
            }
        }
    });
    (endpoint, receiver)
}

fn contains(haystack: &[u8], needle: &str) -> bool {
    haystack.windows(needle.len()).any(|window| window == needle.as_bytes())
}

#[test]
fn serve_exports_its_request_spans_over_otlp_http() {
    let (endpoint, exports) = collector();
    let setup = Setup::demo("");
    let serve = start_serve(&setup, &[("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint), ("OTEL_BSP_SCHEDULE_DELAY", "100")]);
    let mut session = HttpSession::open(&serve.authority, &[]).unwrap();
    let listed = session.request("tools/call", json!({"name": "list_notes", "arguments": {}})).unwrap();
    assert!(listed["result"].is_object(), "{listed}");

    let started = std::time::Instant::now();
    let export = loop {
        let left = HANG_GUARD.saturating_sub(started.elapsed());
        let Ok(export) = exports.recv_timeout(left) else {
            panic!("no span with tools/call reached the collector; toolgate's log:\n{}", serve.stderr_text());
        };
        if contains(&export.body, "tools/call") {
            break export;
        }
    };
    assert_eq!(export.path, "/v1/traces");
    assert_eq!(export.content_type, "application/x-protobuf");
    assert!(contains(&export.body, "request"), "the span's name");
    assert!(contains(&export.body, "method"), "the span's method field");
    assert!(contains(&export.body, "service.name") && contains(&export.body, "toolgate"), "the service");
    assert!(contains(&export.body, &session.id), "the session the request belongs to");
    // The transport-independent span of the call carries what the gateway decided and how it ended.
    assert!(contains(&export.body, "mcp.request"), "the per-request span of the relay");
    for (field, value) in [("tool", "list_notes"), ("upstream", "demo"), ("verdict", "allow"), ("outcome", "ok")] {
        assert!(contains(&export.body, field) && contains(&export.body, value), "the call's {field} ({value})");
    }
}
