//! `toolgate audit`: the audit log as a table or JSON lines, filtered by time, tool, verdict and kind;
//! `toolgate audit export`, every column as JSON lines for a log store; and `toolgate audit verify`, which walks the
//! hash chain (from the retention checkpoint, if rows were pruned) and names the first break the store finds, or
//! re-verifies exported files.
//!
//! Never writes a row. Listing opens the store as every command does (appending what journals of stopped gateways
//! hold); `verify` opens it read-only and only counts those rows. It also holds [`open_store`], which the approvals
//! and pins commands share: a missing database is an error (exit 2), never silently created by a command that only
//! reads it.

use std::fmt::Write as _;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use anyhow::{Context, Result, bail};
use comfy_table::{ContentArrangement, Table, presets};
use toolgate_core::display::{bounded, json_safe};
use toolgate_store::{
    AuditFilter, AuditRow, NOT_RECORDED_OUTCOME, Store, UNANSWERED_OUTCOME, parse_age, parse_rfc3339, verify_rows,
};

use crate::Outcome;
use crate::cli::{AuditAction, AuditArgs};
use crate::store_location::StoreLocation;

/// Opens the store of the state directory, or the one `--config FILE`'s `[store]` names; fails when no gateway has
/// created it yet.
pub(crate) async fn open_store(state_dir: Option<&Path>, config: Option<&Path>) -> Result<Store> {
    StoreLocation::resolve(state_dir, config)?.open_existing().await
}

pub(crate) async fn run(args: AuditArgs) -> Result<Outcome> {
    if let Some(AuditAction::Verify { exported }) = &args.action {
        let location = StoreLocation::resolve(args.state_dir.as_deref(), args.config.as_deref())?;
        return if exported.is_empty() { verify(&location).await } else { verify_exported(exported, &location).await };
    }
    let store = open_store(args.state_dir.as_deref(), args.config.as_deref()).await?;
    let outcome = list(&store, &args).await;
    store.close().await?;
    outcome
}

/// Walks the chain of a database opened read-only; counts what journals of stopped gateways would add.
async fn verify(location: &StoreLocation) -> Result<Outcome> {
    let store = location.open_read_only().await?;
    let report = store.verify_audit().await?;
    let backlog = store.journal_backlog().await?;
    let mut stdout = std::io::stdout().lock();
    let outcome = match &report.first_break {
        None => {
            let head = match &report.head {
                Some((seq, _)) => format!("head seq {seq}"),
                None => "empty log".to_owned(),
            };
            let from = match &report.checkpoint {
                Some((seq, hash)) => format!(", from the checkpoint after pruned row {seq} ({hash})"),
                None => String::new(),
            };
            writeln!(stdout, "{} rows, chain intact ({head}{from})", report.rows_checked)?;
            Outcome::Clean
        }
        Some(problem) => {
            writeln!(stdout, "chain BROKEN after {} intact rows: {problem}", report.rows_checked)?;
            Outcome::Findings
        }
    };
    if backlog.rows > 0 || backlog.torn_lines > 0 {
        writeln!(
            stdout,
            "{} journaled row(s) of stopped gateways are not in the database yet ({} journal file(s), {} torn \
             line(s)); the next `toolgate serve` or `toolgate audit` appends them",
            backlog.rows, backlog.files, backlog.torn_lines
        )?;
    }
    Ok(outcome)
}

