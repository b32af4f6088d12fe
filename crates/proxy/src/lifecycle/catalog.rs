//! Catalog rebuilds: a new catalog from every upstream's current checked listing, installed unless a newer rebuild
//! got there first, then the console's inventory written from it in the background.
//!
//! Run by whoever changed something a catalog depends on (an upstream's run task after a listing or a disconnect,
//! the gateway after a policy reload). It writes only the catalog cell and the inventory: sessions are told of the
//! change by the caller.

use std::sync::Arc;

use toolgate_spec::UpstreamSpec;

use crate::catalog::{Catalog, CatalogContext, CheckedListing};
use crate::inventory::InventoryInputs;
use crate::state::shared::Shared;

/// Rebuilds the catalog from every upstream's current checked listing (each listing with the pin check made of it,
/// read as one value).
///
/// Rebuilds run in the tasks that changed something, in parallel; each takes a number before it reads the listings,
/// and a catalog replaces the current one only when its number is higher, so a rebuild that read older listings
/// never replaces one built from newer ones.
pub(crate) fn rebuild_catalog(gateway: &Shared) {
    let number = gateway.next_rebuild();
    // Every slot, withdrawn ones (which have no listing) included, so a position is an index; and which one wins a
    // name (the config file's order, not the slots').
    let (upstreams, precedence) = gateway.upstreams.all_with_precedence();
    let specs: Vec<UpstreamSpec> = upstreams.iter().map(|runtime| runtime.spec.clone()).collect();
    let listings: Vec<_> = upstreams.iter().map(|runtime| runtime.checked_listing()).collect();
    let resource_servers: Vec<usize> = upstreams
        .iter()
        .filter(|runtime| {
            runtime.connection().is_some_and(|connection| {
                connection.initialize_outcome().capabilities.get("resources").is_some_and(|value| !value.is_null())
            })
        })
        .map(|runtime| runtime.index)
        .collect();
    let context = CatalogContext { resource_servers, quarantine: gateway.spec.guardrails.pins.quarantine, precedence };
    let catalog = Arc::new(Catalog::build_with(&specs, &listings, &context));
    if !gateway.install_catalog(number, &catalog, &listings) {
        return;
    }
    for collision in &catalog.collisions {
        tracing::warn!("{collision}");
    }
    publish_inventory(gateway, specs, listings, catalog);
}

/// Hands the console's tool inventory of `catalog` to the store, in the background (with the policy in force, which
/// says what each caller may do with each tool).
fn publish_inventory(
    gateway: &Shared,
    specs: Vec<UpstreamSpec>,
    listings: Vec<Option<Arc<CheckedListing>>>,
    catalog: Arc<Catalog>,
) {
    let Some(store) = &gateway.store else { return };
    let inputs = InventoryInputs {
        specs,
        configured: gateway.upstreams.live().iter().map(|runtime| runtime.spec.name.clone()).collect(),
        listings,
        catalog,
        policy: gateway.policy(),
        identities: gateway.spec.identities(),
    };
    gateway.inventory.publish(store, inputs);
}

/// Rewrites the inventory from the current catalog (after the policy changed: who may do what changed too).
pub(crate) fn republish_inventory(gateway: &Shared) {
    let upstreams = gateway.upstreams.all();
    let specs = upstreams.iter().map(|runtime| runtime.spec.clone()).collect();
    let listings = upstreams.iter().map(|runtime| runtime.checked_listing()).collect();
    publish_inventory(gateway, specs, listings, gateway.catalog());
}
