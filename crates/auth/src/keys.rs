//! The issuer's metadata and signing keys: discovered (OIDC, then RFC 8414), cached, and fetched again on a timer
//! (the JWKS response's `Cache-Control: max-age` when it has one, within `[min_refetch, refresh]`, else `refresh`),
//! when a token finds them older than that, or when a token names a `kid` the cache lacks. The timer is what makes
//! a key the issuer stopped publishing stop working even when no token ever triggers a fetch: each fetch replaces
//! the whole key set.
//!
//! Fetches are rate-limited (at most one per `min_refetch`, whatever the trigger), so tokens with made-up `kid`s
//! cannot turn toolgate into a flood of requests to the provider. When the provider cannot be reached, the keys
//! already cached keep working and a key that is not cached fails closed with [`TokenError::ProviderUnavailable`];
//! the next fetch after the interval tries again, so service recovers without a restart. The timer's task
//! ([`spawn_refresher`]) ends when its owner drops the stop handle; it never outlives the validator. Nothing here
//! logs a token.

use std::sync::Arc;
use std::time::{Duration, Instant};

use jsonwebtoken::jwk::{Jwk, JwkSet};
use serde::Deserialize;
use tokio::sync::{Mutex, oneshot};

use crate::TokenError;

/// How long one request to the provider may take.
const FETCH_TIMEOUT: Duration = Duration::from_secs(10);

/// The parts of the authorization server's metadata toolgate uses.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct IssuerMetadata {
    pub(crate) issuer: String,
    pub(crate) jwks_uri: Option<String>,
    pub(crate) introspection_endpoint: Option<String>,
    /// The endpoints of a browser login (OpenID Connect discovery), read by [`crate::OpenIdProvider`].
    pub(crate) authorization_endpoint: Option<String>,
    pub(crate) token_endpoint: Option<String>,
    pub(crate) userinfo_endpoint: Option<String>,
    /// RP-initiated logout (OpenID Connect RP-Initiated Logout 1.0), when the provider offers it.
    pub(crate) end_session_endpoint: Option<String>,
}

#[derive(Debug, Default)]
struct Cache {
    metadata: Option<IssuerMetadata>,
    keys: JwkSet,
    fetched: Option<Instant>,
    last_attempt: Option<Instant>,
    /// The last JWKS response's `Cache-Control: max-age`, when it had one.
    max_age: Option<Duration>,
    /// Why the last fetch failed (`None` after a success).
    last_error: Option<String>,
}

/// The cached metadata and keys of one issuer.
#[derive(Debug)]
pub(crate) struct KeyCache {
    client: reqwest::Client,
    issuer: String,
    refresh: Duration,
    min_refetch: Duration,
    cache: Mutex<Cache>,
}

impl KeyCache {
    pub(crate) fn new(client: reqwest::Client, issuer: String, refresh: Duration, min_refetch: Duration) -> Self {
        KeyCache { client, issuer, refresh, min_refetch, cache: Mutex::new(Cache::default()) }
    }

    /// The key named `kid` (or the only key, when the token names none), fetching when it is unknown or the cache
    /// is stale and the rate limit allows.
    pub(crate) async fn key(&self, kid: Option<&str>) -> Result<Jwk, TokenError> {
        let mut cache = self.cache.lock().await;
        let every = self.interval(&cache);
        let stale = cache.fetched.is_none_or(|at| at.elapsed() >= every);
        let found = find(&cache.keys, kid);
        if found.is_none() || stale {
            self.refresh_locked(&mut cache).await;
        }
        if let Some(key) = find(&cache.keys, kid) {
            return Ok(key);
        }
        match (&cache.last_error, cache.fetched) {
            (Some(reason), _) => Err(TokenError::ProviderUnavailable(reason.clone())),
            (None, Some(_)) => Err(TokenError::UnknownKey),
            (None, None) => Err(TokenError::ProviderUnavailable("the issuer's keys were never fetched".into())),
        }
    }

    /// The metadata (discovering it when not yet known).
    pub(crate) async fn metadata(&self) -> Result<IssuerMetadata, TokenError> {
        let mut cache = self.cache.lock().await;
        if cache.metadata.is_none() {
            self.refresh_locked(&mut cache).await;
        }
        match (&cache.metadata, &cache.last_error) {
            (Some(metadata), _) => Ok(metadata.clone()),
            (None, Some(reason)) => Err(TokenError::ProviderUnavailable(reason.clone())),
            (None, None) => Err(TokenError::ProviderUnavailable("the issuer's metadata is unknown".into())),
        }
    }

