//! One upstream's listing made ready for the catalog: a prompt, resource or template repeating an earlier one's name
//! dropped (the first wins), items of each kind beyond its count maximum
//! (`limits.max_tools_per_upstream`, `limits.max_list_items_per_upstream`) or its byte maximum
//! (`limits.max_listing_bytes_per_upstream`) dropped in listing order, never silently (a log line, the status, the
//! `listing` audit row and a metric name the upstream), every tool fingerprinted once, a pinned upstream's tools,
//! prompts, resources, templates and instructions compared with their pins, and its `listing` audit row, written
//! only when something a reviewer cares about changed.
//!
//! The caller hands in the listing to check and stores the result itself ([`crate::upstreams::UpstreamRuntime`]);
//! nothing here reads an upstream's stored listing back or builds a catalog, so what is checked is what is stored.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use serde_json::{Value, json};
use toolgate_core::ToolDefinition;
use toolgate_core::fingerprint::fingerprint_tool;
use toolgate_spec::Limits;
use toolgate_store::{AuditEntry, AuditKind};
use toolgate_upstream::ListKind;
use toolgate_upstream::jsonrpc::approximate_bytes;

use crate::catalog::{ByKind, CheckedListing, UpstreamListing};
use crate::guard::audit;
use crate::guard::pins::check_pins;
use crate::state::shared::Shared;
use crate::upstreams::max_items;

/// Why an upstream's tools were checked, as its `listing` audit row says (`detail.trigger`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ListingTrigger {
    /// The first listing after the gateway started.
    Start,
    /// The listing after a reconnect.
    Reconnect,
    /// The re-listing after the upstream's `tools/list_changed`.
    ListChanged,
    /// The same tools checked again, to see a person's pin decision (or after another kind of list changed).
    Recheck,
}

impl ListingTrigger {
    fn as_str(self) -> &'static str {
        match self {
            ListingTrigger::Start => "start",
            ListingTrigger::Reconnect => "reconnect",
            ListingTrigger::ListChanged => "list_changed",
            ListingTrigger::Recheck => "recheck",
        }
    }
}

/// A checked listing and the tightenings its pin check accepted (for the audit row).
pub(crate) struct Checked {
    pub(crate) listing: CheckedListing,
    pub(crate) accepted_tightening: Vec<String>,
}

/// Cuts each of `kinds` in `listing` to its maxima in `limits` (the count, then the bytes, in listing order) and
/// says so; returns how many items of each kind were dropped (of the pages read: no page is asked for once a
/// maximum is reached). A server listing thousands of items, or a few huge ones, costs memory in every catalog and
/// inventory built from it, and no model chooses well among them. The cut keeps a prefix: an item is either served
/// whole as listed or not at all, and the drop is reported, so nothing is replaced behind a reviewer's back.
pub(crate) fn cap_listing(
    upstream: &str,
    listing: &mut UpstreamListing,
    limits: &Limits,
    kinds: &[ListKind],
) -> ByKind<usize> {
    let mut dropped = ByKind::default();
    for kind in kinds {
        let unread = *listing.unread_pages.get(*kind);
        let items = listing_slot(listing, *kind);
        drop_repeated_content(upstream, *kind, items);
        let listed = items.len();
        let max = max_items(limits, *kind);
        let mut served = listed.min(max);
        let mut bytes = 0usize;
        for (index, item) in items.iter().take(served).enumerate() {
            bytes = bytes.saturating_add(approximate_bytes(item));
            if bytes > limits.max_listing_bytes_per_upstream {
                served = index;
                break;
            }
        }
        if served == listed && !unread {
            continue;
        }
        items.truncate(served);
        *dropped.get_mut(*kind) = listed - served;
        tracing::warn!(
            upstream,
            kind = kind.method(),
            listed,
            served,
            more_pages_unread = unread,
            max_items = max,
            max_bytes = limits.max_listing_bytes_per_upstream,
            "the upstream lists more than the limits allow (a count or limits.max_listing_mib_per_upstream); the \
             rest is dropped"
        );
    }
    dropped
}

