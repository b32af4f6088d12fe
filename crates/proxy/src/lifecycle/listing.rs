//! One upstream's listing made ready for the catalog: tools beyond `limits.max_tools_per_upstream` dropped (with a
//! log line), every tool fingerprinted once, a pinned upstream's tools compared with their pins, and its `listing`
//! audit row, written only when something a reviewer cares about changed.
//!
//! The caller hands in the listing to check and stores the result itself ([`crate::upstreams::UpstreamRuntime`]);
//! nothing here reads an upstream's stored listing back or builds a catalog, so what is checked is what is stored.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::{Value, json};
use toolgate_core::ToolDefinition;
use toolgate_core::fingerprint::fingerprint_tool;
use toolgate_store::{AuditEntry, AuditKind};

use crate::catalog::{CheckedListing, UpstreamListing};
use crate::gateway::GatewayInner;
use crate::guard::audit;
use crate::guard::pins::check_pins;

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

/// Drops the tools beyond `max`, in listing order, and says so; returns how many were dropped (of the pages read:
/// no page is asked for once `max` tools arrived). A server listing thousands of tools costs memory in every
/// catalog and inventory built from it, and no model chooses well among them.
pub(crate) fn cap_tools(upstream: &str, listing: &mut UpstreamListing, max: usize) -> usize {
    let listed = listing.tools.len();
    if listed <= max && !listing.more_tools_unread {
        return 0;
    }
    listing.tools.truncate(max);
    tracing::warn!(
        upstream,
        listed,
        served = max,
        more_pages_unread = listing.more_tools_unread,
        "the upstream lists more tools than limits.max_tools_per_upstream; the rest are dropped"
    );
    listed.saturating_sub(max)
}

/// Fingerprints `listing`'s tools (reusing `previous`'s when the tools are the same) and compares them with the pins
/// when the upstream is pinned.
pub(crate) async fn check(
    gateway: &GatewayInner,
    index: usize,
    listing: Arc<UpstreamListing>,
    dropped_tools: usize,
    previous: Option<&CheckedListing>,
) -> Checked {
    let fingerprints = match previous {
        Some(previous) if previous.listing.tools == listing.tools => previous.fingerprints.clone(),
        _ => fingerprints(&listing),
    };
    let pins = check_pins(gateway, index, &listing).await;
    Checked {
        listing: CheckedListing { listing, fingerprints, approved: pins.approved, dropped_tools },
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
        || previous.dropped_tools != next.dropped_tools
}

/// Writes the upstream's `listing` row: always at start and after a reconnect; otherwise only when the tools'
/// fingerprints, the quarantine or the number of dropped tools changed, or a tightening was pinned. A burst of
/// `list_changed` that changes nothing, and a re-check while tools wait for a person, leave no rows.
pub(crate) fn record(
    gateway: &GatewayInner,
    upstream: &str,
    trigger: ListingTrigger,
    previous: Option<&CheckedListing>,
    checked: &Checked,
) {
    let next = &checked.listing;
    let quarantined = next.quarantined_names();
    let due = match (trigger, previous) {
        (ListingTrigger::Start | ListingTrigger::Reconnect, _) | (_, None) => true,
        (_, Some(previous)) => {
            previous.fingerprints != next.fingerprints
                || previous.quarantined_names() != quarantined
                || previous.dropped_tools != next.dropped_tools
                || previous.listing.more_tools_unread != next.listing.more_tools_unread
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
    if next.dropped_tools > 0 || next.listing.more_tools_unread {
        detail["droppedTools"] = json!(next.dropped_tools);
        detail["morePagesUnread"] = json!(next.listing.more_tools_unread);
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

    #[test]
    fn tools_beyond_the_maximum_are_dropped_in_listing_order() {
        let mut within = listing(3);
        assert_eq!(cap_tools("u", &mut within, 3), 0);
        assert_eq!(within.tools.len(), 3);
        let mut beyond = listing(5);
        assert_eq!(cap_tools("u", &mut beyond, 2), 3);
        let names: Vec<&str> = beyond.tools.iter().filter_map(|tool| tool["name"].as_str()).collect();
        assert_eq!(names, ["t0", "t1"]);
    }

    #[test]
    fn a_listing_differs_only_when_a_catalog_built_from_it_could() {
        let first = CheckedListing::unpinned(listing(2));
        let same = CheckedListing::unpinned(listing(2));
        assert!(!differs(&first, &same), "equal listings");
        assert!(differs(&first, &CheckedListing::unpinned(listing(3))), "another tool");
        let approved = CheckedListing { approved: Some(HashMap::new()), ..first.clone() };
        assert!(differs(&first, &approved), "another pin outcome");
        let dropped = CheckedListing { dropped_tools: 1, ..first.clone() };
        assert!(differs(&first, &dropped), "another cut");
    }
}
