//! `cargo xtask lint-eval [--corpus PATH] [--check]`: measures the lint catalogue on the labelled corpus.
//!
//! Each corpus line becomes an MCP tool object (`name`, `title`, `description`, `inputSchema`, `annotations` with
//! the explicitly declared keys only; `toolgate_core::corpus` builds it) and goes through normalize, infer and lint
//! exactly as `assess_tool` does.
//! The report says which of the corpus README's known mis-declarations a contradiction rule (`TG1xx`) flags, and
//! the false-alarm rate: the share of all other tools with at least one `TG1xx` finding. Missing-hint rules
//! (`TG2xx`) are counted apart: the corpus keeps only explicit keys, so they fire by construction. `--check` fails
//! when a clear contradiction is missed or false alarms exceed 3 %. It reads the corpus and never writes anything.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use toolgate_core::DeclaredHints;
use toolgate_core::corpus::{corpus_tool_with_annotations, parse_corpus_line};
use toolgate_core::infer::infer_annotations;
use toolgate_core::lint::{Finding, RULES, lint_tool};
use toolgate_core::normalize::normalize_annotations;

/// Clear contradictions between name/description and hints, from the corpus README (dev side).
const CLEAR: &[(&str, &str)] = &[
    ("azure-mcp", "communication_email_send"),
    ("azure-mcp", "communication_sms_send"),
    ("circleci", "find_flaky_tests"),
    ("notion", "API-post-search"),
    ("notion", "API-query-data-source"),
    ("notion", "API-create-a-comment"),
    ("notion", "API-post-page"),
    ("azure-mcp", "azuremigrate_platformlandingzone_getguidance"),
];

/// Debatable or inconsistent declarations named in the corpus README (dev side). They count neither as hits nor
/// as false alarms; the report shows what lint says about each.
const DEBATABLE: &[(&str, &str)] = &[
    ("azure-mcp", "foundryextensions_openai_create-completion"),
    ("azure-mcp", "foundryextensions_openai_chat-completions-create"),
    ("azure-mcp", "foundryextensions_openai_embeddings-create"),
    ("azure-mcp", "fileshares_fileshare_delete"),
    ("azure-mcp", "fileshares_fileshare_snapshot_delete"),
    ("azure-mcp", "storagesync_cloudendpoint_delete"),
    ("azure-mcp", "storagesync_serverendpoint_delete"),
    ("azure-mcp", "storagesync_service_delete"),
    ("azure-mcp", "storagesync_syncgroup_delete"),
    ("azure-mcp", "storagesync_registeredserver_update"),
    ("azure-mcp", "storagesync_serverendpoint_update"),
    ("azure-mcp", "storagesync_service_update"),
    ("mongodb", "connect"),
    ("mongodb", "disconnect"),
    ("mongodb", "atlas-connect-cluster"),
    ("mongodb", "export"),
    ("chrome-devtools", "take_screenshot"),
    ("chrome-devtools", "take_snapshot"),
    ("chrome-devtools", "get_network_request"),
    ("chrome-devtools", "select_page"),
    ("firecrawl", "firecrawl_scrape"),
    ("firecrawl", "firecrawl_check_crawl_status"),
    ("hubspot", "hubspot-batch-update-objects"),
    ("hubspot", "hubspot-update-property"),
    ("hubspot", "hubspot-list-objects"),
    ("hubspot", "hubspot-search-objects"),
    ("kubernetes-mcp-server", "vm_create"),
    ("kubernetes-mcp-server", "resources_create_or_update"),
    ("aws-transform", "get_resource"),
    ("terraform-mcp-server", "create_run"),
    ("circleci", "download_usage_api_data"),
];

/// The false-alarm rate above which `--check` fails.
const MAX_FALSE_ALARM_RATE: f64 = 0.03;

/// How a corpus tool is labelled for this evaluation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Label {
    Clear,
    Debatable,
    Other,
}

