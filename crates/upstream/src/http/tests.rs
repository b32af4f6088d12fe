//! Tests of the Streamable HTTP transport against scripted loopback servers: redirects, the direct path, and when
//! a connection ends by itself (a session the server forgot, a server that cannot be reached, a GET stream that
//! cannot be reopened) so that whoever runs it can start a new session.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use super::test_server::{Reply, Request, TestServer, handshake};
use super::{GET_STREAM_ATTEMPTS, UNREACHABLE_POSTS_TO_END};
use crate::Endpoint;
use crate::connection::Connection;
use crate::endpoint::ConnectOptions;
use crate::error::UpstreamError;
use crate::events::{EventSink, Responder};

type TestResult = Result<(), Box<dyn std::error::Error>>;

/// Records what a connection tells its runner: notifications, and the reason it ended.
#[derive(Default)]
struct Recorder {
    notifications: Mutex<Vec<Value>>,
    ended: Mutex<Vec<UpstreamError>>,
}

impl Recorder {
    fn notification_count(&self) -> usize {
        self.notifications.lock().map(|notifications| notifications.len()).unwrap_or_default()
    }

    fn ended(&self) -> Vec<UpstreamError> {
        self.ended.lock().map(|ended| ended.clone()).unwrap_or_default()
    }
}

impl EventSink for Recorder {
    fn notification(&self, message: Value, _related: Option<u64>) {
        if let Ok(mut notifications) = self.notifications.lock() {
            notifications.push(message);
        }
    }

    fn request(&self, _message: Value, _related: Option<u64>, _responder: Responder) {}

    fn ended(&self, error: UpstreamError) {
        if let Ok(mut ended) = self.ended.lock() {
            ended.push(error);
        }
    }
}

/// Connects to `server` with a recorder as the event sink and a long request timeout, so that a request failing
/// quickly is the transport's doing.
async fn connect(server: &TestServer) -> Result<(Connection, Arc<Recorder>), UpstreamError> {
    let recorder = Arc::new(Recorder::default());
    let options = ConnectOptions {
        request_timeout: Duration::from_secs(60),
        events: Some(Arc::clone(&recorder) as Arc<dyn EventSink>),
        ..ConnectOptions::default()
    };
    let connection = Connection::connect(&Endpoint::http(server.url.clone()), options).await?;
    Ok((connection, recorder))
}

