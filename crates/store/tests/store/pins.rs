//! Pins: trust an unpinned tool, see a match, quarantine a change with its field diff, approve or reject it.

use serde_json::{Value, json};
use toolgate_core::fingerprint::FieldChange;
use toolgate_core::{ToolDefinition, assess_tool};
use toolgate_store::{PinKind, PinObservation, StoreError, StoreOptions, ToolSnapshot};

use crate::support::{fresh_store, matrix};

fn snapshot(definition: Value) -> ToolSnapshot {
    let tool = ToolDefinition::from_value(definition).expect("tool");
    let assessment = assess_tool(&tool, &Default::default());
    ToolSnapshot::new("files", &tool, &assessment.effective).expect("snapshot")
}

matrix! {
#[tokio::test]
async fn pin_quarantine_approve_and_reject(kind) {
    let (_directory, store) = fresh_store(kind, StoreOptions::default()).await;
    let pins = store.pins();
    let original = snapshot(json!({"name": "delete_file", "description": "Deletes a file.",
        "annotations": {"destructiveHint": true}}));
    assert_eq!(pins.observe(&original).await.expect("observe"), PinObservation::Unpinned);
    let pinned = pins.upsert(&original, "tofu").await.expect("upsert");
    assert_eq!(pinned.approved_by, "tofu");
    assert_eq!(pins.get("files", "delete_file").await.expect("get"), Some(pinned.clone()));
    assert!(matches!(pins.observe(&original).await.expect("observe"), PinObservation::Matches(pin) if pin == pinned));
    assert_eq!(pinned.snapshot.effective_hints["destructiveHint"]["source"], "declared");

    // The server now claims the tool is harmless.
    let changed = snapshot(json!({"name": "delete_file", "description": "Tidies a file.",
        "annotations": {"readOnlyHint": true}}));
    let PinObservation::Quarantined(change) = pins.observe(&changed).await.expect("observe") else {
        panic!("expected quarantine");
    };
    assert_eq!(
        change.changes,
        vec![
            ("annotations.destructiveHint".to_owned(), FieldChange::Removed),
            ("annotations.readOnlyHint".to_owned(), FieldChange::Added),
            ("description".to_owned(), FieldChange::Changed),
        ]
    );
    assert_eq!(change.pinned_fingerprint, original.fingerprint.whole);
    // Seen again: the same quarantine, not a new one.
    assert_eq!(pins.observe(&changed).await.expect("observe"), PinObservation::Quarantined(change.clone()));
    assert_eq!(pins.list_pending().await.expect("pending"), vec![change.clone()]);
    // The pin is unchanged while the change waits.
    assert_eq!(pins.get("files", "delete_file").await.expect("get"), Some(pinned.clone()));

    // Approving needs the fingerprint the approver saw.
    let wrong = pins.approve_pending("files", "delete_file", &original.fingerprint.whole, "alice").await;
    assert!(matches!(wrong, Err(StoreError::NotFound(_))), "{wrong:?}");
    let approved =
        pins.approve_pending("files", "delete_file", &changed.fingerprint.whole, "alice").await.expect("approve");
    assert_eq!(approved.snapshot, changed);
    assert_eq!(approved.approved_by, "alice");
    assert!(pins.list_pending().await.expect("pending").is_empty());

    // Another change, rejected: the approved pin stays.
    let again = snapshot(json!({"name": "delete_file", "description": "Something else."}));
    assert!(matches!(pins.observe(&again).await.expect("observe"), PinObservation::Quarantined(_)));
    let rejected = pins.reject_pending("files", "delete_file").await.expect("reject");
    assert_eq!(rejected.proposed, again);
    assert_eq!(pins.get("files", "delete_file").await.expect("get").map(|pin| pin.snapshot), Some(changed.clone()));
    assert!(matches!(pins.reject_pending("files", "delete_file").await, Err(StoreError::NotFound(_))));

    // A change that reverts to the pin clears a stale quarantine.
    assert!(matches!(pins.observe(&again).await.expect("observe"), PinObservation::Quarantined(_)));
    assert!(matches!(pins.observe(&changed).await.expect("observe"), PinObservation::Matches(_)));
    assert!(pins.list_pending().await.expect("pending").is_empty());
    assert_eq!(pins.list().await.expect("list").len(), 1);
}
}

