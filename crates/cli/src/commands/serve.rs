//! `toolgate serve`: build a gateway spec from the command line (or the embedded defaults), start the upstreams,
//! and serve clients on stdio or Streamable HTTP (after a wait of a few seconds at most for the upstreams) until
//! stdin closes or a signal arrives. On SIGHUP the config file is read again and applied (`reload`): the policy,
//! the upstreams the file adds, removes or changes, and the console's users; what needs a restart is named.
//!
//! The only commands spawned are the one given after `--` and, for the embedded defaults, toolgate's own
//! `demo-server`.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, Result};
use toolgate_proxy::Gateway;
use toolgate_proxy::session::SessionFactory;
use toolgate_spec::{
    Caller, CallerSpec, DEFAULT_BIND, Endpoint, GatewaySpec, HttpListenerSpec, Limits, StdioListenerSpec, UpstreamSpec,
};
use toolgate_web::{ConsoleHandle, ConsoleUser};

use crate::Outcome;
use crate::cli::{PolicyChoice, ServeArgs};

mod reload;

/// How long a start waits for the upstreams before it serves clients: long enough that upstreams which start quickly
/// are in a client's first `tools/list`, short enough that one which never answers `initialize` holds nobody up
/// (its `initialize_timeout_seconds` may be minutes). An upstream ready later is announced with `list_changed`.
const START_WAIT: Duration = Duration::from_secs(5);

pub(crate) async fn run(args: ServeArgs) -> Result<Outcome> {
    let (mut spec, console) = match &args.config {
        Some(path) => toolgate_config::load_config_with_console(path).map_err(|error| anyhow::anyhow!("{error}"))?,
        None => (spec_from_args(&args)?, toolgate_config::ConsoleSpec::default()),
    };
    crate::manifests::verify_manifests(&mut spec)?;
    let state = crate::state::state_dir(args.state_dir.as_deref())?;
    serve_spec(spec, console, state, args.config.clone()).await
}

/// The console's users as the console takes them.
fn console_users(console: toolgate_config::ConsoleSpec) -> Vec<ConsoleUser> {
    console.users.into_iter().map(|user| ConsoleUser { name: user.name, token_sha256: user.token_sha256 }).collect()
}

/// Gives every stdio upstream the verification records `toolgate verify` stored for its command (`crate::evidence`:
/// the same function the views use), newest per tool fingerprint, as evidence for the trust rule.
async fn load_observations(spec: &mut GatewaySpec, store: &toolgate_store::Store) -> Result<()> {
    for upstream in &mut spec.upstreams {
        crate::evidence::load_observations(upstream, store).await?;
        if !upstream.trust.observations.is_empty() {
            tracing::info!(
                upstream = %upstream.name,
                records = upstream.trust.observations.len(),
                "verification records weighed as evidence"
            );
        }
    }
    Ok(())
}

