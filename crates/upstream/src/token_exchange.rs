//! Tokens for one caller: RFC 8693 token exchange of the caller's own access token at the issuer, for a token
//! exchange upstream (`[upstream.credentials] kind = "token_exchange"`).
//!
//! A request made on a caller's behalf names its [`OnBehalf`] (the caller's subject and token); the HTTP transport
//! asks [`TokenExchanger::token_for`] for that caller's exchanged token and sends it on that request only, so one
//! caller's token never rides on another caller's request, whatever session they share upstream. Exchanged tokens
//! are cached per caller in a bounded least-recently-used table keyed by the subject and a SHA-256 digest of the
//! subject token (never the token itself), until a fifth of their lifetime is left; one caller's concurrent
//! requests wait for one exchange, and other callers never wait behind it. A 401 forgets that caller's token
//! ([`TokenExchanger::reject`]). Neither the caller's token nor an exchanged one is logged, put in an error or shown
//! by `Debug`. What it did is counted ([`TokenExchanger::counts`]: exchanges granted, cache hits, failures by kind)
//! for the gateway's `/metrics`. This module decides nothing about who may call: it only obtains credentials.

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use sha2::{Digest as _, Sha256};
use toolgate_spec::{ACCESS_TOKEN_TYPE, Secret, SubjectToken, TokenExchangeSpec};

use crate::credentials::{self, CachedToken, ClientAuth, TokenFailure};
use crate::error::UpstreamError;

/// The RFC 8693 grant type.
const TOKEN_EXCHANGE_GRANT: &str = "urn:ietf:params:oauth:grant-type:token-exchange";
/// Callers whose exchanged tokens are kept; the one used least recently leaves first.
pub const MAX_CACHED_CALLERS: usize = 1024;

/// On whose behalf a request goes upstream: the caller's name (an OAuth token's subject) and the access token it
/// presented, when it presented one (a static caller or a stdio client did not).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OnBehalf {
    /// The caller's name, for messages and the cache key.
    pub subject: String,
    /// The caller's OAuth access token (redacted when formatted), traded at the issuer and never sent upstream.
    pub token: Option<SubjectToken>,
}

/// Where a caller's exchanged token is cached: its subject and the digest of the token it was exchanged for.
#[derive(Clone, PartialEq, Eq, Hash)]
struct CacheKey {
    subject: String,
    digest: [u8; 32],
}

impl fmt::Debug for CacheKey {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The subject and a digest prefix only: enough to tell entries apart in a debug line, nothing to replay.
        let prefix: String = self.digest.iter().take(4).map(|byte| format!("{byte:02x}")).collect();
        write!(formatter, "CacheKey({}, sha256:{prefix}…)", self.subject)
    }
}

/// One caller's slot: its exchange runs under the slot's lock, so its concurrent requests share one exchange.
type Slot = Arc<tokio::sync::Mutex<Option<CachedToken>>>;

struct Entry {
    slot: Slot,
    /// When it was last used (a counter), for eviction.
    used: u64,
}

#[derive(Default)]
struct Cache {
    entries: HashMap<CacheKey, Entry>,
    clock: u64,
}

impl Cache {
    /// The slot for `key`, made when missing; the least recently used entry leaves when the table is full. An
    /// evicted slot still in use lives on with its user and is simply no longer found.
    fn slot(&mut self, key: CacheKey) -> Slot {
        self.clock += 1;
        let now = self.clock;
        if let Some(entry) = self.entries.get_mut(&key) {
            entry.used = now;
            return Arc::clone(&entry.slot);
        }
        if self.entries.len() >= MAX_CACHED_CALLERS
            && let Some(oldest) = self.entries.iter().min_by_key(|(_, entry)| entry.used).map(|(key, _)| key.clone())
        {
            self.entries.remove(&oldest);
        }
        let slot = Slot::default();
        self.entries.insert(key, Entry { slot: Arc::clone(&slot), used: now });
        slot
    }
}

/// What one exchanger did since it was made (a config reload that restarts its upstream makes a new one).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ExchangeCounts {
    /// Exchanges the issuer granted.
    pub exchanged: u64,
    /// Requests that were sent with a cached exchanged token, asking the issuer nothing.
    pub cache_hits: u64,
    /// Exchanges (or requests for one) that failed, by kind, in [`TokenFailure::ALL`]'s order.
    pub failures: [u64; TokenFailure::ALL.len()],
}

impl ExchangeCounts {
    /// The failures of one kind.
    pub fn failed(&self, kind: TokenFailure) -> u64 {
        TokenFailure::ALL.iter().position(|known| *known == kind).map_or(0, |index| self.failures[index])
    }
}

