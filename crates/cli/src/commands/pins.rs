//! `toolgate pins list | diff | approve | reject`: the pinned definitions (tools; with `--kind`, a pinned upstream's
//! prompts, resources, resource templates and instructions) and the changed ones held in quarantine until a person
//! looks.
//!
//! `diff` shows each changed field with its old and new value (schemas as a compact path-by-path JSON diff) and the
//! fingerprint to approve; `approve` pins only that fingerprint, so a definition that changed again while the
//! person read the diff is never approved by accident. `approve --upstream NAME --all|--agreeing` onboards an
//! upstream in one step: every waiting definition, or those whose declared hints the gateway's trust rule accepted
//! and lint found no error in, judged from the gateway's inventory for the very fingerprint that waits. Each approval or rejection is an audit row (kind `pin`,
//! with the fingerprint and who decided). Nothing here talks to an upstream.

use std::fmt::Write as _;
use std::io::Write;

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};
use toolgate_core::definition_diff::field_diff;
use toolgate_core::display::{bounded, json_safe};
use toolgate_store::{PendingPinChange, PinDecision, PinKind, Store, StoreError};

use crate::Outcome;
use crate::cli::{PinToolArgs, PinsAction, PinsArgs};
use crate::commands::approvals::decider;
use crate::commands::audit::open_store;

/// Most lines of one field's diff before the rest is counted instead of shown.
const MAX_DIFF_LINES: usize = 60;

/// Longest upstream or tool name shown (names come from the upstream; every one is escaped).
const NAME_CHARS: usize = 120;

/// `upstream/tool` (a kind other than a tool first: `prompt upstream/name`), escaped and bounded.
fn shown(upstream: &str, kind: PinKind, name: &str) -> String {
    let what = format!("{}/{}", bounded(upstream, NAME_CHARS), bounded(name, NAME_CHARS));
    match kind {
        PinKind::Tool => what,
        kind => format!("{} {what}", kind.as_str()),
    }
}

/// The `--kind` option a command about this kind needs (none for a tool).
fn kind_option(kind: PinKind) -> String {
    match kind {
        PinKind::Tool => String::new(),
        kind => format!(" --kind {}", kind.as_str()),
    }
}

pub(crate) async fn run(args: PinsArgs) -> Result<Outcome> {
    let named = match &args.action {
        PinsAction::Diff(tool) | PinsAction::Reject { tool, .. } => Some((tool.tool.is_some(), tool.kind)),
        PinsAction::Approve { upstream: Some(_), tool, kind, .. } => Some((tool.is_some(), *kind)),
        _ => None,
    };
    if let Some((false, kind)) = named
        && kind != PinKind::Instructions
    {
        bail!("name the {} after the upstream (only instructions have no name)", kind.as_str());
    }
    let store = open_store(args.state_dir.as_deref(), args.config.as_deref()).await?;
    let text = match args.action {
        PinsAction::List { json } => list(&store, json).await,
        PinsAction::Diff(tool) => diff(&store, &tool).await,
        PinsAction::Approve { upstream: Some(upstream), tool, kind, fingerprint, by, .. } => {
            approve(&store, &PinToolArgs { upstream, tool, kind }, fingerprint, decider(by)).await
        }
        PinsAction::Approve { bulk_upstream: Some(upstream), all, agreeing, by, .. } if all || agreeing => {
            approve_upstream(&store, &upstream, agreeing, decider(by)).await
        }
        PinsAction::Approve { .. } => Err(anyhow::anyhow!(
            "say which: `pins approve UPSTREAM TOOL` or `pins approve --upstream NAME --all|--agreeing`"
        )),
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
            shown(&snapshot.upstream, snapshot.kind, &snapshot.tool),
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
                "{}  {}  changed: {}  (see `toolgate pins diff {} {}{}`)",
                shown(&change.proposed.upstream, change.proposed.kind, &change.proposed.tool),
                bounded(&change.proposed.fingerprint.whole, NAME_CHARS),
                fields.join(", "),
                bounded(&change.proposed.upstream, NAME_CHARS),
                bounded(&change.proposed.tool, NAME_CHARS),
                kind_option(change.proposed.kind)
            );
        }
    }
    Ok(text)
}

async fn pending_change(store: &Store, tool: &PinToolArgs) -> Result<PendingPinChange> {
    store.pins().pending_of(&tool.upstream, tool.kind, tool.name()).await?.with_context(|| {
        format!(
            "{} has no definition in quarantine (see `toolgate pins list`)",
            shown(&tool.upstream, tool.kind, tool.name())
        )
    })
}

