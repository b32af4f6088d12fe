//! The stdio transport: a child process speaking one JSON-RPC message per line on stdin/stdout.
//!
//! Only the configured program is spawned, and every spawn is logged. stdout lines longer than the message limit
//! fail the connection (the line is never held whole in memory); lines that are not JSON are counted and logged,
//! never forwarded. stderr is free-form: each line goes to the log tagged with the upstream's name and the last
//! lines are kept for error messages. Shutdown is polite: close stdin, wait, SIGTERM, wait, SIGKILL.

use std::collections::VecDeque;
use std::process::Stdio;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use futures::StreamExt;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde_json::Value;
use tokio::io::{AsyncWriteExt, BufWriter};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tokio_util::codec::{AnyDelimiterCodec, AnyDelimiterCodecError, FramedRead};
use tokio_util::sync::CancellationToken;
use toolgate_spec::Endpoint;

use crate::endpoint::ConnectOptions;
use crate::error::UpstreamError;
use crate::framing::{Line, Lines};
use crate::transport::{Diagnostics, Inbound, InboundStream, Transport, split_batch};

const STDERR_LINE_LIMIT: usize = 64 * 1024;
const GRACE_PERIOD: Duration = Duration::from_secs(2);

/// Spawns the child and starts its reader, writer and stderr tasks; the closer ends the child.
pub(crate) fn start(endpoint: &Endpoint, options: &ConnectOptions) -> Result<(Transport, StdioCloser), UpstreamError> {
    let Endpoint::Stdio { program, args, env, cwd } = endpoint else {
        return Err(UpstreamError::InvalidEndpoint("not a stdio endpoint".into()));
    };
    let mut command = Command::new(program);
    command
        .args(args)
        .envs(env.iter().map(|(key, value)| (key, value)))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    if let Some(cwd) = cwd {
        command.current_dir(cwd);
    }
    tracing::info!(upstream = %options.name, %program, ?args, "spawning upstream server");
    let mut child = command
        .spawn()
        .map_err(|error| UpstreamError::Spawn { program: program.clone(), reason: error.to_string() })?;
    let missing = |stream: &str| UpstreamError::Spawn { program: program.clone(), reason: format!("no {stream} pipe") };
    let stdin = child.stdin.take().ok_or_else(|| missing("stdin"))?;
    let stdout = child.stdout.take().ok_or_else(|| missing("stdout"))?;
    let stderr = child.stderr.take().ok_or_else(|| missing("stderr"))?;
    let pid = child.id();

    let diagnostics = Arc::new(Diagnostics::default());
    let (outbound_sender, outbound_receiver) = mpsc::channel::<Value>(64);
    let (exit_sender, exit_receiver) = watch::channel::<Option<String>>(None);

    let shutdown = CancellationToken::new();
    let writer = tokio::spawn(write_messages(stdin, outbound_receiver, shutdown.clone()));
    tokio::spawn(wait_for_exit(child, exit_sender));
    tokio::spawn(log_stderr(stderr, options.name.clone(), Arc::clone(&diagnostics)));
    let inbound = read_messages(
        stdout,
        options.max_message_bytes,
        exit_receiver.clone(),
        Arc::clone(&diagnostics),
        options.name.clone(),
    );

    let transport = Transport {
        outbound: outbound_sender,
        inbound,
        diagnostics,
        negotiated_version: Arc::new(OnceLock::new()),
        shutdown,
    };
    Ok((transport, StdioCloser { pid, writer, exit: exit_receiver, name: options.name.clone() }))
}

async fn write_messages(stdin: ChildStdin, mut outbound: mpsc::Receiver<Value>, shutdown: CancellationToken) {
    let mut stdin = BufWriter::new(stdin);
    let mut line = Vec::with_capacity(4096);
    loop {
        let message = tokio::select! {
            biased;
            () = shutdown.cancelled() => break,
            message = outbound.recv() => match message {
                Some(message) => message,
                None => break,
            },
        };
        // Write everything already queued, then flush once: one syscall for a burst of messages.
        let mut next = Some(message);
        while let Some(message) = next {
            line.clear();
            if serde_json::to_writer(&mut line, &message).is_err() {
                next = outbound.try_recv().ok();
                continue;
            }
            line.push(b'\n');
            if stdin.write_all(&line).await.is_err() {
                // The reader reports the closed pipe with the exit status; nothing more to say here.
                return;
            }
            next = outbound.try_recv().ok();
        }
        if stdin.flush().await.is_err() {
            return;
        }
    }
    // Dropping stdin closes the pipe: the first step of a polite shutdown.
}

async fn wait_for_exit(mut child: Child, exit: watch::Sender<Option<String>>) {
    let status = match child.wait().await {
        Ok(status) => status.to_string(),
        Err(error) => format!("unknown exit status ({error})"),
    };
    let _ = exit.send(Some(status));
}