/// Verifies exported JSON-lines files as one chain, in the order given, and whether the database's checkpoint is
/// their last row (what anchors the checkpoint).
async fn verify_exported(files: &[PathBuf], location: &StoreLocation) -> Result<Outcome> {
    let mut rows = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(file).with_context(|| format!("cannot read {}", file.display()))?;
        for (number, line) in text.lines().enumerate().filter(|(_, line)| !line.trim().is_empty()) {
            let row: AuditRow = serde_json::from_str(line)
                .with_context(|| format!("{}:{}: not an exported audit row", file.display(), number + 1))?;
            rows.push(row);
        }
    }
    let Some(first) = rows.first() else { bail!("the exported files hold no rows") };
    // The first row's predecessor is taken as given unless it is the chain's first row.
    let start = (first.seq > 1).then(|| (first.seq - 1, first.prev_hash.clone()));
    let report = verify_rows(&rows, start);
    let mut text = String::new();
    let outcome = if let Some(problem) = &report.first_break {
        let _ = writeln!(text, "exported chain BROKEN after {} intact rows: {problem}", report.rows_checked);
        Outcome::Findings
    } else {
        let last = rows.last().map(|row| (row.seq, row.hash.clone()));
        let last_seq = last.as_ref().map_or(0, |last| last.0);
        let _ = writeln!(text, "{} exported rows, chain intact (rows {}..{last_seq})", report.rows_checked, first.seq);
        match location.require_database() {
            Ok(()) => anchored(location, last, &mut text).await?,
            Err(_) => Outcome::Clean,
        }
    };
    std::io::stdout().lock().write_all(text.as_bytes())?;
    Ok(outcome)
}

/// Whether the database's checkpoint is the last exported row (which anchors it), when it reaches that far.
async fn anchored(location: &StoreLocation, last: Option<(i64, String)>, text: &mut String) -> Result<Outcome> {
    let store = location.open_read_only().await?;
    match (store.audit_checkpoint().await?, last) {
        (Some(checkpoint), Some((seq, hash))) if checkpoint.seq == seq && checkpoint.hash == hash => {
            let _ = writeln!(text, "the database continues from the last exported row (its checkpoint, row {seq})");
            Ok(Outcome::Clean)
        }
        (Some(checkpoint), Some((seq, _))) if checkpoint.seq <= seq => {
            let _ = writeln!(
                text,
                "the database's checkpoint (row {}, {}) is not the exported row of that seq",
                checkpoint.seq, checkpoint.hash
            );
            Ok(Outcome::Findings)
        }
        (Some(checkpoint), Some((seq, _))) => {
            let _ = writeln!(
                text,
                "the database's checkpoint is row {}: the files given end at row {seq}, later exported files were not \
                 given",
                checkpoint.seq
            );
            Ok(Outcome::Clean)
        }
        _ => Ok(Outcome::Clean),
    }
}

async fn list(store: &Store, args: &AuditArgs) -> Result<Outcome> {
    let now = SystemTime::now();
    let filter = AuditFilter {
        since: args.since.as_deref().map(|text| parse_time(text, now)).transpose()?,
        until: args.until.as_deref().map(|text| parse_time(text, now)).transpose()?,
        tool_glob: args.tool.clone(),
        verdict: args.verdict,
        kind: args.kind,
        instance: args.instance.clone(),
        limit: if matches!(args.action, Some(AuditAction::Export)) { None } else { args.limit },
        ..AuditFilter::default()
    };
    let rows = store.query_audit(&filter).await?;
    let text = if args.json || matches!(args.action, Some(AuditAction::Export)) {
        let mut text = String::new();
        for row in &rows {
            text.push_str(&json_safe(&serde_json::to_string(row)?));
            text.push('\n');
        }
        text
    } else {
        table(&rows)
    };
    let mut stdout = std::io::stdout().lock();
    stdout.write_all(text.as_bytes())?;
    stdout.flush()?;
    Ok(Outcome::Clean)
}

/// RFC 3339, or an age before `now`: a number followed by `s`, `m`, `h`, `d` or `w`.
pub(crate) fn parse_time(text: &str, now: SystemTime) -> Result<SystemTime> {
    let trimmed = text.trim();
    if let Some(age) = parse_age(trimmed) {
        return now.checked_sub(age).with_context(|| format!("{text:?} reaches before the clock's range"));
    }
    parse_rfc3339(trimmed).map_err(|_| {
        anyhow::anyhow!(
            "cannot read time {text:?}: use RFC 3339 (2026-01-31T09:00:00Z) or an age (30s, 10m, 2h, 1d, 1w)"
        )
    })
}