async fn diff(store: &Store, tool: &PinToolArgs) -> Result<String> {
    let change = pending_change(store, tool).await?;
    let pin = store.pins().get_of(&tool.upstream, tool.kind, tool.name()).await?;
    let old_definition = pin.as_ref().map(|pin| &pin.snapshot.definition).unwrap_or(&Value::Null);
    let new_definition = &change.proposed.definition;
    let mut text = String::new();
    let _ = writeln!(
        text,
        "{}: definition changed (first seen {})",
        shown(&tool.upstream, tool.kind, tool.name()),
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
    let (upstream, name) = (bounded(&tool.upstream, NAME_CHARS), bounded(tool.name(), NAME_CHARS));
    let kind = kind_option(tool.kind);
    let _ = writeln!(
        text,
        "\napprove: toolgate pins approve {upstream} {name}{kind} --fingerprint {}\nreject:  toolgate pins reject \
         {upstream} {name}{kind}",
        bounded(&change.proposed.fingerprint.whole, NAME_CHARS)
    );
    Ok(text)
}

async fn approve(store: &Store, tool: &PinToolArgs, fingerprint: Option<String>, by: String) -> Result<String> {
    let change = pending_change(store, tool).await?;
    let wanted = fingerprint.unwrap_or_else(|| change.proposed.fingerprint.whole.clone());
    if wanted != change.proposed.fingerprint.whole {
        bail!(
            "the definition in quarantine for {} is now {}, not {wanted}: it changed again; run `toolgate pins \
             diff {} {}{}` and look again",
            shown(&tool.upstream, tool.kind, tool.name()),
            change.proposed.fingerprint.whole,
            tool.upstream,
            tool.name(),
            kind_option(tool.kind)
        );
    }
    let pinned = match store.pins().approve_pending_of(&tool.upstream, tool.kind, tool.name(), &wanted, &by).await {
        Ok(pinned) => pinned,
        Err(StoreError::NotFound(_)) => bail!(
            "the definition in quarantine for {} changed while approving; run `toolgate pins diff` again",
            shown(&tool.upstream, tool.kind, tool.name())
        ),
        Err(error) => return Err(error.into()),
    };
    store
        .record_pin_decision_of(&tool.upstream, tool.kind, tool.name(), &wanted, PinDecision::Approved, &by)
        .await
        .context("the definition is pinned, but its audit row could not be written")?;
    Ok(format!(
        "pinned {} at {} (approved by {})\n",
        shown(&tool.upstream, tool.kind, tool.name()),
        bounded(&pinned.snapshot.fingerprint.whole, NAME_CHARS),
        bounded(&pinned.approved_by, NAME_CHARS)
    ))
}

/// Pins the waiting definitions of one upstream: all of them, or (`only_agreeing`) those the gateway's inventory
/// shows agreeing ([`toolgate_store::InventoryTool::disagreements`]) for the very fingerprint waiting. Each is pinned
/// at the fingerprint listed now and gets its own audit row; the others are named with why they were left.
async fn approve_upstream(store: &Store, upstream: &str, only_agreeing: bool, by: String) -> Result<String> {
    let waiting: Vec<PendingPinChange> =
        store.pins().list_pending().await?.into_iter().filter(|change| change.proposed.upstream == upstream).collect();
    if waiting.is_empty() {
        bail!(
            "upstream {} has no definition waiting to be pinned (see `toolgate pins list`)",
            bounded(upstream, NAME_CHARS)
        );
    }
    let inventory = if only_agreeing { store.inventory().await? } else { Vec::new() };
    let mut text = String::new();
    let (mut pinned, mut left) = (0usize, 0usize);
    for change in &waiting {
        let (kind, name, fingerprint) =
            (change.proposed.kind, &change.proposed.tool, &change.proposed.fingerprint.whole);
        if only_agreeing && kind != PinKind::Tool {
            // Agreement is about a tool's hints; a prompt's, resource's or the instructions' text has none.
            left += 1;
            let _ =
                writeln!(text, "left {}: not a tool; review it with `toolgate pins diff`", shown(upstream, kind, name));
            continue;
        }
        if only_agreeing {
            let assessed = inventory
                .iter()
                .find(|tool| tool.upstream == upstream && &tool.tool == name && &tool.fingerprint == fingerprint);
            let reasons = match assessed {
                Some(tool) => tool.disagreements(),
                None => vec!["the gateway has not assessed this definition yet (is `toolgate serve` running?)".into()],
            };
            if !reasons.is_empty() {
                left += 1;
                let reasons: Vec<String> = reasons.iter().map(|reason| bounded(reason, 300)).collect();
                let _ = writeln!(text, "left {}: {}", shown(upstream, kind, name), reasons.join("; "));
                continue;
            }
        }
        match store.pins().approve_pending_of(upstream, kind, name, fingerprint, &by).await {
            Ok(_) => {}
            // It changed again since it was listed: not what anyone looked at.
            Err(StoreError::NotFound(_)) => {
                left += 1;
                let _ = writeln!(text, "left {}: its definition changed while pinning", shown(upstream, kind, name));
                continue;
            }
            Err(error) => return Err(error.into()),
        }
        store
            .record_pin_decision_of(upstream, kind, name, fingerprint, PinDecision::Approved, &by)
            .await
            .context("a definition is pinned, but its audit row could not be written")?;
        pinned += 1;
        let _ = writeln!(text, "pinned {} at {}", shown(upstream, kind, name), bounded(fingerprint, NAME_CHARS));
    }
    let _ = writeln!(text, "{pinned} pinned, {left} left waiting (approved by {})", bounded(&by, NAME_CHARS));
    Ok(text)
}

async fn reject(store: &Store, tool: &PinToolArgs, by: String) -> Result<String> {
    let dropped = match store.pins().reject_pending_of(&tool.upstream, tool.kind, tool.name()).await {
        Ok(dropped) => dropped,
        Err(StoreError::NotFound(_)) => {
            bail!("{} has no definition in quarantine", shown(&tool.upstream, tool.kind, tool.name()))
        }
        Err(error) => return Err(error.into()),
    };
    let fingerprint = &dropped.proposed.fingerprint.whole;
    store
        .record_pin_decision_of(&tool.upstream, tool.kind, tool.name(), fingerprint, PinDecision::Rejected, &by)
        .await
        .context("the definition is rejected, but its audit row could not be written")?;
    Ok(format!(
        "rejected {} for {}; the pin stays at {}\n",
        bounded(&dropped.proposed.fingerprint.whole, NAME_CHARS),
        shown(&tool.upstream, tool.kind, tool.name()),
        bounded(&dropped.pinned_fingerprint, NAME_CHARS)
    ))
}