/// The live counters behind [`ExchangeCounts`].
#[derive(Default)]
struct Counters {
    exchanged: AtomicU64,
    cache_hits: AtomicU64,
    failures: [AtomicU64; TokenFailure::ALL.len()],
}

/// The refusal of `caller`, who presented no OAuth access token to exchange, counted by the upstream's exchanger
/// (`exchanger`, when it has one) whether the connection refuses it before anything is queued or the exchanger does.
pub(crate) fn no_caller_token(exchanger: Option<&TokenExchanger>, caller: &OnBehalf) -> UpstreamError {
    if let Some(exchanger) = exchanger {
        exchanger.count_failure(TokenFailure::NoCallerToken);
    }
    UpstreamError::NoCallerToken { caller: caller.subject.clone() }
}

/// Exchanges callers' tokens for one upstream and caches the results.
pub struct TokenExchanger {
    spec: TokenExchangeSpec,
    client: reqwest::Client,
    /// The token endpoint: configured, or discovered once.
    endpoint: tokio::sync::Mutex<Option<reqwest::Url>>,
    cache: Mutex<Cache>,
    counters: Counters,
}

impl fmt::Debug for TokenExchanger {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter
            .debug_struct("TokenExchanger")
            .field("issuer", &self.spec.issuer)
            .field("client_id", &self.spec.client_id)
            .finish_non_exhaustive()
    }
}

impl TokenExchanger {
    /// An exchanger for `spec`; nothing is asked until the first request on a caller's behalf.
    pub fn new(spec: &TokenExchangeSpec) -> Result<TokenExchanger, UpstreamError> {
        let client = credentials::issuer_client(&spec.issuer)?;
        let endpoint = spec
            .token_endpoint
            .as_deref()
            .map(|endpoint| credentials::configured_endpoint(&spec.issuer, endpoint))
            .transpose()?;
        Ok(TokenExchanger {
            spec: spec.clone(),
            client,
            endpoint: tokio::sync::Mutex::new(endpoint),
            cache: Mutex::new(Cache::default()),
            counters: Counters::default(),
        })
    }

    /// What this exchanger did so far.
    pub fn counts(&self) -> ExchangeCounts {
        let read = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        ExchangeCounts {
            exchanged: read(&self.counters.exchanged),
            cache_hits: read(&self.counters.cache_hits),
            failures: std::array::from_fn(|index| read(&self.counters.failures[index])),
        }
    }

    /// Counts one failure of `kind`.
    fn count_failure(&self, kind: TokenFailure) {
        if let Some(index) = TokenFailure::ALL.iter().position(|known| *known == kind) {
            self.counters.failures[index].fetch_add(1, Ordering::Relaxed);
        }
    }

    /// The token to send upstream on `caller`'s behalf: its cached exchanged token while fresh, else a new one
    /// from the issuer. A caller without an access token gets [`UpstreamError::NoCallerToken`]: nothing may be
    /// sent for it with anyone else's credentials.
    pub(crate) async fn token_for(&self, caller: &OnBehalf) -> Result<Secret, UpstreamError> {
        let (key, subject_token) = self.key(caller)?;
        let slot = self.cache.lock().unwrap_or_else(PoisonError::into_inner).slot(key);
        let mut cached = slot.lock().await;
        if let Some(token) = cached.as_ref().filter(|token| token.is_fresh()) {
            self.counters.cache_hits.fetch_add(1, Ordering::Relaxed);
            return Ok(token.value.clone());
        }
        *cached = None;
        let token = self.exchange(&caller.subject, subject_token).await.map_err(|(kind, error)| {
            self.count_failure(kind);
            error
        })?;
        self.counters.exchanged.fetch_add(1, Ordering::Relaxed);
        let value = token.value.clone();
        *cached = Some(token);
        Ok(value)
    }

    /// The upstream refused `token` sent for `caller` (HTTP 401): forget it, unless another request of the caller
    /// has replaced it already.
    pub(crate) async fn reject(&self, caller: &OnBehalf, token: &Secret) {
        let Ok((key, _)) = self.key(caller) else { return };
        let slot =
            self.cache.lock().unwrap_or_else(PoisonError::into_inner).entries.get(&key).map(|e| Arc::clone(&e.slot));
        if let Some(slot) = slot {
            let mut cached = slot.lock().await;
            if cached.as_ref().is_some_and(|cached| cached.value == *token) {
                *cached = None;
            }
        }
    }

