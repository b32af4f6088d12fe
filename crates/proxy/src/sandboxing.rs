//! Starting a stdio upstream in its sandbox: the profile from its `[upstream.sandbox]` settings and what its tools'
//! effective hints need, the sandboxed command in place of the configured one, and the note on a refused action.
//!
//! What the hints need is known only after a listing, so an `auto` upstream starts with what was last known (at
//! first: no network, its writable paths) and is started once more when its listing asks for another profile (an
//! open-world tool needs the network; an all-read-only listing loses its writable paths). A missing mechanism
//! fails a `strict` upstream closed and is logged as an error for an `auto` one, which then runs with what there
//! is. This module never decides policy and never relaxes a profile the settings did not grant.

use serde_json::Value;
use toolgate_core::ToolDefinition;
use toolgate_sandbox::{HintNeeds, Network, Profile, SandboxError, command, explain_denial, probe};
use toolgate_spec::{Endpoint, SandboxEnvironment, SandboxMode, UpstreamSpec};
use toolgate_upstream::UpstreamError;

use crate::catalog::{enforced_tool, listing_convention};

/// How one connection's process is confined: the profile it started with and the mode, for notes and restarts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Confinement {
    /// `auto` or `strict`.
    pub(crate) mode: SandboxMode,
    /// What the server got.
    pub(crate) profile: Profile,
    /// What the hints were taken to need when the profile was built.
    pub(crate) needs: HintNeeds,
}

/// What an upstream's hints are assumed to need before any listing: writes (its writable paths stay) and no
/// network (the listing says whether an open-world tool needs it).
pub(crate) const BEFORE_LISTING: HintNeeds = HintNeeds { network: false, writes: true };

/// The endpoint to connect to for `spec` with `needs`: the configured one when unsandboxed (mode off, or HTTP),
/// else the sandboxed command with the confinement it has.
pub(crate) fn sandboxed_endpoint(
    spec: &UpstreamSpec,
    environment: &SandboxEnvironment,
    needs: HintNeeds,
) -> Result<(Endpoint, Option<Confinement>), UpstreamError> {
    let mode = spec.sandbox.mode;
    let Endpoint::Stdio { program, args, env, cwd } = &spec.endpoint else {
        return Ok((spec.endpoint.clone(), None));
    };
    if mode == SandboxMode::Off {
        return Ok((spec.endpoint.clone(), None));
    }
    let mut profile =
        Profile::for_upstream(&spec.sandbox, needs, environment, env, cwd.as_deref(), |name| std::env::var(name).ok());
    let refuse = |error: SandboxError| UpstreamError::Spawn {
        program: program.clone(),
        reason: format!("sandbox mode {}: {error}", mode.as_str()),
    };
    loop {
        match command(&profile, probe(), &[], program, args) {
            Ok(sandboxed) => {
                tracing::info!(upstream = %spec.name, mode = mode.as_str(), rules = %profile.describe(), "sandboxed");
                let endpoint =
                    Endpoint::Stdio { program: sandboxed.program, args: sandboxed.args, env: Vec::new(), cwd: None };
                return Ok((endpoint, Some(Confinement { mode, profile, needs })));
            }
            Err(error) if mode == SandboxMode::Strict => return Err(refuse(error)),
            Err(error @ SandboxError::Path { .. }) => return Err(refuse(error)),
            Err(SandboxError::Unavailable { mechanism, reason }) => {
                let done = without(&mut profile, mechanism);
                tracing::error!(
                    upstream = %spec.name,
                    mechanism,
                    %reason,
                    "sandbox mode auto: this machine lacks {mechanism}; {}",
                    if done { "the server runs WITHOUT a sandbox" } else { "the server runs without it" }
                );
                if done {
                    return Ok((spec.endpoint.clone(), None));
                }
            }
        }
    }
}

