//! The approval console: a small web UI that `toolgate serve` mounts under `/console` on its HTTP listener.
//!
//! Pages (server-rendered HTML, one stylesheet and one script served from here, no CDN):
//! - `/console`: pending approvals (title, risk badge, upstream, action, arguments) with approve / deny buttons
//!   (POST forms); a script polls `/console/api/pending` and swaps in `/console/fragment/pending` when the list
//!   changed.
//! - `/console/approvals/{id}`: one approval (where a 2026-07-28 client's URL-mode confirmation points), with the
//!   same forms while it can be decided and what became of it afterwards.
//! - `/console/tools`: changed definitions in quarantine with a field-by-field diff and pin / reject buttons bound
//!   to the fingerprint shown; every tool the gateway last listed (hints with sources, risk, lint findings, pin
//!   state), from the store's inventory; pinned tools with their effective hints.
//! - `/console/audit`: the last rows of the audit log, filtered by tool, verdict, kind, upstream, caller, time and
//!   free text (bound SQL parameters in the store), with the hash chain's verification.
//! - `/console/activity`: calls by verdict per minute (last hour) or per hour (last day), as an inline SVG chart
//!   with a table of the same numbers.
//!
//! Security, in the order a request meets it:
//! 1. `Host` (always) and `Origin` (when present) must be loopback or configured (`checks`), else 403.
//! 2. Login: the link printed at start (`/console/login?token=...`) is exchanged, once, for a session in an
//!    `HttpOnly; SameSite=Strict` cookie sealed with the store's console secret, which every process on the store
//!    accepts (`session`); a configured user's own token, posted by the login form, opens a session
//!    that decides as `console:NAME`. Without a session every page answers 401. Failed logins are limited per
//!    client address (`login_limit`: 429 with `Retry-After` once the budget is spent, a correct token included),
//!    which needs the router served with connect info (`into_make_service_with_connect_info::<SocketAddr>()`).
//!    The users can be replaced while the console serves ([`ConsoleHandle::replace_users`]); a removed user's
//!    sessions end at once.
//! 3. Every POST carries the session's CSRF token in a hidden form field, else 403. Nothing changes through GET.
//!
//! Responses carry a strict `Content-Security-Policy` (`'self'` only, no inline script), `no-store` caching and
//! `Referrer-Policy: same-origin` (the login URL holds a secret). The crate depends on the store and the core only;
//! it never talks to the proxy (approvals are decided in the store, where the waiting call polls for them).

mod activity;
mod approval;
mod approvers;
mod audit;
mod checks;
mod destination;
mod form;
mod handlers;
mod html;
mod inventory;
mod login_limit;
mod oidc;
mod onboarding;
mod pins;
mod session;
mod sso;
mod tool_cells;
mod tools;

use std::sync::Arc;

use axum::Router;
use axum::routing::{get, post};
use toolgate_store::Store;

pub use toolgate_spec::SsoSpec;

pub use session::random_token;

/// The console's settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsoleConfig {
    /// The secret of the one-time login link (`/console/login?token=...`); see [`random_token`].
    pub login_token: String,
    /// `Host` values allowed besides loopback (`name` or `name:port`), as for the MCP endpoint.
    pub allowed_hosts: Vec<String>,
    /// `Origin` values allowed besides loopback (`scheme://host[:port]`, `:*` for any port).
    pub allowed_origins: Vec<String>,
    /// People who log in with a token of their own (the login form); their decisions record `console:NAME`. These
    /// are the users at start; [`ConsoleHandle::replace_users`] changes them while the console serves.
    pub users: Vec<ConsoleUser>,
    /// Single sign-on with an OpenID provider (`/console/sso/login`), beside the link and the users.
    pub sso: Option<SsoSpec>,
    /// Refuse a person's approval of a call whose caller identity is their own (a configured user's name, a single
    /// sign-on person's subject).
    pub forbid_self_approval: bool,
}

/// A person who may log in with a token of their own.
#[derive(Clone, PartialEq, Eq)]
pub struct ConsoleUser {
    /// The name decisions record, as `console:NAME`.
    pub name: String,
    /// `sha256:<hex>` of the token (as `toolgate_core::fingerprint::digest_bytes` writes it); never the token.
    pub token_sha256: String,
}

// Hand-written so a debug print never shows a token's hash.
impl std::fmt::Debug for ConsoleUser {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConsoleUser").field("name", &self.name).finish_non_exhaustive()
    }
}

impl ConsoleConfig {
    /// A configuration with a fresh random login token, no users, and only loopback hosts and origins allowed.
    pub fn loopback() -> std::io::Result<ConsoleConfig> {
        Ok(ConsoleConfig {
            login_token: random_token()?,
            allowed_hosts: Vec::new(),
            allowed_origins: Vec::new(),
            users: Vec::new(),
            sso: None,
            forbid_self_approval: false,
        })
    }

    /// The path (with query) of the login link; prefix it with `http://host:port`.
    pub fn login_path(&self) -> String {
        format!("/console/login?token={}", self.login_token)
    }
}

