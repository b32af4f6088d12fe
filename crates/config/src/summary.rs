//! What a valid configuration would run, for `toolgate check-config`: upstreams with their trust, listeners,
//! limits, the policy, callers, warnings.
//!
//! Built from the lowered spec, so it shows what the runtime would see rather than what the file literally says.
//! It must never contain a secret: header and environment *names* appear, their values never do, and callers
//! appear by name and scopes, never by their token digests.

use std::fmt;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use toolgate_core::policy::{DefaultProfile, Mode};
use toolgate_core::trust::{DEFAULT_MIN_CONFIDENCE, TrustLevel};
use toolgate_spec::Endpoint;
use toolgate_spec::{GatewaySpec, Limits, ManifestSpec, Prefix, UpstreamCredentials};

use crate::error::Problem;

/// A human- and test-friendly account of a valid configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct ConfigSummary {
    /// The file checked.
    pub source: PathBuf,
    /// Upstreams, in file order.
    pub upstreams: Vec<UpstreamSummary>,
    /// Listeners (HTTP first).
    pub listeners: Vec<ListenerSummary>,
    /// Limits in effect.
    pub limits: Limits,
    /// The policy's mode, default profile and rule count.
    pub policy: PolicySummary,
    /// HTTP callers, in file order (names and scopes only).
    pub callers: Vec<CallerSummary>,
    /// The OAuth access tokens the HTTP listener accepts besides the callers (`[listen.http.oauth]`).
    pub oauth: Option<OAuthSummary>,
    /// Things that are allowed but deserve a second look (a public bind without callers, credentials over plain
    /// http, arguments in clear in the audit log, a verified upstream's keys).
    pub warnings: Vec<Problem>,
}

/// The policy as configured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PolicySummary {
    /// The mode at start.
    pub mode: Mode,
    /// What decides calls no rule settles.
    pub defaults: DefaultProfile,
    /// Number of `[[policy.rule]]` tables.
    pub rules: usize,
    /// Whether open-world writes need confirmation in a tainted session.
    pub session_taint: bool,
}

/// Which OAuth access tokens authenticate HTTP callers: with them, no request is anonymous.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OAuthSummary {
    /// The issuer.
    pub issuer: String,
    /// The audience every token must name.
    pub resource: String,
    /// Scopes every token must carry.
    pub required_scopes: Vec<String>,
    /// Whether opaque tokens are introspected (else refused).
    pub introspection: bool,
}

/// One HTTP caller, without its token digest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallerSummary {
    /// Its name.
    pub name: String,
    /// Its scopes.
    pub scopes: Vec<String>,
}

/// One upstream as it would run.
#[derive(Debug, Clone, PartialEq)]
pub struct UpstreamSummary {
    /// Its unique name.
    pub name: String,
    /// How it is reached.
    pub transport: Transport,
    /// The command line (stdio) or URL (HTTP).
    pub target: String,
    /// What its tool names are prefixed with (`git_`), or `None` when exposed as is.
    pub exposed_prefix: Option<String>,
    /// Number of tools with hint overrides.
    pub overrides: usize,
    /// Names of the extra environment variables a stdio server gets (never their values).
    pub env_names: Vec<String>,
    /// Names of the headers an HTTP upstream gets, besides the bearer token's (never their values).
    pub header_names: Vec<String>,
    /// The environment variable the bearer token is read from.
    pub bearer_token_env: Option<String>,
    /// How toolgate authenticates to an HTTP upstream: a static bearer token or the `[upstream.credentials]` it
    /// obtains; `None` when it sends only its configured headers.
    pub credentials: Option<CredentialsSummary>,
    /// Time allowed for each request.
    pub request_timeout: Duration,
    /// Time allowed for `initialize`.
    pub initialize_timeout: Duration,
    /// How far its declared hints are believed.
    pub trust: TrustLevel,
    /// For an untrusted upstream: the inference confidence that confirms a relaxing declaration.
    pub min_confidence: f32,
    /// For a verified upstream: its manifest and signers (public keys, not secrets).
    pub manifest: Option<ManifestSpec>,
    /// Its sandbox mode (off for HTTP upstreams).
    pub sandbox: toolgate_spec::SandboxMode,
}

