//! toolgate's bundled demo MCP server: an in-memory notes workspace whose tools carry a deliberate spread of
//! annotations (honest read-only, open-world, additive, idempotent, destructive and external tools, one tool
//! with no annotations, and two that lie about being read-only), plus one prompt and one resource.
//!
//! It exists so that people and tests can try toolgate without installing anything. It must never touch the
//! disk or the network, never print to stdout outside the MCP stream, and never change the declared
//! annotations by accident: they are the fixture other crates' tests and docs describe.
//!
//! ```no_run
//! # async fn run() -> Result<(), toolgate_demo::DemoError> {
//! // What `toolgate demo-server` does: speak MCP on stdin/stdout until the client closes stdin.
//! toolgate_demo::serve_stdio().await
//! # }
//! ```

mod server;
pub mod workspace;

pub use server::{DemoServer, NOTES_RESOURCE_URI};

use rmcp::ServiceExt;
use tokio::io::{AsyncRead, AsyncWrite};

/// Why the demo server stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum DemoError {
    /// The client went away or spoke something other than MCP before initialization finished.
    #[error("demo server could not start the MCP session")]
    Initialize(#[source] Box<rmcp::service::ServerInitializeError>),
    /// The server's session task panicked or was aborted.
    #[error("demo server session ended abnormally")]
    Session(#[source] tokio::task::JoinError),
}

/// Serves the demo over this process's stdin and stdout until the client closes the connection.
///
/// Needs a tokio runtime with IO enabled. Logs nothing to stdout (stdout carries only MCP).
pub async fn serve_stdio() -> Result<(), DemoError> {
    serve(rmcp::transport::stdio()).await
}

/// Serves a fresh demo workspace over any byte stream pair (a socket, a `tokio::io::duplex` half, stdio).
pub async fn serve<R, W>(io: (R, W)) -> Result<(), DemoError>
where
    R: AsyncRead + Send + Unpin + 'static,
    W: AsyncWrite + Send + Unpin + 'static,
{
    let running = DemoServer::new().serve(io).await.map_err(|error| DemoError::Initialize(Box::new(error)))?;
    running.waiting().await.map_err(DemoError::Session)?;
    Ok(())
}
