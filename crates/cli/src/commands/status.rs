//! `toolgate status`: what every running gateway of this user is doing, read from the state directory.
//!
//! One block per gateway: where it listens and, per upstream, whether it is ready (server, protocol, tools) or
//! down and why. `--json` prints the run files as they are.

use std::fmt::Write as _;
use std::io::Write;

use anyhow::Result;
use serde_json::Value;
use toolgate_core::display::{bounded, json_safe};

/// Longest text shown for one field (server names, reasons and collisions come from upstreams).
const FIELD_CHARS: usize = 300;

use crate::Outcome;
use crate::cli::StatusArgs;
use crate::state::{read_run_files, state_dir};

pub(crate) fn run(args: StatusArgs) -> Result<Outcome> {
    let state = state_dir(args.state_dir.as_deref())?;
    let runs = read_run_files(&state)?;
    let mut text = String::new();
    if args.json {
        text = json_safe(&serde_json::to_string_pretty(&runs)?);
        text.push('\n');
    } else if runs.is_empty() {
        writeln!(text, "no toolgate gateway is running (state directory {})", state.display())?;
    } else {
        for run in &runs {
            let instance = run.instance.as_deref().map(|id| format!(" (instance {})", bounded(id, FIELD_CHARS)));
            writeln!(
                text,
                "gateway pid {}{} on {}",
                run.pid,
                instance.unwrap_or_default(),
                bounded(&run.listeners.join(", "), FIELD_CHARS)
            )?;
            if let Some(config) = &run.config {
                writeln!(text, "  config: {}", bounded(config, FIELD_CHARS))?;
            }
            let status = &run.status;
            let count = |key: &str| status.get(key).and_then(Value::as_u64).unwrap_or(0);
            writeln!(text, "  {} tool(s), {} session(s)", count("tools"), count("sessions"))?;
            for upstream in status.get("upstreams").and_then(Value::as_array).into_iter().flatten() {
                writeln!(text, "  {}", upstream_line(upstream))?;
            }
            for collision in status.get("collisions").and_then(Value::as_array).into_iter().flatten() {
                writeln!(text, "  collision: {}", bounded(collision.as_str().unwrap_or_default(), FIELD_CHARS))?;
            }
        }
    }
    let mut stdout = std::io::stdout().lock();
    stdout.write_all(text.as_bytes())?;
    Ok(Outcome::Clean)
}

fn upstream_line(upstream: &Value) -> String {
    let field = |key: &str| bounded(upstream.get(key).and_then(Value::as_str).unwrap_or_default(), FIELD_CHARS);
    match field("state").as_str() {
        "ready" => {
            let line = format!(
                "{}: ready ({}, protocol {}, {} tool(s))",
                field("name"),
                field("server"),
                field("protocol_version"),
                upstream.get("tools").and_then(Value::as_u64).unwrap_or(0)
            );
            match upstream.get("warning").and_then(Value::as_str) {
                Some(warning) => format!("{line}; {}", bounded(warning, FIELD_CHARS)),
                None => line,
            }
        }
        "down" => format!(
            "{}: DOWN after {} attempt(s): {}",
            field("name"),
            upstream.get("attempts").and_then(Value::as_u64).unwrap_or(0),
            field("reason")
        ),
        other => format!("{}: {other}", field("name")),
    }
}
