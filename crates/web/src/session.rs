//! Console sessions: the one-time login token, the configured users (replaced whole on a config reload), and the
//! session cookie, which any process sharing the store accepts. A cookie is sealed (HMAC-SHA256) with a secret the
//! store keeps for every process (`RequestStateStore::console_session_key`) and carries a random session id, the
//! expiry, the user's name and a digest of that user's configured entry, so replacing or removing the user ends the
//! session on every process that has the new configuration. The CSRF token is derived from the session id with the
//! same secret, so any process can check it; logout records the session id in the store's used nonces until its
//! expiry, so no process accepts the cookie again. A single sign-on session's ID token stays on the process that
//! opened it (in memory, never in the cookie), only to hint the provider's logout with; a logout handled by another
//! process, or after a restart, names the client without it. Nothing here decides an approval or reads the audit
//! log.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use hmac::{Hmac, KeyInit, Mac};
use sha2::{Digest as _, Sha256};
use toolgate_core::fingerprint::digest_bytes;
use toolgate_store::{Store, StoreError};

use crate::{ConsoleUser, UsersReplaced};

/// The session cookie's name.
pub(crate) const COOKIE: &str = "toolgate_console";
/// Who a session opened with the one-time link decides as.
pub(crate) const LINK_IDENTITY: &str = "console";
/// How long a session lasts after login.
pub(crate) const SESSION_LIFETIME: Duration = Duration::from_secs(12 * 60 * 60);
/// Most sessions this process remembers having opened, only to count those a user change ends (the oldest goes
/// first); the cookies themselves are checked without this list.
const MAX_OPENED: usize = 64;
/// The longest ID token kept for a logout hint (a provider's tokens are a few KiB at most); a longer one logs out
/// without the hint.
const MAX_ID_TOKEN_BYTES: usize = 16 * 1024;
/// The cookie format's version, first in every cookie, so a later format can refuse this one plainly.
const VERSION: &str = "v1";
/// The prefix of a logged-out session's id among the store's used nonces (shared with request states).
const REVOKED_PREFIX: &str = "console-session:";
/// The entry field of a single sign-on session's cookie (a configured user's is a digest, the link's `-`).
const SSO_ENTRY: &str = "sso";

/// 32 random bytes from the operating system, as 64 lowercase hex digits.
pub fn random_token() -> std::io::Result<String> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).map_err(|error| std::io::Error::other(error.to_string()))?;
    Ok(hex(&bytes))
}

/// Lowercase hex of `bytes` (what a sealed cookie carries a free-form field as, so it holds no separator).
pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

/// The bytes [`hex`] wrote; `None` for anything else.
pub(crate) fn unhex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len()).step_by(2).map(|at| u8::from_str_radix(text.get(at..at + 2)?, 16).ok()).collect()
}

fn digest(text: &str) -> [u8; 32] {
    Sha256::digest(text.as_bytes()).into()
}

/// Equality that takes the same time wherever the inputs differ (over digests, so lengths leak nothing).
pub(crate) fn same_secret(left: &str, right: &str) -> bool {
    let (left, right) = (digest(left), digest(right));
    left.iter().zip(right.iter()).fold(0u8, |acc, (a, b)| acc | (a ^ b)) == 0
}

/// The digest of a user's configured entry (name and token digest): a cookie names it, so a session ends when the
/// entry changes. Keyed with the store's secret, so a cookie read by whoever holds it says nothing about the token.
fn entry_digest(key: &[u8], user: &ConsoleUser) -> String {
    seal(key, "entry", &format!("{}\n{}", user.name, user.token_sha256))
}

/// HMAC-SHA256 of `label` then `message` under `key`, as hex. The label keeps a cookie's MAC and a CSRF token
/// apart although both use one secret.
pub(crate) fn seal(key: &[u8], label: &str, message: &str) -> String {
    // HMAC takes a key of any length; the fallback is never reached and would only make every seal fail to match.
    let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(key)
        .unwrap_or_else(|_| <Hmac<Sha256> as KeyInit>::new(&Default::default()));
    mac.update(label.as_bytes());
    mac.update(b"\0");
    mac.update(message.as_bytes());
    hex(&mac.finalize().into_bytes())
}

