//! `toolgate lint`: check a server's annotations; exit 1 when findings reach the `--deny` level.

use std::io::Write;

use anyhow::Result;
use toolgate_core::lint::Severity;

use crate::Outcome;
use crate::cli::{DenyLevel, LintArgs, LintFormat};
use crate::render;
use crate::report::{Report, build_report};
use crate::target::{tools_from_file, tools_from_server};

pub(crate) async fn run(args: LintArgs) -> Result<Outcome> {
    let view = crate::view::View::from_args(&args.view, &args.target).await?;
    let source = match &args.tools {
        Some(path) => tools_from_file(path)?,
        None => tools_from_server(&args.target, view.endpoint.as_ref()).await?,
    };
    let report = build_report(&source, &view.upstream);
    let text = match args.format {
        LintFormat::Text => render::findings::report(&report, args.color.enabled()),
        LintFormat::Json => render::json::report(&report)?,
        LintFormat::Sarif => render::sarif::report(&report, source.file.as_deref())?,
    };
    let mut stdout = std::io::stdout().lock();
    stdout.write_all(text.as_bytes())?;
    stdout.flush()?;
    Ok(if fails(&report, args.deny) { Outcome::Findings } else { Outcome::Clean })
}

fn fails(report: &Report, deny: DenyLevel) -> bool {
    let threshold = match deny {
        DenyLevel::Notes => Severity::Note,
        DenyLevel::Warnings => Severity::Warning,
        DenyLevel::Errors => Severity::Error,
    };
    !report.invalid.is_empty()
        || report.tools.iter().flat_map(|tool| &tool.findings).any(|finding| finding.severity >= threshold)
}
