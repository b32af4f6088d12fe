//! RFC 7662 introspection of opaque access tokens: the question to the issuer's endpoint, and a small cache of its
//! answers so that a client's every request does not become a request to the provider.
//!
//! The cache keeps an accepted token's identity until the earlier of its `exp` and the configured reuse time
//! (`IntrospectionSpec::cache`), and an inactive token's refusal for the reuse time; it never keeps an unreachable
//! provider's failure (the next request asks again). That reuse time is the window in which a token revoked at the
//! provider is still accepted: nothing shorter than asking every time closes it, and zero does that. Entries are
//! keyed by the SHA-256 of the token, never the token, and bounded in number (the soonest to lapse goes first).
//! A refusal (an inactive token, one for another audience) is kept at least [`REFUSAL_REUSE`] whatever the reuse
//! time, since keeping a refusal never lets a revoked token in: a client that repeats a bad token asks the
//! provider once.
//!
//! What reaches the provider is bounded too ([`InFlight`]): at most [`MAX_IN_FLIGHT_PER_ADDRESS`] questions at once
//! for one remote address and [`MAX_IN_FLIGHT`] in all; a token past either bound is refused at once
//! ([`TokenError::IntrospectionBusy`]), so a flood of distinct made-up tokens (which no cache can absorb) holds a
//! few of the provider's requests, never one per token.
//! This module sends a token only to the issuer's introspection endpoint and never logs one.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::Value;
use sha2::{Digest, Sha256};
use toolgate_spec::IntrospectionSpec;

use crate::{Identity, TokenError};

/// How many answers are kept at most (enough for every live token of a busy gateway; a flood of made-up tokens
/// evicts only answers that would lapse soonest).
const MAX_ANSWERS: usize = 4096;
/// How long one request to the introspection endpoint may take.
const INTROSPECTION_TIMEOUT: Duration = Duration::from_secs(10);
/// The shortest time a refusal is reused, even with a shorter (or zero) configured reuse time.
pub(crate) const REFUSAL_REUSE: Duration = Duration::from_secs(10);
/// Most introspections in flight for one remote address (a busy client's distinct tokens, or a flood's).
pub(crate) const MAX_IN_FLIGHT_PER_ADDRESS: usize = 8;
/// Most introspections in flight in all, whatever the addresses.
pub(crate) const MAX_IN_FLIGHT: usize = 64;

/// The introspections in flight, by the remote address of the request whose token is asked about (`None`: not
/// known, counted as one address). An address's entry lives only while it has one in flight, so the table holds
/// at most [`MAX_IN_FLIGHT`] entries.
#[derive(Debug, Default)]
pub(crate) struct InFlight {
    counts: Mutex<(HashMap<Option<IpAddr>, usize>, usize)>,
}

impl InFlight {
    /// A place for one introspection for `remote`, held until the returned guard is dropped; `None` when the
    /// address or the whole gateway has as many in flight as it may.
    pub(crate) fn enter(&self, remote: Option<IpAddr>) -> Option<InFlightPlace<'_>> {
        let mut counts = self.counts.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let (by_address, total) = &mut *counts;
        let mine = by_address.get(&remote).copied().unwrap_or(0);
        if mine >= MAX_IN_FLIGHT_PER_ADDRESS || *total >= MAX_IN_FLIGHT {
            return None;
        }
        by_address.insert(remote, mine + 1);
        *total += 1;
        Some(InFlightPlace { table: self, remote })
    }
}

/// One introspection's place in [`InFlight`]; given back when dropped.
#[derive(Debug)]
pub(crate) struct InFlightPlace<'a> {
    table: &'a InFlight,
    remote: Option<IpAddr>,
}

impl Drop for InFlightPlace<'_> {
    fn drop(&mut self) {
        let mut counts = self.table.counts.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let (by_address, total) = &mut *counts;
        *total = total.saturating_sub(1);
        if let Some(count) = by_address.get_mut(&self.remote) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                by_address.remove(&self.remote);
            }
        }
    }
}

