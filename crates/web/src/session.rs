//! Console sessions: the one-time login token, the configured users (replaced whole on a config reload), random
//! session ids (kept only as SHA-256) and a CSRF token per session. A user's session remembers which user opened
//! it, so replacing the users ends the sessions of anyone removed or changed.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use sha2::{Digest as _, Sha256};
use toolgate_core::fingerprint::digest_bytes;

use crate::{ConsoleUser, UsersReplaced};

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
    /// Configured users (their `Debug` hides the token digests).
    users: Vec<ConsoleUser>,
    /// Sessions by the digest of their id.
    live: HashMap<[u8; 32], Live>,
}

/// A live session and the user who opened it (`None` for the one-time link).
#[derive(Debug)]
struct Live {
    session: Session,
    user: Option<ConsoleUser>,
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
        Sessions { inner: Mutex::new(Inner { login, users: users.to_vec(), live: HashMap::new() }) }
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
        let mut found = None;
        for user in &inner.users {
            if same_secret(&presented, &user.token_sha256) && found.is_none() {
                found = Some(user.clone());
            }
        }
        let Some(user) = found else { return Err(LoginError::Refused) };
        Sessions::open(&mut inner, Some(user))
    }

    /// Replaces the configured users. Sessions opened by a user who is no longer configured with the same name and
    /// token end now; the one-time link's sessions and the link itself are untouched.
    pub(crate) fn replace_users(&self, users: Vec<ConsoleUser>) -> UsersReplaced {
        let mut inner = self.lock();
        let Inner { users: running, live, .. } = &mut *inner;
        let named = |list: &[ConsoleUser], name: &str| list.iter().find(|user| user.name == name).cloned();
        let mut replaced = UsersReplaced::default();
        for user in &users {
            match named(running, &user.name) {
                None => replaced.added.push(user.name.clone()),
                Some(before) if before.token_sha256 != user.token_sha256 => replaced.changed.push(user.name.clone()),
                Some(_) => {}
            }
        }
        replaced.removed =
            running.iter().filter(|user| named(&users, &user.name).is_none()).map(|user| user.name.clone()).collect();
        let before = live.len();
        live.retain(|_, session| session.user.as_ref().is_none_or(|user| users.contains(user)));
        replaced.sessions_ended = before - live.len();
        *running = users;
        replaced
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
        Sessions::open(&mut inner, None)
    }

    /// A new session in `inner` for `user` (`None`: the one-time link); returns its id.
    fn open(inner: &mut Inner, user: Option<ConsoleUser>) -> Result<String, LoginError> {
        let id = random_token().map_err(LoginError::Random)?;
        let csrf = random_token().map_err(LoginError::Random)?;
        let now = Instant::now();
        inner.live.retain(|_, live| live.session.expires > now);
        if inner.live.len() >= MAX_SESSIONS
            && let Some(oldest) = inner.live.iter().min_by_key(|(_, live)| live.session.expires).map(|(key, _)| *key)
        {
            inner.live.remove(&oldest);
        }
        let identity = match &user {
            Some(user) => format!("console:{}", user.name),
            None => LINK_IDENTITY.to_owned(),
        };
        let session = Session { csrf, identity, expires: now + SESSION_LIFETIME };
        inner.live.insert(digest(&id), Live { session, user });
        Ok(id)
    }

    /// The live session with this id.
    pub(crate) fn get(&self, id: &str) -> Option<Session> {
        let inner = self.lock();
        inner
            .live
            .get(&digest(id))
            .map(|live| &live.session)
            .filter(|session| session.expires > Instant::now())
            .cloned()
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
    fn replacing_the_users_ends_the_sessions_of_removed_and_changed_users_only() -> Result<(), String> {
        let user =
            |name: &str, token: &str| ConsoleUser { name: name.into(), token_sha256: digest_bytes(token.as_bytes()) };
        let sessions =
            Sessions::new("link", &[user("alice", "alice-1"), user("bob", "bob-1"), user("carol", "carol-1")]);
        let open = |token: &str| sessions.login_user(token).map_err(|error| format!("{error:?}"));
        let (alice, bob, carol) = (open("alice-1")?, open("bob-1")?, open("carol-1")?);
        let link = sessions.login("link").map_err(|error| format!("{error:?}"))?;

        let replaced =
            sessions.replace_users(vec![user("alice", "alice-1"), user("bob", "bob-2"), user("dave", "dave-1")]);
        assert_eq!(replaced.added, ["dave"]);
        assert_eq!(replaced.changed, ["bob"]);
        assert_eq!(replaced.removed, ["carol"]);
        assert_eq!(replaced.sessions_ended, 2);
        assert!(sessions.get(&alice).is_some(), "unchanged users keep their sessions");
        assert!(sessions.get(&bob).is_none() && sessions.get(&carol).is_none());
        assert_eq!(sessions.get(&link).map(|session| session.identity), Some("console".to_owned()));
        assert!(matches!(sessions.login_user("bob-1"), Err(LoginError::Refused)), "the old token opens nothing");
        assert!(matches!(sessions.login_user("carol-1"), Err(LoginError::Refused)));
        assert_eq!(sessions.get(&open("bob-2")?).map(|session| session.identity), Some("console:bob".to_owned()));
        assert_eq!(sessions.get(&open("dave-1")?).map(|session| session.identity), Some("console:dave".to_owned()));

        // A rename with the same token is another user: the old name's session ends.
        let renamed = sessions.replace_users(vec![user("alicia", "alice-1")]);
        assert_eq!(
            (renamed.added, renamed.removed),
            (vec!["alicia".to_owned()], vec!["alice".to_owned(), "bob".to_owned(), "dave".to_owned()])
        );
        assert!(sessions.get(&alice).is_none());
        sessions.replace_users(Vec::new());
        assert!(!sessions.has_users(), "no users: no login form");
        Ok(())
    }

    #[test]
    fn secrets_compare() {
        assert!(same_secret("abc", "abc"));
        assert!(!same_secret("abc", "abd"));
        assert!(!same_secret("abc", "abcd"));
    }
}