/// Keeps only the first prompt of each name, resource of each URI and template of each `uriTemplate` in `items`
/// (of `kind`), and says so. A pin is per name: were a second definition of a name kept, the check (which approves
/// by name) and the catalog (which serves the first) could disagree about which of the two was approved, and an
/// unapproved first one would go live beside an approved second. Tools are left to the catalog, which holds each
/// tool by its own fingerprint.
fn drop_repeated_content(upstream: &str, kind: ListKind, items: &mut Vec<Value>) {
    let key = match kind {
        ListKind::Tools => return,
        ListKind::Prompts => "name",
        ListKind::Resources => "uri",
        ListKind::ResourceTemplates => "uriTemplate",
    };
    let mut seen = HashSet::new();
    let listed = items.len();
    items.retain(|item| match item.get(key).and_then(Value::as_str) {
        Some(name) => seen.insert(name.to_owned()),
        None => true,
    });
    if items.len() < listed {
        tracing::warn!(
            upstream,
            kind = kind.method(),
            repeated = listed - items.len(),
            "the upstream lists the same name more than once; only the first of each is kept"
        );
    }
}

/// The items of one kind in `listing`, to cut.
fn listing_slot(listing: &mut UpstreamListing, kind: ListKind) -> &mut Vec<Value> {
    match kind {
        ListKind::Tools => &mut listing.tools,
        ListKind::Prompts => &mut listing.prompts,
        ListKind::Resources => &mut listing.resources,
        ListKind::ResourceTemplates => &mut listing.templates,
    }
}

/// Fingerprints `listing`'s tools (reusing `previous`'s when the tools are the same) and compares them with the pins
/// when the upstream is pinned.
pub(crate) async fn check(
    gateway: &Shared,
    index: usize,
    listing: Arc<UpstreamListing>,
    dropped: ByKind<usize>,
    previous: Option<&CheckedListing>,
) -> Checked {
    let fingerprints = match previous {
        Some(previous) if previous.listing.tools == listing.tools => previous.fingerprints.clone(),
        _ => fingerprints(&listing),
    };
    let pins = check_pins(gateway, index, &listing).await;
    Checked {
        listing: CheckedListing {
            listing,
            fingerprints,
            approved: pins.approved,
            content_approved: pins.content_approved,
            dropped,
        },
        accepted_tightening: pins.accepted_tightening,
    }
}

/// Each tool's fingerprint by its original name (the fingerprint the catalog puts in `_meta`).
fn fingerprints(listing: &UpstreamListing) -> HashMap<String, String> {
    listing
        .tools
        .iter()
        .filter_map(|raw| {
            let tool = ToolDefinition::from_value(raw.clone()).ok()?;
            let fingerprint = fingerprint_tool(&tool).ok()?;
            Some((tool.name().to_owned(), fingerprint.whole))
        })
        .collect()
}

/// Whether a catalog built from `next` could differ from one built from `previous`.
pub(crate) fn differs(previous: &CheckedListing, next: &CheckedListing) -> bool {
    (!Arc::ptr_eq(&previous.listing, &next.listing) && previous.listing != next.listing)
        || previous.approved != next.approved
        || previous.content_approved != next.content_approved
        || previous.dropped != next.dropped
}