    /// How often the keys are fetched: the issuer's `max-age` kept within `[min_refetch, refresh]`, else `refresh`;
    /// never more often than once a second (a zero `min_refetch` must not make the timer spin).
    fn interval(&self, cache: &Cache) -> Duration {
        let every = match cache.max_age {
            Some(max_age) => max_age.max(self.min_refetch).min(self.refresh),
            None => self.refresh,
        };
        every.max(Duration::from_secs(1))
    }

    /// How long until the timer should fetch: one interval after the last attempt (a failed one included, so a
    /// provider that is down is asked once per interval by the timer), now when nothing was tried yet.
    async fn due_in(&self) -> Duration {
        let cache = self.cache.lock().await;
        match cache.last_attempt {
            Some(at) => self.interval(&cache).saturating_sub(at.elapsed()),
            None => Duration::ZERO,
        }
    }

    /// The timer's fetch (rate-limited like every other).
    async fn refresh_on_timer(&self) {
        let mut cache = self.cache.lock().await;
        self.refresh_locked(&mut cache).await;
    }

    async fn refresh_locked(&self, cache: &mut Cache) {
        if cache.last_attempt.is_some_and(|at| at.elapsed() < self.min_refetch) {
            return;
        }
        cache.last_attempt = Some(Instant::now());
        match self.fetch(cache.metadata.clone()).await {
            Ok((metadata, keys, max_age)) => {
                cache.metadata = Some(metadata);
                cache.keys = keys;
                cache.max_age = max_age;
                cache.fetched = Some(Instant::now());
                cache.last_error = None;
            }
            Err(reason) => {
                tracing::warn!(issuer = %self.issuer, %reason, "cannot fetch the OAuth issuer's keys");
                cache.last_error = Some(reason);
            }
        }
    }

    async fn fetch(&self, known: Option<IssuerMetadata>) -> Result<(IssuerMetadata, JwkSet, Option<Duration>), String> {
        let metadata = match known {
            Some(metadata) => metadata,
            None => self.discover().await?,
        };
        let jwks_uri = metadata.jwks_uri.clone().ok_or("the issuer's metadata names no jwks_uri")?;
        let (keys, max_age) = self.get_json_with_max_age::<JwkSet>(&jwks_uri).await?;
        Ok((metadata, keys, max_age))
    }

    /// OIDC discovery, then RFC 8414's well-known location; the metadata must name exactly the configured issuer
    /// (a mix-up defence: keys from another issuer must never validate this one's tokens).
    async fn discover(&self) -> Result<IssuerMetadata, String> {
        let base = self.issuer.trim_end_matches('/');
        let mut reasons = Vec::new();
        for url in well_known_urls(base) {
            match self.get_json::<IssuerMetadata>(&url).await {
                Ok(metadata) if metadata.issuer == self.issuer => return Ok(metadata),
                Ok(metadata) => {
                    return Err(format!(
                        "{url} names issuer {:?}, not the configured {:?}",
                        metadata.issuer, self.issuer
                    ));
                }
                Err(reason) => reasons.push(reason),
            }
        }
        Err(reasons.join("; "))
    }

    async fn get_json<T: serde::de::DeserializeOwned>(&self, url: &str) -> Result<T, String> {
        self.get_json_with_max_age(url).await.map(|(value, _)| value)
    }

    /// The JSON at `url` and the response's `Cache-Control: max-age`, if any.
    async fn get_json_with_max_age<T: serde::de::DeserializeOwned>(
        &self,
        url: &str,
    ) -> Result<(T, Option<Duration>), String> {
        let response = self
            .client
            .get(url)
            .timeout(FETCH_TIMEOUT)
            .send()
            .await
            .map_err(|error| format!("{url}: {}", without_url(&error)))?;
        let status = response.status();
        if !status.is_success() {
            return Err(format!("{url} answered {status}"));
        }
        let max_age = response
            .headers()
            .get(reqwest::header::CACHE_CONTROL)
            .and_then(|value| value.to_str().ok())
            .and_then(max_age);
        let value = response.json::<T>().await.map_err(|error| format!("{url}: {}", without_url(&error)))?;
        Ok((value, max_age))
    }
}

