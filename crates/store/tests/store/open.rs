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

/// Processes starting together against one fresh PostgreSQL database: sqlx's migrator takes an advisory lock, so
/// one creates the schema and the others find it done.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn handles_opening_a_fresh_postgres_database_at_once_all_succeed() {
    let target = toolgate_store::PostgresTarget::new(
        toolgate_test_support::postgres::PostgresCluster::shared().fresh_database(),
    );
    let opens: Vec<_> = (0..6)
        .map(|index| {
            let target = target.clone();
            tokio::spawn(async move {
                let directory = tempfile::tempdir().unwrap();
                let options = toolgate_store::StoreOptions {
                    instance_id: Some(format!("gw-{index}")),
                    ..toolgate_store::StoreOptions::default()
                };
                let store = Store::open_postgres(&target, directory.path(), options).await;
                (directory, store)
            })
        })
        .collect();
    let mut stores = Vec::new();
    for open in opens {
        match open.await.unwrap() {
            (directory, Ok(store)) => stores.push((directory, store)),
            (_, Err(error)) => panic!("a concurrent open failed: {error}"),
        }
    }
    for (index, (_, store)) in stores.iter().enumerate() {
        store.audit().record_durable(call_entry("concurrent", index as u64)).await.unwrap();
    }
    let rows = stores[5].1.query_audit(&AuditFilter::default()).await.unwrap();
    let mut instances: Vec<_> = rows.iter().filter_map(|row| row.instance.clone()).collect();
    instances.sort();
    assert_eq!(instances, (0..6).map(|index| format!("gw-{index}")).collect::<Vec<_>>(), "every row names its writer");
    assert!(stores[0].1.verify_audit().await.unwrap().is_intact());
    for (_, store) in stores {
        store.close().await.unwrap();
    }
}
