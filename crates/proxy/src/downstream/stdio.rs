//! MCP over toolgate's own stdin/stdout, so desktop clients can launch toolgate as their server.
//!
//! One session for the life of the process. Each stdin line is one message; a line that is not JSON gets a
//! JSON-RPC parse error, an oversized line an invalid-request error, and reading goes on. Every message for the
//! client is written as one compact line; bursts are flushed once. stdout carries nothing but MCP.

use std::sync::Arc;

use serde_json::Value;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, BufWriter};
use tokio::sync::mpsc;
use toolgate_upstream::framing::{Line, Lines};
use toolgate_upstream::jsonrpc::{self, codes};

use crate::session::{Caller, ClientBound, SessionFactory, TransportKind};

/// Serves one session for `caller` on toolgate's own stdin and stdout.
///
/// When they are pipes (as when a desktop client launches toolgate), they are read and written as non-blocking
/// pipes on the runtime's reactor; `tokio::io::stdin`/`stdout` would hand every read and every flush to the
/// blocking thread pool, two thread round trips per message. Files and terminals fall back to those.
pub async fn serve_process_stdio(factory: Arc<dyn SessionFactory>, caller: Caller, max_message_bytes: usize) {
    #[cfg(unix)]
    if let (Some(reader), Some(writer)) = (pipe_reader(), pipe_writer()) {
        serve(factory, caller, reader, writer, max_message_bytes).await;
        return;
    }
    serve(factory, caller, tokio::io::stdin(), tokio::io::stdout(), max_message_bytes).await;
}

#[cfg(unix)]
fn pipe_reader() -> Option<tokio::net::unix::pipe::Receiver> {
    use std::os::fd::AsFd;
    let fd = std::io::stdin().as_fd().try_clone_to_owned().ok()?;
    tokio::net::unix::pipe::Receiver::from_owned_fd(fd).ok()
}

#[cfg(unix)]
fn pipe_writer() -> Option<tokio::net::unix::pipe::Sender> {
    use std::os::fd::AsFd;
    let fd = std::io::stdout().as_fd().try_clone_to_owned().ok()?;
    tokio::net::unix::pipe::Sender::from_owned_fd(fd).ok()
}

/// Serves one session for `caller` over the given reader and writer (stdin/stdout in production) until the
/// reader ends.
pub async fn serve<R, W>(
    factory: Arc<dyn SessionFactory>,
    caller: Caller,
    reader: R,
    writer: W,
    max_message_bytes: usize,
) where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (session, outbox) = factory.open_session(TransportKind::Stdio, caller);
    let (errors, error_receiver) = mpsc::channel::<Value>(64);
    let writer_task = tokio::spawn(write_messages(writer, outbox, error_receiver));
    let mut lines = Lines::new(reader, max_message_bytes);
    while let Some(line) = lines.next_line().await {
        match line {
            Ok(Line::Text(bytes)) => {
                let text = String::from_utf8_lossy(&bytes);
                let text = text.trim();
                if text.is_empty() {
                    continue;
                }
                match serde_json::from_str::<Value>(text) {
                    Ok(Value::Array(_)) => {
                        let error =
                            jsonrpc::error_response(&Value::Null, codes::INVALID_REQUEST, "batching is not supported");
                        let _ = errors.send(error).await;
                    }
                    Ok(message) => session.deliver(message),
                    Err(error) => {
                        let error =
                            jsonrpc::error_response(&Value::Null, codes::PARSE_ERROR, &format!("parse error: {error}"));
                        let _ = errors.send(error).await;
                    }
                }
            }
            Ok(Line::Oversized) => {
                let text = format!("message larger than the {max_message_bytes}-byte limit");
                let _ = errors.send(jsonrpc::error_response(&Value::Null, codes::INVALID_REQUEST, &text)).await;
            }
            Err(error) => {
                tracing::warn!(%error, "reading stdin failed");
                break;
            }
        }
    }
    session.close();
    // The session's outbox closes when the last handle to the session goes; give queued answers a moment to be
    // written, then stop either way, so the end of input always ends the session.
    drop(session);
    drop(errors);
    let mut writer_task = writer_task;
    if tokio::time::timeout(WRITER_GRACE, &mut writer_task).await.is_err() {
        writer_task.abort();
    }
}

/// How long queued messages may take to be written after the client closed its input.
const WRITER_GRACE: std::time::Duration = std::time::Duration::from_secs(2);

async fn write_messages<W>(writer: W, mut outbox: mpsc::Receiver<ClientBound>, mut errors: mpsc::Receiver<Value>)
where
    W: AsyncWrite + Unpin,
{
    let mut writer = BufWriter::new(writer);
    let mut line = Vec::with_capacity(4096);
    loop {
        let message = tokio::select! {
            bound = outbox.recv() => match bound {
                Some(bound) => message_of(bound),
                None => break,
            },
            error = errors.recv() => match error {
                Some(error) => error,
                None => match outbox.recv().await {
                    Some(bound) => message_of(bound),
                    None => break,
                },
            },
        };
        let mut next = Some(message);
        while let Some(message) = next {
            line.clear();
            if serde_json::to_writer(&mut line, &message).is_ok() {
                line.push(b'\n');
                if writer.write_all(&line).await.is_err() {
                    return;
                }
            }
            next = outbox.try_recv().ok().map(message_of);
        }
        if writer.flush().await.is_err() {
            return;
        }
    }
    let _ = writer.flush().await;
}

fn message_of(bound: ClientBound) -> Value {
    match bound {
        ClientBound::Response { message, .. } | ClientBound::Related { message, .. } => message,
        ClientBound::Unsolicited(message) => message,
    }
}