/// Writes the upstream's `listing` row: always at start and after a reconnect; otherwise only when the tools'
/// fingerprints, the quarantine or the items dropped at the maxima changed, or a tightening was pinned. A burst of
/// `list_changed` that changes nothing, and a re-check while tools wait for a person, leave no rows.
pub(crate) fn record(
    gateway: &Shared,
    upstream: &str,
    trigger: ListingTrigger,
    previous: Option<&CheckedListing>,
    checked: &Checked,
) {
    let next = &checked.listing;
    let quarantined = next.quarantined_names();
    let held = next.held_content();
    let due = match (trigger, previous) {
        (ListingTrigger::Start | ListingTrigger::Reconnect, _) | (_, None) => true,
        (_, Some(previous)) => {
            previous.fingerprints != next.fingerprints
                || previous.quarantined_names() != quarantined
                || previous.held_content() != held
                || previous.dropped != next.dropped
                || previous.listing.unread_pages != next.listing.unread_pages
                || !checked.accepted_tightening.is_empty()
        }
    };
    if !due {
        return;
    }
    if !quarantined.is_empty() {
        tracing::warn!(
            upstream,
            quarantined = quarantined.len(),
            "tool definitions wait for approval: run `toolgate pins list`"
        );
    }
    if !held.is_empty() {
        tracing::warn!(
            upstream,
            held = held.len(),
            "prompts, resources or instructions wait for approval: run `toolgate pins list`"
        );
    }
    if gateway.store.is_none() {
        return;
    }
    let fingerprints: serde_json::Map<String, Value> = next
        .fingerprints
        .iter()
        .map(|(name, fingerprint)| (name.clone(), Value::String(fingerprint.clone())))
        .collect();
    let mut entry = AuditEntry::new(AuditKind::Listing);
    entry.upstream = Some(upstream.to_owned());
    let mut detail = json!({
        "trigger": trigger.as_str(),
        "tools": next.listing.tools.len(),
        "fingerprints": fingerprints,
        "quarantined": quarantined,
        "acceptedTightening": checked.accepted_tightening,
    });
    if !held.is_empty() {
        let held: Vec<Value> = held.iter().map(|(kind, name)| json!({"kind": kind.as_str(), "name": name})).collect();
        detail["held"] = Value::Array(held);
    }
    if next.dropped.tools > 0 || next.listing.unread_pages.tools {
        detail["droppedTools"] = json!(next.dropped.tools);
        detail["morePagesUnread"] = json!(next.listing.unread_pages.tools);
    }
    // The other kinds, under the same names as their list methods' result keys.
    for kind in [ListKind::Prompts, ListKind::Resources, ListKind::ResourceTemplates] {
        if *next.dropped.get(kind) > 0 || *next.listing.unread_pages.get(kind) {
            detail["dropped"][kind.result_key()] =
                json!({"items": next.dropped.get(kind), "morePagesUnread": next.listing.unread_pages.get(kind)});
        }
    }
    entry.detail = Some(detail);
    audit::record(gateway, entry);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listing(count: usize) -> UpstreamListing {
        let tools = (0..count).map(|index| json!({"name": format!("t{index}"), "inputSchema": {}})).collect();
        UpstreamListing { tools, ..UpstreamListing::default() }
    }

    fn limits(max_items: usize, max_bytes: usize) -> Limits {
        Limits {
            max_tools_per_upstream: max_items,
            max_list_items_per_upstream: max_items,
            max_listing_bytes_per_upstream: max_bytes,
            ..Limits::default()
        }
    }

    #[test]
    fn items_beyond_a_count_or_byte_maximum_are_dropped_in_listing_order() {
        let mut within = listing(3);
        assert_eq!(cap_listing("u", &mut within, &limits(3, usize::MAX), &ListKind::ALL), ByKind::default());
        assert_eq!(within.tools.len(), 3);
        let mut beyond = listing(5);
        beyond.prompts = beyond.tools.clone();
        let dropped = cap_listing("u", &mut beyond, &limits(2, usize::MAX), &ListKind::ALL);
        assert_eq!((dropped.tools, dropped.prompts), (3, 3));
        let names: Vec<&str> = beyond.tools.iter().filter_map(|tool| tool["name"].as_str()).collect();
        assert_eq!(names, ["t0", "t1"]);
        assert_eq!(beyond.prompts, beyond.tools, "prompts are cut like tools");

        // By bytes: as many whole items as fit, in order, and never part of one.
        let mut large = listing(5);
        let one = approximate_bytes(&large.tools[0]);
        let dropped = cap_listing("u", &mut large, &limits(100, one * 2 + one / 2), &[ListKind::Tools]);
        assert_eq!((dropped.tools, large.tools.len()), (3, 2));
        assert_eq!(large.tools[1], json!({"name": "t1", "inputSchema": {}}));
    }

    #[test]
    fn a_listing_differs_only_when_a_catalog_built_from_it_could() {
        let first = CheckedListing::unpinned(listing(2));
        let same = CheckedListing::unpinned(listing(2));
        assert!(!differs(&first, &same), "equal listings");
        assert!(differs(&first, &CheckedListing::unpinned(listing(3))), "another tool");
        let approved = CheckedListing { approved: Some(HashMap::new()), ..first.clone() };
        assert!(differs(&first, &approved), "another pin outcome");
        let dropped = CheckedListing { dropped: ByKind { prompts: 1, ..ByKind::default() }, ..first.clone() };
        assert!(differs(&first, &dropped), "another cut");
    }
}