/// Polls `condition` every 20 ms for up to `within`.
async fn eventually(within: Duration, condition: impl Fn() -> bool) -> bool {
    let deadline = tokio::time::Instant::now() + within;
    while tokio::time::Instant::now() < deadline {
        if condition() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    condition()
}

fn says_session_is_unknown(error: &UpstreamError) -> bool {
    matches!(error, UpstreamError::Closed { detail } if detail.contains("no longer knows this session"))
}

/// A server that redirects the initialize POST elsewhere: toolgate refuses with the status and never sends the
/// configured header (an upstream's credential) to the redirect target.
#[tokio::test]
async fn a_redirect_is_refused_and_never_followed() -> TestResult {
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

/// A bare server: JSON answers only, no GET stream, an empty `tools` result for any request.
fn minimal(request: &Request) -> Reply {
    handshake(request).unwrap_or_else(|| match request.verb.as_str() {
        "GET" => Reply::status(405),
        _ => Reply::result(request, json!({"tools": []})),
    })
}

/// Requests after the handshake take the direct path (posted from the caller, answered from the POST task); after
/// `close` a request fails at once instead of being posted to a session that was just deleted.
#[tokio::test]
async fn requests_are_answered_directly_and_refused_after_close() -> TestResult {
    let server = TestServer::start(minimal).await?;
    let (connection, recorder) = connect(&server).await?;
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
    let seen = server.seen();
    let lists = seen.iter().filter(|line| *line == "POST tools/list").count();
    assert_eq!(lists, 3, "nothing is posted after close: {seen:?}");
    assert_eq!(seen.first().map(String::as_str), Some("POST initialize"), "{seen:?}");
    assert!(seen.iter().any(|line| line == "DELETE"), "the session is deleted: {seen:?}");
    assert!(recorder.ended().is_empty(), "a polite close is not reported as an end: {:?}", recorder.ended());
    Ok(())
}

/// A server that restarted answers 404 to the old session id: the request that met it fails with that status, a
/// request still waiting fails at once with the reason (not after its timeout), the runner is told, and later
/// requests are refused without being posted, so the runner starts a new session.
#[tokio::test]
async fn a_404_to_the_session_ends_the_connection_and_fails_waiting_requests() -> TestResult {
    let server = TestServer::start(|request| {
        handshake(request).unwrap_or_else(|| match (request.verb.as_str(), request.method.as_str()) {
            ("GET", _) => Reply::status(405),
            ("POST", "tools/call") => Reply::Silence,
            _ => Reply::Json {
                status: 404,
                body: json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32001, "message": "Session not found"}}),
                session: None,
            },
        })
    })
    .await?;
    let (connection, recorder) = connect(&server).await?;
    let waiting = connection.begin_request("tools/call", Some(json!({"name": "slow"}))).await?;
    assert!(eventually(Duration::from_secs(5), || server.seen().iter().any(|line| line == "POST tools/call")).await);

    let refused = connection.request("tools/list", None).await;
    assert!(matches!(&refused, Err(UpstreamError::HttpStatus { status: 404, .. })), "{refused:?}");
    let waited = tokio::time::timeout(Duration::from_secs(5), connection.wait(waiting, Duration::from_secs(60))).await;
    match waited {
        Ok(Err(error)) => assert!(says_session_is_unknown(&error), "the waiting request's error: {error}"),
        Ok(Ok(answer)) => return Err(format!("the waiting request was answered: {answer}").into()),
        Err(_) => return Err("the waiting request still waits after the session was gone".into()),
    }
    let ended = connection.ended();
    assert!(ended.as_ref().is_some_and(says_session_is_unknown), "{ended:?}");
    assert!(eventually(Duration::from_secs(5), || recorder.ended().len() == 1).await);
    assert!(says_session_is_unknown(&recorder.ended()[0]), "{:?}", recorder.ended());

    let posted = server.seen().len();
    let later = connection.request("tools/list", None).await;
    assert!(later.as_ref().is_err_and(says_session_is_unknown), "{later:?}");
    assert_eq!(server.seen().len(), posted, "nothing is posted to a forgotten session: {:?}", server.seen());
    connection.close().await;
    Ok(())
}

/// Without a session id a 404 is just that request's failure: the connection carries on.
#[tokio::test]
async fn a_404_without_a_session_fails_only_its_request() -> TestResult {
    let server = TestServer::start(|request| match (request.verb.as_str(), request.method.as_str()) {
        ("POST", "initialize") => {
            let result = json!({"protocolVersion": "2025-11-25", "capabilities": {}, "serverInfo": {"name": "t"}});
            Reply::result(request, result)
        }
        ("POST", "tools/call") => Reply::status(404),
        _ => minimal(request),
    })
    .await?;
    let (connection, recorder) = connect(&server).await?;
    let refused = connection.request("tools/call", Some(json!({"name": "x"}))).await;
    assert!(matches!(&refused, Err(UpstreamError::HttpStatus { status: 404, .. })), "{refused:?}");
    assert_eq!(connection.request("tools/list", None).await?, json!({"tools": []}));
    assert!(connection.ended().is_none());
    assert!(recorder.ended().is_empty(), "{:?}", recorder.ended());
    connection.close().await;
    Ok(())
}

