//! `toolgate serve`: build a gateway spec from the command line (or the embedded defaults), start the upstreams,
//! and serve clients on stdio or Streamable HTTP until stdin closes or a signal arrives.
//!
//! The only commands spawned are the one given after `--` and, for the embedded defaults, toolgate's own
//! `demo-server`.

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use toolgate_proxy::Gateway;
use toolgate_proxy::session::SessionFactory;
use toolgate_proxy::spec::{GatewaySpec, HttpListenerSpec, Limits, Prefix, StdioListenerSpec, UpstreamSpec};
use toolgate_upstream::Endpoint;

use crate::Outcome;
use crate::cli::ServeArgs;

/// The port the embedded defaults try first.
const DEFAULT_PORT: u16 = 8765;

pub(crate) async fn run(args: ServeArgs) -> Result<Outcome> {
    let spec = match &args.config {
        Some(path) => toolgate_config::load_config(path).map_err(|error| anyhow::anyhow!("{error}"))?,
        None => spec_from_args(&args)?,
    };
    serve_spec(spec).await
}

/// Runs a gateway for a spec until it is told to stop.
pub(crate) async fn serve_spec(spec: GatewaySpec) -> Result<Outcome> {
    let gateway = Gateway::new(spec.clone());
    gateway.start();
    gateway.wait_settled(Duration::from_secs(30)).await;
    for upstream in gateway.status().upstreams {
        tracing::info!(upstream = %upstream.name, status = ?upstream.status, "upstream status");
    }
    let factory: Arc<dyn SessionFactory> = Arc::new(gateway.clone());
    let result = match (&spec.stdio, &spec.http) {
        (Some(_), _) => {
            let serving = toolgate_proxy::downstream::stdio::serve(
                factory,
                tokio::io::stdin(),
                tokio::io::stdout(),
                spec.limits.max_message_bytes,
            );
            tokio::select! {
                () = serving => Ok(()),
                () = shutdown_signal() => Ok(()),
            }
        }
        (None, Some(http)) => serve_http(factory, http, &spec.limits).await,
        (None, None) => Err(anyhow::anyhow!("no listener configured: nothing to serve")),
    };
    gateway.shutdown().await;
    result.map(|()| Outcome::Clean)
}

async fn serve_http(factory: Arc<dyn SessionFactory>, http: &HttpListenerSpec, limits: &Limits) -> Result<()> {
    let listener = match tokio::net::TcpListener::bind(http.bind).await {
        Ok(listener) => listener,
        Err(error) if error.kind() == std::io::ErrorKind::AddrInUse && http.bind.port() == DEFAULT_PORT => {
            // The embedded defaults should just work: take any free loopback port instead.
            let fallback = std::net::SocketAddr::new(http.bind.ip(), 0);
            tokio::net::TcpListener::bind(fallback).await.with_context(|| format!("cannot listen on {fallback}"))?
        }
        Err(error) => return Err(error).with_context(|| format!("cannot listen on {}", http.bind)),
    };
    let address = listener.local_addr().context("cannot read the listening address")?;
    if !address.ip().is_loopback() {
        tracing::warn!(%address, "serving on a non-loopback address: every client that can reach it can call tools");
    }
    // The one line on stderr a person needs: where to point a client.
    eprintln!("toolgate: serving MCP on http://{address}{}", http.path);
    let router = toolgate_proxy::downstream::http::router(factory, http, limits);
    toolgate_proxy::downstream::http::serve(listener, router, shutdown_signal())
        .await
        .context("the HTTP listener failed")
}

fn spec_from_args(args: &ServeArgs) -> Result<GatewaySpec> {
    let timeout = Duration::from_secs(args.timeout);
    let (name, endpoint) = if let Some(url) = &args.upstream_url {
        ("upstream".to_owned(), Endpoint::http(url.clone()))
    } else if let Some((program, rest)) = args.command.split_first() {
        (upstream_name(program), Endpoint::stdio(program.clone(), rest.iter().cloned()))
    } else {
        let own = std::env::current_exe().context("cannot find the toolgate binary to run the demo server")?;
        ("demo".to_owned(), Endpoint::stdio(own.to_string_lossy().into_owned(), ["demo-server"]))
    };
    let embedded_defaults = args.upstream_url.is_none() && args.command.is_empty();
    let upstream = UpstreamSpec {
        name,
        endpoint,
        prefix: Prefix::None,
        overrides: Default::default(),
        initialize_timeout: Duration::from_secs(30),
        request_timeout: timeout,
    };
    let listen = args.listen.or(embedded_defaults.then(|| std::net::SocketAddr::from(([127, 0, 0, 1], DEFAULT_PORT))));
    let (stdio, http) = match listen {
        Some(bind) => (
            None,
            Some(HttpListenerSpec {
                bind,
                path: "/mcp".into(),
                allowed_origins: Vec::new(),
                allowed_hosts: Vec::new(),
            }),
        ),
        None => (Some(StdioListenerSpec { identity: "stdio".into() }), None),
    };
    Ok(GatewaySpec { upstreams: vec![upstream], stdio, http, limits: Limits::default(), source: None })
}

/// A short upstream name from a command (`/usr/bin/mcp-server-git` -> `mcp-server-git`).
fn upstream_name(program: &str) -> String {
    let base = std::path::Path::new(program).file_name().map(|name| name.to_string_lossy().into_owned());
    let cleaned = toolgate_proxy::naming::sanitize(base.as_deref().unwrap_or("upstream"));
    cleaned.chars().take(32).collect()
}

/// Resolves on SIGINT or SIGTERM.
pub(crate) async fn shutdown_signal() {
    let interrupt = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut terminate = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(signal) => signal,
            Err(_) => {
                let _ = interrupt.await;
                return;
            }
        };
        tokio::select! {
            _ = interrupt => {}
            _ = terminate.recv() => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = interrupt.await;
    }
}
