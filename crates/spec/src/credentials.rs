//! How toolgate authenticates itself to one HTTP upstream when its token is not static: OAuth 2.1 client
//! credentials from an issuer (its token endpoint found by discovery).
//!
//! Plain data, already resolved from the environment by `toolgate-config`; the upstream crate fetches and caches
//! the tokens. The client secret is wrapped in [`Secret`], whose `Debug` never shows it, so no log, summary or
//! panic message made from a spec can carry it. Nothing here talks to a network.

use std::fmt;

/// A credential value: compared and cloned like a string, never shown by `Debug`.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wraps `value`.
    pub fn new(value: impl Into<String>) -> Secret {
        Secret(value.into())
    }

    /// The value itself, for the one place that sends it (the token request).
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str("Secret(<redacted>)")
    }
}

/// OAuth credentials toolgate obtains for an upstream (`[upstream.credentials]` in the config file).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UpstreamCredentials {
    /// The client credentials grant (RFC 6749 §4.4) at the issuer's token endpoint: toolgate's own identity as a
    /// service, one token shared by every caller.
    ClientCredentials(ClientCredentialsSpec),
}

/// Where and as whom toolgate asks for a client-credentials token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientCredentialsSpec {
    /// The issuer URL; its token endpoint comes from `/.well-known/openid-configuration` (or RFC 8414's
    /// `/.well-known/oauth-authorization-server`).
    pub issuer: String,
    /// toolgate's client id at the issuer.
    pub client_id: String,
    /// toolgate's client secret (sent with HTTP Basic authentication).
    pub client_secret: Secret,
    /// The `scope` asked for, when any.
    pub scope: Option<String>,
    /// The RFC 8707 `resource` asked for: the upstream's resource identifier (its URL unless configured).
    pub resource: Option<String>,
}