/// One corpus tool after linting.
struct Linted {
    server: String,
    name: String,
    variant: Option<String>,
    label: Label,
    findings: Vec<Finding>,
}

impl Linted {
    fn contradictions(&self) -> impl Iterator<Item = &Finding> {
        self.findings.iter().filter(|finding| finding.code.starts_with("TG1"))
    }

    fn display_name(&self) -> String {
        match &self.variant {
            Some(variant) => format!("{} {} [{}]", self.server, self.name, variant),
            None => format!("{} {}", self.server, self.name),
        }
    }
}

pub(crate) fn run(args: &[String]) -> Result<()> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut corpus = root.join("../shared/corpus/dev.jsonl");
    let mut check = false;
    let mut rest = args.iter();
    while let Some(arg) = rest.next() {
        match arg.as_str() {
            "--corpus" => corpus = PathBuf::from(rest.next().context("--corpus needs a path")?),
            "--check" => check = true,
            other => bail!("unknown argument `{other}`; usage: cargo xtask lint-eval [--corpus PATH] [--check]"),
        }
    }
    let linted = lint_corpus(&corpus)?;
    let outcome = report(&corpus, &linted)?;
    if check {
        if !outcome.missed.is_empty() {
            bail!("lint-eval check failed: clear contradictions missed: {}", outcome.missed.join(", "));
        }
        if outcome.false_alarm_rate > MAX_FALSE_ALARM_RATE {
            bail!(
                "lint-eval check failed: TG1xx false-alarm rate {:.1} % exceeds {:.0} %",
                outcome.false_alarm_rate * 100.0,
                MAX_FALSE_ALARM_RATE * 100.0
            );
        }
    }
    Ok(())
}

fn lint_corpus(corpus: &Path) -> Result<Vec<Linted>> {
    let text = std::fs::read_to_string(corpus).with_context(|| format!("reading corpus {}", corpus.display()))?;
    let mut linted = Vec::new();
    for (index, line) in text.lines().enumerate().filter(|(_, line)| !line.trim().is_empty()) {
        let at = || format!("{}:{}", corpus.display(), index + 1);
        let entry = parse_corpus_line(line).with_context(at)?;
        let tool = corpus_tool_with_annotations(line).with_context(at)?;
        let normalized = normalize_annotations(&tool);
        let findings = lint_tool(&tool, &normalized, &infer_annotations(&tool));
        let label = label_of(&entry.server, &entry.name, &entry.labels);
        linted.push(Linted { server: entry.server, name: entry.name, variant: entry.variant, label, findings });
    }
    Ok(linted)
}

fn label_of(server: &str, name: &str, labels: &DeclaredHints) -> Label {
    let listed = |list: &[(&str, &str)]| list.iter().any(|(s, n)| *s == server && *n == name);
    // The README also calls "many" azure create tools with destructiveHint: true debatable, without naming them.
    let azure_destructive_create =
        server == "azure-mcp" && name.ends_with("_create") && labels.destructive == Some(true);
    if listed(CLEAR) {
        Label::Clear
    } else if listed(DEBATABLE) || azure_destructive_create {
        Label::Debatable
    } else {
        Label::Other
    }
}

struct Outcome {
    missed: Vec<String>,
    false_alarm_rate: f64,
}