/// A server that went away (connection refused) fails each request with its own error; after
/// `UNREACHABLE_POSTS_TO_END` in a row the connection ends, saying so, so the runner reconnects with backoff.
#[tokio::test]
async fn posts_that_cannot_reach_the_server_end_the_connection_after_a_few_in_a_row() -> TestResult {
    let server = TestServer::start(minimal).await?;
    let (connection, recorder) = connect(&server).await?;
    assert_eq!(connection.request("tools/list", None).await?, json!({"tools": []}));
    server.stop();
    for attempt in 1..=UNREACHABLE_POSTS_TO_END {
        assert!(connection.ended().is_none(), "ended before attempt {attempt}: {:?}", connection.ended());
        let failed = tokio::time::timeout(Duration::from_secs(15), connection.request("tools/list", None)).await?;
        assert!(matches!(&failed, Err(UpstreamError::Connect { .. })), "attempt {attempt}: {failed:?}");
    }
    assert!(eventually(Duration::from_secs(5), || connection.ended().is_some()).await);
    let ended = connection.ended();
    assert!(matches!(&ended, Some(UpstreamError::Connect { reason, .. }) if reason.contains("in a row")), "{ended:?}");
    assert_eq!(recorder.ended().len(), 1, "{:?}", recorder.ended());
    connection.close().await;
    Ok(())
}

/// A server that sends one event on its GET stream and closes it: the stream is reopened for as long as it keeps
/// delivering, not a fixed number of times over the connection's life.
#[tokio::test]
async fn the_get_stream_is_reopened_for_as_long_as_it_delivers() -> TestResult {
    let server = TestServer::start(|request| {
        handshake(request).unwrap_or_else(|| match request.verb.as_str() {
            "GET" => Reply::Events {
                messages: vec![json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})],
                hold_open: false,
                first_id: 1,
            },
            _ => Reply::result(request, json!({"tools": []})),
        })
    })
    .await?;
    let (connection, recorder) = connect(&server).await?;
    let wanted = usize::try_from(GET_STREAM_ATTEMPTS)? + 2;
    let delivered = eventually(Duration::from_secs(20), || recorder.notification_count() >= wanted).await;
    assert!(delivered, "{} notifications, {:?}", recorder.notification_count(), server.seen());
    assert!(connection.ended().is_none(), "{:?}", connection.ended());
    connection.close().await;
    Ok(())
}

/// A reopened GET stream says where the last one stopped (`Last-Event-ID`), so a server that keeps its events can
/// replay what it sent in between; the first opening says nothing.
#[tokio::test]
async fn a_reopened_get_stream_resumes_after_the_last_event_it_carried() -> TestResult {
    let resumed_from: Arc<Mutex<Vec<Option<String>>>> = Arc::new(Mutex::new(Vec::new()));
    let record = Arc::clone(&resumed_from);
    let server = TestServer::start(move |request| {
        handshake(request).unwrap_or_else(|| match request.verb.as_str() {
            "GET" => {
                let mut seen = record.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                seen.push(request.last_event_id.clone());
                // Each stream carries two events, numbered on from the last one, then ends.
                let first_id = 1 + 2 * u64::try_from(seen.len() - 1).unwrap_or(0);
                let message = json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"});
                Reply::Events { messages: vec![message.clone(), message], hold_open: false, first_id }
            }
            _ => Reply::result(request, json!({"tools": []})),
        })
    })
    .await?;
    let (connection, _recorder) = connect(&server).await?;
    let reopened =
        eventually(Duration::from_secs(20), || resumed_from.lock().map(|seen| seen.len() >= 3).unwrap_or(false)).await;
    connection.close().await;
    let seen = resumed_from.lock().map(|seen| seen.clone()).unwrap_or_default();
    assert!(reopened, "the GET stream was not reopened twice: {seen:?}");
    assert_eq!(seen[..3], [None, Some("2".to_owned()), Some("4".to_owned())], "{seen:?}");
    Ok(())
}