/// Runs a gateway for a spec until it is told to stop, publishing its status in the state directory, keeping its
/// audit log, pins and approvals there, and applying `config` again on SIGHUP (`reload`).
/// `console`'s users may log in to the console with their own tokens until a reload replaces them; its single
/// sign-on and approver rules hold until a restart.
pub(crate) async fn serve_spec(
    mut spec: GatewaySpec,
    console: toolgate_config::ConsoleSpec,
    state: PathBuf,
    config: Option<PathBuf>,
) -> Result<Outcome> {
    // What a reload compares the file with: the file's own limits, not the ones fitted to the open-files limit.
    let started = spec.clone();
    size_from_descriptors(&mut spec);
    prepare_sandboxes(&mut spec, &state);
    // Owner only: the state holds arguments, approvals and the audit trail.
    toolgate_store::create_state_dir(&state)
        .with_context(|| format!("cannot create the state directory {}", state.display()))?;
    // The gateway's options (an audit journal, commits that survive a crash of the process), then the config's.
    let options = toolgate_store::StoreOptions {
        redaction: if spec.guardrails.audit.arguments_in_clear {
            toolgate_store::ArgumentRedaction::Clear
        } else {
            toolgate_store::ArgumentRedaction::Digest
        },
        retention: toolgate_store::Retention {
            keep: spec
                .guardrails
                .audit
                .keep_days
                .map(|days| std::time::Duration::from_secs(days.saturating_mul(86_400))),
            max_bytes: spec.guardrails.audit.max_bytes,
            export_dir: spec.guardrails.audit.export_dir.clone(),
        },
        ..toolgate_store::StoreOptions::gateway()
    };
    // `[store]` is read at start (a reload does not move the store): SQLite in the state directory, or PostgreSQL.
    let store_spec = match &config {
        Some(path) => toolgate_config::load_store_config(path).map_err(|error| anyhow::anyhow!("{error}"))?,
        None => toolgate_config::StoreSpec::default(),
    };
    let location = crate::store_location::StoreLocation { state: state.clone(), spec: store_spec };
    let store = location.open(options).await?;
    // The store resolved (and locked) the instance id: `[store] instance_id`, else $TOOLGATE_INSTANCE_ID, else the
    // id kept in the state directory. Status and metrics name the process with the same id its audit rows carry.
    let instance = store.instance().unwrap_or_default().to_owned();
    tracing::info!(store = %location.describe(), %instance, "state store open");
    load_observations(&mut spec, &store).await?;
    let gateway = Gateway::with_store(spec.clone(), Some(store.clone()))?;
    gateway.set_instance_id(instance);
    // `toolgate approvals` finds this state directory without being told only when it is the default one.
    let default_state = crate::state::state_dir(None).ok();
    gateway.set_approval_directions(toolgate_proxy::ApprovalDirections {
        console_url: None,
        state_dir: (default_state.as_deref() != Some(state.as_path())).then(|| state.display().to_string()),
    });
    gateway.start();
    // The approval console on the HTTP listener, behind its own one-time login link (toolgate-web). Made before the
    // reload task, so a SIGHUP while the upstreams connect replaces its users too.
    let forbid_self_approval = console.forbid_self_approval;
    let sso = console.sso.clone();
    let console_users = console_users(console);
    let console = match &spec.http {
        Some(http) => Some(ConsoleHandle::new(
            store.clone(),
            toolgate_web::ConsoleConfig {
                login_token: toolgate_web::random_token().context("cannot create the console's login token")?,
                allowed_hosts: http.allowed_hosts.clone(),
                allowed_origins: http.allowed_origins.clone(),
                users: console_users,
                sso,
                forbid_self_approval,
            },
        )),
        None => None,
    };
    if let Some(path) = config {
        let reload =
            reload::Reload { gateway: gateway.clone(), started, console: console.clone(), store: store.clone() };
        tokio::spawn(reload::reload_on_hangup(reload, path));
    }
    gateway.wait_settled(START_WAIT).await;
    for upstream in gateway.status().upstreams {
        tracing::info!(upstream = %upstream.name, status = ?upstream.status, "upstream status");
    }
    let listeners = Arc::new(Mutex::new(Vec::new()));
    if spec.stdio.is_some() {
        lock(&listeners).push("stdio".to_owned());
    }
    let publisher =
        tokio::spawn(publish_status(gateway.clone(), state.clone(), Arc::clone(&listeners), spec.source.clone()));
    let factory: Arc<dyn SessionFactory> = Arc::new(gateway.clone());
    let http = spec.http.clone().zip(console).map(|(http, console)| {
        let factory = Arc::clone(&factory);
        let limits = spec.limits.clone();
        let listeners = Arc::clone(&listeners);
        let callers = spec.guardrails.callers.clone();
        let gateway = gateway.clone();
        tokio::spawn(async move { serve_http(factory, gateway, &http, &limits, &callers, &listeners, console).await })
    });
    let result = match (spec.stdio.is_some(), http) {
        // stdio ends the process when the client closes stdin, whatever else is listening.
        (true, http) => {
            let caller = spec.stdio.as_ref().map(StdioListenerSpec::caller).unwrap_or_else(Caller::anonymous);
            let serving =
                toolgate_proxy::downstream::stdio::serve_process_stdio(factory, caller, spec.limits.max_message_bytes);
            tokio::select! {
                () = serving => Ok(()),
                () = shutdown_signal() => Ok(()),
                Some(outcome) = async { match http { Some(task) => Some(task.await), None => None } } => flatten(outcome),
            }
        }
        (false, Some(task)) => flatten(task.await),
        (false, None) => Err(anyhow::anyhow!("no listener configured: nothing to serve")),
    };
    publisher.abort();
    crate::state::remove_run_file(&state, std::process::id());
    gateway.shutdown().await;
    if let Err(error) = store.audit().flush().await {
        tracing::error!(%error, "the audit log could not be flushed at shutdown");
    }
    result.map(|()| Outcome::Clean)
}