fn table(rows: &[AuditRow]) -> String {
    if rows.is_empty() {
        return "no audit rows match\n".to_owned();
    }
    let mut table = Table::new();
    table.load_style(presets::UTF8_HORIZONTAL_ONLY).set_content_arrangement(ContentArrangement::Dynamic);
    table.set_header([
        "seq",
        "time (UTC)",
        "kind",
        "caller",
        "session",
        "upstream",
        "tool",
        "verdict",
        "outcome",
        "duration",
        "approval",
    ]);
    // Upstream and tool names come from upstreams, identities from callers: every cell is escaped and bounded.
    let text = |value: &Option<String>| {
        value.as_deref().map(|text| bounded(text, CELL_CHARS)).unwrap_or_else(|| "-".to_owned())
    };
    for row in rows {
        table.add_row([
            row.seq.to_string(),
            short_time(&row.time),
            bounded(&row.kind, CELL_CHARS),
            caller(row),
            row.session.as_deref().map(|session| shorten(session, 8)).unwrap_or_else(|| "-".to_owned()),
            text(&row.upstream),
            text(&row.tool),
            text(&row.verdict),
            match row.outcome.as_deref() {
                Some(NOT_RECORDED_OUTCOME) => "not recorded (process ended)".to_owned(),
                Some(UNANSWERED_OUTCOME) => "unanswered (never forwarded)".to_owned(),
                _ => text(&row.outcome),
            },
            row.duration_us.map(duration).unwrap_or_else(|| "-".to_owned()),
            row.approval_id.as_deref().map(|id| shorten(id, 12)).unwrap_or_else(|| "-".to_owned()),
        ]);
    }
    let mut output = table.to_string();
    let _ = writeln!(output, "\n{} row(s)", rows.len());
    output
}

/// Who made the request or decision: the caller's identity (`console:alice`, an OAuth subject, `stdio`), else `-`.
fn caller(row: &AuditRow) -> String {
    row.caller
        .as_ref()
        .and_then(|caller| caller.get("identity"))
        .and_then(serde_json::Value::as_str)
        .map(|identity| shorten(identity, 24))
        .unwrap_or_else(|| "-".to_owned())
}

/// `2026-01-31T09:00:00.123456Z` → `2026-01-31 09:00:00`.
fn short_time(time: &str) -> String {
    time.get(..19).map(|text| text.replacen('T', " ", 1)).unwrap_or_else(|| bounded(time, CELL_CHARS))
}

/// The first `keep` characters, escaped, with `…` when there were more (ids and identities, where the start is
/// what tells them apart).
fn shorten(text: &str, keep: usize) -> String {
    if text.chars().count() <= keep {
        bounded(text, keep)
    } else {
        format!("{}…", bounded(&text.chars().take(keep).collect::<String>(), keep))
    }
}

/// Longest text shown in one cell.
const CELL_CHARS: usize = 120;

fn duration(micros: i64) -> String {
    match micros {
        ..1_000 => format!("{micros} µs"),
        1_000..1_000_000 => format!("{:.1} ms", micros as f64 / 1_000.0),
        _ => format!("{:.2} s", micros as f64 / 1_000_000.0),
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn ages_and_rfc3339() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        let check = |text: &str, seconds_ago: u64| {
            assert_eq!(parse_time(text, now).ok(), Some(now - Duration::from_secs(seconds_ago)), "{text}");
        };
        check("30s", 30);
        check("10m", 600);
        check("2h", 7200);
        check("1d", 86_400);
        check("1w", 604_800);
        assert_eq!(
            parse_time("1970-01-01T00:00:10Z", now).ok(),
            Some(SystemTime::UNIX_EPOCH + Duration::from_secs(10))
        );
        for bad in ["", "10", "m", "10y", "yesterday", "-5m"] {
            assert!(parse_time(bad, now).is_err(), "{bad}");
        }
    }

    #[test]
    fn durations_read_well() {
        assert_eq!(duration(12), "12 µs");
        assert_eq!(duration(12_340), "12.3 ms");
        assert_eq!(duration(2_500_000), "2.50 s");
    }
}
