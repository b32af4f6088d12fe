//! `toolgate audit`: the audit log as a table or JSON lines, filtered by time, tool, verdict and kind; and
//! `toolgate audit verify`, which walks the hash chain and names the first break the store finds.
//!
//! Reads only: this command never writes a row. It also holds [`open_store`], which the approvals and pins commands
//! share: a missing database is an error (exit 2), never silently created by a command that only reads it.

use std::fmt::Write as _;
use std::io::Write;
use std::path::Path;
use std::time::SystemTime;

use anyhow::{Context, Result, bail};
use comfy_table::{ContentArrangement, Table, presets};
use toolgate_core::display::{bounded, json_safe};
use toolgate_store::{AuditFilter, AuditRow, DATABASE_FILE, Store, parse_age, parse_rfc3339};

use crate::Outcome;
use crate::cli::{AuditAction, AuditArgs};
use crate::state::state_dir;

/// Opens the store of the state directory; fails when no gateway has created it yet.
pub(crate) async fn open_store(explicit: Option<&Path>) -> Result<Store> {
    let state = state_dir(explicit)?;
    let database = state.join(DATABASE_FILE);
    if !database.is_file() {
        bail!(
            "no toolgate database at {} (run `toolgate serve` with this state directory first, or pass --state-dir)",
            database.display()
        );
    }
    Store::open(&state).await.with_context(|| format!("cannot open {}", database.display()))
}

pub(crate) async fn run(args: AuditArgs) -> Result<Outcome> {
    let store = open_store(args.state_dir.as_deref()).await?;
    let outcome = match args.action {
        Some(AuditAction::Verify) => verify(&store).await,
        None => list(&store, &args).await,
    };
    store.close().await?;
    outcome
}

async fn verify(store: &Store) -> Result<Outcome> {
    let report = store.verify_audit().await?;
    let mut stdout = std::io::stdout().lock();
    match &report.first_break {
        None => {
            let head = match &report.head {
                Some((seq, _)) => format!("head seq {seq}"),
                None => "empty log".to_owned(),
            };
            writeln!(stdout, "{} rows, chain intact ({head})", report.rows_checked)?;
            Ok(Outcome::Clean)
        }
        Some(problem) => {
            writeln!(stdout, "chain BROKEN after {} intact rows: {problem}", report.rows_checked)?;
            Ok(Outcome::Findings)
        }
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
        limit: args.limit,
        ..AuditFilter::default()
    };
    let rows = store.query_audit(&filter).await?;
    let text = if args.json {
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
            text(&row.outcome),
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