/// Raises the open-files limit and lowers the HTTP limits to what it allows, saying what is in force.
fn size_from_descriptors(spec: &mut GatewaySpec) {
    let Some(descriptors) = crate::descriptors::raise_soft_limit() else { return };
    let configured = spec.limits.clone();
    // OAuth tokens, like configured callers, mean many callers share the sessions.
    let shared = spec.authenticates_http();
    let lowered = crate::descriptors::fit_limits(&mut spec.limits, descriptors.now, spec.upstreams.len(), shared);
    let limits = &spec.limits;
    if lowered {
        tracing::warn!(
            open_files = descriptors.now,
            configured_connections = configured.max_connections,
            configured_sessions = configured.max_sessions,
            "the open-files limit is too low for the configured [limits]; lowered them (raise the hard limit, \
             `ulimit -Hn`, to serve more)"
        );
    }
    tracing::info!(
        open_files_before = descriptors.before,
        open_files = descriptors.now,
        max_connections = limits.max_connections,
        max_sessions = limits.max_sessions,
        max_sessions_per_caller = limits.max_sessions_per_caller,
        "file descriptors sized"
    );
}

fn flatten(outcome: Result<Result<()>, tokio::task::JoinError>) -> Result<()> {
    outcome.map_err(|error| anyhow::anyhow!("the HTTP listener stopped: {error}"))?
}

fn lock(listeners: &Mutex<Vec<String>>) -> std::sync::MutexGuard<'_, Vec<String>> {
    listeners.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Keeps `run/<pid>.json` in the state directory current for `toolgate status`.