/// How toolgate authenticates to one HTTP upstream: where the token comes from, never the token or a secret.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CredentialsSummary {
    /// static, client_credentials or token_exchange.
    pub kind: CredentialsKind,
    /// Where toolgate asks for tokens (the issuer, or the token endpoint when only that is configured); `None` for
    /// a static token.
    pub issuer: Option<String>,
    /// The RFC 8693 `audience` a token exchange asks for, when configured.
    pub audience: Option<String>,
}

/// Where an HTTP upstream's bearer token comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CredentialsKind {
    /// Read once from `bearer_token_env`.
    Static,
    /// toolgate's own, from the client credentials grant.
    ClientCredentials,
    /// Each caller's, exchanged for its own access token (RFC 8693).
    TokenExchange,
}

impl CredentialsKind {
    /// The word the config file uses (`static` is `bearer_token_env`'s kind in the docs).
    pub fn as_str(self) -> &'static str {
        match self {
            CredentialsKind::Static => "static",
            CredentialsKind::ClientCredentials => "client_credentials",
            CredentialsKind::TokenExchange => "token_exchange",
        }
    }
}

/// The summary of `credentials`, or a static token's when only `bearer_token_env` is set.
fn credentials_summary(
    credentials: Option<&UpstreamCredentials>,
    bearer_token_env: Option<&String>,
) -> Option<CredentialsSummary> {
    Some(match credentials {
        Some(UpstreamCredentials::ClientCredentials(grant)) => CredentialsSummary {
            kind: CredentialsKind::ClientCredentials,
            issuer: Some(grant.issuer.clone()),
            audience: None,
        },
        Some(UpstreamCredentials::TokenExchange(exchange)) => CredentialsSummary {
            kind: CredentialsKind::TokenExchange,
            issuer: Some(exchange.issuer.clone()),
            audience: exchange.audience.clone(),
        },
        None if bearer_token_env.is_some() => {
            CredentialsSummary { kind: CredentialsKind::Static, issuer: None, audience: None }
        }
        None => return None,
    })
}

/// An upstream's transport.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    /// A child process on stdin/stdout.
    Stdio,
    /// Streamable HTTP.
    Http,
}

impl Transport {
    /// `stdio` or `http`.
    pub fn as_str(self) -> &'static str {
        match self {
            Transport::Stdio => "stdio",
            Transport::Http => "http",
        }
    }
}

/// A listener as it would run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ListenerSummary {
    /// Streamable HTTP.
    Http {
        /// Bound address.
        bind: SocketAddr,
        /// Endpoint path.
        path: String,
        /// Whether only this machine can connect.
        loopback: bool,
    },
    /// stdin/stdout.
    Stdio {
        /// Identity of the stdio caller.
        identity: String,
        /// Its scopes.
        scopes: Vec<String>,
    },
}

