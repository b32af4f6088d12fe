//! Pinning: for an upstream with `trust = "pinned"`, every listed tool is compared with the definition a person
//! approved. A match is trusted; a change that only tightens hints is accepted and recorded; anything else (a hint
//! loosened, a description, title or schema edited, a new tool) is quarantined until a person approves it with
//! `toolgate pins approve`. The upstream's run task runs it on every listing (at start, after `list_changed`, after a
//! reconnect) and, while tools wait in quarantine, again when the store's change feed says their pins changed (and on
//! a bounded fallback re-read, `lifecycle::run::watch_quarantine`) to see a person's decision. It writes pins and
//! pending changes, never audit rows: the `listing` row carries the outcome, so a re-check that changes nothing
//! leaves no trace.
//!
//! Its outcome is the fingerprint each approved tool was approved with, never a list of names to hide: the catalog
//! compares every definition it exposes with it, so a definition listed after this check is never taken as reviewed.
//!
//! A pinned upstream's prompts, resources, templates and instructions are pinned the same way (fingerprinted with
//! `core::fingerprint`, stored by kind): one that is not its approved pin is held back until a person approves it.
//! There is no tightening for them: any change waits.

use std::collections::{HashMap, HashSet};

use serde_json::Value;
use toolgate_core::normalize::normalize_annotations;
use toolgate_core::trust::TrustLevel;
use toolgate_core::{DeclaredHints, Hint, HintOverrides, ToolDefinition, resolve_hints};
use toolgate_store::{PendingPinChange, PinKind, PinObservation, PinState, PinStore, ToolSnapshot};

use crate::catalog::{UpstreamListing, content_items};
use crate::state::shared::Shared;

/// Who approves a change that only tightens hints.
const TIGHTENING: &str = "toolgate (tightening only)";

/// What comparing one listing with the pins concluded.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct PinCheck {
    /// For a pinned upstream, each listed tool whose definition is its approved pin (by original name), with that
    /// definition's fingerprint; every other tool waits for a person. `None` for an upstream that is not pinned.
    pub(crate) approved: Option<HashMap<String, String>>,
    /// Tools whose change only tightened hints, pinned by this check.
    pub(crate) accepted_tightening: Vec<String>,
    /// For a pinned upstream, its other definitions (kind and name) that are their approved pin; every other one is
    /// held back. `None` for an upstream that is not pinned.
    pub(crate) content_approved: Option<HashSet<(PinKind, String)>>,
}

