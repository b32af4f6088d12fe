//! Where an upstream server is: a child process or a Streamable HTTP URL.
//!
//! Plain data, here rather than in `toolgate-upstream` so that the configuration can name an endpoint without
//! building an HTTP client; `toolgate-upstream` re-exports it and is the only crate that connects to one.

use std::path::PathBuf;

/// How to reach an MCP server.
#[derive(Debug, Clone, PartialEq)]
pub enum Endpoint {
    /// A child process speaking newline-delimited JSON-RPC on stdin/stdout.
    Stdio {
        /// The program to run (looked up on `PATH` when not a path).
        program: String,
        /// Its arguments.
        args: Vec<String>,
        /// Extra environment variables.
        env: Vec<(String, String)>,
        /// Working directory, when not inherited.
        cwd: Option<PathBuf>,
    },
    /// A Streamable HTTP endpoint (one URL, POST per message).
    Http {
        /// The endpoint URL, e.g. `http://127.0.0.1:3001/mcp`.
        url: String,
        /// Extra headers sent with every request (e.g. an upstream's own credentials).
        headers: Vec<(String, String)>,
    },
}

impl Endpoint {
    /// A stdio endpoint from a program and its arguments.
    pub fn stdio<I, S>(program: impl Into<String>, args: I) -> Endpoint
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Endpoint::Stdio {
            program: program.into(),
            args: args.into_iter().map(Into::into).collect(),
            env: Vec::new(),
            cwd: None,
        }
    }

    /// A Streamable HTTP endpoint.
    pub fn http(url: impl Into<String>) -> Endpoint {
        Endpoint::Http { url: url.into(), headers: Vec::new() }
    }

    /// A short label for logs: the program name or the URL.
    pub fn label(&self) -> String {
        match self {
            Endpoint::Stdio { program, .. } => program.clone(),
            Endpoint::Http { url, .. } => url.clone(),
        }
    }
}
