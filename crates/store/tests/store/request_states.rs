//! Sealed request states (2026-07-28 MRTR confirmations): one sealing secret for every handle on a store, so a
//! retry may reach any gateway process, and each nonce used once, whichever handle uses it; the console's own secret
//! (another purpose) and its read-only check of a used nonce (a logged-out session).

use std::time::{Duration, SystemTime};

use toolgate_store::StoreOptions;

use crate::support::{Fresh, matrix};

matrix! {
#[tokio::test]
async fn one_secret_is_shared_and_a_nonce_is_used_once(kind) {
    let fresh = Fresh::new(kind);
    let first = fresh.open(StoreOptions::default()).await;
    let second = fresh.open(StoreOptions::default()).await;
    let key = first.request_states().sealing_key().await.expect("key");
    assert_eq!(key.len(), 32);
    assert_eq!(second.request_states().sealing_key().await.expect("key"), key, "every handle reads the one secret");
    assert_eq!(first.request_states().sealing_key().await.expect("key"), key, "asked again, the same secret");
    let expires = SystemTime::now() + Duration::from_secs(60);
    assert!(first.request_states().use_nonce("n1", expires).await.expect("use"));
    assert!(!second.request_states().use_nonce("n1", expires).await.expect("use"), "a nonce is used once, anywhere");
    assert!(second.request_states().use_nonce("n2", expires).await.expect("use"));
}
}

matrix! {
#[tokio::test]
async fn an_expired_nonce_is_forgotten(kind) {
    let fresh = Fresh::new(kind);
    let store = fresh.open(StoreOptions::default()).await;
    let past = SystemTime::now() - Duration::from_secs(1);
    assert!(store.request_states().use_nonce("old", past).await.expect("use"));
    // Its state is refused as expired before the nonce is looked at, so forgetting it reopens nothing.
    assert!(store.request_states().use_nonce("other", SystemTime::now() + Duration::from_secs(60)).await.expect("use"));
    let raw = fresh.raw().await;
    assert_eq!(raw.count("SELECT count(*) FROM used_request_states WHERE nonce = 'old'").await, 0);
}
}

matrix! {
#[tokio::test]
async fn the_console_has_its_own_shared_secret_and_sees_used_nonces_without_using_them(kind) {
    let fresh = Fresh::new(kind);
    let first = fresh.open(StoreOptions::default()).await;
    let second = fresh.open(StoreOptions::default()).await;
    let console = first.request_states().console_session_key().await.expect("key");
    assert_eq!(console.len(), 32);
    assert_eq!(second.request_states().console_session_key().await.expect("key"), console, "one secret per store");
    assert_ne!(first.request_states().sealing_key().await.expect("key"), console, "another purpose, another secret");
    assert!(!first.request_states().is_used("s1").await.expect("read"));
    assert!(!first.request_states().is_used("s1").await.expect("read"), "asking marks nothing");
    assert!(first.request_states().use_nonce("s1", SystemTime::now() + Duration::from_secs(60)).await.expect("use"));
    assert!(second.request_states().is_used("s1").await.expect("read"), "seen by every handle");
    assert!(first.request_states().use_nonce("s2", SystemTime::now() - Duration::from_secs(1)).await.expect("use"));
    assert!(!second.request_states().is_used("s2").await.expect("read"), "past its expiry it is forgotten");
}
}

matrix! {
#[tokio::test]
async fn a_console_sessions_id_token_is_read_by_every_handle_until_it_expires_or_is_forgotten(kind) {
    let fresh = Fresh::new(kind);
    let first = fresh.open(StoreOptions::default()).await;
    let second = fresh.open(StoreOptions::default()).await;
    let later = SystemTime::now() + Duration::from_secs(60);
    first.request_states().remember_id_token("s1", "eyJ.one.sig", later).await.expect("remember");
    assert_eq!(second.request_states().id_token("s1").await.expect("read").as_deref(), Some("eyJ.one.sig"));
    assert_eq!(second.request_states().id_token("s2").await.expect("read"), None, "another session has none");
    first.request_states().remember_id_token("s2", "eyJ.two.sig", SystemTime::now() - Duration::from_secs(1)).await.expect("remember");
    assert_eq!(second.request_states().id_token("s2").await.expect("read"), None, "past its session's expiry");
    second.request_states().forget_id_token("s1").await.expect("forget");
    assert_eq!(first.request_states().id_token("s1").await.expect("read"), None, "forgotten at logout, everywhere");
    // Expired tokens are pruned when another is kept.
    first.request_states().remember_id_token("s3", "eyJ.three.sig", later).await.expect("remember");
    let raw = fresh.raw().await;
    assert_eq!(raw.count("SELECT count(*) FROM console_id_tokens WHERE session = 's2'").await, 0);
}
}
