//! The JSON output of `inspect --json` and `lint --format json`: the report, pretty-printed, one trailing newline.

use anyhow::Result;

use crate::report::Report;

/// Serializes the report.
pub(crate) fn report(report: &Report) -> Result<String> {
    let mut text = serde_json::to_string_pretty(report)?;
    text.push('\n');
    Ok(text)
}
