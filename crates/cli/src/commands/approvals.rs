//! `toolgate approvals list | approve ID | deny ID`: the calls waiting for a person, decided from a terminal.
//!
//! The gateway that asked polls the same database and sees the decision within its poll interval. Deciding records
//! who decided (`--by`, else `$USER`); an unknown, already decided, expired or lapsed id (its call stopped waiting:
//! timed out, cancelled, client gone) is an error that says which (exit 2). This command never consumes an approval: only the gateway uses it, once, for the call it was for.

use std::fmt::Write as _;
use std::io::Write;
use std::time::SystemTime;

use anyhow::{Context, Result};
use serde_json::{Value, json};
use toolgate_core::display::{bounded, json_safe, json_text};
use toolgate_core::facts::{category, risk_level};
use toolgate_core::{EffectiveHint, EffectiveHints, Hint, HintSource};
use toolgate_store::{
    ApprovalDecision, ApprovalId, ApprovalRecord, AuditFilter, AuditKind, Store, StoreError, format_rfc3339,
};

use crate::Outcome;
use crate::cli::{ApprovalsAction, ApprovalsArgs, DecideArgs};
use crate::commands::audit::open_store;

/// Longest id, name, title or action shown.
const NAME_CHARS: usize = 120;

/// Longest argument key or value shown.
const VALUE_CHARS: usize = 60;

/// Longest argument summary shown when it is not a JSON object.
const SUMMARY_CHARS: usize = 600;

pub(crate) async fn run(args: ApprovalsArgs) -> Result<Outcome> {
    let store = open_store(args.state_dir.as_deref(), args.config.as_deref()).await?;
    let outcome = match args.action {
        ApprovalsAction::List { json } => list(&store, json).await,
        ApprovalsAction::Approve(decide_args) => decide(&store, decide_args, ApprovalDecision::Approve).await,
        ApprovalsAction::Deny(decide_args) => decide(&store, decide_args, ApprovalDecision::Deny).await,
    };
    store.close().await?;
    outcome
}

/// Who is deciding: `--by`, else `$USER`, else `unknown`.
pub(crate) fn decider(by: Option<String>) -> String {
    by.or_else(|| std::env::var("USER").ok())
        .map(|name| name.trim().to_owned())
        .filter(|name| !name.is_empty())
        .unwrap_or_else(|| "unknown".to_owned())
}

async fn decide(store: &Store, args: DecideArgs, decision: ApprovalDecision) -> Result<Outcome> {
    let id = ApprovalId::from_text(&args.id);
    let by = decider(args.by);
    let verb = match decision {
        ApprovalDecision::Approve => "approved",
        ApprovalDecision::Deny => "denied",
    };
    let approvals = store.approvals();
    match approvals.decide(&id, decision, &by).await {
        Ok(()) => {}
        Err(StoreError::NotFound(_)) => anyhow::bail!("no approval with id {id}"),
        Err(StoreError::Expired(_)) => {
            anyhow::bail!("approval {id} has expired: the call it was for was refused")
        }
        Err(StoreError::AlreadyDecided { state, .. }) => anyhow::bail!("approval {id} is already {state}"),
        Err(StoreError::Lapsed { why, .. }) => {
            anyhow::bail!(
                "approval {id}: nothing waits for it any more ({}); nothing was {verb}",
                bounded(&why, NAME_CHARS)
            )
        }
        Err(error) => return Err(error).context(format!("cannot record the decision on approval {id}")),
    }
    let record = approvals.get(&id).await?.with_context(|| format!("approval {id} vanished after the decision"))?;
    let approval = &record.approval;
    store
        .record_approval_decision(approval, decision, &by)
        .await
        .with_context(|| format!("approval {id} is {verb}, but its audit row could not be written"))?;
    let mut stdout = std::io::stdout().lock();
    writeln!(
        stdout,
        "{verb} {} by {}: {} ({}/{}): {}",
        bounded(id.as_str(), NAME_CHARS),
        bounded(&by, NAME_CHARS),
        bounded(&approval.title, NAME_CHARS),
        bounded(&approval.upstream, NAME_CHARS),
        bounded(&approval.tool, NAME_CHARS),
        bounded(&approval.action, NAME_CHARS)
    )?;
    Ok(Outcome::Clean)
}

async fn list(store: &Store, json: bool) -> Result<Outcome> {
    let pending = store.approvals().list_pending().await?;
    let now = SystemTime::now();
    let mut text = String::new();
    if json {
        for record in &pending {
            let mut value = serde_json::to_value(record)?;
            if let (Value::Object(object), Some((category, risk))) = (&mut value, risk_of(store, record).await) {
                object.insert("category".into(), json!(category));
                object.insert("risk_level".into(), json!(risk));
            }
            text.push_str(&json_safe(&serde_json::to_string(&value)?));
            text.push('\n');
        }
    } else if pending.is_empty() {
        text.push_str("no approvals are waiting\n");
    } else {
        for record in &pending {
            let approval = &record.approval;
            let risk = match risk_of(store, record).await {
                Some((category, risk)) => format!("risk {risk} ({category})"),
                None => "risk unknown".to_owned(),
            };
            // Title, action, names and arguments come from the upstream and the model: each escaped and bounded.
            let _ = writeln!(text, "{}", bounded(approval.id.as_str(), NAME_CHARS));
            let _ =
                writeln!(text, "  {}: {}", bounded(&approval.title, NAME_CHARS), bounded(&approval.action, NAME_CHARS));
            let _ = writeln!(
                text,
                "  upstream {}, tool {}, {}",
                bounded(&approval.upstream, NAME_CHARS),
                bounded(&approval.tool, NAME_CHARS),
                bounded(&risk, NAME_CHARS)
            );
            let _ = writeln!(text, "  arguments: {}", pretty_summary(&approval.args_summary));
            if record.detached {
                // No call waits in any process: the client was sent the console's page and retries once decided.
                let _ = writeln!(text, "  no call waits: the client retries the call once this is decided");
            }
            let _ = writeln!(
                text,
                "  asked {}, expires {} ({})",
                short_time(approval.created),
                short_time(approval.expires),
                remaining(approval.expires, now)
            );
            text.push('\n');
        }
        let _ = writeln!(
            text,
            "{} waiting; decide with `toolgate approvals approve ID` or `toolgate approvals deny ID`",
            pending.len()
        );
    }
    let mut stdout = std::io::stdout().lock();
    stdout.write_all(text.as_bytes())?;
    stdout.flush()?;
    Ok(Outcome::Clean)
}

