//! The JSON output of `inspect --json` and `lint --format json`: the report, pretty-printed, one trailing newline.

use anyhow::Result;

use crate::report::Report;

/// Serializes the report.
pub(crate) fn report(report: &Report) -> Result<String> {
    // Valid JSON of the same value, with no raw control, bidi or invisible character from a server's text.
    let mut text = toolgate_core::display::json_safe(&serde_json::to_string_pretty(report)?);
    text.push('\n');
    Ok(text)
}