type TokenKey = [u8; 32];
/// What the provider said of a token, and until when it may be reused.
type Answer = (Instant, Result<Identity, TokenError>);

/// The introspection answers reused until they lapse.
#[derive(Debug, Default)]
pub(crate) struct AnswerCache {
    answers: Mutex<HashMap<TokenKey, Answer>>,
}

impl AnswerCache {
    /// The answer kept for `token`, when it has not lapsed.
    pub(crate) fn get(&self, token: &str) -> Option<Result<Identity, TokenError>> {
        let key = token_key(token);
        let mut answers = self.answers.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        match answers.get(&key) {
            Some((until, answer)) if Instant::now() < *until => Some(answer.clone()),
            Some(_) => {
                answers.remove(&key);
                None
            }
            None => None,
        }
    }

    /// Keeps `answer` for `token` for `reuse` (a refusal at least [`REFUSAL_REUSE`]), and an accepted one no later
    /// than `exp` (seconds since the epoch). A provider failure (or a question refused as busy) is never kept.
    pub(crate) fn put(&self, token: &str, answer: &Result<Identity, TokenError>, exp: Option<u64>, reuse: Duration) {
        let mut keep = match answer {
            Ok(_) => reuse,
            Err(error) if error.is_unavailable() || *error == TokenError::IntrospectionBusy => return,
            Err(_) => reuse.max(REFUSAL_REUSE),
        };
        if keep.is_zero() {
            return;
        }
        if let (Ok(_), Some(exp)) = (answer, exp) {
            let now = SystemTime::now().duration_since(UNIX_EPOCH).map(|now| now.as_secs()).unwrap_or(u64::MAX);
            keep = keep.min(Duration::from_secs(exp.saturating_sub(now)));
        }
        if keep.is_zero() {
            return;
        }
        let now = Instant::now();
        let mut answers = self.answers.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if answers.len() >= MAX_ANSWERS {
            answers.retain(|_, (until, _)| now < *until);
        }
        if answers.len() >= MAX_ANSWERS
            && let Some(soonest) = answers.iter().min_by_key(|(_, (until, _))| *until).map(|(key, _)| *key)
        {
            answers.remove(&soonest);
        }
        answers.insert(token_key(token), (now + keep, answer.clone()));
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.answers.lock().map(|answers| answers.len()).unwrap_or_default()
    }
}

/// Asks `endpoint` about `token` as the client named in the environment; the answer's claims when it is active,
/// [`TokenError::Inactive`] when not, [`TokenError::ProviderUnavailable`] when there is no usable answer.
pub(crate) async fn ask(
    client: &reqwest::Client,
    spec: &IntrospectionSpec,
    endpoint: &str,
    token: &str,
) -> Result<Value, TokenError> {
    let unavailable = |reason: String| TokenError::ProviderUnavailable(reason);
    let client_id = std::env::var(&spec.client_id_env)
        .map_err(|_| unavailable(format!("introspection client id: ${} is not set", spec.client_id_env)))?;
    let secret = std::env::var(&spec.client_secret_env)
        .map_err(|_| unavailable(format!("introspection secret: ${} is not set", spec.client_secret_env)))?;
    let response = client
        .post(endpoint)
        .basic_auth(client_id, Some(secret))
        .form(&[("token", token), ("token_type_hint", "access_token")])
        .timeout(INTROSPECTION_TIMEOUT)
        .send()
        .await
        .map_err(|_| unavailable(format!("{endpoint}: cannot connect")))?;
    if !response.status().is_success() {
        return Err(unavailable(format!("{endpoint} answered {}", response.status())));
    }
    let mut claims: Value = response.json().await.map_err(|_| unavailable(format!("{endpoint}: not JSON")))?;
    if claims.get("active") != Some(&Value::Bool(true)) {
        return Err(TokenError::Inactive);
    }
    // RFC 7662 makes `sub` optional; a client-credentials token has no person behind it and is its client, as
    // RFC 9068 says of a JWT access token's `sub` (node-oidc-provider's answer for one has no `sub`).
    if claims.get("sub").is_none()
        && let Some(client) = claims.get("client_id").cloned()
        && let Some(object) = claims.as_object_mut()
    {
        object.insert("sub".to_owned(), client);
    }
    Ok(claims)
}