/// Compares a listing with the pins: the tools approved as listed and the tightenings accepted; nothing for
/// upstreams that are not pinned. Fails closed: a tool whose pin cannot be read is not approved, and without a
/// store no tool of a pinned upstream is.
pub(crate) async fn check_pins(gateway: &Shared, index: usize, listing: &UpstreamListing) -> PinCheck {
    let Some(runtime) = gateway.upstreams.get(index) else { return PinCheck::default() };
    let spec = &runtime.spec;
    if spec.trust.level != TrustLevel::Pinned {
        return PinCheck::default();
    }
    let Some(store) = &gateway.store else {
        tracing::error!(upstream = %spec.name, "a pinned upstream needs the state store; all its tools are quarantined");
        return PinCheck {
            approved: Some(HashMap::new()),
            accepted_tightening: Vec::new(),
            content_approved: Some(HashSet::new()),
        };
    };
    let pins = store.pins();
    let states = pin_states(&pins, &spec.name).await;
    let mut approved = HashMap::new();
    let mut accepted = Vec::new();
    for raw in &listing.tools {
        let Ok(tool) = ToolDefinition::from_value(raw.clone()) else { continue };
        let name = tool.name().to_owned();
        let declared = normalize_annotations(&tool).declared;
        let effective = resolve_hints(&HintOverrides::default(), &declared, None);
        let snapshot = ToolSnapshot::new(&spec.name, &tool, &effective);
        let fingerprint = snapshot.as_ref().map(|snapshot| snapshot.fingerprint.whole.clone()).unwrap_or_default();
        let outcome = match snapshot {
            // Its pin with nothing pending: approved without a statement (a re-check runs every second).
            Ok(_)
                if states.get(&(PinKind::Tool, name.clone())).and_then(|state| state.settled(&fingerprint))
                    == Some(true) =>
            {
                Ok(true)
            }
            Ok(snapshot) => match pins.observe(&snapshot).await {
                Ok(PinObservation::Matches(_)) => Ok(true),
                Ok(PinObservation::Unpinned) => {
                    pins.propose_new(&snapshot).await.map(|seen| matches!(seen, PinObservation::Matches(_)))
                }
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
            Ok(true) => {
                approved.insert(name, fingerprint);
            }
            Ok(false) => {}
            Err(error) => {
                tracing::error!(upstream = %spec.name, tool = %name, %error, "pin check failed; the tool is quarantined");
            }
        }
    }
    let content_approved = check_content(&pins, &states, &spec.name, listing).await;
    PinCheck { approved: Some(approved), accepted_tightening: accepted, content_approved: Some(content_approved) }
}

/// Compares a pinned upstream's prompts, resources, templates and instructions with their pins: returns those that
/// match; records every other one as a pending change (a new one like a new tool). Fails closed: one whose pin
/// cannot be read or written is held.
async fn check_content(
    pins: &PinStore,
    states: &HashMap<(PinKind, String), PinState>,
    upstream: &str,
    listing: &UpstreamListing,
) -> HashSet<(PinKind, String)> {
    let mut approved = HashSet::new();
    // A name listed twice is held whatever its pin says: approval is by name, and the catalog serves the first of
    // a name, which need not be the one that matched (the listing's cut drops repeats; this keeps it so).
    let mut repeated = HashSet::new();
    let mut seen = HashSet::new();
    for (kind, name, definition) in content_items(listing) {
        if !seen.insert((kind, name.clone())) {
            // Not observed: a matching repeat would clear the pending change the first one recorded.
            repeated.insert((kind, name));
            continue;
        }
        let snapshot = ToolSnapshot::of_content(upstream, kind, &name, definition);
        // Unchanged since the last check (its pin, or the pending change already recorded): no statement.
        let settled = snapshot.as_ref().ok().and_then(|snapshot| {
            states.get(&(kind, name.clone())).and_then(|state| state.settled(&snapshot.fingerprint.whole))
        });
        let outcome = match snapshot {
            Ok(_) if settled.is_some() => Ok(settled == Some(true)),
            Ok(snapshot) => match pins.observe(&snapshot).await {
                Ok(PinObservation::Matches(_)) => Ok(true),
                Ok(PinObservation::Unpinned) => {
                    pins.propose_new(&snapshot).await.map(|seen| matches!(seen, PinObservation::Matches(_)))
                }
                Ok(PinObservation::Quarantined(_)) => Ok(false),
                Err(error) => Err(error),
            },
            Err(error) => Err(error),
        };
        match outcome {
            Ok(true) => {
                approved.insert((kind, name));
            }
            Ok(false) => {}
            Err(error) => {
                tracing::error!(upstream, kind = kind.as_str(), name = %name, %error, "pin check failed; it is held");
            }
        }
    }
    approved.retain(|item| !repeated.contains(item));
    approved
}

/// The pinned and pending fingerprints of `upstream`'s definitions, read once per check; empty when they cannot
/// be read, so that every definition is then asked of the store one by one (and fails closed there).
async fn pin_states(pins: &PinStore, upstream: &str) -> HashMap<(PinKind, String), PinState> {
    pins.states_of(upstream).await.unwrap_or_else(|error| {
        tracing::warn!(upstream, %error, "reading the pins at once failed; each definition is checked on its own");
        HashMap::new()
    })
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

#[cfg(test)]
mod tests {
    use serde_json::json;
    use toolgate_core::fingerprint::{diff_fingerprints, fingerprint_tool};

    use super::*;

    /// The pending change from `pinned` to `proposed`, as the store would report it.
    fn change(pinned: &Value, proposed: &Value) -> PendingPinChange {
        let definition =
            |raw: &Value| ToolDefinition::from_value(raw.clone()).unwrap_or_else(|error| unreachable!("{error}"));
        let (before, after) = (definition(pinned), definition(proposed));
        let fingerprint =
            |tool: &ToolDefinition| fingerprint_tool(tool).unwrap_or_else(|error| unreachable!("{error}"));
        let effective = resolve_hints(&HintOverrides::default(), &normalize_annotations(&after).declared, None);
        let snapshot = ToolSnapshot::new("notes", &after, &effective).unwrap_or_else(|error| unreachable!("{error}"));
        PendingPinChange {
            proposed: snapshot,
            pinned_fingerprint: fingerprint(&before).whole,
            changes: diff_fingerprints(&fingerprint(&before), &fingerprint(&after)),
            detected_at: String::new(),
        }
    }

    fn tool(annotations: Value) -> Value {
        json!({"name": "write", "description": "Writes a note.", "inputSchema": {"type": "object"}, "annotations": annotations})
    }

    #[test]
    fn a_change_only_tightens_when_every_changed_hint_moves_towards_caution() {
        let pinned = tool(json!({"readOnlyHint": true, "destructiveHint": false, "openWorldHint": false}));
        let check = |proposed: Value| only_tightens(&pinned, &change(&pinned, &proposed));
        assert!(check(tool(json!({"readOnlyHint": false, "destructiveHint": false, "openWorldHint": false}))));
        assert!(check(tool(json!({"readOnlyHint": true, "destructiveHint": true, "openWorldHint": true}))));
        assert!(check(tool(json!({}))), "a removed hint means the cautious default");

        let relaxed = json!({"readOnlyHint": false, "destructiveHint": false, "idempotentHint": true});
        assert!(!only_tightens(&tool(relaxed.clone()), &change(&tool(relaxed), &tool(json!({"readOnlyHint": true})))));
        let mut described = pinned.clone();
        described["description"] = json!("Deletes every note.");
        assert!(!check(described), "any other field edited is not a tightening");
    }

    #[test]
    fn a_new_tool_never_only_tightens() {
        let proposed = tool(json!({"readOnlyHint": false}));
        let mut new = change(&proposed, &proposed);
        new.pinned_fingerprint.clear();
        assert!(!only_tightens(&proposed, &new));
    }
}
