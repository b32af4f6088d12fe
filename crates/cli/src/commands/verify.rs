//! `toolgate verify`: run a server in the observing sandbox (`toolgate_verify`), print what each tool did against
//! what it declares (text, JSON or SARIF), store the verification records for `serve`, and exit 1 when findings
//! reach `--deny`. The observing, the findings and the records' meaning live in `toolgate_verify`; this only wires
//! arguments, output and the store.

use std::io::Write;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use comfy_table::{Cell, ContentArrangement, Table, presets};
use serde_json::{Value, json};
use toolgate_core::display::bounded;
use toolgate_store::VerifiedFacts;
use toolgate_verify::{RULES, ToolReport, Verification, VerifyOptions};

use crate::Outcome;
use crate::cli::{LintFormat, VerifyArgs};

pub(crate) async fn run(args: VerifyArgs) -> Result<Outcome> {
    let workdir = match &args.dir {
        Some(dir) => dir.clone(),
        None => std::env::current_dir().context("cannot read the current directory")?,
    };
    let mut env = Vec::new();
    for pair in &args.env {
        let Some((key, value)) = pair.split_once('=') else { bail!("--env {pair:?} is not KEY=VALUE") };
        env.push((key.to_owned(), value.to_owned()));
    }
    let options = VerifyOptions {
        command: args.command.clone(),
        workdir,
        env,
        calls: args.calls,
        allow_writes: args.allow_writes,
        timeout_per_call: Duration::from_secs(args.timeout_per_call),
        timeout: Duration::from_secs(args.timeout),
    };
    let verification = toolgate_verify::verify(&options).await.context("verify could not run the server")?;
    let records = if args.no_record { Vec::new() } else { store_records(&args, &verification).await? };
    let text = match args.format {
        LintFormat::Text => text(&verification, &records),
        LintFormat::Json => json_report(&verification, &records)?,
        LintFormat::Sarif => sarif(&verification)?,
    };
    let mut stdout = std::io::stdout().lock();
    stdout.write_all(text.as_bytes())?;
    stdout.flush()?;
    // Every observed contradiction is an error, so any `--deny` level fails on a finding.
    let findings = verification.tools.iter().any(|tool| !tool.findings.is_empty());
    Ok(if findings { Outcome::Findings } else { Outcome::Clean })
}

/// Stores one record per tool that was called; returns `(tool, record name)` pairs.
async fn store_records(args: &VerifyArgs, verification: &Verification) -> Result<Vec<(String, String)>> {
    let location = crate::store_location::StoreLocation::resolve(args.state_dir.as_deref(), args.config.as_deref())?;
    toolgate_store::create_state_dir(&location.state)
        .with_context(|| format!("cannot create the state directory {}", location.state.display()))?;
    let store = location.open(toolgate_store::StoreOptions::default()).await?;
    // Stored under the program as the spawn found it, so `serve` and the views match the record however their config
    // spells the same command (`crate::evidence`).
    let command = match verification.command.split_first() {
        Some((program, rest)) => crate::evidence::command_key(program, rest, None, None),
        None => Vec::new(),
    };
    let mut names = Vec::new();
    for tool in verification.tools.iter().filter(|tool| !tool.observations.is_empty()) {
        let observed = tool.observed;
        let facts = VerifiedFacts {
            calls: observed.calls,
            succeeded: observed.succeeded,
            wrote: observed.wrote,
            connected: observed.connected,
            repeat_changed: observed.repeat_changed,
            destroyed: observed.destroyed,
            supported: observed.supported,
        };
        let evidence = serde_json::to_value(tool)?;
        let id = store.record_verification(&command, &tool.name, &tool.fingerprint, facts, &evidence).await?;
        names.push((tool.name.clone(), format!("verification/{id}")));
    }
    store.close().await?;
    Ok(names)
}

fn yes(value: bool) -> &'static str {
    if value { "yes" } else { "-" }
}

fn declares(tool: &ToolReport) -> String {
    let annotations = tool.definition.get("annotations");
    let flag = |key: &str, short: &str| match annotations.and_then(|a| a.get(key)).and_then(Value::as_bool) {
        Some(true) => Some(short.to_owned()),
        Some(false) => Some(format!("!{short}")),
        None => None,
    };
    let parts: Vec<String> =
        [("readOnlyHint", "ro"), ("destructiveHint", "destr"), ("idempotentHint", "idem"), ("openWorldHint", "open")]
            .into_iter()
            .filter_map(|(key, short)| flag(key, short))
            .collect();
    if parts.is_empty() { "(nothing)".into() } else { parts.join(" ") }
}

