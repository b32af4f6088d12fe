//! Whose eyes `inspect`, `lint` and `prompt` look through: the upstream as the relay would run it, so each shows the
//! hints the relay enforces (`toolgate_proxy::catalog::enforced_tool`, the catalog's own function), not a second
//! opinion.
//!
//! `--config FILE --upstream NAME` takes that upstream from the config (its command or URL unless one is given,
//! its trust, confidence bar and overrides; a `verified` upstream's manifest is checked as `serve` checks it);
//! otherwise `--trust` (default `untrusted`, the relay's default) applies to an upstream with no overrides. Without
//! a config `verified` counts as the relay counts a verified upstream without a manifest: untrusted.

use anyhow::{Context, Result, anyhow};
use toolgate_spec::UpstreamSpec;
use toolgate_upstream::Endpoint;

use crate::cli::{TrustArg, ViewArgs};

/// The upstream a command shows tools through, and the endpoint the config names for it (when it came from one).
pub(crate) struct View {
    /// As the relay would run it.
    pub(crate) upstream: UpstreamSpec,
    /// The config's endpoint for it, used when no `--url` or command is given.
    pub(crate) endpoint: Option<Endpoint>,
}

impl View {
    /// The view the arguments ask for.
    pub(crate) fn from_args(args: &ViewArgs) -> Result<View> {
        let Some(path) = &args.config else {
            // Never started: the endpoint is only a placeholder for the spec's shape.
            let mut upstream = UpstreamSpec::new("upstream", Endpoint::stdio("true", Vec::<String>::new()));
            upstream.trust.level = args.trust.unwrap_or(TrustArg::Untrusted).level();
            return Ok(View { upstream, endpoint: None });
        };
        let name =
            args.upstream.as_deref().context("--config needs --upstream NAME: which upstream to look through")?;
        let mut spec = toolgate_config::load_config(path).map_err(|error| anyhow!("{error}"))?;
        crate::commands::serve::verify_manifests(&mut spec)?;
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
