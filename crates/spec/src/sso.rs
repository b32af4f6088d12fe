//! `[console.sso]` lowered: the console's OpenID Connect client (authorization code with PKCE) at one provider,
//! the scopes and claims it reads, and who among the people it logs in may decide approvals and pins.
//!
//! Data only, one type for the config loader (which builds it) and the console (which runs it): the login itself
//! lives in `toolgate-web`, ID-token validation in `toolgate-auth`. The client secret is read from the environment
//! at load and never formatted by `Debug`.

use std::time::Duration;

/// Longest a console session opened by single sign-on lasts unless configured shorter; the ID token's own lifetime
/// bounds it further, so a session never outlives the identity assertion that opened it.
pub const DEFAULT_SSO_MAX_SESSION: Duration = Duration::from_secs(12 * 60 * 60);

/// The scopes asked for unless configured otherwise.
pub const DEFAULT_SSO_SCOPES: &[&str] = &["openid", "profile", "email"];

/// The groups claim read unless configured otherwise.
pub const DEFAULT_SSO_GROUPS_CLAIM: &str = "groups";

/// `[console.sso]`: the console's OpenID Connect client.
#[derive(Clone, PartialEq, Eq)]
pub struct SsoSpec {
    /// The provider's issuer identifier, exactly as its discovery document and ID tokens state it (`https://`, or
    /// `http://` on loopback only).
    pub issuer: String,
    /// The console's client id at the provider (the ID token's audience).
    pub client_id: String,
    /// The client secret, when the provider gave the console one (read from `client_secret_env` at load; never in
    /// the file).
    pub client_secret: Option<String>,
    /// Where the provider sends the browser back: the console's `/console/sso/callback` as browsers reach it.
    pub redirect_uri: String,
    /// The scopes asked for (default `openid profile email`); `openid` is always among them.
    pub scopes: Vec<String>,
    /// The claim (in the ID token or the userinfo) that lists a person's groups (default `groups`).
    pub groups_claim: String,
    /// When set, only persons with this value in their groups claim may approve or deny calls and pin or reject
    /// definitions.
    pub approver_group: Option<String>,
    /// Longest a console session opened by a login lasts; it ends sooner when the ID token expires.
    pub max_session: Duration,
    /// Where the provider sends the browser after a logout that ended the person's session there (RP-initiated
    /// logout); registered at the provider. `None`: the provider shows its own page.
    pub post_logout_redirect_uri: Option<String>,
}

impl SsoSpec {
    /// A client of `issuer` named `client_id`, returning to `redirect_uri`, with the documented defaults.
    pub fn new(issuer: impl Into<String>, client_id: impl Into<String>, redirect_uri: impl Into<String>) -> Self {
        SsoSpec {
            issuer: issuer.into(),
            client_id: client_id.into(),
            client_secret: None,
            redirect_uri: redirect_uri.into(),
            scopes: DEFAULT_SSO_SCOPES.iter().map(|scope| (*scope).to_owned()).collect(),
            groups_claim: DEFAULT_SSO_GROUPS_CLAIM.to_owned(),
            approver_group: None,
            max_session: DEFAULT_SSO_MAX_SESSION,
            post_logout_redirect_uri: None,
        }
    }
}

// Hand-written so a debug print never shows the client secret.
impl std::fmt::Debug for SsoSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SsoSpec")
            .field("issuer", &self.issuer)
            .field("client_id", &self.client_id)
            .field("client_secret", &self.client_secret.as_ref().map(|_| "<redacted>"))
            .field("redirect_uri", &self.redirect_uri)
            .field("scopes", &self.scopes)
            .field("groups_claim", &self.groups_claim)
            .field("approver_group", &self.approver_group)
            .field("max_session", &self.max_session)
            .field("post_logout_redirect_uri", &self.post_logout_redirect_uri)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_never_shows_the_secret() {
        let spec = SsoSpec { client_secret: Some("s3cret".into()), ..SsoSpec::new("https://id", "c", "https://r") };
        assert!(!format!("{spec:?}").contains("s3cret"));
    }
}