fn verdict(tool: &ToolReport) -> String {
    if let Some(reason) = &tool.skipped
        && tool.observations.is_empty()
    {
        return format!("not called: {reason}");
    }
    if !tool.findings.is_empty() {
        return tool
            .findings
            .iter()
            .map(|finding| format!("{} {}", finding.code, finding.rule))
            .collect::<Vec<_>>()
            .join(", ");
    }
    if tool.observed.supported {
        return format!("support: {} quiet call(s)", tool.observed.calls);
    }
    // A local socket is not a finding (it is not the network), but it is why quiet calls gave no support.
    let mut sockets: Vec<&str> =
        tool.observations.iter().flat_map(|call| call.local_connections.iter().map(String::as_str)).collect();
    sockets.dedup();
    if !sockets.is_empty() {
        return format!("no support: used a local socket {}", sockets.join(", "));
    }
    let observed = tool.observed;
    if observed.wrote || observed.connected || observed.destroyed {
        return "no finding (as declared)".into();
    }
    if observed.succeeded == 0 {
        return "no evidence: every call failed".into();
    }
    "no finding".into()
}

fn text(verification: &Verification, records: &[(String, String)]) -> String {
    let mut out = format!(
        "{} · {} tool(s) · {} call(s) each · observed under bubblewrap + strace\n",
        bounded(&verification.server, 120),
        verification.tools.len(),
        verification.calls
    );
    let mut table = Table::new();
    table.load_style(presets::UTF8_HORIZONTAL_ONLY).set_content_arrangement(ContentArrangement::Disabled);
    table.set_header(["tool", "declares", "ok", "wrote", "connected", "repeat changed", "destroyed", "result"]);
    for tool in &verification.tools {
        let observed = tool.observed;
        table.add_row([
            Cell::new(bounded(&tool.name, 60)),
            Cell::new(declares(tool)),
            Cell::new(format!("{}/{}", observed.succeeded, observed.calls)),
            Cell::new(yes(observed.wrote)),
            Cell::new(yes(observed.connected)),
            Cell::new(yes(observed.repeat_changed)),
            Cell::new(yes(observed.destroyed)),
            Cell::new(verdict(tool)),
        ]);
    }
    out.push_str(&table.to_string());
    out.push('\n');
    let mut evidence = String::new();
    for tool in &verification.tools {
        for finding in &tool.findings {
            evidence.push_str(&format!(
                "{} {} {}: {} (fix: {})\n",
                finding.code,
                finding.rule,
                bounded(&tool.name, 60),
                bounded(&finding.message, 600),
                finding.fix
            ));
        }
        for (index, call) in tool.observations.iter().enumerate() {
            if let Some(error) = &call.error {
                evidence.push_str(&format!(
                    "  {} call {}: failed: {}\n",
                    bounded(&tool.name, 60),
                    index + 1,
                    bounded(error, 200)
                ));
            }
            if !call.processes.is_empty() {
                evidence.push_str(&format!(
                    "  {} call {}: started {}\n",
                    bounded(&tool.name, 60),
                    index + 1,
                    bounded(&call.processes.join(", "), 300)
                ));
            }
        }
    }
    if !evidence.is_empty() {
        out.push('\n');
        out.push_str(&evidence);
    }
    let findings: usize = verification.tools.iter().map(|tool| tool.findings.len()).sum();
    let supported = verification.tools.iter().filter(|tool| tool.observed.supported).count();
    out.push_str(&format!("\n{findings} finding(s), {supported} tool(s) with support\n"));
    if let (Some(first), Some(last)) = (records.first(), records.last()) {
        out.push_str(&format!("stored {} verification record(s): {} … {}\n", records.len(), first.1, last.1));
    }
    out
}

fn json_report(verification: &Verification, records: &[(String, String)]) -> Result<String> {
    let mut value = serde_json::to_value(verification)?;
    if let Some(tools) = value.get_mut("tools").and_then(Value::as_array_mut) {
        for (tool, report) in tools.iter_mut().zip(&verification.tools) {
            // The definition as listed, so a reader can tell which definition the evidence is of (the record keeps
            // only its fingerprint): `cargo xtask eval --observations` matches it to a corpus line field by field.
            tool["definition"] = report.definition.clone();
            if let Some((_, record)) = records.iter().find(|(tool_name, _)| *tool_name == report.name) {
                tool["record"] = json!(record);
            }
        }
    }
    let mut text = toolgate_core::display::json_safe(&serde_json::to_string_pretty(&value)?);
    text.push('\n');
    Ok(text)
}

fn sarif(verification: &Verification) -> Result<String> {
    let rules: Vec<Value> = RULES
        .iter()
        .map(|rule| {
            json!({
                "id": rule.code,
                "name": rule.name,
                "shortDescription": {"text": rule.summary},
                "help": {"text": rule.fix},
                "defaultConfiguration": {"level": "error"},
            })
        })
        .collect();
    let mut results = Vec::new();
    for tool in &verification.tools {
        for finding in &tool.findings {
            results.push(json!({
                "ruleId": finding.code,
                "ruleIndex": RULES.iter().position(|rule| rule.code == finding.code),
                "level": "error",
                "message": {"text": format!("{}: {} (fix: {})", tool.name, finding.message, finding.fix)},
                "locations": [{"logicalLocations": [{"name": tool.name, "fullyQualifiedName": format!("tools/{}", tool.name), "kind": "member"}]}],
                "partialFingerprints": {"toolgate/tool-rule": format!("{}/{}", tool.name, finding.code)},
            }));
        }
    }
    crate::render::sarif::log("toolgate verify", rules, results)
}