/// The server goes away while the GET stream is open: the stream cannot be reopened, and after
/// `GET_STREAM_ATTEMPTS` tries the connection ends (no request needed to notice), instead of server-initiated
/// messages stopping silently.
#[tokio::test]
async fn a_get_stream_that_cannot_be_reopened_ends_the_connection() -> TestResult {
    let server = TestServer::start(|request| {
        handshake(request).unwrap_or_else(|| match request.verb.as_str() {
            "GET" => Reply::Events { messages: Vec::new(), hold_open: true, first_id: 1 },
            _ => Reply::result(request, json!({"tools": []})),
        })
    })
    .await?;
    let (connection, recorder) = connect(&server).await?;
    assert!(eventually(Duration::from_secs(5), || server.seen().iter().any(|line| line == "GET")).await);
    server.stop();
    assert!(eventually(Duration::from_secs(20), || connection.ended().is_some()).await, "the connection stayed up");
    let ended = connection.ended();
    assert!(
        matches!(&ended, Some(UpstreamError::Connect { reason, .. }) if reason.contains("GET stream")),
        "{ended:?}"
    );
    assert_eq!(recorder.ended().len(), 1, "{:?}", recorder.ended());
    connection.close().await;
    Ok(())
}

/// A 404 to the GET stream's session id means the session is gone too: the connection ends at once.
#[tokio::test]
async fn a_404_to_the_get_stream_ends_the_connection() -> TestResult {
    let server = TestServer::start(|request| {
        handshake(request).unwrap_or_else(|| match request.verb.as_str() {
            "GET" if request.session.is_some() => Reply::status(404),
            _ => Reply::result(request, json!({"tools": []})),
        })
    })
    .await?;
    let (connection, recorder) = connect(&server).await?;
    assert!(eventually(Duration::from_secs(5), || connection.ended().is_some()).await, "the connection stayed up");
    let ended = connection.ended();
    assert!(ended.as_ref().is_some_and(says_session_is_unknown), "{ended:?}");
    assert_eq!(recorder.ended().len(), 1, "{:?}", recorder.ended());
    connection.close().await;
    Ok(())
}

/// What a person reads when nobody listens: the operating system's reason, not only reqwest's "error sending
/// request".
#[tokio::test]
async fn an_unreachable_server_is_described_by_its_root_cause() -> TestResult {
    let closed = TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}/mcp", closed.local_addr()?);
    drop(closed);
    let Err(error) = Connection::connect(&Endpoint::http(url), ConnectOptions::default()).await else {
        return Err("nothing listens there".into());
    };
    assert!(
        matches!(&error, UpstreamError::Connect { reason, .. } if reason.to_lowercase().contains("refused")),
        "{error}"
    );
    Ok(())
}

/// A caller that routes what the server says about a request by its id registers the route before the request
/// leaves: `register` runs once, with the id the request then carries, before the server has seen it.
#[tokio::test]
async fn a_request_is_registered_before_the_server_sees_it() -> TestResult {
    let server = TestServer::start(minimal).await?;
    let (connection, _recorder) = connect(&server).await?;
    for _ in 0..20 {
        let seen_before = Mutex::new(None);
        let pending = connection
            .begin_request_registered("tools/list", None, Duration::from_secs(10), |id| {
                let lists = server.seen().iter().filter(|line| *line == "POST tools/list").count();
                if let Ok(mut seen) = seen_before.lock() {
                    *seen = Some((id, lists));
                }
            })
            .await?;
        let Some((id, lists_before)) = seen_before.lock().ok().and_then(|seen| *seen) else {
            return Err("register was not called".into());
        };
        assert_eq!(id, pending.id(), "register gets the request's own id");
        let response = connection.wait(pending, Duration::from_secs(10)).await?;
        let lists_after = server.seen().iter().filter(|line| *line == "POST tools/list").count();
        assert_eq!(lists_after, lists_before + 1, "register ran before the request was posted: {response}");
    }
    Ok(())
}
