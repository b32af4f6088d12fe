//! Opening: several processes (here, independent handles) opening the same fresh state directory at once all get
//! a working store with the whole schema, instead of racing each other's migrations.

use toolgate_store::{AuditFilter, Store};

use crate::support::call_entry;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn handles_opening_a_fresh_state_directory_at_once_all_succeed() {
    for _ in 0..5 {
        let directory = tempfile::tempdir().unwrap();
        let opens: Vec<_> = (0..6)
            .map(|_| {
                let path = directory.path().to_path_buf();
                tokio::spawn(async move { Store::open(&path).await })
            })
            .collect();
        let mut stores = Vec::new();
        for open in opens {
            match open.await.unwrap() {
                Ok(store) => stores.push(store),
                Err(error) => panic!("a concurrent open failed: {error}"),
            }
        }
        // Every handle sees the same, complete schema: a row written through one is read through another.
        stores[0].audit().record_durable(call_entry("concurrent", 1)).await.unwrap();
        let rows = stores[5].query_audit(&AuditFilter::default()).await.unwrap();
        assert_eq!(rows.len(), 1);
        assert!(stores[3].inventory().await.unwrap().is_empty());
        for store in stores {
            store.close().await.unwrap();
        }
    }
}
