//! `toolgate pins list | diff | approve | reject`: the pinned tool definitions and the changed ones held in
//! quarantine until a person looks.
//!
//! `diff` shows each changed field with its old and new value (schemas as a compact path-by-path JSON diff) and the
//! fingerprint to approve; `approve` pins only that fingerprint, so a definition that changed again while the
//! person read the diff is never approved by accident. Each approval or rejection is an audit row (kind `pin`,
//! with the fingerprint and who decided). Nothing here talks to an upstream.

use std::fmt::Write as _;
use std::io::Write;

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};
use toolgate_core::definition_diff::field_diff;
use toolgate_core::display::{bounded, json_safe};
use toolgate_store::{PendingPinChange, PinDecision, Store, StoreError};

use crate::Outcome;
use crate::cli::{PinToolArgs, PinsAction, PinsArgs};
use crate::commands::approvals::decider;
use crate::commands::audit::open_store;

/// Most lines of one field's diff before the rest is counted instead of shown.
const MAX_DIFF_LINES: usize = 60;

/// Longest upstream or tool name shown (names come from the upstream; every one is escaped).
const NAME_CHARS: usize = 120;

/// `upstream/tool`, escaped and bounded.
fn shown(upstream: &str, tool: &str) -> String {
    format!("{}/{}", bounded(upstream, NAME_CHARS), bounded(tool, NAME_CHARS))
}

pub(crate) async fn run(args: PinsArgs) -> Result<Outcome> {
    let store = open_store(args.state_dir.as_deref()).await?;
    let text = match args.action {
        PinsAction::List { json } => list(&store, json).await,
        PinsAction::Diff(tool) => diff(&store, &tool).await,
        PinsAction::Approve { tool, fingerprint, by } => approve(&store, &tool, fingerprint, decider(by)).await,
        PinsAction::Reject { tool, by } => reject(&store, &tool, decider(by)).await,
    };
    store.close().await?;
    let mut stdout = std::io::stdout().lock();
    stdout.write_all(text?.as_bytes())?;
    stdout.flush()?;
    Ok(Outcome::Clean)
}

async fn list(store: &Store, json: bool) -> Result<String> {
    let pins = store.pins().list().await?;
    let pending = store.pins().list_pending().await?;
    if json {
        let mut text = json_safe(&serde_json::to_string_pretty(&json!({"pins": pins, "pending": pending}))?);
        text.push('\n');
        return Ok(text);
    }
    let mut text = String::new();
    if pins.is_empty() {
        text.push_str("no tools are pinned\n");
    }
    for pin in &pins {
        let snapshot = &pin.snapshot;
        let _ = writeln!(
            text,
            "{}  {}  approved {} by {}",
            shown(&snapshot.upstream, &snapshot.tool),
            bounded(&snapshot.fingerprint.whole, NAME_CHARS),
            bounded(&pin.approved_at, NAME_CHARS),
            bounded(&pin.approved_by, NAME_CHARS)
        );
    }
    if !pending.is_empty() {
        let _ = writeln!(text, "\nin quarantine (definition changed since it was pinned):");
        for change in &pending {
            let fields: Vec<String> = change.changes.iter().map(|(field, _)| bounded(field, NAME_CHARS)).collect();
            let _ = writeln!(
                text,
                "{}  {}  changed: {}  (see `toolgate pins diff {} {}`)",
                shown(&change.proposed.upstream, &change.proposed.tool),
                bounded(&change.proposed.fingerprint.whole, NAME_CHARS),
                fields.join(", "),
                bounded(&change.proposed.upstream, NAME_CHARS),
                bounded(&change.proposed.tool, NAME_CHARS)
            );
        }
    }
    Ok(text)
}

async fn pending_change(store: &Store, tool: &PinToolArgs) -> Result<PendingPinChange> {
    store.pins().pending(&tool.upstream, &tool.tool).await?.with_context(|| {
        format!("{} has no definition in quarantine (see `toolgate pins list`)", shown(&tool.upstream, &tool.tool))
    })
}