/// A logged-in browser.
#[derive(Debug, Clone)]
pub(crate) struct Session {
    /// The token every POST of this session must carry.
    pub(crate) csrf: String,
    /// Who is logged in, as decisions record it (`console` for the one-time link, `console:NAME` for a configured
    /// user, the provider's subject for a person logged in through single sign-on).
    pub(crate) identity: String,
    /// A single sign-on person's name or email, for display beside the identity.
    pub(crate) display: Option<String>,
    /// The caller identity whose calls are this person's own (a configured user's name, a person's subject; none
    /// for the one-time link), for the rule that forbids approving one's own call.
    pub(crate) own_caller: Option<String>,
    /// A single sign-on person's groups (for the approver group rule); `None` for the link and configured users.
    pub(crate) groups: Option<Vec<String>>,
    /// Whether a single sign-on login opened it (its logout also ends the person's session at the provider).
    pub(crate) single_sign_on: bool,
    /// The random session id (what logout revokes).
    id: String,
    expires: SystemTime,
}

/// The login token (until used), the configured users and the store's sealing secret.
pub(crate) struct Sessions {
    store: Store,
    /// The single sign-on provider's issuer, when one is configured: a person's cookie names it.
    sso_issuer: Option<String>,
    inner: Mutex<Inner>,
    /// The store's console secret, read once (it never changes for a store).
    key: Mutex<Option<Arc<Vec<u8>>>>,
}

struct Inner {
    /// The login token's digest; `None` once it has been exchanged.
    login: Option<[u8; 32]>,
    /// Configured users (their `Debug` hides the token digests).
    users: Vec<ConsoleUser>,
    /// Sessions this process opened, by id: the user (`None`: the link) and the expiry.
    opened: HashMap<String, (Option<ConsoleUser>, SystemTime)>,
}

/// Why a login failed.
#[derive(Debug)]
pub(crate) enum LoginError {
    /// Wrong token, or the link was already used.
    Refused,
    /// No randomness for the session id.
    Random(std::io::Error),
    /// The store's sealing secret could not be read.
    Store(StoreError),
}

/// What a cookie says, once its seal is checked.
struct Sealed<'a> {
    id: &'a str,
    expires_s: u64,
    /// Hex of the user's name; empty for the one-time link.
    name: &'a str,
    /// The user's entry digest; `-` for the one-time link.
    entry: &'a str,
}

impl Sessions {
    pub(crate) fn new(store: Store, login_token: &str, users: &[ConsoleUser], sso_issuer: Option<String>) -> Sessions {
        let login = (!login_token.is_empty()).then(|| digest(login_token));
        let inner = Inner { login, users: users.to_vec(), opened: HashMap::new() };
        Sessions { store, sso_issuer, inner: Mutex::new(inner), key: Mutex::new(None) }
    }

    /// The store's console secret (also what the single sign-on login state is sealed and derived with).
    pub(crate) async fn secret(&self) -> Result<Arc<Vec<u8>>, StoreError> {
        self.key().await
    }

    /// Opens a session for a person the provider vouched for, ending at `expires` (the caller bounds it by the ID
    /// token's expiry and the configured maximum); returns the cookie's value. The cookie carries the issuer,
    /// subject, display name and groups (sealed), so every process on the store accepts it while it has the same
    /// provider configured.
    /// The login's ID token is kept in the store, by session id until the session expires, for the logout's hint on
    /// whichever process the person logs out on.
    pub(crate) async fn login_person(
        &self,
        login: &crate::oidc::Login,
        expires: SystemTime,
    ) -> Result<String, LoginError> {
        let person = &login.person;
        let issuer = self.sso_issuer.clone().unwrap_or_default();
        let claims = serde_json::json!({
            "iss": issuer, "sub": person.subject, "name": person.display, "groups": person.groups,
        });
        let (id, cookie) =
            self.open_sealed(None, hex(claims.to_string().as_bytes()), SSO_ENTRY.to_owned(), expires).await?;
        if login.id_token.len() <= MAX_ID_TOKEN_BYTES {
            self.store
                .request_states()
                .remember_id_token(&id, &login.id_token, expires)
                .await
                .map_err(LoginError::Store)?;
        }
        Ok(cookie)
    }

    /// The ID token a single sign-on session was opened with, while the store keeps it (on any process sharing the
    /// store). A store that cannot be read gives none: the logout goes on without the hint.
    pub(crate) async fn id_token(&self, session: &Session) -> Option<String> {
        if !session.single_sign_on {
            return None;
        }
        match self.store.request_states().id_token(&session.id).await {
            Ok(token) => token,
            Err(error) => {
                tracing::warn!(%error, "console: the session's ID token could not be read; logging out without the hint");
                None
            }
        }
    }

