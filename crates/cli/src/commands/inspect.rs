//! `toolgate inspect`: connect to a server and show what toolgate concludes about each tool: what it declares and
//! what the relay enforces under the upstream's trust (`--trust`, or the upstream of `--config`), side by side.

use std::io::Write;

use anyhow::Result;

use crate::Outcome;
use crate::cli::InspectArgs;
use crate::render;
use crate::report::build_report;
use crate::target::tools_from_server;

pub(crate) async fn run(args: InspectArgs) -> Result<Outcome> {
    let view = crate::view::View::from_args(&args.view, &args.target).await?;
    let source = tools_from_server(&args.target, view.endpoint.as_ref()).await?;
    let report = build_report(&source, &view.upstream);
    let text =
        if args.json { render::json::report(&report)? } else { render::table::report(&report, args.color.enabled()) };
    let mut stdout = std::io::stdout().lock();
    stdout.write_all(text.as_bytes())?;
    stdout.flush()?;
    Ok(Outcome::Clean)
}
