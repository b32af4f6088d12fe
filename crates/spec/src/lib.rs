//! The gateway's lowered configuration: what the runtime runs from, with the documented defaults.
//!
//! A [`GatewaySpec`] is built once, from a config file (by `toolgate-config`) or from the command line (by the CLI),
//! and never parsed again; nothing here knows TOML or JSON config syntax, and secrets (bearer tokens) are already
//! resolved into headers. Every default lives here, in a constant, a constructor or a `Default`, so the config file
//! and the command line cannot drift apart. This crate is data only: it depends on the core for the policy and trust
//! types and must not do IO, spawn anything or depend on the runtime crates.
//!
//! ```
//! use toolgate_spec::{Endpoint, GatewaySpec, StdioListenerSpec, UpstreamSpec};
//!
//! let upstream = UpstreamSpec::new("everything", Endpoint::stdio("mcp-server-everything", ["stdio"]));
//! let spec = GatewaySpec {
//!     stdio: Some(StdioListenerSpec::default()),
//!     ..GatewaySpec::new(vec![upstream])
//! };
//! assert_eq!(spec.identities()[0].name, "stdio");
//! ```

mod credentials;
mod endpoint;
mod guardrails;
mod listen;
mod oauth;
mod sandbox;
mod sso;
mod upstream;

use std::path::PathBuf;
use std::time::Duration;

pub use credentials::{
    ACCESS_TOKEN_TYPE, ClientCredentialsSpec, JWT_TOKEN_TYPE, Secret, TokenExchangeSpec, UpstreamCredentials,
};
pub use endpoint::Endpoint;
pub use guardrails::{
    AuditSpec, CallerSpec, ConfirmVia, ConfirmationSpec, GuardrailSpec, ModernConfirm, PinSpec, Quarantine, ResultSpec,
    RetrySpec, SelectionSpec,
};
pub use listen::{
    Caller, DEFAULT_BIND, DEFAULT_HTTP_PATH, DEFAULT_STDIO_IDENTITY, HttpListenerSpec, Limits, StdioListenerSpec,
};
pub use oauth::{
    DEFAULT_INTROSPECTION_CACHE, DEFAULT_JWKS_MIN_REFETCH, DEFAULT_JWKS_REFRESH, DEFAULT_OAUTH_ALGORITHMS,
    DEFAULT_OAUTH_CLOCK_SKEW, IntrospectionSpec, OAuthSpec, SubjectToken,
};
pub use sandbox::{
    DEFAULT_SANDBOX_MAX_OPEN_FILES, DEFAULT_SANDBOX_MAX_PROCESSES, DEFAULT_SANDBOX_MEMORY_MIB,
    DEFAULT_SANDBOX_PASS_ENV, MIN_SANDBOX_MAX_PROCESSES, SandboxEnvironment, SandboxMode, SandboxSpec,
};
pub use sso::{DEFAULT_SSO_GROUPS_CLAIM, DEFAULT_SSO_MAX_SESSION, DEFAULT_SSO_SCOPES, SsoSpec};
pub use upstream::{ManifestSpec, Prefix, UpstreamEra, UpstreamSpec, UpstreamTrust};

/// Time an upstream is allowed for `initialize` unless configured otherwise.
pub const DEFAULT_INITIALIZE_TIMEOUT: Duration = Duration::from_secs(30);

/// Time an upstream is allowed for each request unless configured otherwise.
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(60);

/// Most requests waiting for one upstream's answers at once: above what a busy gateway sends one healthy server (the
/// benchmark's 64 sessions with 4 calls each), and small enough that a hung server holds a bounded number of callers.
pub const DEFAULT_MAX_IN_FLIGHT: usize = 512;

/// Largest message accepted from a client or an upstream unless configured otherwise, in bytes.
pub const DEFAULT_MAX_MESSAGE_BYTES: usize = 16 * 1024 * 1024;

/// Everything the gateway needs to run.
#[derive(Debug, Clone)]
pub struct GatewaySpec {
    /// The upstream servers, in configuration order (which also breaks name-collision ties).
    pub upstreams: Vec<UpstreamSpec>,
    /// Serve MCP on stdin/stdout.
    pub stdio: Option<StdioListenerSpec>,
    /// Serve MCP over Streamable HTTP.
    pub http: Option<HttpListenerSpec>,
    /// Limits that apply to every session.
    pub limits: Limits,
    /// Policy, confirmation, pinning, results, retries, audit and callers.
    pub guardrails: GuardrailSpec,
    /// The config file this came from, for messages (`None` for command-line setups).
    pub source: Option<PathBuf>,
    /// What every sandboxed upstream must not see or reach (toolgate's own files and ports).
    pub sandbox: SandboxEnvironment,
}

/// How [`GatewaySpec::identities`] names the callers OAuth tokens bring (their subjects are not known before
/// they call): what the policy does for a token with only the required scopes.
pub const OAUTH_CALLER: &str = "any OAuth caller";

impl GatewaySpec {
    /// These upstreams with no listener, the default limits and guardrails, and no source file.
    pub fn new(upstreams: Vec<UpstreamSpec>) -> GatewaySpec {
        GatewaySpec {
            upstreams,
            stdio: None,
            http: None,
            limits: Limits::default(),
            guardrails: GuardrailSpec::default(),
            source: None,
            sandbox: SandboxEnvironment::default(),
        }
    }

    /// Every identity a session can have: the stdio listener's, then each configured HTTP caller, then, with
    /// `[listen.http.oauth]`, [`OAUTH_CALLER`] (a token's subject carrying only the required scopes: the least an
    /// accepted token holds), or `anonymous` for an HTTP listener with neither callers nor OAuth (or when no listener
    /// is configured at all). With OAuth nobody is anonymous: a request without a token is refused.
    pub fn identities(&self) -> Vec<Caller> {
        let mut identities: Vec<Caller> = self.stdio.iter().map(StdioListenerSpec::caller).collect();
        identities.extend(
            self.guardrails.callers.iter().map(|caller| Caller::named(caller.name.clone(), caller.scopes.clone())),
        );
        let oauth = self.http.as_ref().and_then(|http| http.oauth.as_ref());
        if let Some(oauth) = oauth {
            identities.push(Caller::named(OAUTH_CALLER, oauth.required_scopes.clone()));
        }
        let anonymous_http = self.http.is_some() && self.guardrails.callers.is_empty() && oauth.is_none();
        if anonymous_http || identities.is_empty() {
            identities.push(Caller::anonymous());
        }
        identities
    }

    /// True when HTTP requests authenticate (configured callers or OAuth tokens): many callers share the listener.
    pub fn authenticates_http(&self) -> bool {
        !self.guardrails.callers.is_empty() || self.http.as_ref().is_some_and(|http| http.oauth.is_some())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn with_oauth_nobody_is_anonymous_and_the_token_holder_has_the_required_scopes() {
        let mut spec = GatewaySpec::new(Vec::new());
        spec.http = Some(HttpListenerSpec::new(DEFAULT_BIND));
        assert_eq!(spec.identities(), vec![Caller::anonymous()]);
        assert!(!spec.authenticates_http());
        let mut oauth = OAuthSpec::new("https://id.example", "https://gw.example/mcp");
        oauth.required_scopes = vec!["tools:call".into()];
        if let Some(http) = spec.http.as_mut() {
            http.oauth = Some(oauth);
        }
        assert_eq!(spec.identities(), vec![Caller::named(OAUTH_CALLER, vec!["tools:call".into()])]);
        assert!(spec.authenticates_http());
    }
}