/// Removes from `profile` what needs `mechanism`; true when nothing is left to run a sandbox with.
fn without(profile: &mut Profile, mechanism: &str) -> bool {
    match mechanism {
        "a process limit" => profile.limits.max_processes = None,
        "memory and open-file limits" => {
            profile.limits.memory_bytes = None;
            profile.limits.max_open_files = None;
        }
        "a Landlock port guard" => profile.network = Network::Host { deny_ports: Vec::new(), guard: None },
        _ => return true,
    }
    false
}

/// What the tools of a listing need by their effective hints (as the catalog will expose them).
pub(crate) fn hint_needs(spec: &UpstreamSpec, tools: &[Value]) -> HintNeeds {
    let convention = listing_convention(tools);
    let mut needs = HintNeeds::default();
    for raw in tools {
        let Ok(definition) = ToolDefinition::from_value(raw.clone()) else { continue };
        let Ok(exposed) = enforced_tool(&definition, spec, &convention) else { continue };
        needs.network |= exposed.hints.open_world.value;
        needs.writes |= !exposed.hints.read_only.value;
    }
    needs
}

/// Whether a listing asks for another profile than the one the connection started with.
pub(crate) fn needs_restart(
    spec: &UpstreamSpec,
    environment: &SandboxEnvironment,
    confinement: &Confinement,
    needs: HintNeeds,
) -> bool {
    if spec.sandbox.mode != SandboxMode::Auto || needs == confinement.needs {
        return false;
    }
    let Endpoint::Stdio { env, cwd, .. } = &spec.endpoint else { return false };
    let wanted =
        Profile::for_upstream(&spec.sandbox, needs, environment, env, cwd.as_deref(), |name| std::env::var(name).ok());
    wanted.has_network() != confinement.profile.has_network() || wanted.writable != confinement.profile.writable
}

/// Adds toolgate's note to an `isError` tool result whose text shows a refusal of `confinement`'s sandbox.
pub(crate) fn annotate_refusal(result: &mut Value, upstream: &str, confinement: &Confinement) {
    if result.get("isError").and_then(Value::as_bool) != Some(true) {
        return;
    }
    let Some(content) = result.get_mut("content").and_then(Value::as_array_mut) else { return };
    let text: String =
        content.iter().filter_map(|item| item.get("text").and_then(Value::as_str)).collect::<Vec<_>>().join("\n");
    if let Some(note) = explain_denial(&text, &confinement.profile, upstream, confinement.mode.as_str()) {
        content.push(serde_json::json!({"type": "text", "text": note}));
    }
}

/// The event sink of a connection that may be replaced right after its listing (an `auto` upstream whose tools ask
/// for another profile): once superseded, nothing it says reaches the gateway, above all not its end, which would
/// otherwise be taken for the end of the connection that replaced it.
pub(crate) struct SupersedableSink {
    inner: std::sync::Arc<dyn toolgate_upstream::EventSink>,
    superseded: std::sync::atomic::AtomicBool,
}

impl SupersedableSink {
    pub(crate) fn new(inner: std::sync::Arc<dyn toolgate_upstream::EventSink>) -> SupersedableSink {
        SupersedableSink { inner, superseded: std::sync::atomic::AtomicBool::new(false) }
    }

    /// From now on, the connection's events are dropped.
    pub(crate) fn supersede(&self) {
        self.superseded.store(true, std::sync::atomic::Ordering::SeqCst);
    }

    fn live(&self) -> bool {
        !self.superseded.load(std::sync::atomic::Ordering::SeqCst)
    }
}

impl toolgate_upstream::EventSink for SupersedableSink {
    fn notification(&self, message: Value, related: Option<u64>) {
        if self.live() {
            self.inner.notification(message, related);
        }
    }

    fn request(&self, message: Value, related: Option<u64>, responder: toolgate_upstream::Responder) {
        // A superseded connection is closing; its question is left unanswered with it.
        if self.live() {
            self.inner.request(message, related, responder);
        }
    }

    fn ended(&self, error: UpstreamError) {
        if self.live() {
            self.inner.ended(error);
        }
    }
}