/// Summarizes `spec`; `bearer_token_envs` is parallel to `spec.upstreams`.
pub(crate) fn summarize(
    spec: &GatewaySpec,
    bearer_token_envs: &[Option<String>],
    warnings: Vec<Problem>,
) -> ConfigSummary {
    let upstreams = spec
        .upstreams
        .iter()
        .enumerate()
        .map(|(index, upstream)| {
            let bearer_token_env = bearer_token_envs.get(index).cloned().flatten();
            let (transport, target, env_names, header_names) = match &upstream.endpoint {
                Endpoint::Stdio { program, args, env, .. } => {
                    let mut words = vec![shell_word(program)];
                    words.extend(args.iter().map(|arg| shell_word(arg)));
                    let env_names = env.iter().map(|(name, _)| name.clone()).collect();
                    (Transport::Stdio, words.join(" "), env_names, Vec::new())
                }
                Endpoint::Http { url, headers } => {
                    let names = headers.iter().map(|(name, _)| name.clone());
                    // The Authorization header made from bearer_token_env is reported as that variable instead.
                    let names =
                        names.filter(|name| bearer_token_env.is_none() || !name.eq_ignore_ascii_case("authorization"));
                    (Transport::Http, url.clone(), Vec::new(), names.collect())
                }
            };
            UpstreamSummary {
                name: upstream.name.clone(),
                transport,
                target,
                credentials: credentials_summary(upstream.credentials.as_ref(), bearer_token_env.as_ref()),
                exposed_prefix: match &upstream.prefix {
                    Prefix::None | Prefix::Passthrough => None,
                    Prefix::With(prefix) => Some(format!("{prefix}_")),
                },
                overrides: upstream.overrides.len(),
                env_names,
                header_names,
                bearer_token_env,
                request_timeout: upstream.request_timeout,
                initialize_timeout: upstream.initialize_timeout,
                trust: upstream.trust.level,
                min_confidence: upstream.trust.min_confidence,
                manifest: upstream.trust.manifest.clone(),
                sandbox: upstream.sandbox.mode,
            }
        })
        .collect();
    let mut listeners = Vec::new();
    if let Some(http) = &spec.http {
        listeners.push(ListenerSummary::Http {
            bind: http.bind,
            path: http.path.clone(),
            loopback: http.bind.ip().is_loopback(),
        });
    }
    if let Some(stdio) = &spec.stdio {
        listeners.push(ListenerSummary::Stdio { identity: stdio.identity.clone(), scopes: stdio.scopes.clone() });
    }
    let policy = &spec.guardrails.policy;
    ConfigSummary {
        source: spec.source.clone().unwrap_or_default(),
        upstreams,
        listeners,
        limits: spec.limits.clone(),
        policy: PolicySummary {
            mode: policy.mode,
            defaults: policy.defaults,
            rules: policy.rules.len(),
            session_taint: policy.session_taint,
        },
        callers: spec
            .guardrails
            .callers
            .iter()
            .map(|caller| CallerSummary { name: caller.name.clone(), scopes: caller.scopes.clone() })
            .collect(),
        oauth: spec.http.as_ref().and_then(|http| http.oauth.as_ref()).map(|oauth| OAuthSummary {
            issuer: oauth.issuer.clone(),
            resource: oauth.resource.clone(),
            required_scopes: oauth.required_scopes.clone(),
            introspection: oauth.introspection.is_some(),
        }),
        warnings,
    }
}

/// `word` quoted for display when it contains spaces or quotes (display only: nothing is ever run by a shell).
fn shell_word(word: &str) -> String {
    if !word.is_empty() && !word.contains(|character: char| character.is_whitespace() || "'\"\\$`".contains(character))
    {
        return word.to_owned();
    }
    format!("'{}'", word.replace('\'', r"'\''"))
}

/// ` (scopes: a, b)`, or nothing for no scopes.
fn scope_list(scopes: &[String]) -> String {
    if scopes.is_empty() { " (no scopes)".to_owned() } else { format!(" (scopes: {})", scopes.join(", ")) }
}

fn plural(count: usize, one: &str, many: &str) -> String {
    format!("{count} {}", if count == 1 { one } else { many })
}