/// What every handler shares.
#[derive(Clone)]
pub(crate) struct Console {
    pub(crate) store: Store,
    pub(crate) config: Arc<ConsoleConfig>,
    pub(crate) sessions: Arc<session::Sessions>,
    pub(crate) login_limiter: Arc<login_limit::LoginLimiter>,
    /// The single sign-on provider, when configured.
    pub(crate) provider: Option<Arc<oidc::Provider>>,
}

/// A console's shared state: [`ConsoleHandle::router`] serves it, and the handle changes it while it serves (a
/// config reload replacing the users).
#[derive(Clone)]
pub struct ConsoleHandle {
    console: Console,
}

impl ConsoleHandle {
    /// A console over `store` with `config`; nothing is served until its [`router`](ConsoleHandle::router) is.
    pub fn new(store: Store, config: ConsoleConfig) -> ConsoleHandle {
        let issuer = config.sso.as_ref().map(|sso| sso.issuer.clone());
        let sessions = Arc::new(session::Sessions::new(store.clone(), &config.login_token, &config.users, issuer));
        let login_limiter = Arc::new(login_limit::LoginLimiter::new(login_limit::Limits::CONSOLE));
        let provider = config.sso.clone().map(|sso| Arc::new(oidc::Provider::new(sso)));
        ConsoleHandle { console: Console { store, sessions, config: Arc::new(config), login_limiter, provider } }
    }

    /// The console as an axum router with routes under `/console` and no fallback, so it can be merged with the
    /// MCP endpoint's router on the same listener. Serve it with `into_make_service_with_connect_info::<SocketAddr>()`:
    /// failed logins are limited per peer address, and without it every client shares one budget.
    pub fn router(&self) -> Router {
        let console = self.console.clone();
        Router::new()
            .route("/console", get(handlers::pending_page))
            .route("/console/", get(handlers::pending_page))
            .route("/console/login", get(handlers::login).post(handlers::login_form))
            .route("/console/logout", post(handlers::logout))
            .route("/console/sso/login", get(sso::start))
            .route("/console/sso/callback", get(sso::callback))
            .route("/console/tools", get(tools::tools_page))
            .route("/console/pins/{decision}", post(pins::decide_pin))
            .route("/console/upstreams/{upstream}", get(onboarding::upstream_page))
            .route("/console/upstreams/{upstream}/pin", post(onboarding::pin_upstream))
            .route("/console/audit", get(audit::audit_page))
            .route("/console/activity", get(activity::activity_page))
            .route("/console/api/pending", get(handlers::pending_json))
            .route("/console/fragment/pending", get(handlers::pending_fragment))
            .route("/console/approvals/{id}", get(approval::approval_page))
            .route("/console/approvals/{id}/{decision}", post(handlers::decide))
            .route("/console/assets/console.css", get(handlers::stylesheet))
            .route("/console/assets/console.js", get(handlers::script))
            .route_layer(axum::middleware::from_fn_with_state(console.clone(), handlers::guard))
            .with_state(console)
    }

    /// Which of `sso` and `forbid_self_approval` differ from what this console serves with, as the config file
    /// names them: they are not replaced while it serves (a config reload names them as needing a restart), unlike
    /// the users.
    pub fn sign_on_changes(&self, sso: Option<&SsoSpec>, forbid_self_approval: bool) -> Vec<&'static str> {
        let mut changed = Vec::new();
        if self.console.config.sso.as_ref() != sso {
            changed.push("[console.sso]");
        }
        if self.console.config.forbid_self_approval != forbid_self_approval {
            changed.push("[console] forbid_self_approval");
        }
        changed
    }

    /// The path (with query) of the one-time login link; see [`ConsoleConfig::login_path`].
    pub fn login_path(&self) -> String {
        self.console.config.login_path()
    }

    /// Replaces the configured users (a config reload). A user no longer present with the same name and token can
    /// no longer log in, and every session they opened ends now: their next request is not logged in. New users can
    /// log in at once; unchanged users keep their sessions. The one-time link and its session are untouched.
    ///
    /// The caller checks the list as at start (unique names and tokens; no token that is also a caller's).
    pub fn replace_users(&self, users: Vec<ConsoleUser>) -> UsersReplaced {
        self.console.sessions.replace_users(users)
    }
}

/// What [`ConsoleHandle::replace_users`] changed, by user name (never a token).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UsersReplaced {
    /// Users who were not configured before.
    pub added: Vec<String>,
    /// Users configured before whose token changed.
    pub changed: Vec<String>,
    /// Users no longer configured.
    pub removed: Vec<String>,
    /// Sessions this process opened (at most the last 64) that ended because their user was removed or changed;
    /// sessions opened elsewhere end too (their cookie names the user's entry) but are not counted here.
    pub sessions_ended: usize,
}

/// [`ConsoleHandle::router`] of a new console, for an embedder that changes nothing while it serves.
pub fn router(store: Store, config: ConsoleConfig) -> Router {
    ConsoleHandle::new(store, config).router()
}