fn token_key(token: &str) -> TokenKey {
    Sha256::digest(token.as_bytes()).into()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn identity() -> Identity {
        Identity { subject: "svc".into(), display: None, scopes: vec!["tools:call".into()] }
    }

    fn now() -> u64 {
        SystemTime::now().duration_since(UNIX_EPOCH).map(|now| now.as_secs()).unwrap_or_default()
    }

    #[test]
    fn answers_are_kept_until_the_earlier_of_exp_and_the_reuse_time() {
        let cache = AnswerCache::default();
        let reuse = Duration::from_secs(30);
        cache.put("a", &Ok(identity()), Some(now() + 600), reuse);
        assert_eq!(cache.get("a"), Some(Ok(identity())));
        // Already past its exp: never reused, however long the reuse time.
        cache.put("expired", &Ok(identity()), Some(now().saturating_sub(1)), reuse);
        assert_eq!(cache.get("expired"), None);
        cache.put("inactive", &Err(TokenError::Inactive), None, reuse);
        assert_eq!(cache.get("inactive"), Some(Err(TokenError::Inactive)));
        // The provider down is never an answer to keep, and zero keeps nothing.
        cache.put("down", &Err(TokenError::ProviderUnavailable("x".into())), None, reuse);
        assert_eq!(cache.get("down"), None);
        cache.put("b", &Ok(identity()), None, Duration::ZERO);
        assert_eq!(cache.get("b"), None);
        // A refusal is kept even with reuse zero: keeping it never lets a revoked token in.
        cache.put("refused", &Err(TokenError::Inactive), None, Duration::ZERO);
        assert_eq!(cache.get("refused"), Some(Err(TokenError::Inactive)));
        cache.put("busy", &Err(TokenError::IntrospectionBusy), None, reuse);
        assert_eq!(cache.get("busy"), None);
    }

    #[test]
    fn introspections_in_flight_are_bounded_per_address_and_in_all() {
        let in_flight = InFlight::default();
        let here = Some(IpAddr::from([127, 0, 0, 1]));
        let mine: Vec<_> = (0..MAX_IN_FLIGHT_PER_ADDRESS).filter_map(|_| in_flight.enter(here)).collect();
        assert_eq!(mine.len(), MAX_IN_FLIGHT_PER_ADDRESS);
        assert!(in_flight.enter(here).is_none(), "one more from the same address is refused");
        drop(mine);
        assert!(in_flight.enter(here).is_some(), "places come back when the questions end");
        let many: Vec<_> = (0..MAX_IN_FLIGHT as u32)
            .filter_map(|index| in_flight.enter(Some(IpAddr::from(std::net::Ipv4Addr::from(0x0a00_0000 + index)))))
            .collect();
        assert_eq!(many.len(), MAX_IN_FLIGHT);
        assert!(in_flight.enter(None).is_none(), "the whole gateway's bound holds");
        drop(many);
        assert_eq!(in_flight.counts.lock().map(|counts| (counts.0.len(), counts.1)).unwrap_or_default(), (0, 0));
    }

    #[test]
    fn the_cache_is_bounded() {
        let cache = AnswerCache::default();
        for index in 0..MAX_ANSWERS + 10 {
            cache.put(&format!("token-{index}"), &Err(TokenError::Inactive), None, Duration::from_secs(30));
        }
        assert_eq!(cache.len(), MAX_ANSWERS);
        assert!(cache.get(&format!("token-{}", MAX_ANSWERS + 9)).is_some(), "the newest answer is kept");
    }
}
