//! SARIF 2.1.0 output for `lint --format sarif`, so a server author's CI shows findings inline.
//!
//! Every rule of the catalogue is listed in `tool.driver.rules`; each finding becomes a result with its rule
//! index, level, message (with the fix) and a logical location naming the tool. When the tools came from a file,
//! results also carry a physical location: the file and the line where the tool's name is written.

use std::path::Path;

use anyhow::Result;
use serde_json::{Value, json};
use toolgate_core::lint::{RULES, Severity};

use crate::report::Report;

const SCHEMA: &str = "https://json.schemastore.org/sarif-2.1.0.json";

/// Renders the report as a SARIF log.
pub(crate) fn report(report: &Report, file: Option<&Path>) -> Result<String> {
    let file_text = file.and_then(|path| std::fs::read_to_string(path).ok());
    let rules: Vec<Value> = RULES
        .iter()
        .map(|rule| {
            json!({
                "id": rule.code,
                "name": rule.name,
                "shortDescription": {"text": rule.summary},
                "help": {"text": rule.fix},
                "defaultConfiguration": {"level": level(rule.severity)},
            })
        })
        .collect();
    let mut results = Vec::new();
    for tool in &report.tools {
        for finding in &tool.findings {
            let mut location = json!({
                "logicalLocations": [{"name": tool.name, "fullyQualifiedName": format!("tools/{}", tool.name), "kind": "member"}]
            });
            if let Some(path) = file {
                let mut physical = json!({"artifactLocation": {"uri": uri(path)}});
                if let Some(line) = file_text.as_deref().and_then(|text| line_of_tool(text, &tool.name)) {
                    physical["region"] = json!({"startLine": line});
                }
                location["physicalLocation"] = physical;
            }
            let mut result = json!({
                "ruleId": finding.code,
                "level": level(finding.severity),
                "message": {"text": format!("{}: {} (fix: {})", tool.name, finding.message, finding.fix)},
                "locations": [location],
                "partialFingerprints": {"toolgate/tool-rule": format!("{}/{}", tool.name, finding.code)},
            });
            if let Some(index) = RULES.iter().position(|rule| rule.code == finding.code) {
                result["ruleIndex"] = json!(index);
            }
            results.push(result);
        }
    }
    log("toolgate", rules, results)
}

/// One SARIF 2.1.0 log of one run by `driver` (`toolgate` for lint, `toolgate verify`), printed JSON-safe: the
/// envelope both commands share, so their files read alike in code-scanning tools.
pub(crate) fn log(driver: &str, rules: Vec<Value>, results: Vec<Value>) -> Result<String> {
    let log = json!({
        "$schema": SCHEMA,
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {
                "name": driver,
                "version": env!("CARGO_PKG_VERSION"),
                "informationUri": "https://modelcontextprotocol.io/specification/2025-11-25/server/tools",
                "rules": rules,
            }},
            "results": results,
        }],
    });
    let mut text = toolgate_core::display::json_safe(&serde_json::to_string_pretty(&log)?);
    text.push('\n');
    Ok(text)
}

fn level(severity: Severity) -> &'static str {
    match severity {
        Severity::Error => "error",
        Severity::Warning => "warning",
        Severity::Note => "note",
    }
}

fn uri(path: &Path) -> String {
    path.to_string_lossy().replace('\\', "/")
}

/// The 1-based line where `"name": "<tool>"` appears in a JSON file.
fn line_of_tool(text: &str, name: &str) -> Option<usize> {
    let quoted = serde_json::to_string(name).ok()?;
    text.lines().position(|line| line.contains("\"name\"") && line.contains(&quoted)).map(|index| index + 1)
}