async fn diff(store: &Store, tool: &PinToolArgs) -> Result<String> {
    let change = pending_change(store, tool).await?;
    let pin = store.pins().get(&tool.upstream, &tool.tool).await?;
    let old_definition = pin.as_ref().map(|pin| &pin.snapshot.definition).unwrap_or(&Value::Null);
    let new_definition = &change.proposed.definition;
    let mut text = String::new();
    let _ = writeln!(
        text,
        "{}: definition changed (first seen {})",
        shown(&tool.upstream, &tool.tool),
        bounded(&change.detected_at, NAME_CHARS)
    );
    let _ = writeln!(text, "  pinned:   {}", bounded(&change.pinned_fingerprint, NAME_CHARS));
    let _ = writeln!(text, "  proposed: {}", bounded(&change.proposed.fingerprint.whole, NAME_CHARS));
    for (field, kind) in &change.changes {
        let _ = writeln!(text, "\n{}: {}", bounded(field, NAME_CHARS), kind.as_str());
        let lines = field_diff(old_definition, new_definition, field);
        let hidden = lines.len().saturating_sub(MAX_DIFF_LINES);
        for line in lines.iter().take(MAX_DIFF_LINES) {
            let _ = writeln!(text, "  {line}");
        }
        if hidden > 0 {
            let _ = writeln!(text, "  … and {hidden} more line(s) of changes");
        }
    }
    let (upstream, name) = (bounded(&tool.upstream, NAME_CHARS), bounded(&tool.tool, NAME_CHARS));
    let _ = writeln!(
        text,
        "\napprove: toolgate pins approve {upstream} {name} --fingerprint {}\nreject:  toolgate pins reject {upstream} \
         {name}",
        bounded(&change.proposed.fingerprint.whole, NAME_CHARS)
    );
    Ok(text)
}

async fn approve(store: &Store, tool: &PinToolArgs, fingerprint: Option<String>, by: String) -> Result<String> {
    let change = pending_change(store, tool).await?;
    let wanted = fingerprint.unwrap_or_else(|| change.proposed.fingerprint.whole.clone());
    if wanted != change.proposed.fingerprint.whole {
        bail!(
            "the definition in quarantine for {}/{} is now {}, not {wanted}: it changed again; run `toolgate pins \
             diff {} {}` and look again",
            tool.upstream,
            tool.tool,
            change.proposed.fingerprint.whole,
            tool.upstream,
            tool.tool
        );
    }
    let pinned = match store.pins().approve_pending(&tool.upstream, &tool.tool, &wanted, &by).await {
        Ok(pinned) => pinned,
        Err(StoreError::NotFound(_)) => bail!(
            "the definition in quarantine for {}/{} changed while approving; run `toolgate pins diff` again",
            tool.upstream,
            tool.tool
        ),
        Err(error) => return Err(error.into()),
    };
    store
        .record_pin_decision(&tool.upstream, &tool.tool, &wanted, PinDecision::Approved, &by)
        .await
        .context("the definition is pinned, but its audit row could not be written")?;
    Ok(format!(
        "pinned {} at {} (approved by {})\n",
        shown(&tool.upstream, &tool.tool),
        bounded(&pinned.snapshot.fingerprint.whole, NAME_CHARS),
        bounded(&pinned.approved_by, NAME_CHARS)
    ))
}

async fn reject(store: &Store, tool: &PinToolArgs, by: String) -> Result<String> {
    let dropped = match store.pins().reject_pending(&tool.upstream, &tool.tool).await {
        Ok(dropped) => dropped,
        Err(StoreError::NotFound(_)) => bail!("{}/{} has no definition in quarantine", tool.upstream, tool.tool),
        Err(error) => return Err(error.into()),
    };
    let fingerprint = &dropped.proposed.fingerprint.whole;
    store
        .record_pin_decision(&tool.upstream, &tool.tool, fingerprint, PinDecision::Rejected, &by)
        .await
        .context("the definition is rejected, but its audit row could not be written")?;
    Ok(format!(
        "rejected {} for {}; the pin stays at {}\n",
        bounded(&dropped.proposed.fingerprint.whole, NAME_CHARS),
        shown(&tool.upstream, &tool.tool),
        bounded(&dropped.pinned_fingerprint, NAME_CHARS)
    ))
}