fn report(corpus: &Path, linted: &[Linted]) -> Result<Outcome> {
    let mut out = std::io::stdout().lock();
    let servers: std::collections::BTreeSet<&str> = linted.iter().map(|tool| tool.server.as_str()).collect();
    writeln!(out, "lint-eval: {} tools from {} servers in {}", linted.len(), servers.len(), corpus.display())?;

    let mut missed = Vec::new();
    for (label, heading) in [
        (Label::Clear, "clear contradictions (corpus README)"),
        (Label::Debatable, "debatable declarations (corpus README; not scored)"),
    ] {
        let tools: Vec<&Linted> = linted.iter().filter(|tool| tool.label == label).collect();
        let flagged = tools.iter().filter(|tool| tool.contradictions().next().is_some()).count();
        writeln!(out, "\n{heading}: {flagged}/{} flagged by a TG1xx rule", tools.len())?;
        for tool in tools {
            let contradictions: Vec<String> =
                tool.contradictions().map(|finding| format!("{} {}", finding.code, finding.message)).collect();
            if contradictions.is_empty() {
                writeln!(out, "  missed   {}", tool.display_name())?;
                if label == Label::Clear {
                    missed.push(tool.display_name());
                }
            } else {
                writeln!(out, "  flagged  {}: {}", tool.display_name(), contradictions.join("; "))?;
            }
        }
    }
    let expected_clear = CLEAR.len();
    let found_clear = linted.iter().filter(|tool| tool.label == Label::Clear).count();
    if found_clear < expected_clear {
        writeln!(out, "  (only {found_clear} of the {expected_clear} listed clear contradictions are in this corpus)")?;
    }

    let others: Vec<&Linted> = linted.iter().filter(|tool| tool.label == Label::Other).collect();
    let alarms: Vec<&Linted> = others.iter().copied().filter(|tool| tool.contradictions().next().is_some()).collect();
    let false_alarm_rate = if others.is_empty() { 0.0 } else { alarms.len() as f64 / others.len() as f64 };
    writeln!(
        out,
        "\nTG1xx findings on the other {} tools (false alarms unless the README missed a mis-declaration): {} ({:.1} %)",
        others.len(),
        alarms.len(),
        false_alarm_rate * 100.0
    )?;
    for tool in &alarms {
        let contradictions: Vec<String> =
            tool.contradictions().map(|finding| format!("{} {}", finding.code, finding.message)).collect();
        writeln!(out, "  {}: {}", tool.display_name(), contradictions.join("; "))?;
    }

    let mut per_rule: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
    for tool in linted {
        for finding in &tool.findings {
            let counts = per_rule.entry(finding.code).or_default();
            counts.0 += 1;
            if tool.label == Label::Other {
                counts.1 += 1;
            }
        }
    }
    writeln!(out, "\nfindings per rule (all tools / other tools); TG2xx fire by construction: the corpus keeps")?;
    writeln!(out, "only explicitly declared keys")?;
    for rule in RULES {
        let (all, other) = per_rule.get(rule.code).copied().unwrap_or_default();
        writeln!(out, "  {:<6} {:<34} {:<8} {:>4} {:>4}", rule.code, rule.name, rule.severity.as_str(), all, other)?;
    }
    let tools_with_missing =
        linted.iter().filter(|tool| tool.findings.iter().any(|finding| finding.code.starts_with("TG2"))).count();
    writeln!(out, "tools with a TG2xx finding: {tools_with_missing} of {}", linted.len())?;
    writeln!(
        out,
        "\nsummary: clear contradictions flagged {}/{}, TG1xx false-alarm rate {:.1} % (limit {:.0} %)",
        found_clear - missed.len(),
        found_clear,
        false_alarm_rate * 100.0,
        MAX_FALSE_ALARM_RATE * 100.0
    )?;
    Ok(Outcome { missed, false_alarm_rate })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_follow_the_readme_lists() {
        let none = DeclaredHints::default();
        assert_eq!(label_of("notion", "API-post-search", &none), Label::Clear);
        assert_eq!(label_of("mongodb", "export", &none), Label::Debatable);
        assert_eq!(label_of("mongodb", "find", &none), Label::Other);
        assert_eq!(label_of("azure-mcp", "sql_db_create", &none), Label::Other);
        let destructive = DeclaredHints { destructive: Some(true), ..DeclaredHints::default() };
        assert_eq!(label_of("azure-mcp", "sql_db_create", &destructive), Label::Debatable);
    }
}