/// The tool's category and risk level: as stored with the approval when the gateway asked; for approvals stored
/// before risk was, from the latest decision the gateway recorded for the tool (the hints it decided on), else from
/// its pin; `None` when none of these is known.
async fn risk_of(store: &Store, record: &ApprovalRecord) -> Option<(String, u8)> {
    let approval = &record.approval;
    if let Some(risk) = &approval.risk {
        return Some((risk.category.clone(), risk.level));
    }
    let filter = AuditFilter {
        kind: Some(AuditKind::Decision),
        tool_glob: Some(glob_literal(&approval.tool)),
        session: Some(approval.session.clone()),
        limit: Some(1),
        ..AuditFilter::default()
    };
    let decided = store.query_audit(&filter).await.ok().into_iter().flatten().next().and_then(|row| row.hint_sources);
    let hints = match decided {
        Some(hints) => hints,
        None => store.pins().get(&approval.upstream, &approval.tool).await.ok()??.snapshot.effective_hints,
    };
    let hints = hints_from_json(&hints)?;
    Some((category(&hints).as_str().to_owned(), risk_level(&hints)))
}

/// A glob matching exactly `text` (SQLite GLOB: `*`, `?` and `[` are bracketed).
fn glob_literal(text: &str) -> String {
    text.chars()
        .map(|character| match character {
            '*' | '?' | '[' => format!("[{character}]"),
            other => other.to_string(),
        })
        .collect()
}

/// Effective hints from their JSON form (`{"readOnlyHint": {"value": true, "source": ...}, ...}`).
fn hints_from_json(value: &Value) -> Option<EffectiveHints> {
    let hint = |hint: Hint| -> Option<EffectiveHint> {
        let entry = value.get(hint.wire_key())?;
        let value = entry.get("value").and_then(Value::as_bool).or_else(|| entry.as_bool())?;
        let source = entry.get("source").cloned().and_then(|source| serde_json::from_value(source).ok());
        Some(EffectiveHint { value, source: source.unwrap_or(HintSource::Declared) })
    };
    Some(EffectiveHints {
        read_only: hint(Hint::ReadOnly)?,
        destructive: hint(Hint::Destructive)?,
        idempotent: hint(Hint::Idempotent)?,
        open_world: hint(Hint::OpenWorld)?,
    })
}

/// The stored argument summary, made readable when it is a JSON object: `path="/tmp/x", force=true`.
/// Keys and values are escaped (`core::display`): a key chosen by the model cannot move the cursor or hide a path.
pub(crate) fn pretty_summary(summary: &str) -> String {
    let Ok(Value::Object(object)) = serde_json::from_str::<Value>(summary) else {
        return bounded(summary, SUMMARY_CHARS);
    };
    if object.is_empty() {
        return "(none)".to_owned();
    }
    object
        .iter()
        .map(|(key, value)| format!("{}={}", bounded(key, VALUE_CHARS), json_text(value, VALUE_CHARS)))
        .collect::<Vec<_>>()
        .join(", ")
}

fn short_time(time: SystemTime) -> String {
    let text = format_rfc3339(time);
    text.get(..19).map(|text| format!("{} UTC", text.replacen('T', " ", 1))).unwrap_or(text)
}

fn remaining(expires: SystemTime, now: SystemTime) -> String {
    match expires.duration_since(now) {
        Ok(left) if left.as_secs() >= 60 => format!("in {}m {}s", left.as_secs() / 60, left.as_secs() % 60),
        Ok(left) => format!("in {}s", left.as_secs()),
        Err(_) => "expired".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use toolgate_core::facts::Category;

    #[test]
    fn summaries_and_globs() {
        assert_eq!(pretty_summary(r#"{"path":"/tmp/x","force":true}"#), r#"path="/tmp/x", force=true"#);
        assert_eq!(pretty_summary("{}"), "(none)");
        assert_eq!(pretty_summary("path=/tmp/x"), "path=/tmp/x");
        assert_eq!(
            pretty_summary(r#"{"path\r\u001b[2Kscratch":"~/.ssh/id_rsa\u202e"}"#),
            r#"path\r\u{1b}[2Kscratch="~/.ssh/id_rsa\u202e""#
        );
        assert_eq!(glob_literal("a*b?[c]"), "a[*]b[?][[]c]");
    }

    #[test]
    fn hints_read_back_from_json() {
        let hints = hints_from_json(&json!({
            "readOnlyHint": {"value": false, "source": "declared"},
            "destructiveHint": {"value": true, "source": "inferred"},
            "idempotentHint": {"value": false, "source": "default"},
            "openWorldHint": {"value": false, "source": "declared"},
        }));
        assert_eq!(hints.map(|hints| (category(&hints), risk_level(&hints))), Some((Category::Destructive, 4)));
        assert!(hints_from_json(&json!({"readOnlyHint": true})).is_none());
    }
}
