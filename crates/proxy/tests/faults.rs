//! The relay survives faulty upstreams and faulty clients: an in-process gateway in front of `misbehave.py`
//! upstreams that crash, hang, flood stdout, answer malformed JSON or wrong ids, or send 100 MB results, and
//! clients that send garbage, cancel calls or call at the same time.
//!
//! Each test asserts what the client and the fixture saw (the fixture logs every message it read when
//! `MISBEHAVE_LOG` names a file). Waits are hang guards only; no test asserts how long something took.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use toolgate_proxy::Gateway;
use toolgate_proxy::session::ClientBound;
use toolgate_proxy::upstreams::UpstreamStatus;
use toolgate_spec::Limits;

use support::{Client, FixtureLog, GUARD, memory_kib, start, status_of, text_of, tool_error, upstream};
use toolgate_spec::UpstreamSpec;

const SHORT: Duration = Duration::from_secs(2);

/// Watches an upstream's status for a down state followed by a ready one.
#[derive(Default)]
struct DownThenReady {
    down_reason: Option<String>,
}

impl DownThenReady {
    /// Looks at the status once; returns the down reason once the upstream was seen down and then ready.
    fn seen(&mut self, gateway: &toolgate_proxy::Gateway, name: &str) -> Option<String> {
        match (status_of(gateway, name), &self.down_reason) {
            (UpstreamStatus::Down { reason, .. }, None) => self.down_reason = Some(reason),
            (UpstreamStatus::Ready { .. }, Some(reason)) => return Some(reason.clone()),
            _ => {}
        }
        None
    }

