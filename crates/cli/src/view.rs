//! Whose eyes `inspect`, `lint` and `prompt` look through: the upstream as the relay would run it, so each shows the
//! hints the relay enforces (`toolgate_proxy::catalog::enforced_tool`, the catalog's own function), not a second
//! opinion.
//!
//! `--config FILE --upstream NAME` takes that upstream from the config (its command or URL unless one is given,
//! its trust, confidence bar and overrides; a `verified` upstream's manifest is checked as `serve` checks it);
//! otherwise `--trust` (default `untrusted`, the relay's default) applies to an upstream with no overrides. Without
//! a config `verified` counts as the relay counts a verified upstream without a manifest: untrusted.
//!
//! Either way the upstream weighs the verification records stored in the state directory (`--state-dir`, else
//! serve's default) for the command the view runs (the command given, else the config's), read by the function
//! `serve` uses (`crate::evidence`), so a record tightens or confirms a hint here exactly as in the relay.

use anyhow::{Context, Result, anyhow};
use toolgate_spec::UpstreamSpec;
use toolgate_upstream::Endpoint;

use crate::cli::{TargetArgs, TrustArg, ViewArgs};

/// The upstream a command shows tools through, and the endpoint the config names for it (when it came from one).
pub(crate) struct View {
    /// As the relay would run it.
    pub(crate) upstream: UpstreamSpec,
    /// The config's endpoint for it, used when no `--url` or command is given.
    pub(crate) endpoint: Option<Endpoint>,
}

impl View {
    /// The view the arguments ask for.
    /// The view the arguments ask for, with the verification records of the command it looks at: `target`'s
    /// command when one is given, else the config's (none for the bundled demo or an HTTP server).
    pub(crate) async fn from_args(args: &ViewArgs, target: &TargetArgs) -> Result<View> {
        let mut view = View::configured(args)?;
        let given = target.command.split_first().map(|(program, rest)| Endpoint::stdio(program.clone(), rest.to_vec()));
        let mut looked_at = view.upstream.clone();
        match given {
            Some(endpoint) => looked_at.endpoint = endpoint,
            None if target.url.is_none() && view.endpoint.is_some() => {}
            // The demo, or an HTTP server: no command, so no records.
            None => return Ok(view),
        }
        let location =
            crate::store_location::StoreLocation::resolve(args.state_dir.as_deref(), args.config.as_deref())?;
        match crate::evidence::load_for_view(&mut looked_at, &location).await {
            Ok(()) => {}
            Err(error) if args.state_dir.is_some() => return Err(error),
            // Not asked for: a default state directory this view cannot read (an older schema that only a command
            // which migrates may upgrade, say) must not stop a look at a server. Said, so the gap is known.
            Err(error) => {
                tracing::warn!("showing the tools without verification records (serve may weigh some): {error:#}");
            }
        }
        view.upstream.trust.observations = looked_at.trust.observations;
        Ok(view)
    }

    fn configured(args: &ViewArgs) -> Result<View> {
        let Some(path) = &args.config else {
            // Never started: the endpoint is only a placeholder for the spec's shape.
            let mut upstream = UpstreamSpec::new("upstream", Endpoint::stdio("true", Vec::<String>::new()));
            upstream.trust.level = args.trust.unwrap_or(TrustArg::Untrusted).level();
            return Ok(View { upstream, endpoint: None });
        };
        let name =
            args.upstream.as_deref().context("--config needs --upstream NAME: which upstream to look through")?;
        let mut spec = toolgate_config::load_config(path).map_err(|error| anyhow!("{error}"))?;
        crate::manifests::verify_manifests(&mut spec)?;
        let mut upstream = spec
            .upstreams
            .into_iter()
            .find(|upstream| upstream.name == name)
            .with_context(|| format!("{} configures no upstream named {name:?}", path.display()))?;
        if let Some(trust) = args.trust {
            upstream.trust.level = trust.level();
        }
        let endpoint = Some(upstream.endpoint.clone());
        Ok(View { upstream, endpoint })
    }
}
