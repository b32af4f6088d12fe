//! How toolgate authenticates to one HTTP upstream when its token is not static: OAuth 2.1 client credentials from
//! an issuer (its token endpoint found by discovery), or RFC 8693 token exchange of each caller's own access token.
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
    /// RFC 8693 token exchange: each call made on behalf of a caller carries a token the issuer issued for that
    /// caller (its subject, toolgate as the actor) in exchange for the caller's own access token; toolgate's own
    /// traffic (initialize, listings, the stream for server messages) carries toolgate's client-credentials token
    /// from the same client ([`TokenExchangeSpec::own_credentials`]).
    TokenExchange(TokenExchangeSpec),
}

/// The RFC 8693 token type of an access token: what the caller's token is (`subject_token_type`) and, unless
/// configured otherwise, what toolgate asks for (`requested_token_type`).
pub const ACCESS_TOKEN_TYPE: &str = "urn:ietf:params:oauth:token-type:access_token";
/// The RFC 8693 token type of a JWT, the other requested token type toolgate can send as a bearer.
pub const JWT_TOKEN_TYPE: &str = "urn:ietf:params:oauth:token-type:jwt";

/// Where and as whom toolgate exchanges a caller's access token for one for this upstream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenExchangeSpec {
    /// The issuer URL (discovery as for client credentials); the token endpoint's URL when only that is configured,
    /// so messages always name where toolgate asked.
    pub issuer: String,
    /// The token endpoint, when configured: used as it is, without discovery.
    pub token_endpoint: Option<String>,
    /// toolgate's client id at the issuer (the actor of every exchanged token).
    pub client_id: String,
    /// toolgate's client secret (sent with HTTP Basic authentication).
    pub client_secret: Secret,
    /// The `scope` asked for, when any.
    pub scope: Option<String>,
    /// The RFC 8707 `resource` asked for: the upstream's resource identifier (its URL unless configured).
    pub resource: Option<String>,
    /// The RFC 8693 `audience` asked for (a logical name of the upstream), when configured.
    pub audience: Option<String>,
    /// The RFC 8693 `requested_token_type` ([`ACCESS_TOKEN_TYPE`] unless configured).
    pub requested_token_type: String,
}

impl TokenExchangeSpec {
    /// toolgate's own client-credentials grant from the same client, for what it sends on no caller's behalf.
    pub fn own_credentials(&self) -> ClientCredentialsSpec {
        ClientCredentialsSpec {
            issuer: self.issuer.clone(),
            client_id: self.client_id.clone(),
            client_secret: self.client_secret.clone(),
            scope: self.scope.clone(),
            resource: self.resource.clone(),
        }
    }
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