    fn key<'a>(&self, caller: &'a OnBehalf) -> Result<(CacheKey, &'a SubjectToken), UpstreamError> {
        let token = caller.token.as_ref().ok_or_else(|| no_caller_token(Some(self), caller))?;
        let digest: [u8; 32] = Sha256::digest(token.expose().as_bytes()).into();
        Ok((CacheKey { subject: caller.subject.clone(), digest }, token))
    }

    /// One RFC 8693 exchange at the token endpoint (discovered first when not configured); a failure says its kind.
    async fn exchange(
        &self,
        subject: &str,
        subject_token: &SubjectToken,
    ) -> Result<CachedToken, (TokenFailure, UpstreamError)> {
        let endpoint = self.token_endpoint().await.map_err(|error| (TokenFailure::Discovery, error))?;
        let mut form = vec![
            ("grant_type", TOKEN_EXCHANGE_GRANT),
            ("subject_token", subject_token.expose()),
            ("subject_token_type", ACCESS_TOKEN_TYPE),
            ("requested_token_type", self.spec.requested_token_type.as_str()),
        ];
        for (key, value) in
            [("resource", &self.spec.resource), ("audience", &self.spec.audience), ("scope", &self.spec.scope)]
        {
            if let Some(value) = value {
                form.push((key, value));
            }
        }
        let client = ClientAuth { id: &self.spec.client_id, secret: &self.spec.client_secret };
        credentials::request_token(&self.client, &self.spec.issuer, endpoint, client, &form).await.map_err(
            |(kind, error)| match error {
                // Which caller's exchange failed is worth saying; the caller's token never is.
                UpstreamError::Credentials { issuer, reason } => (
                    kind,
                    UpstreamError::Credentials { issuer, reason: format!("exchanging {subject}'s token: {reason}") },
                ),
                other => (kind, other),
            },
        )
    }

    async fn token_endpoint(&self) -> Result<reqwest::Url, UpstreamError> {
        let mut endpoint = self.endpoint.lock().await;
        if let Some(endpoint) = endpoint.as_ref() {
            return Ok(endpoint.clone());
        }
        let discovered = credentials::discover(&self.client, &self.spec.issuer).await?;
        *endpoint = Some(discovered.clone());
        Ok(discovered)
    }
}

#[cfg(test)]
#[allow(clippy::expect_used)]
mod tests {
    use super::*;

    fn spec() -> TokenExchangeSpec {
        TokenExchangeSpec {
            issuer: "http://127.0.0.1:1".into(),
            token_endpoint: None,
            client_id: "toolgate".into(),
            client_secret: Secret::new("s3cr3t-value"),
            scope: None,
            resource: Some("http://127.0.0.1:2/mcp".into()),
            audience: None,
            requested_token_type: ACCESS_TOKEN_TYPE.into(),
        }
    }

    fn caller(subject: &str, token: &str) -> OnBehalf {
        OnBehalf { subject: subject.into(), token: Some(SubjectToken::new(token)) }
    }

    #[test]
    fn the_cache_keeps_the_callers_used_last() {
        let mut cache = Cache::default();
        let exchanger = TokenExchanger::new(&spec()).expect("an exchanger");
        let first = exchanger.key(&caller("first", "token-0")).expect("a key").0;
        let kept = cache.slot(first.clone());
        for index in 1..MAX_CACHED_CALLERS {
            let key = exchanger.key(&caller(&format!("caller-{index}"), &format!("token-{index}"))).expect("a key").0;
            cache.slot(key);
        }
        // The first is used again, so the second is the least recently used when one more arrives.
        assert!(Arc::ptr_eq(&kept, &cache.slot(first.clone())));
        let second = exchanger.key(&caller("caller-1", "token-1")).expect("a key").0;
        cache.slot(exchanger.key(&caller("newcomer", "token-new")).expect("a key").0);
        assert_eq!(cache.entries.len(), MAX_CACHED_CALLERS);
        assert!(cache.entries.contains_key(&first));
        assert!(!cache.entries.contains_key(&second));
    }

    #[test]
    fn a_new_token_of_the_same_subject_is_another_entry_and_keys_never_show_the_token() {
        let exchanger = TokenExchanger::new(&spec()).expect("an exchanger");
        let old = exchanger.key(&caller("alice", "eyJ.old-secret.sig")).expect("a key").0;
        let new = exchanger.key(&caller("alice", "eyJ.new-secret.sig")).expect("a key").0;
        assert_ne!(old, new);
        let shown = format!("{old:?} {new:?} {exchanger:?}");
        assert!(!shown.contains("secret") && !shown.contains("s3cr3t"), "{shown}");
        assert!(shown.contains("alice"));
    }

    #[test]
    fn a_caller_without_a_token_gets_no_key() {
        let exchanger = TokenExchanger::new(&spec()).expect("an exchanger");
        let anonymous = OnBehalf { subject: "ops".into(), token: None };
        assert!(matches!(exchanger.key(&anonymous), Err(UpstreamError::NoCallerToken { .. })));
    }
}