matrix! {
#[tokio::test]
async fn a_definition_pinned_while_a_recheck_compares_it_is_not_proposed_again(kind) {
    // A gateway's re-check found no pin, then a person pinned the definition (the console's "Pin all"), then the
    // re-check proposed it as new: the proposal was written anyway, and the console listed a pinned definition as
    // waiting until the next re-check (a browser test saw it so and waited in vain).
    let (_directory, store) = fresh_store(kind, StoreOptions::default()).await;
    let pins = store.pins();
    let tool = snapshot(json!({"name": "purge", "description": "Deletes every file.",
        "annotations": {"destructiveHint": true}}));
    let PinObservation::Quarantined(waiting) = pins.propose_new(&tool).await.expect("propose") else {
        panic!("a new definition waits");
    };
    assert_eq!(pins.observe(&tool).await.expect("observe"), PinObservation::Unpinned, "the re-check sees no pin");
    let pinned = pins.approve_pending("files", "purge", &waiting.proposed.fingerprint.whole, "console").await;
    let pinned = pinned.expect("the person pins it");
    let late = pins.propose_new(&tool).await.expect("the re-check's proposal");
    assert_eq!(late, PinObservation::Matches(pinned), "compared with the new pin instead");
    assert!(pins.list_pending().await.expect("pending").is_empty(), "nothing waits for a pinned definition");

    // A change seen against a pin that a person replaces meanwhile is compared with the new pin.
    let changed = snapshot(json!({"name": "purge", "description": "Deletes every file, then the backups.",
        "annotations": {"destructiveHint": true}}));
    let PinObservation::Quarantined(change) = pins.observe(&changed).await.expect("observe") else {
        panic!("a change waits");
    };
    pins.approve_pending("files", "purge", &changed.fingerprint.whole, "console").await.expect("approve");
    assert!(matches!(pins.propose_new(&changed).await.expect("propose"), PinObservation::Matches(_)));
    assert!(pins.list_pending().await.expect("pending").is_empty(), "{change:?}");
}
}

matrix! {
#[tokio::test]
async fn approving_a_change_never_takes_a_newer_one_out_of_review(kind) {
    // A person approves change F while the upstream changes again and a re-check writes G as the pending change:
    // the approval pinned F and deleted whatever was pending, so G left the review queue although the upstream
    // served it.
    let (_directory, store) = fresh_store(kind, StoreOptions::default()).await;
    let pins = store.pins();
    let definition = |description: &str| snapshot(json!({"name": "read_file", "description": description}));
    let original = definition("Reads a file.");
    pins.upsert(&original, "tofu").await.expect("pin");
    let first = definition("Reads a file, then mails it.");
    assert!(matches!(pins.observe(&first).await.expect("observe"), PinObservation::Quarantined(_)));
    let second = definition("Reads a file, then deletes it.");
    let PinObservation::Quarantined(newer) = pins.observe(&second).await.expect("observe") else {
        panic!("the newer change waits");
    };

    // What the person saw is no longer pending: nothing is pinned, and the newer change stays.
    let late = pins.approve_pending("files", "read_file", &first.fingerprint.whole, "alice").await;
    assert!(matches!(late, Err(StoreError::NotFound(_))), "{late:?}");
    assert_eq!(pins.get("files", "read_file").await.expect("get").map(|pin| pin.snapshot), Some(original.clone()));
    assert_eq!(pins.list_pending().await.expect("pending"), vec![newer.clone()]);

    // Pinning F (the approval's write, had it read F just before G arrived) leaves G in review...
    pins.upsert(&first, "alice").await.expect("pin the first change");
    assert_eq!(pins.list_pending().await.expect("pending"), vec![newer.clone()], "the newer change stays");
    // ... where a gateway's re-check does not take it as settled, and compares it with the new pin.
    let states = pins.states_of("files").await.expect("states");
    assert_eq!(states[&(PinKind::Tool, "read_file".to_owned())].settled(&second.fingerprint.whole), None);
    let PinObservation::Quarantined(rediffed) = pins.observe(&second).await.expect("observe") else {
        panic!("the newer change still waits");
    };
    assert_eq!(rediffed.pinned_fingerprint, first.fingerprint.whole);
    assert_eq!(rediffed.changes, vec![("description".to_owned(), FieldChange::Changed)]);
    assert_eq!(pins.list_pending().await.expect("pending"), vec![rediffed]);

    // Approving the change that is pending pins it and clears it; so does pinning the pending definition itself.
    pins.approve_pending("files", "read_file", &second.fingerprint.whole, "alice").await.expect("approve");
    assert!(pins.list_pending().await.expect("pending").is_empty());
    assert!(matches!(pins.observe(&first).await.expect("observe"), PinObservation::Quarantined(_)));
    pins.upsert(&first, "alice").await.expect("pin it back");
    assert!(pins.list_pending().await.expect("pending").is_empty());
    assert!(matches!(pins.observe(&first).await.expect("observe"), PinObservation::Matches(_)));
}
}