/// Starts the timer that fetches `keys` once per interval (the first time at once); it ends when the returned
/// sender is dropped. `None` outside a Tokio runtime (nothing to run it on): then only tokens trigger fetches.
pub(crate) fn spawn_refresher(keys: &Arc<KeyCache>) -> Option<oneshot::Sender<()>> {
    let runtime = tokio::runtime::Handle::try_current().ok()?;
    let (stop, mut stopped) = oneshot::channel::<()>();
    let keys = Arc::clone(keys);
    runtime.spawn(async move {
        loop {
            let wait = keys.due_in().await;
            tokio::select! {
                _ = &mut stopped => return,
                () = tokio::time::sleep(wait) => {}
            }
            tokio::select! {
                _ = &mut stopped => return,
                () = keys.refresh_on_timer() => {}
            }
        }
    });
    Some(stop)
}

/// `max-age=N` of a `Cache-Control` value (`no-cache` / `no-store` read as zero: fetch as often as allowed).
fn max_age(value: &str) -> Option<Duration> {
    let mut found = None;
    for directive in value.split(',').map(str::trim) {
        let lowered = directive.to_ascii_lowercase();
        if lowered == "no-cache" || lowered == "no-store" {
            return Some(Duration::ZERO);
        }
        if let Some(seconds) = lowered.strip_prefix("max-age=") {
            found = seconds.trim_matches('"').parse::<u64>().ok().map(Duration::from_secs);
        }
    }
    found
}

/// `/.well-known/openid-configuration` after the issuer's path, then RFC 8414's form (inserted before the path).
fn well_known_urls(issuer: &str) -> Vec<String> {
    let mut urls = vec![format!("{issuer}/.well-known/openid-configuration")];
    let after_scheme = issuer.find("://").map_or(0, |at| at + 3);
    match issuer[after_scheme..].find('/') {
        Some(slash) => {
            let (origin, path) = issuer.split_at(after_scheme + slash);
            urls.push(format!("{origin}/.well-known/oauth-authorization-server{path}"));
        }
        None => urls.push(format!("{issuer}/.well-known/oauth-authorization-server")),
    }
    urls
}

fn find(keys: &JwkSet, kid: Option<&str>) -> Option<Jwk> {
    match kid {
        Some(kid) => keys.find(kid).cloned(),
        // Without a `kid` only an unambiguous key set can say which key signed.
        None if keys.keys.len() == 1 => keys.keys.first().cloned(),
        None => None,
    }
}

fn without_url(error: &reqwest::Error) -> String {
    let text = error.to_string();
    if error.is_connect() { "cannot connect".to_owned() } else { text }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn max_age_is_read_from_cache_control() {
        assert_eq!(max_age("public, max-age=600"), Some(Duration::from_secs(600)));
        assert_eq!(max_age("Max-Age=\"60\""), Some(Duration::from_secs(60)));
        assert_eq!(max_age("no-store"), Some(Duration::ZERO));
        assert_eq!(max_age("public"), None);
        assert_eq!(max_age("max-age=soon"), None);
    }

    #[test]
    fn the_interval_keeps_max_age_within_the_configured_bounds() {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let keys = KeyCache::new(
            reqwest::Client::new(),
            "http://127.0.0.1:9".into(),
            Duration::from_secs(300),
            Duration::from_secs(10),
        );
        let with = |max_age| Cache { max_age, ..Cache::default() };
        assert_eq!(keys.interval(&with(None)), Duration::from_secs(300));
        assert_eq!(keys.interval(&with(Some(Duration::from_secs(60)))), Duration::from_secs(60));
        assert_eq!(keys.interval(&with(Some(Duration::from_secs(86_400)))), Duration::from_secs(300));
        assert_eq!(keys.interval(&with(Some(Duration::ZERO))), Duration::from_secs(10));
    }

    #[test]
    fn well_known_locations_follow_oidc_then_rfc_8414() {
        assert_eq!(
            well_known_urls("https://id.example/tenant"),
            vec![
                "https://id.example/tenant/.well-known/openid-configuration".to_owned(),
                "https://id.example/.well-known/oauth-authorization-server/tenant".to_owned(),
            ]
        );
        assert_eq!(
            well_known_urls("http://127.0.0.1:9")[1],
            "http://127.0.0.1:9/.well-known/oauth-authorization-server"
        );
    }
}