impl fmt::Display for ConfigSummary {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            formatter,
            "{}: {}, {}",
            self.source.display(),
            plural(self.upstreams.len(), "upstream", "upstreams"),
            plural(self.listeners.len(), "listener", "listeners")
        )?;
        writeln!(formatter, "upstreams:")?;
        let name_width = self.upstreams.iter().map(|upstream| upstream.name.len()).max().unwrap_or(0);
        for upstream in &self.upstreams {
            write!(
                formatter,
                "  {:name_width$}  {:5}  {}",
                upstream.name,
                upstream.transport.as_str(),
                upstream.target
            )?;
            let trust = match (&upstream.manifest, upstream.trust) {
                (Some(manifest), _) => format!(
                    "trust verified by {} signed by {}",
                    manifest.path.display(),
                    manifest.public_keys.join(" or ")
                ),
                (None, TrustLevel::Untrusted) if upstream.min_confidence != DEFAULT_MIN_CONFIDENCE => {
                    format!("trust untrusted, min confidence {}", upstream.min_confidence)
                }
                (None, level) => format!("trust {}", level.as_str()),
            };
            let mut notes = vec![trust];
            notes.push(match &upstream.exposed_prefix {
                Some(prefix) => format!("tools exposed as {prefix}*"),
                None => "tool names unprefixed".to_owned(),
            });
            if upstream.sandbox != toolgate_spec::SandboxMode::Off {
                notes.push(format!("sandbox {}", upstream.sandbox.as_str()));
            }
            if upstream.overrides > 0 {
                notes.push(plural(upstream.overrides, "override", "overrides"));
            }
            if let Some(credentials) = &upstream.credentials {
                let mut note = format!("credentials {}", credentials.kind.as_str());
                if let Some(variable) = &upstream.bearer_token_env {
                    note.push_str(&format!(", bearer token from ${variable}"));
                }
                if let Some(issuer) = &credentials.issuer {
                    note.push_str(&format!(" from {issuer}"));
                }
                if let Some(audience) = &credentials.audience {
                    note.push_str(&format!(" for audience {audience}"));
                }
                notes.push(note);
            }
            if !upstream.env_names.is_empty() {
                notes.push(format!("env: {}", upstream.env_names.join(", ")));
            }
            if !upstream.header_names.is_empty() {
                notes.push(format!("headers: {}", upstream.header_names.join(", ")));
            }
            writeln!(formatter, "  ({})", notes.join("; "))?;
        }
        writeln!(formatter, "listeners:")?;
        for listener in &self.listeners {
            match listener {
                ListenerSummary::Http { bind, path, loopback } => {
                    let reach = if *loopback { "this machine only" } else { "REACHABLE FROM OTHER MACHINES" };
                    writeln!(formatter, "  http   http://{bind}{path}  ({reach})")?;
                }
                ListenerSummary::Stdio { identity, scopes } => {
                    writeln!(formatter, "  stdio  identity \"{identity}\"{}", scope_list(scopes))?;
                }
            }
        }
        write!(
            formatter,
            "limits: messages up to {} MiB, at most {}, idle sessions closed after {} min",
            self.limits.max_message_bytes / (1024 * 1024),
            plural(self.limits.max_sessions, "session", "sessions"),
            self.limits.session_idle_timeout.as_secs() / 60
        )?;
        let defaults = match self.policy.defaults {
            DefaultProfile::Standard => "standard",
            DefaultProfile::None => "none",
        };
        write!(
            formatter,
            "\npolicy: mode {}, default profile {defaults}, {}, session taint {}",
            self.policy.mode.as_str(),
            plural(self.policy.rules, "rule", "rules"),
            if self.policy.session_taint { "on" } else { "off" }
        )?;
        if self.callers.is_empty() && self.oauth.is_none() {
            write!(formatter, "\ncallers: none")?;
        } else {
            write!(formatter, "\ncallers:")?;
            for caller in &self.callers {
                write!(formatter, "\n  {}{}", caller.name, scope_list(&caller.scopes))?;
            }
            // With OAuth every HTTP caller is a token's subject: nobody calls as `anonymous`.
            if let Some(oauth) = &self.oauth {
                let opaque = if oauth.introspection { "introspected" } else { "refused" };
                let required = match oauth.required_scopes.as_slice() {
                    [] => "no required scope".to_owned(),
                    scopes => format!("required scopes: {}", scopes.join(", ")),
                };
                write!(
                    formatter,
                    "\n  OAuth access tokens from {} for {} ({required}; opaque tokens {opaque})",
                    oauth.issuer, oauth.resource
                )?;
            }
        }
        for warning in &self.warnings {
            write!(formatter, "\nwarning: {warning}")?;
        }
        Ok(())
    }
}