    /// Polls until down then ready, within the hang guard.
    async fn wait(mut self, gateway: &toolgate_proxy::Gateway, name: &str) -> String {
        let deadline = tokio::time::Instant::now() + GUARD;
        loop {
            if let Some(reason) = self.seen(gateway, name) {
                return reason;
            }
            assert!(tokio::time::Instant::now() < deadline, "{name} not seen down then ready: {:?}", gateway.status());
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_mid_call_fails_the_call_clearly_and_the_upstream_comes_back_while_another_keeps_answering() {
    // A long request timeout: the answer must come from the crash, not from the timeout.
    let crash = upstream("crash", "crash-mid-call", Duration::from_secs(120), None);
    let steady = upstream("steady", "tool-faults", SHORT, None);
    let gateway = start(vec![crash, steady], Limits::default()).await;
    let mut client = Client::connect(&gateway).await;
    let mut other = Client::connect(&gateway).await;

    let response = client.call(json!(1), "crash_slow_operation", json!({})).await;
    let text = tool_error(&response);
    assert!(text.contains("`crash`"), "the error names the upstream: {text}");
    assert!(text.contains("exited"), "the error says the upstream exited: {text}");
    assert!(!text.contains("no answer"), "the crash is reported, not a timeout: {text}");

    // Until the crashed upstream is back, the other one answers every call.
    let mut watch = DownThenReady::default();
    let deadline = tokio::time::Instant::now() + GUARD;
    let mut steady_calls = 0u64;
    let reason = loop {
        if let Some(reason) = watch.seen(&gateway, "crash") {
            break reason;
        }
        assert!(tokio::time::Instant::now() < deadline, "crash not seen down then ready: {:?}", gateway.status());
        steady_calls += 1;
        let text = format!("still here {steady_calls}");
        let response = other.call(json!(steady_calls), "steady_echo", json!({"text": text})).await;
        assert_eq!(text_of(&response), text, "the other upstream keeps answering");
        assert!(matches!(status_of(&gateway, "steady"), UpstreamStatus::Ready { .. }));
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert!(reason.contains("exited"), "the down status says why: {reason}");
    assert!(steady_calls > 0);

    // Reconnected: its tool is listed again and it serves (here: crashes again, reported the same way).
    let list = client.request(json!(2), "tools/list", json!({})).await;
    let names: Vec<&str> =
        list["result"]["tools"].as_array().unwrap().iter().filter_map(|t| t["name"].as_str()).collect();
    assert!(names.contains(&"crash_slow_operation") && names.contains(&"steady_echo"), "{names:?}");
    let again = client.call(json!(3), "crash_slow_operation", json!({})).await;
    assert!(tool_error(&again).contains("exited"));
    gateway.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hanging_call_times_out_as_a_tool_error_and_is_cancelled_upstream() {
    let log = FixtureLog::new();
    let gateway = start(vec![upstream("faulty", "tool-faults", SHORT, Some(&log.path))], Limits::default()).await;
    let mut client = Client::connect(&gateway).await;

    let response = client.call(json!("hang-1"), "faulty_hang", json!({"text": "hang"})).await;
    let text = tool_error(&response);
    assert!(text.contains("`faulty`") && text.contains("no answer to `tools/call`"), "{text}");

    let upstream_id = log.call_id("hang", "hang").await;
    assert!(upstream_id.is_u64(), "toolgate allocates its own ids upstream: {upstream_id}");
    let cancelled = log
        .wait_for("notifications/cancelled for the hung call", |entry| {
            entry["method"] == "notifications/cancelled" && entry["params"]["requestId"] == upstream_id
        })
        .await;
    assert!(cancelled["params"]["reason"].as_str().unwrap_or_default().contains("timed out"), "{cancelled}");

    // The session and the upstream still work.
    let echo = client.call(json!("after"), "faulty_echo", json!({"text": "fine"})).await;
    assert_eq!(text_of(&echo), "fine");
    gateway.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stdout_flood_neither_stalls_the_call_nor_reaches_the_client_nor_grows_memory() {
    const LINES: u64 = 100_000;
    let gateway =
        start(vec![upstream("faulty", "tool-faults", Duration::from_secs(60), None)], Limits::default()).await;
    let mut client = Client::connect(&gateway).await;
    client.drain();
    client.stash.clear();
    let _memory = support::MEMORY_TESTS.lock().await;
    support::reset_peak_memory();
    let (rss_before, _) = memory_kib();

    // About 50 MB of non-JSON text, then about 10 MB of valid notifications no session asked for.
    for (id, kind, lines) in [(1, "garbage", 10 * LINES), (2, "notifications", LINES)] {
        let response = client.call(json!(id), "faulty_flood", json!({"lines": lines, "kind": kind})).await;
        assert_eq!(text_of(&response), format!("flooded {lines}"), "{kind}: {response}");
    }
    // Nothing of the flood was relayed: unroutable progress and unknown notifications are dropped.
    tokio::time::sleep(Duration::from_millis(200)).await;
    client.drain();
    assert!(client.stash.is_empty(), "the client got flood traffic: {:?}", client.stash.first());

    let (rss_after, peak) = memory_kib();
    eprintln!("stdout flood of 11x{LINES} lines: VmRSS {rss_before} KiB -> {rss_after} KiB, peak {peak} KiB");
    assert!(peak < rss_before + 32 * 1024, "the relay held the flood: {rss_before} KiB -> peak {peak} KiB");
    gateway.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_and_misaddressed_answers_time_out_without_hurting_other_sessions() {
    let gateway = start(vec![upstream("faulty", "tool-faults", SHORT, None)], Limits::default()).await;
    let mut malformed = Client::connect(&gateway).await;
    let mut misaddressed = Client::connect(&gateway).await;
    let mut bystander = Client::connect(&gateway).await;

    malformed.send(json!(1), "tools/call", json!({"name": "faulty_malformed", "arguments": {}}));
    misaddressed.send(json!(1), "tools/call", json!({"name": "faulty_wrong_id", "arguments": {}}));
    let echo = bystander.call(json!(1), "faulty_echo", json!({"text": "unaffected"})).await;
    assert_eq!(text_of(&echo), "unaffected");

    let one = json!(1);
    let (bad_json, wrong_id) = tokio::join!(malformed.response(&one), misaddressed.response(&one));
    let bad_json = tool_error(&bad_json);
    assert!(bad_json.contains("no answer to `tools/call`"), "{bad_json}");
    assert!(bad_json.contains("not JSON-RPC"), "the timeout mentions the malformed output: {bad_json}");
    assert!(tool_error(&wrong_id).contains("no answer to `tools/call`"));

    for (n, client) in [&mut malformed, &mut misaddressed, &mut bystander].into_iter().enumerate() {
        let text = format!("session {n} still works");
        let response = client.call(json!(2), "faulty_echo", json!({"text": text})).await;
        assert_eq!(text_of(&response), text);
    }
    assert!(matches!(status_of(&gateway, "faulty"), UpstreamStatus::Ready { .. }));
    gateway.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_100_mb_result_is_refused_clearly_the_upstream_reconnects_and_memory_stays_bounded() {
    let limits = Limits::default();
    let limit = limits.max_message_bytes;
    let gateway = start(vec![upstream("faulty", "tool-faults", Duration::from_secs(120), None)], limits).await;
    let mut client = Client::connect(&gateway).await;
    let _memory = support::MEMORY_TESTS.lock().await;
    support::reset_peak_memory();
    let (rss_before, _) = memory_kib();

    let response = client.call(json!(1), "faulty_huge_result", json!({"mb": 100})).await;
    let text = tool_error(&response);
    assert!(text.contains("`faulty`"), "{text}");
    assert!(text.contains(&format!("larger than the {limit}-byte limit")), "{text}");
    let (rss_after, peak) = memory_kib();

    DownThenReady::default().wait(&gateway, "faulty").await;
    let echo = client.call(json!(2), "faulty_echo", json!({"text": "back"})).await;
    assert_eq!(text_of(&echo), "back");
    eprintln!("100 MB result, {limit}-byte limit: VmRSS {rss_before} KiB -> {rss_after} KiB, peak {peak} KiB");
    // The line is never held whole: the peak stays near the limit (16 MiB), far below the 100 MB sent.
    assert!(peak < rss_before + 64 * 1024, "the relay held the huge line: {rss_before} KiB -> peak {peak} KiB");
    gateway.shutdown().await;
}

/// A client on the stdio downstream transport, over an in-memory pipe.
struct StdioClient {
    lines: tokio::io::Lines<BufReader<tokio::io::ReadHalf<tokio::io::DuplexStream>>>,
    writer: tokio::io::WriteHalf<tokio::io::DuplexStream>,
    served: tokio::task::JoinHandle<()>,
}

impl StdioClient {
    fn serve(gateway: &toolgate_proxy::Gateway, max_message_bytes: usize) -> StdioClient {
        let (client_side, server_side) = tokio::io::duplex(1 << 20);
        let (server_read, server_write) = tokio::io::split(server_side);
        let factory: Arc<dyn toolgate_proxy::session::SessionFactory> = Arc::new(gateway.clone());
        let served = tokio::spawn(toolgate_proxy::downstream::stdio::serve(
            factory,
            toolgate_proxy::session::Caller::anonymous(),
            server_read,
            server_write,
            max_message_bytes,
        ));
        let (client_read, writer) = tokio::io::split(client_side);
        StdioClient { lines: BufReader::new(client_read).lines(), writer, served }
    }

    /// Writes one raw line and returns the next line the gateway writes, parsed.
    async fn exchange(&mut self, line: &str) -> Value {
        self.writer.write_all(line.as_bytes()).await.unwrap();
        self.writer.write_all(b"\n").await.unwrap();
        self.writer.flush().await.unwrap();
        let answer = tokio::time::timeout(GUARD, self.lines.next_line())
            .await
            .unwrap_or_else(|_| panic!("no answer to {:.80} within the hang guard", line))
            .unwrap()
            .unwrap_or_else(|| panic!("the session ended after {:.80}", line));
        serde_json::from_str(&answer).unwrap()
    }
}

fn error_code(response: &Value) -> i64 {
    response["error"]["code"].as_i64().unwrap_or_else(|| panic!("expected a JSON-RPC error: {response}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_client_messages_get_json_rpc_errors_and_the_session_goes_on() {
    let gateway = start(vec![upstream("faulty", "tool-faults", SHORT, None)], Limits::default()).await;
    let mut client = StdioClient::serve(&gateway, 64 * 1024);
    let init = client
        .exchange(r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t"}}}"#)
        .await;
    assert!(init["result"]["protocolVersion"].is_string(), "{init}");

    let parse = client.exchange(r#"{"jsonrpc":"2.0","id":2,"method":"#).await;
    assert_eq!((error_code(&parse), &parse["id"]), (-32700, &Value::Null), "{parse}");
    let batch = client.exchange(r#"[{"jsonrpc":"2.0","id":3,"method":"ping"}]"#).await;
    assert_eq!(error_code(&batch), -32600, "{batch}");
    let no_version = client.exchange(r#"{"id":4,"method":"ping"}"#).await;
    assert_eq!((error_code(&no_version), &no_version["id"]), (-32600, &json!(4)), "{no_version}");
    let unknown_method = client.exchange(r#"{"jsonrpc":"2.0","id":5,"method":"tools/explode"}"#).await;
    assert_eq!((error_code(&unknown_method), &unknown_method["id"]), (-32601, &json!(5)), "{unknown_method}");
    // An unknown tool is answered like the SDKs answer it (an `isError` result the model can read); a call
    // without a tool name is malformed (-32602).
    let unknown_tool = client
        .exchange(r#"{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"faulty_nope","arguments":{}}}"#)
        .await;
    assert_eq!((tool_error(&unknown_tool).as_str(), &unknown_tool["id"]), ("Unknown tool: faulty_nope", &json!(6)));
    let nameless =
        client.exchange(r#"{"jsonrpc":"2.0","id":"n","method":"tools/call","params":{"arguments":{}}}"#).await;
    assert_eq!((error_code(&nameless), &nameless["id"]), (-32602, &json!("n")), "{nameless}");

    let call = client
        .exchange(r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"faulty_echo","arguments":{"text":"ok"}}}"#)
        .await;
    assert_eq!((text_of(&call), &call["id"]), ("ok", &json!(7)));
    assert!(!client.served.is_finished(), "the session is still being served");
    gateway.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_cancel_reaches_the_upstream_with_its_id_and_the_late_answer_is_dropped() {
    let (log, gateway) = logged_tool_faults(Duration::from_secs(60)).await;
    let mut client = Client::connect(&gateway).await;

    // The fixture answers after 1.5 s even when cancelled: the relay must drop that late answer.
    let client_id = json!("client-call-1");
    client.send(
        client_id.clone(),
        "tools/call",
        json!({"name": "faulty_echo", "arguments": {"text": "late", "delayMs": 1500}}),
    );
    let upstream_id = log.call_id("echo", "late").await;
    assert!(upstream_id.is_u64() && upstream_id != client_id, "toolgate's own id upstream: {upstream_id}");
    client.session.deliver(json!({
        "jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": {"requestId": client_id, "reason": "the user gave up"}
    }));

    let cancelled = log.wait_for("notifications/cancelled", |entry| entry["method"] == "notifications/cancelled").await;
    assert_eq!(cancelled["params"]["requestId"], upstream_id, "the upstream's id, not the client's: {cancelled}");
    assert_eq!(cancelled["params"]["reason"], "the user gave up");
    log.wait_for("the late answer being sent", |entry| entry["sent"] == upstream_id).await;

    // The fixture answers in order on one stdout: once this answer is through, the late one was read too.
    let after = client.call(json!("after"), "faulty_echo", json!({"text": "after"})).await;
    assert_eq!(text_of(&after), "after");
    client.drain();
    assert_eq!(client.stashed_responses(&client_id), 0, "a cancelled call got a response: {:?}", client.stash);
    gateway.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_sessions_get_their_own_results_and_only_their_own_progress() {
    let gateway =
        start(vec![upstream("faulty", "tool-faults", Duration::from_secs(60), None)], Limits::default()).await;
    let mut first = Client::connect(&gateway).await;
    let mut second = Client::connect(&gateway).await;

    // Same client ids and the same progress token in both sessions: the gateway must keep them apart.
    for (client, n) in [(&first, 1), (&second, 2)] {
        client.send(
            json!(7),
            "tools/call",
            json!({"name": "faulty_progress", "arguments": {"n": n, "delayMs": 300}, "_meta": {"progressToken": "tok"}}),
        );
        client.send(
            json!(8),
            "tools/call",
            json!({"name": "faulty_echo", "arguments": {"text": format!("echo {n}"), "delayMs": 200}}),
        );
    }
    let ((p1, e1), (p2, e2)) =
        tokio::join!(async { (first.response(&json!(7)).await, first.response(&json!(8)).await) }, async {
            (second.response(&json!(7)).await, second.response(&json!(8)).await)
        },);
    assert_eq!((text_of(&p1), text_of(&e1)), ("done 1", "echo 1"));
    assert_eq!((text_of(&p2), text_of(&e2)), ("done 2", "echo 2"));

    for (client, n) in [(&mut first, 1), (&mut second, 2)] {
        tokio::time::sleep(Duration::from_millis(100)).await;
        client.drain();
        let progress: Vec<&ClientBound> = client
            .stash
            .iter()
            .filter(|bound| matches!(bound, ClientBound::Related { message, .. } | ClientBound::Unsolicited(message) if message["method"] == "notifications/progress"))
            .collect();
        assert_eq!(progress.len(), 1, "session {n} got exactly its own progress: {:?}", client.stash);
        let ClientBound::Related { request_id, message } = progress[0] else {
            panic!("progress must belong to its request: {:?}", progress[0])
        };
        assert_eq!(request_id, &json!(7));
        assert_eq!(message["params"]["progressToken"], "tok", "the client's own token comes back: {message}");
        assert_eq!(message["params"]["progress"], json!(n), "session {n} got another session's progress: {message}");
    }
    gateway.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_stdio_session_ends_when_the_client_closes_its_input() {
    let gateway = start(vec![upstream("faulty", "tool-faults", SHORT, None)], Limits::default()).await;
    let mut client = StdioClient::serve(&gateway, 64 * 1024);
    let ping = client.exchange(r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#).await;
    assert_eq!(ping["result"], json!({}));
    assert_eq!(gateway.status().sessions, 1);

    client.writer.shutdown().await.unwrap();
    tokio::time::timeout(GUARD, &mut client.served).await.expect("serve returns after the client's EOF").unwrap();
    let rest = tokio::time::timeout(GUARD, client.lines.next_line()).await.expect("the output ends").unwrap();
    assert_eq!(rest, None, "nothing more is written and the output is closed");
    assert_eq!(gateway.status().sessions, 0, "the session is forgotten");
    gateway.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oversized_client_line_is_refused_and_the_session_goes_on() {
    let gateway = start(vec![upstream("faulty", "tool-faults", SHORT, None)], Limits::default()).await;
    let limit = 64 * 1024;
    let mut client = StdioClient::serve(&gateway, limit);

    let padding = "x".repeat(2 * limit);
    let oversized =
        client.exchange(&format!(r#"{{"jsonrpc":"2.0","id":1,"method":"ping","params":{{"pad":"{padding}"}}}}"#)).await;
    assert_eq!(error_code(&oversized), -32600, "{oversized}");
    assert!(oversized["error"]["message"].as_str().unwrap_or_default().contains(&limit.to_string()), "{oversized}");

    let ping = client.exchange(r#"{"jsonrpc":"2.0","id":2,"method":"ping"}"#).await;
    assert_eq!((&ping["id"], &ping["result"]), (&json!(2), &json!({})), "{ping}");
    let call = client
        .exchange(r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"faulty_echo","arguments":{"text":"ok"}}}"#)
        .await;
    assert_eq!(text_of(&call), "ok");
    gateway.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closing_a_session_cancels_its_calls_upstream() {
    let (log, gateway) = logged_tool_faults(Duration::from_secs(60)).await;
    let client = Client::connect(&gateway).await;
    client.send(json!(1), "tools/call", json!({"name": "faulty_hang", "arguments": {"text": "orphan"}}));
    let upstream_id = log.call_id("hang", "orphan").await;

    client.session.close();
    log.wait_for("notifications/cancelled for the closed session's call", |entry| {
        entry["method"] == "notifications/cancelled" && entry["params"]["requestId"] == upstream_id
    })
    .await;
    gateway.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelled_calls_leave_no_route_behind_so_later_logs_reach_only_their_caller() {
    let (log, gateway) = logged_tool_faults(Duration::from_secs(60)).await;
    let mut canceller = Client::connect(&gateway).await;
    let mut caller = Client::connect(&gateway).await;

    // Several cancels, so a route left behind by any one of them shows below.
    for n in 0..8 {
        let text = format!("cancel me {n}");
        canceller.send(json!(n), "tools/call", json!({"name": "faulty_hang", "arguments": {"text": text}}));
        let upstream_id = log.call_id("hang", &text).await;
        canceller
            .session
            .deliver(json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": n}}));
        log.wait_for("the cancel", |entry| {
            entry["method"] == "notifications/cancelled" && entry["params"]["requestId"] == upstream_id
        })
        .await;
    }

    let response = caller.call(json!("log-1"), "faulty_log", json!({"text": "for the caller only"})).await;
    assert_eq!(text_of(&response), "logged");
    tokio::time::sleep(Duration::from_millis(200)).await;
    caller.drain();
    canceller.drain();
    let is_log = |message: &Value| message["params"]["data"] == "for the caller only";
    let leaked: Vec<&ClientBound> = canceller
        .stash
        .iter()
        .filter(|bound| matches!(bound, ClientBound::Related { message, .. } | ClientBound::Unsolicited(message) if is_log(message)))
        .collect();
    assert!(leaked.is_empty(), "another session's log line reached the canceller: {leaked:?}");
    let mine = caller.stash.iter().find(|bound| matches!(bound, ClientBound::Related { message, .. } | ClientBound::Unsolicited(message) if is_log(message)));
    assert!(
        matches!(mine, Some(ClientBound::Related { request_id, .. }) if request_id == "log-1"),
        "the log line belongs to the caller's request: {mine:?}"
    );
    gateway.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_log_flood_toward_a_client_that_is_not_reading_is_not_buffered_without_bound() {
    const LINES: u64 = 100_000;
    let (log, gateway) = logged_tool_faults(Duration::from_secs(120)).await;
    let mut client = Client::connect(&gateway).await;
    client.drain();
    client.stash.clear();
    let _memory = support::MEMORY_TESTS.lock().await;
    support::reset_peak_memory();
    let (rss_before, _) = memory_kib();

    client.send(
        json!(1),
        "tools/call",
        json!({"name": "faulty_flood", "arguments": {"lines": LINES, "kind": "logs", "text": "logs"}}),
    );
    let upstream_id = log.call_id("flood", "logs").await;
    // The client reads nothing while the upstream floods; give the relay time to take in what it will take in.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while tokio::time::Instant::now() < deadline && !log.entries().iter().any(|entry| entry["sent"] == upstream_id) {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (rss_stalled, _) = memory_kib();

    let mut relayed = 0u64;
    let response = loop {
        match tokio::time::timeout(GUARD, client_recv(&mut client)).await.expect("the call ends") {
            ClientBound::Response { message, .. } => break message,
            _ => relayed += 1,
        }
    };
    assert_eq!(text_of(&response), format!("flooded {LINES}"));
    let (rss_after, hwm) = memory_kib();
    eprintln!(
        "log flood of {LINES} lines to a stalled client: VmRSS {rss_before} KiB -> {rss_stalled} KiB stalled -> {rss_after} KiB, VmHWM {hwm} KiB; {relayed} relayed"
    );
    assert!(rss_stalled < rss_before + 64 * 1024, "the relay buffered the flood: {rss_before} -> {rss_stalled} KiB");
    gateway.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstream_that_withdraws_its_elicitation_is_relayed_and_the_late_answer_is_dropped() {
    let (log, gateway) = logged_tool_faults(GUARD).await;
    let mut client = Client::connect_with(&gateway, support::Elicit::Hold).await;
    let response = client.call(json!("q"), "faulty_ask_then_cancel", json!({"delayMs": 300})).await;
    assert_eq!(text_of(&response), "withdrew the question");

    // The client saw the question under toolgate's id, then its cancellation with the same id (which may come
    // after the tool's answer: the two travel separately).
    let question = client.elicitations.first().cloned().expect("the question reached the client");
    let ours = question["id"].clone();
    assert!(ours.as_str().is_some_and(|id| id.starts_with("toolgate-")), "toolgate's own id: {question}");
    wait_for_cancel_of(&mut client, &ours).await;

    // An answer after the cancel is dropped: the upstream never reads a response to its withdrawn request.
    client.session.deliver(json!({"jsonrpc": "2.0", "id": ours, "result": {"action": "accept", "content": {}}}));
    let after = client.call(json!("after"), "faulty_echo", json!({"text": "still fine"})).await;
    assert_eq!(text_of(&after), "still fine");
    let answered = log.entries().iter().any(|entry| entry.get("result").is_some());
    assert!(!answered, "a late answer reached the upstream: {:?}", log.entries());

    // Withdrawn at once (before toolgate could relay it): never answered either, and never left open at the client.
    let quick = client.call(json!("quick"), "faulty_ask_then_cancel", json!({"delayMs": 0})).await;
    assert_eq!(text_of(&quick), "withdrew the question");
    for question in client.elicitations.clone().iter().skip(1) {
        wait_for_cancel_of(&mut client, &question["id"]).await;
    }
    let answered = log.entries().iter().any(|entry| entry.get("result").is_some() || entry.get("error").is_some());
    assert!(!answered, "the upstream got an answer to a withdrawn question: {:?}", log.entries());
    gateway.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_result_beyond_the_text_limit_reaches_the_client_cut_flagged_and_explained() {
    let (_log, gateway) = logged_tool_faults(GUARD).await;
    let mut client = Client::connect(&gateway).await;
    let response = client.call(json!("big"), "faulty_huge_result", json!({"mb": 1})).await;
    let result = &response["result"];
    let content = result["content"].as_array().expect("content");
    let limit = toolgate_spec::ResultSpec::default().max_text_chars;
    assert_eq!(content[0]["text"].as_str().map(str::len), Some(limit), "the text is cut to the limit");
    let notice = content.last().and_then(|item| item["text"].as_str()).unwrap_or_default();
    assert!(notice.contains("Ask for less"), "the model is told how to ask for less: {notice}");
    assert_eq!(result["_meta"]["toolgate/truncated"], json!({"originalChars": 1024 * 1024, "keptChars": limit}));
    gateway.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn roots_asked_outside_a_call_come_from_the_only_client_and_from_nobody_when_there_are_several() {
    let (log, gateway) = logged_tool_faults(GUARD).await;
    let roots = json!({"roots": {"listChanged": true}});
    let mut client = Client::connect_declaring(&gateway, support::Elicit::None, roots.clone()).await;

    // The client's roots changed: the upstream asks again, outside any call, and the only client answers.
    client.session.deliver(json!({"jsonrpc": "2.0", "method": "notifications/roots/list_changed"}));
    let request = loop {
        let asked = client.stash.iter().find_map(|bound| match bound {
            ClientBound::Unsolicited(message) if message["method"] == "roots/list" => Some(message.clone()),
            _ => None,
        });
        if let Some(request) = asked {
            break request;
        }
        assert!(client.receive_one(GUARD).await, "roots/list never reached the client: {}", client.everything());
    };
    let mine = json!({"roots": [{"uri": "file:///work/project", "name": "project"}]});
    client.session.deliver(json!({"jsonrpc": "2.0", "id": request["id"], "result": mine}));
    let answer = log.wait_for("the client's roots", |entry| entry["id"] == "roots-1").await;
    assert_eq!(answer["result"], mine, "the upstream gets the client's roots");

    // With two clients there is no single answer: the upstream is told of no roots, and neither client is asked.
    let other = Client::connect_declaring(&gateway, support::Elicit::None, roots).await;
    other.session.deliver(json!({"jsonrpc": "2.0", "method": "notifications/roots/list_changed"}));
    let answer = log.wait_for("an answer with two clients", |entry| entry["id"] == "roots-2").await;
    assert_eq!(answer["result"], json!({"roots": []}));
    gateway.shutdown().await;
}

/// Waits (within the hang guard) until the client has received `notifications/cancelled` for its request `id`.
async fn wait_for_cancel_of(client: &mut Client, id: &Value) {
    let cancelled = |client: &Client| {
        client.all.iter().any(|bound| {
            matches!(bound, ClientBound::Related { message, .. } | ClientBound::Unsolicited(message)
                if message["method"] == "notifications/cancelled" && message["params"]["requestId"] == *id)
        })
    };
    while !cancelled(client) {
        assert!(
            client.receive_one(GUARD).await,
            "the client is never told {id} was withdrawn: {}",
            client.everything()
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closing_an_upstream_that_ignores_its_stdin_and_sigterm_ends_with_sigkill() {
    let log = FixtureLog::new();
    let spec = upstream("stubborn", "stubborn", SHORT, Some(&log.path));
    let options = toolgate_upstream::ConnectOptions { name: "stubborn".into(), ..Default::default() };
    let connection = toolgate_upstream::Connection::connect(&spec.endpoint, options).await.unwrap();
    let started = log.wait_for("the fixture's pid", |entry| entry.get("pid").is_some()).await;
    let pid = started["pid"].as_u64().unwrap();

    // close: stdin first, then SIGTERM, then SIGKILL, each after a grace period; it returns once the child is gone.
    connection.close().await;
    let steps: Vec<Value> = log
        .entries()
        .into_iter()
        .filter(|entry| entry.get("stdin").is_some() || entry.get("signal").is_some())
        .collect();
    assert_eq!(steps, [json!({"stdin": "closed"}), json!({"signal": "SIGTERM"})], "the polite steps came first");
    assert!(!std::path::Path::new(&format!("/proc/{pid}")).exists(), "the stubborn child {pid} is gone");
}

/// How many `tools/call` of `tool` the fixture has read.
fn calls_of(log: &FixtureLog, tool: &str) -> usize {
    log.entries().iter().filter(|entry| entry["method"] == "tools/call" && entry["params"]["name"] == tool).count()
}

/// A `crash-once` fixture exposed as `name`, keeping its crash markers in `state`.
fn crash_once(name: &str, request_timeout: Duration, log: &FixtureLog, state: &std::path::Path) -> UpstreamSpec {
    let mut spec = upstream(name, "crash-once", request_timeout, Some(&log.path));
    if let toolgate_upstream::Endpoint::Stdio { env, .. } = &mut spec.endpoint {
        env.push(("MISBEHAVE_STATE".to_owned(), state.to_string_lossy().into_owned()));
    }
    spec
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_is_retried_after_its_upstream_crashed_and_a_write_or_a_timed_out_read_is_not() {
    let (log, slow_log) = (FixtureLog::new(), FixtureLog::new());
    let (state, slow_state) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let once = crash_once("once", GUARD, &log, state.path());
    let slow = crash_once("slow", SHORT, &slow_log, slow_state.path());
    let guardrails = toolgate_spec::GuardrailSpec {
        policy: toolgate_core::policy::PolicySpec::permissive(),
        // Enough attempts to outlast the upstream's restart.
        retries: toolgate_spec::RetrySpec { max_attempts: 10, initial_backoff: Duration::from_millis(100) },
        ..Default::default()
    };
    let gateway = support::start_guarded(vec![once, slow], guardrails, None).await;
    let mut client = Client::connect(&gateway).await;

    // The first call crashes the upstream; the read is tried again once it is back, and answered.
    let read = client.call(json!(1), "once_read_records", json!({})).await;
    assert_eq!(text_of(&read), "called read_records", "{read}");
    assert_eq!(calls_of(&log, "read_records"), 2, "one crashed attempt, one answered: {:?}", log.entries());

    // A write that is not idempotent is never repeated: its crash is the client's answer.
    let write = client.call(json!(2), "once_append_entry", json!({})).await;
    let text = tool_error(&write);
    assert!(text.contains("`once`") && text.contains("exited"), "{text}");
    DownThenReady::default().wait(&gateway, "once").await;
    assert_eq!(calls_of(&log, "append_entry"), 1, "the write was sent once: {:?}", log.entries());

    // A read that times out used the call's whole time (the upstream's request timeout): it is not tried again.
    let timed_out = client.call(json!(3), "slow_fetch_records", json!({})).await;
    assert!(tool_error(&timed_out).contains("no answer"), "{timed_out}");
    assert_eq!(calls_of(&slow_log, "fetch_records"), 1, "no retry after a timeout: {:?}", slow_log.entries());
    gateway.shutdown().await;
}

async fn client_recv(client: &mut Client) -> ClientBound {
    loop {
        if !client.stash.is_empty() {
            return client.stash.remove(0);
        }
        assert!(client.receive_one(GUARD).await, "a message within the hang guard");
    }
}

/// A gateway in front of one `tool-faults` fixture (exposed as `faulty`) that logs what it receives.
async fn logged_tool_faults(request_timeout: Duration) -> (FixtureLog, Gateway) {
    let log = FixtureLog::new();
    let gateway =
        start(vec![upstream("faulty", "tool-faults", request_timeout, Some(&log.path))], Limits::default()).await;
    (log, gateway)
}