async fn publish_status(gateway: Gateway, state: PathBuf, listeners: Arc<Mutex<Vec<String>>>, config: Option<PathBuf>) {
    let mut last = None;
    loop {
        let run = crate::state::RunFile {
            pid: std::process::id(),
            listeners: lock(&listeners).clone(),
            config: config.as_ref().map(|path| path.display().to_string()),
            instance: gateway.instance_id(),
            status: serde_json::to_value(gateway.status()).unwrap_or_default(),
        };
        if last.as_ref() != Some(&run) {
            if let Err(error) = crate::state::write_run_file(&state, &run) {
                tracing::warn!("cannot publish status for `toolgate status`: {error:#}");
            }
            last = Some(run);
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

// Each argument is a separate part the listener mounts; a struct for them would only be a second name for this list.
#[allow(clippy::too_many_arguments)]
async fn serve_http(
    factory: Arc<dyn SessionFactory>,
    gateway: Gateway,
    http: &HttpListenerSpec,
    limits: &Limits,
    callers: &[CallerSpec],
    listeners: &Mutex<Vec<String>>,
    console: ConsoleHandle,
) -> Result<()> {
    let listener = match tokio::net::TcpListener::bind(http.bind).await {
        Ok(listener) => listener,
        Err(error) if error.kind() == std::io::ErrorKind::AddrInUse && http.bind.port() == DEFAULT_BIND.port() => {
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
    let url = format!("http://{address}{}", http.path);
    eprintln!("toolgate: serving MCP on {url}");
    lock(listeners).push(url);
    eprintln!("toolgate: console at http://{address}{}", console.login_path());
    // A client that cannot be asked is told where its call waits: this page (after logging in) and the command.
    gateway.set_approval_directions(toolgate_proxy::ApprovalDirections {
        console_url: Some(format!("http://{address}/console")),
        ..gateway.approval_directions()
    });
    let gateway_for_refusals = gateway.clone();
    let router = toolgate_proxy::downstream::http::router(factory, http, limits, callers)
        // `/metrics` (Prometheus), under the same Host/Origin rules as the MCP endpoint.
        .merge(toolgate_proxy::metrics::router(gateway.clone(), http))
        // `/healthz/live` and `/healthz/ready` for a load balancer: outside the tokens, nothing an upstream wrote.
        .merge(toolgate_proxy::health::router(gateway, &http.path))
        .merge(console.router());
    let counter = gateway_for_refusals;
    let options = toolgate_proxy::downstream::http::ServeOptions {
        on_refusal: Some(Arc::new(move |refusal| counter.count_refusal(refusal))),
        ..toolgate_proxy::downstream::http::ServeOptions::from_limits(limits)
    };
    toolgate_proxy::downstream::http::serve_with(listener, router, shutdown_signal(), options)
        .await
        .context("the HTTP listener failed")
}

fn spec_from_args(args: &ServeArgs) -> Result<GatewaySpec> {
    let (name, endpoint) = if let Some(url) = &args.upstream_url {
        ("upstream".to_owned(), Endpoint::http(url.clone()))
    } else if let Some((program, rest)) = args.command.split_first() {
        (upstream_name(program), Endpoint::stdio(program.clone(), rest.iter().cloned()))
    } else {
        let own = std::env::current_exe().context("cannot find the toolgate binary to run the demo server")?;
        ("demo".to_owned(), Endpoint::stdio(own.to_string_lossy().into_owned(), ["demo-server"]))
    };
    let embedded_defaults = args.upstream_url.is_none() && args.command.is_empty();
    let upstream =
        UpstreamSpec { request_timeout: Duration::from_secs(args.timeout), ..UpstreamSpec::new(name, endpoint) };
    let listen = args.listen.or(embedded_defaults.then_some(DEFAULT_BIND));
    let (stdio, http) = match listen {
        Some(bind) => (None, Some(HttpListenerSpec::new(bind))),
        None => (Some(StdioListenerSpec::default()), None),
    };
    let mut spec = GatewaySpec { stdio, http, ..GatewaySpec::new(vec![upstream]) };
    if args.policy == PolicyChoice::Permissive {
        spec.guardrails.policy = toolgate_core::policy::PolicySpec::permissive();
    }
    Ok(spec)
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

/// Hides the state directory (besides the config file) from every sandbox, makes the hidden paths absolute, and says
/// at start what this machine offers sandboxes, so a missing mechanism is never silent (docs/sandbox.md).
fn prepare_sandboxes(spec: &mut GatewaySpec, state: &std::path::Path) {
    spec.sandbox.hidden_paths.push(state.to_path_buf());
    // This binary is the port guard that keeps a sandbox with the network off toolgate's own port.
    spec.sandbox.port_guard = std::env::current_exe().ok();
    for path in &mut spec.sandbox.hidden_paths {
        if let Ok(absolute) = std::path::absolute(&*path) {
            *path = absolute;
        }
    }
    let sandboxed: Vec<&UpstreamSpec> = spec
        .upstreams
        .iter()
        .filter(|upstream| matches!(upstream.endpoint, Endpoint::Stdio { .. }))
        .filter(|upstream| upstream.sandbox.mode != toolgate_spec::SandboxMode::Off)
        .collect();
    if sandboxed.is_empty() {
        return;
    }
    let mechanisms = toolgate_sandbox::probe();
    tracing::info!(mechanisms = %mechanisms.summary(), "sandbox mechanisms on this machine");
    if let Err(reason) = &mechanisms.bubblewrap {
        for upstream in sandboxed {
            match upstream.sandbox.mode {
                toolgate_spec::SandboxMode::Strict => tracing::error!(
                    upstream = %upstream.name,
                    %reason,
                    "sandbox mode strict needs bubblewrap: this upstream will not start"
                ),
                _ => tracing::error!(
                    upstream = %upstream.name,
                    %reason,
                    "sandbox mode auto without bubblewrap: this upstream runs WITHOUT a sandbox"
                ),
            }
        }
    }
}
