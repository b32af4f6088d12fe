//! Pinning: for an upstream with `trust = "pinned"`, every listed tool is compared with the definition a person
//! approved. A match is trusted; a change that only tightens hints is accepted and recorded; anything else (a hint
//! loosened, a description, title or schema edited, a new tool) is quarantined until a person approves it with
//! `toolgate pins approve`. Runs on every listing: at start, after `list_changed`, after a reconnect.

use std::collections::HashSet;

use serde_json::{Value, json};
use toolgate_core::normalize::normalize_annotations;
use toolgate_core::trust::TrustLevel;
use toolgate_core::{DeclaredHints, Hint, HintOverrides, ToolDefinition, resolve_hints};
use toolgate_store::{AuditEntry, AuditKind, PendingPinChange, PinObservation, ToolSnapshot};

use crate::catalog::UpstreamListing;
use crate::gateway::GatewayInner;
use crate::guard::audit;

/// Who approves a change that only tightens hints.
const TIGHTENING: &str = "toolgate (tightening only)";

/// The original names of the listed tools that must stay quarantined; empty for upstreams that are not pinned.
/// Fails closed: when the store cannot be read, every tool of the pinned upstream is quarantined.
pub(crate) async fn quarantined_tools(
    gateway: &GatewayInner,
    index: usize,
    listing: &UpstreamListing,
) -> HashSet<String> {
    let Some(spec) = gateway.spec.upstreams.get(index) else { return HashSet::new() };
    if spec.trust.level != TrustLevel::Pinned {
        return HashSet::new();
    }
    let names = || listing.tools.iter().filter_map(|tool| tool.get("name").and_then(Value::as_str)).map(str::to_owned);
    let Some(store) = &gateway.store else {
        tracing::error!(upstream = %spec.name, "a pinned upstream needs the state store; all its tools are quarantined");
        return names().collect();
    };
    let pins = store.pins();
    let mut quarantined = HashSet::new();
    let mut accepted = Vec::new();
    for raw in &listing.tools {
        let Ok(tool) = ToolDefinition::from_value(raw.clone()) else { continue };
        let name = tool.name().to_owned();
        let declared = normalize_annotations(&tool).declared;
        let effective = resolve_hints(&HintOverrides::default(), &declared, None);
        let outcome = match ToolSnapshot::new(&spec.name, &tool, &effective) {
            Ok(snapshot) => match pins.observe(&snapshot).await {
                Ok(PinObservation::Matches(_)) => Ok(true),
                Ok(PinObservation::Unpinned) => pins.propose_new(&snapshot).await.map(|_| false),
                Ok(PinObservation::Quarantined(change))
                    if pins
                        .get(&spec.name, &name)
                        .await
                        .ok()
                        .flatten()
                        .is_some_and(|pin| only_tightens(&pin.snapshot.definition, &change)) =>
                {
                    let fingerprint = change.proposed.fingerprint.whole.clone();
                    pins.approve_pending(&spec.name, &name, &fingerprint, TIGHTENING).await.map(|_| {
                        accepted.push(name.clone());
                        true
                    })
                }
                Ok(PinObservation::Quarantined(_)) => Ok(false),
                Err(error) => Err(error),
            },
            Err(error) => Err(error),
        };
        match outcome {
            Ok(true) => {}
            Ok(false) => {
                quarantined.insert(name);
            }
            Err(error) => {
                tracing::error!(upstream = %spec.name, tool = %name, %error, "pin check failed; the tool is quarantined");
                quarantined.insert(name);
            }
        }
    }
    let mut entry = AuditEntry::new(AuditKind::Listing);
    entry.upstream = Some(spec.name.clone());
    let mut names: Vec<&String> = quarantined.iter().collect();
    names.sort();
    entry.detail = Some(json!({"tools": listing.tools.len(), "quarantined": names, "acceptedTightening": accepted}));
    audit::record(gateway, entry);
    if !quarantined.is_empty() {
        tracing::warn!(
            upstream = %spec.name,
            quarantined = quarantined.len(),
            "tool definitions wait for approval: run `toolgate pins list`"
        );
    }
    quarantined
}

/// True when the only changes are hints moved towards caution (not read-only, destructive, not idempotent,
/// open-world, or removed, which means the cautious spec default). Any other field change, or a new tool, is not.
fn only_tightens(pinned_definition: &Value, change: &PendingPinChange) -> bool {
    if change.pinned_fingerprint.is_empty() {
        return false;
    }
    let hint_fields: Vec<String> = Hint::ALL.iter().map(|hint| format!("annotations.{}", hint.wire_key())).collect();
    if !change.changes.iter().all(|(field, _)| hint_fields.contains(field)) {
        return false;
    }
    let declared = |definition: &Value| {
        ToolDefinition::from_value(definition.clone()).ok().map(|tool| normalize_annotations(&tool).declared)
    };
    let (Some(before), Some(after)) = (declared(pinned_definition), declared(&change.proposed.definition)) else {
        return false;
    };
    Hint::ALL.iter().all(|hint| {
        let value = |hints: &DeclaredHints| hints.get(*hint).unwrap_or(hint.spec_default());
        let (old, new) = (value(&before), value(&after));
        old == new || new != hint.relaxed_value()
    })
}