async fn log_stderr(stderr: tokio::process::ChildStderr, name: String, diagnostics: Arc<Diagnostics>) {
    // Reading goes on after an overlong line: stopping would leave the child blocked on a full pipe.
    let mut lines = Lines::new(stderr, STDERR_LINE_LIMIT);
    while let Some(Ok(line)) = lines.next_line().await {
        if let Line::Text(bytes) = line {
            let text = String::from_utf8_lossy(&bytes);
            let text = text.trim_end();
            tracing::info!(target: "toolgate::upstream::stderr", upstream = %name, "{text}");
            diagnostics.record_stderr(text);
        }
    }
}

/// The child's stdout as a stream of messages, ending with one `Ended` that says why.
fn read_messages(
    stdout: ChildStdout,
    max_message_bytes: usize,
    exit: watch::Receiver<Option<String>>,
    diagnostics: Arc<Diagnostics>,
    name: String,
) -> InboundStream {
    let codec = AnyDelimiterCodec::new_with_max_length(b"\n".to_vec(), Vec::new(), max_message_bytes);
    let state = ReadState { lines: FramedRead::new(stdout, codec), queued: VecDeque::new(), ended: false };
    Box::pin(futures::stream::unfold(state, move |mut state| {
        let (exit, diagnostics, name) = (exit.clone(), Arc::clone(&diagnostics), name.clone());
        async move {
            loop {
                if let Some(message) = state.queued.pop_front() {
                    return Some((Inbound::Message { message, related: None }, state));
                }
                if state.ended {
                    return None;
                }
                let ending = match state.lines.next().await {
                    Some(Ok(bytes)) => {
                        if let Some(value) = parse_line(&bytes, &diagnostics, &name) {
                            state.queued.extend(split_batch(value));
                        }
                        continue;
                    }
                    Some(Err(AnyDelimiterCodecError::MaxChunkLengthExceeded)) => {
                        UpstreamError::MessageTooLarge { limit: max_message_bytes }
                    }
                    Some(Err(AnyDelimiterCodecError::Io(error))) => {
                        UpstreamError::Closed { detail: format!("reading stdout failed: {error}") }
                    }
                    None => closed_error(exit, &diagnostics).await,
                };
                state.ended = true;
                return Some((Inbound::Ended(ending), state));
            }
        }
    }))
}

struct ReadState {
    lines: FramedRead<ChildStdout, AnyDelimiterCodec>,
    queued: VecDeque<Value>,
    ended: bool,
}

fn parse_line(bytes: &[u8], diagnostics: &Diagnostics, name: &str) -> Option<Value> {
    let text = match std::str::from_utf8(bytes) {
        Ok(text) => text.trim(),
        Err(_) => {
            diagnostics.record_non_json(&String::from_utf8_lossy(bytes));
            tracing::warn!(upstream = %name, "upstream wrote invalid UTF-8 to stdout; ignored");
            return None;
        }
    };
    if text.is_empty() {
        return None;
    }
    match serde_json::from_str::<Value>(text) {
        Ok(value) => Some(value),
        Err(error) => {
            diagnostics.record_non_json(text);
            tracing::warn!(upstream = %name, %error, "upstream wrote a non-JSON line to stdout; ignored");
            None
        }
    }
}

async fn closed_error(mut exit: watch::Receiver<Option<String>>, diagnostics: &Diagnostics) -> UpstreamError {
    // stdout closes a moment before the exit status is known; wait briefly for it.
    let status = tokio::time::timeout(GRACE_PERIOD, exit.wait_for(Option::is_some))
        .await
        .ok()
        .and_then(Result::ok)
        .and_then(|status| status.clone());
    let mut detail = match status {
        Some(status) => format!("the process exited ({status})"),
        None => "the process closed stdout".to_owned(),
    };
    let context = diagnostics.describe();
    if !context.is_empty() {
        detail.push_str("; ");
        detail.push_str(&context);
    }
    UpstreamError::Closed { detail }
}

/// Ends a stdio child politely: stdin closed, then SIGTERM, then SIGKILL, each after a grace period.
pub(crate) struct StdioCloser {
    pid: Option<u32>,
    writer: JoinHandle<()>,
    exit: watch::Receiver<Option<String>>,
    name: String,
}

impl StdioCloser {
    pub(crate) async fn close(mut self) {
        // The connection fired the shutdown token, so the writer ends and closes stdin.
        let _ = tokio::time::timeout(GRACE_PERIOD, &mut self.writer).await;
        if self.exited_within(GRACE_PERIOD).await {
            return;
        }
        let Some(pid) = self.pid.and_then(|pid| i32::try_from(pid).ok()).map(Pid::from_raw) else { return };
        tracing::debug!(upstream = %self.name, "upstream still running after stdin closed; sending SIGTERM");
        let _ = kill(pid, Signal::SIGTERM);
        if self.exited_within(GRACE_PERIOD).await {
            return;
        }
        tracing::warn!(upstream = %self.name, "upstream ignored SIGTERM; sending SIGKILL");
        let _ = kill(pid, Signal::SIGKILL);
        let _ = self.exited_within(GRACE_PERIOD).await;
    }

    async fn exited_within(&mut self, grace: Duration) -> bool {
        matches!(tokio::time::timeout(grace, self.exit.wait_for(Option::is_some)).await, Ok(Ok(_)))
    }
}
