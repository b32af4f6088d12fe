//! Sealed request states (2026-07-28 MRTR confirmations): one sealing secret for every handle on a store, so a
//! retry may reach any gateway process, and each nonce used once, whichever handle uses it.

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
