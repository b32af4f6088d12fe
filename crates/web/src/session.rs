//! Console sessions: the one-time login token, random session ids (kept only as SHA-256) and a CSRF token per
//! session.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use sha2::{Digest as _, Sha256};
use toolgate_core::fingerprint::digest_bytes;

use crate::ConsoleUser;

/// The session cookie's name.
pub(crate) const COOKIE: &str = "toolgate_console";
/// Who a session opened with the one-time link decides as.
pub(crate) const LINK_IDENTITY: &str = "console";
/// How long a session lasts after login.
pub(crate) const SESSION_LIFETIME: Duration = Duration::from_secs(12 * 60 * 60);
/// Most sessions kept at once (the oldest goes first).
const MAX_SESSIONS: usize = 64;

/// 32 random bytes from the operating system, as 64 lowercase hex digits.
pub fn random_token() -> std::io::Result<String> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).map_err(|error| std::io::Error::other(error.to_string()))?;
    Ok(hex(&bytes))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

fn digest(text: &str) -> [u8; 32] {
    Sha256::digest(text.as_bytes()).into()
}

/// Equality that takes the same time wherever the inputs differ (over digests, so lengths leak nothing).
pub(crate) fn same_secret(left: &str, right: &str) -> bool {
    let (left, right) = (digest(left), digest(right));
    left.iter().zip(right.iter()).fold(0u8, |acc, (a, b)| acc | (a ^ b)) == 0
}

/// A logged-in browser.
#[derive(Debug, Clone)]
pub(crate) struct Session {
    /// The token every POST of this session must carry.
    pub(crate) csrf: String,
    /// Who is logged in, as decisions record it (`console` for the one-time link).
    pub(crate) identity: String,
    expires: Instant,
}

/// The login token (until used) and the live sessions.
#[derive(Debug)]
pub(crate) struct Sessions {
    inner: Mutex<Inner>,
}

#[derive(Debug)]
struct Inner {
    /// The login token's digest; `None` once it has been exchanged.
    login: Option<[u8; 32]>,
    /// Configured users: their identity (`console:NAME`) and token digest (`sha256:<hex>`).
    users: Vec<(String, String)>,
    /// Sessions by the digest of their id.
    live: HashMap<[u8; 32], Session>,
}

/// Why a login failed.
#[derive(Debug)]
pub(crate) enum LoginError {
    /// Wrong token, or the link was already used.
    Refused,
    /// No randomness for the session id.
    Random(std::io::Error),
}

impl Sessions {
    pub(crate) fn new(login_token: &str, users: &[ConsoleUser]) -> Sessions {
        let login = (!login_token.is_empty()).then(|| digest(login_token));
        let users = users.iter().map(|user| (format!("console:{}", user.name), user.token_sha256.clone())).collect();
        Sessions { inner: Mutex::new(Inner { login, users, live: HashMap::new() }) }
    }

    /// Whether users are configured (the login form is offered).
    pub(crate) fn has_users(&self) -> bool {
        !self.lock().users.is_empty()
    }

    /// Opens a session for the user whose token this is; returns the session id. Every user's digest is compared
    /// (in constant time each), so the time taken says nothing about which one matched.
    pub(crate) fn login_user(&self, token: &str) -> Result<String, LoginError> {
        let mut inner = self.lock();
        let presented = digest_bytes(token.as_bytes());
        let mut identity = None;
        for (name, token_sha256) in &inner.users {
            if same_secret(&presented, token_sha256) && identity.is_none() {
                identity = Some(name.clone());
            }
        }
        let Some(identity) = identity else { return Err(LoginError::Refused) };
        Sessions::open(&mut inner, &identity)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Exchanges the one-time login token for a new session; returns the session id (the cookie's value).
    pub(crate) fn login(&self, token: &str) -> Result<String, LoginError> {
        let mut inner = self.lock();
        let presented = digest(token);
        let matches = inner
            .login
            .is_some_and(|login| login.iter().zip(presented.iter()).fold(0u8, |acc, (a, b)| acc | (a ^ b)) == 0);
        if !matches {
            return Err(LoginError::Refused);
        }
        inner.login = None;
        Sessions::open(&mut inner, LINK_IDENTITY)
    }

    /// A new session for `identity` in `inner`; returns its id.
    fn open(inner: &mut Inner, identity: &str) -> Result<String, LoginError> {
        let id = random_token().map_err(LoginError::Random)?;
        let csrf = random_token().map_err(LoginError::Random)?;
        let now = Instant::now();
        inner.live.retain(|_, session| session.expires > now);
        if inner.live.len() >= MAX_SESSIONS
            && let Some(oldest) = inner.live.iter().min_by_key(|(_, session)| session.expires).map(|(key, _)| *key)
        {
            inner.live.remove(&oldest);
        }
        inner
            .live
            .insert(digest(&id), Session { csrf, identity: identity.to_owned(), expires: now + SESSION_LIFETIME });
        Ok(id)
    }

    /// The live session with this id.
    pub(crate) fn get(&self, id: &str) -> Option<Session> {
        let inner = self.lock();
        inner.live.get(&digest(id)).filter(|session| session.expires > Instant::now()).cloned()
    }

    /// Ends a session.
    pub(crate) fn remove(&self, id: &str) {
        self.lock().live.remove(&digest(id));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn login_token_is_single_use() -> Result<(), String> {
        let sessions = Sessions::new("secret", &[]);
        assert!(matches!(sessions.login("wrong"), Err(LoginError::Refused)));
        let id = sessions.login("secret").map_err(|error| format!("{error:?}"))?;
        assert!(sessions.get(&id).is_some());
        assert!(matches!(sessions.login("secret"), Err(LoginError::Refused)));
        sessions.remove(&id);
        assert!(sessions.get(&id).is_none());
        assert!(matches!(Sessions::new("", &[]).login(""), Err(LoginError::Refused)));
        Ok(())
    }

    #[test]
    fn users_log_in_with_their_own_token_as_often_as_they_like() -> Result<(), String> {
        let alice = ConsoleUser { name: "alice".into(), token_sha256: digest_bytes(b"alice-token") };
        let sessions = Sessions::new("link", &[alice]);
        assert!(sessions.has_users());
        assert!(matches!(sessions.login_user("link"), Err(LoginError::Refused)), "the link is not a user token");
        assert!(matches!(sessions.login_user("alice"), Err(LoginError::Refused)));
        for _ in 0..2 {
            let id = sessions.login_user("alice-token").map_err(|error| format!("{error:?}"))?;
            assert_eq!(sessions.get(&id).map(|session| session.identity), Some("console:alice".to_owned()));
        }
        let id = sessions.login("link").map_err(|error| format!("{error:?}"))?;
        assert_eq!(sessions.get(&id).map(|session| session.identity), Some("console".to_owned()));
        assert!(!Sessions::new("link", &[]).has_users());
        Ok(())
    }

    #[test]
    fn secrets_compare() {
        assert!(same_secret("abc", "abc"));
        assert!(!same_secret("abc", "abd"));
        assert!(!same_secret("abc", "abcd"));
    }
}