    /// Whether users are configured (the login form is offered).
    pub(crate) fn has_users(&self) -> bool {
        !self.lock().users.is_empty()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    async fn key(&self) -> Result<Arc<Vec<u8>>, StoreError> {
        if let Some(key) = self.key.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone() {
            return Ok(key);
        }
        let key = Arc::new(self.store.request_states().console_session_key().await?);
        *self.key.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(Arc::clone(&key));
        Ok(key)
    }

    /// Opens a session for the user whose token this is; returns the cookie's value. Every user's digest is
    /// compared (in constant time each), so the time taken says nothing about which one matched.
    pub(crate) async fn login_user(&self, token: &str) -> Result<String, LoginError> {
        let presented = digest_bytes(token.as_bytes());
        let found = {
            let inner = self.lock();
            let mut found = None;
            for user in &inner.users {
                if same_secret(&presented, &user.token_sha256) && found.is_none() {
                    found = Some(user.clone());
                }
            }
            found
        };
        let Some(user) = found else { return Err(LoginError::Refused) };
        self.open(Some(&user)).await
    }

    /// Exchanges the one-time login token for a new session; returns the cookie's value. The link is this
    /// process's own (each process prints one); its session is accepted by every process on the store.
    pub(crate) async fn login(&self, token: &str) -> Result<String, LoginError> {
        {
            let mut inner = self.lock();
            let presented = digest(token);
            let matches = inner
                .login
                .is_some_and(|login| login.iter().zip(presented.iter()).fold(0u8, |acc, (a, b)| acc | (a ^ b)) == 0);
            if !matches {
                return Err(LoginError::Refused);
            }
            inner.login = None;
        }
        self.open(None).await
    }

    /// Replaces the configured users. Sessions opened by a user who is no longer configured with the same name and
    /// token end now, on this process and on every other that loads the same users (the cookie names the entry);
    /// `sessions_ended` counts those this process opened. The link's sessions and the link itself are untouched.
    pub(crate) fn replace_users(&self, users: Vec<ConsoleUser>) -> UsersReplaced {
        let mut inner = self.lock();
        let Inner { users: running, opened, .. } = &mut *inner;
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
        let now = SystemTime::now();
        opened.retain(|_, (_, expires)| *expires > now);
        let before = opened.len();
        opened.retain(|_, (user, _)| user.as_ref().is_none_or(|user| users.contains(user)));
        replaced.sessions_ended = before - opened.len();
        *running = users;
        replaced
    }

    /// A new sealed session for `user` (`None`: the one-time link); returns the cookie's value.
    async fn open(&self, user: Option<&ConsoleUser>) -> Result<String, LoginError> {
        let key = self.key().await.map_err(LoginError::Store)?;
        let (name, entry) = match user {
            Some(user) => (hex(user.name.as_bytes()), entry_digest(&key, user)),
            None => (String::new(), "-".to_owned()),
        };
        Ok(self.open_sealed(user, name, entry, SystemTime::now() + SESSION_LIFETIME).await?.1)
    }

    /// Seals a new session until `expires` whose cookie carries `name` and `entry`; `user` is remembered for
    /// `replace_users`. Returns the session's id and the cookie's value.
    async fn open_sealed(
        &self,
        user: Option<&ConsoleUser>,
        name: String,
        entry: String,
        expires: SystemTime,
    ) -> Result<(String, String), LoginError> {
        let key = self.key().await.map_err(LoginError::Store)?;
        let id = random_token().map_err(LoginError::Random)?;
        let expires_s = expires.duration_since(UNIX_EPOCH).map_or(0, |since| since.as_secs());
        let body = format!("{VERSION}.{id}.{expires_s}.{name}.{entry}");
        let cookie = format!("{body}.{}", seal(&key, "cookie", &body));
        let mut inner = self.lock();
        let now = SystemTime::now();
        inner.opened.retain(|_, (_, expires)| *expires > now);
        if inner.opened.len() >= MAX_OPENED
            && let Some(oldest) =
                inner.opened.iter().min_by_key(|(_, (_, expires))| *expires).map(|(key, _)| key.clone())
        {
            inner.opened.remove(&oldest);
        }
        inner.opened.insert(id.clone(), (user.cloned(), expires));
        Ok((id, cookie))
    }

    /// The live session this cookie names: sealed with this store's secret, not expired, its user still configured
    /// with the same entry, and not logged out on any process. A store failure is logged and refuses the session.
    pub(crate) async fn get(&self, cookie: &str) -> Option<Session> {
        match self.check(cookie).await {
            Ok(session) => session,
            Err(error) => {
                tracing::error!(%error, "console: the store failed while checking a session");
                None
            }
        }
    }

    async fn check(&self, cookie: &str) -> Result<Option<Session>, StoreError> {
        let Some((body, mac)) = cookie.rsplit_once('.') else { return Ok(None) };
        let key = self.key().await?;
        if !same_secret(mac, &seal(&key, "cookie", body)) {
            return Ok(None);
        }
        let Some(sealed) = parse(body) else { return Ok(None) };
        let expires = UNIX_EPOCH + Duration::from_secs(sealed.expires_s);
        if expires <= SystemTime::now() {
            return Ok(None);
        }
        let mut session = Session {
            csrf: seal(&key, "csrf", sealed.id),
            identity: LINK_IDENTITY.to_owned(),
            display: None,
            own_caller: None,
            groups: None,
            single_sign_on: false,
            id: sealed.id.to_owned(),
            expires,
        };
        if sealed.entry == SSO_ENTRY {
            let Some(person) = self.person(sealed.name) else { return Ok(None) };
            session.identity = person.subject.clone();
            session.own_caller = Some(person.subject);
            session.display = Some(person.display);
            session.groups = Some(person.groups);
            session.single_sign_on = true;
        } else if !sealed.name.is_empty() {
            let Some(name) = unhex(sealed.name).and_then(|bytes| String::from_utf8(bytes).ok()) else {
                return Ok(None);
            };
            let configured = self
                .lock()
                .users
                .iter()
                .any(|user| user.name == name && same_secret(&entry_digest(&key, user), sealed.entry));
            if !configured {
                return Ok(None);
            }
            session.identity = format!("console:{name}");
            session.own_caller = Some(name);
        }
        if self.store.request_states().is_used(&revoked(sealed.id)).await? {
            return Ok(None);
        }
        Ok(Some(session))
    }

    /// The person a single sign-on cookie names, if it was issued for the provider configured now.
    fn person(&self, name: &str) -> Option<crate::oidc::Person> {
        let claims: serde_json::Value = serde_json::from_slice(&unhex(name)?).ok()?;
        let text = |field: &str| claims.get(field).and_then(serde_json::Value::as_str).map(str::to_owned);
        if self.sso_issuer.is_none() || text("iss") != self.sso_issuer {
            return None;
        }
        let groups = claims.get("groups")?.as_array()?.iter().filter_map(serde_json::Value::as_str);
        Some(crate::oidc::Person {
            subject: text("sub").filter(|sub| !sub.is_empty())?,
            display: text("name")?,
            groups: groups.map(str::to_owned).collect(),
        })
    }

    /// Ends a session on every process on the store: its id is remembered as used until the cookie expires.
    pub(crate) async fn remove(&self, session: &Session) -> Result<(), StoreError> {
        self.store.request_states().use_nonce(&revoked(&session.id), session.expires).await?;
        if session.single_sign_on {
            self.store.request_states().forget_id_token(&session.id).await?;
        }
        self.lock().opened.remove(&session.id);
        Ok(())
    }
}

fn revoked(id: &str) -> String {
    format!("{REVOKED_PREFIX}{id}")
}

/// The fields of a cookie's body (`v1.ID.EXPIRES.NAME.ENTRY`), or `None` for another shape.
fn parse(body: &str) -> Option<Sealed<'_>> {
    let mut fields = body.split('.');
    let (version, id, expires, name, entry) =
        (fields.next()?, fields.next()?, fields.next()?, fields.next()?, fields.next()?);
    if version != VERSION || fields.next().is_some() || id.is_empty() {
        return None;
    }
    Some(Sealed { id, expires_s: expires.parse().ok()?, name, entry })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_compare() {
        assert!(same_secret("abc", "abc"));
        assert!(!same_secret("abc", "abd"));
        assert!(!same_secret("abc", "abcd"));
    }

    #[test]
    fn hex_round_trips_and_refuses_odd_text() {
        assert_eq!(unhex(&hex(b"alice.bob")), Some(b"alice.bob".to_vec()));
        assert_eq!(unhex("abc"), None);
        assert_eq!(unhex("zz"), None);
    }

    #[test]
    fn seals_differ_by_label_and_key() {
        assert_ne!(seal(b"k", "cookie", "x"), seal(b"k", "csrf", "x"));
        assert_ne!(seal(b"k", "cookie", "x"), seal(b"j", "cookie", "x"));
        assert!(parse("v1.id.10.616c.e").is_some());
        assert!(parse("v2.id.10.616c.e").is_none());
        assert!(parse("v1.id.10.616c.e.extra").is_none());
    }
}
