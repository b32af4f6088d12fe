//! `serve`'s SIGHUP: the config file is read again and applied to the running gateway. The policy is replaced first
//! (so a new upstream's tools are never decided by the old rules), then the upstreams the file adds, removes or
//! changes are started, stopped or restarted (`Gateway::reload_upstreams`), then the console's users are replaced.
//! What cannot change while serving (listeners, `[listen.http.oauth]` named on its own, limits, callers,
//! confirmation, pins, results, retries, audit, selection, and the console's `[console.sso]`) is named in a warning
//! as needing a restart, and the rest is applied.
//!
//! A file that does not load (syntax, validation, a `verified` upstream's manifest that does not verify) changes
//! nothing and says why, with file and line where there is one. Every change is logged with the upstream's name
//! escaped, never a value (a header or an environment variable may hold a secret). This module reads the config file
//! and calls the gateway and the console; it decides no call.

use std::path::{Path, PathBuf};

use toolgate_proxy::Gateway;
use toolgate_spec::{CallerSpec, GatewaySpec, GuardrailSpec, HttpListenerSpec};
use toolgate_web::{ConsoleHandle, ConsoleUser};

/// What a SIGHUP replaces, and what it compares the file with.
pub(super) struct Reload {
    pub(super) gateway: Gateway,
    /// The spec as the file gave it at start (before the limits were fitted to the open-files limit): what the
    /// settings that need a restart are compared with.
    pub(super) started: GatewaySpec,
    /// The console, when there is an HTTP listener to serve it.
    pub(super) console: Option<ConsoleHandle>,
    /// The gateway's store, for the verification records each reloaded upstream is weighed with.
    pub(super) store: toolgate_store::Store,
}

/// Applies the config file on every SIGHUP, until the process ends.
pub(super) async fn reload_on_hangup(reload: Reload, path: PathBuf) {
    #[cfg(unix)]
    {
        let Ok(mut hangups) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()) else { return };
        while hangups.recv().await.is_some() {
            apply(&reload, &path).await;
        }
    }
    #[cfg(not(unix))]
    {
        let _ = (reload, path);
    }
}

/// Reads the file once and applies what it can, in the order the module describes.
async fn apply(reload: &Reload, path: &Path) {
    let (mut spec, console) = match toolgate_config::load_config_with_console(path) {
        Ok(loaded) => loaded,
        Err(error) => {
            tracing::error!("config reload failed; nothing was changed:\n{error}");
            return;
        }
    };
    if let Err(error) = crate::manifests::verify_manifests(&mut spec) {
        tracing::error!("config reload failed; nothing was changed: {error:#}");
        return;
    }
    // As at start: without them every upstream with a record would look changed (its trust lacks the evidence) and be
    // restarted without it. Records stored since start apply now (that upstream restarts with them).
    if let Err(error) = super::load_observations(&mut spec, &reload.store).await {
        tracing::error!("config reload failed; nothing was changed: {error:#}");
        return;
    }
    let console_changes = reload
        .console
        .as_ref()
        .map_or_else(Vec::new, |handle| handle.sign_on_changes(console.sso.as_ref(), console.forbid_self_approval));
    for setting in restart_only_changes(&reload.started, &spec).into_iter().chain(console_changes) {
        tracing::warn!(config = %path.display(), "{setting} changed; restart toolgate to apply it");
    }
    match reload.gateway.reload_policy(&spec.guardrails.policy) {
        Ok(()) => tracing::info!(config = %path.display(), "policy reloaded; clients were told to re-list"),
        Err(error) => {
            // Fail closed: the new upstreams may rely on rules that are not in force.
            tracing::error!(%error, "the reloaded policy is invalid; keeping the running policy and upstreams");
            return;
        }
    }
    for change in reload.gateway.reload_upstreams(&spec.upstreams).await {
        tracing::info!(config = %path.display(), "{change}: applied");
    }
    if let Some(handle) = &reload.console {
        reload_console_users(handle, console, &reload.started.guardrails.callers);
    }
}

/// The settings outside the upstreams, the policy and the console's users that differ between the running gateway
/// and the file, in words. Every field is named in the destructuring below, so a new setting has to be sorted into
/// applied or restart-only before this compiles.
fn restart_only_changes(running: &GatewaySpec, reloaded: &GatewaySpec) -> Vec<&'static str> {
    // `sandbox` (toolgate's own files and ports, which no sandbox may reach) follows the listeners and the state
    // directory, which do not change while serving: the gateway keeps the one it started with.
    let GatewaySpec { upstreams: _, stdio, http, limits, guardrails, source: _, sandbox: _ } = running;
    let GuardrailSpec { policy: _, confirmation, pins, results, retries, audit, callers, selection } = guardrails;
    let new = &reloaded.guardrails;
    // `[listen.http.oauth]` is named on its own: who may call, and with which tokens, changing is worth saying
    // exactly (the validator, its keys and its introspection client are the running listener's).
    let oauth = |http: &Option<HttpListenerSpec>| http.as_ref().and_then(|http| http.oauth.clone());
    let without_oauth =
        |http: &Option<HttpListenerSpec>| http.clone().map(|http| HttpListenerSpec { oauth: None, ..http });
    [
        ("[listen.stdio]", *stdio != reloaded.stdio),
        ("[listen.http]", without_oauth(http) != without_oauth(&reloaded.http)),
        ("[listen.http.oauth]", oauth(http) != oauth(&reloaded.http)),
        ("[limits]", *limits != reloaded.limits),
        ("[confirmation]", *confirmation != new.confirmation),
        ("[pins]", *pins != new.pins),
        ("[results]", *results != new.results),
        ("[retries]", *retries != new.retries),
        ("[audit]", *audit != new.audit),
        ("[[caller]]", *callers != new.callers),
        ("[selection]", *selection != new.selection),
    ]
    .into_iter()
    .filter_map(|(setting, changed)| changed.then_some(setting))
    .collect()
}

/// Replaces the console's users with the reloaded ones (its sign-on settings need a restart: `apply` names them).
/// The config's own checks (unique names and tokens, no token of the file's callers) have passed; the running
/// callers are checked here too, because a reload does not replace them: a token that calls tools must not also
/// approve them, whatever the file says now.
fn reload_console_users(handle: &ConsoleHandle, console: toolgate_config::ConsoleSpec, callers: &[CallerSpec]) {
    let users = super::console_users(console);
    if let Err(problem) = check_against_callers(&users, callers) {
        tracing::error!("{problem}; keeping the running console users");
        return;
    }
    let replaced = handle.replace_users(users);
    tracing::info!(
        added = ?replaced.added,
        changed = ?replaced.changed,
        removed = ?replaced.removed,
        sessions_ended = replaced.sessions_ended,
        "console users reloaded"
    );
}

/// Refuses console users whose token is also a running caller's; the message names both, never the token.
fn check_against_callers(users: &[ConsoleUser], callers: &[CallerSpec]) -> Result<(), String> {
    for user in users {
        if let Some(caller) = callers.iter().find(|caller| caller.token_sha256 == user.token_sha256) {
            return Err(format!(
                "console user \"{}\" has the same token as the running caller \"{}\" (callers change only with a \
                 restart)",
                user.name, caller.name
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_settings_that_need_a_restart_are_named() {
        let running = GatewaySpec::new(Vec::new());
        let mut reloaded = running.clone();
        assert!(restart_only_changes(&running, &reloaded).is_empty());
        reloaded.limits.max_sessions += 1;
        reloaded.guardrails.audit.arguments_in_clear = !reloaded.guardrails.audit.arguments_in_clear;
        reloaded.guardrails.policy = toolgate_core::policy::PolicySpec::permissive();
        assert_eq!(restart_only_changes(&running, &reloaded), ["[limits]", "[audit]"]);
    }

    #[test]
    fn an_oauth_change_is_named_apart_from_the_rest_of_the_http_listener() {
        let mut running = GatewaySpec::new(Vec::new());
        let mut http = HttpListenerSpec::new(toolgate_spec::DEFAULT_BIND);
        http.oauth = Some(toolgate_spec::OAuthSpec::new("https://id.example", "https://gw.example/mcp"));
        running.http = Some(http);
        let mut reloaded = running.clone();
        if let Some(oauth) = reloaded.http.as_mut().and_then(|http| http.oauth.as_mut()) {
            oauth.required_scopes = vec!["tools:call".into()];
        }
        assert_eq!(restart_only_changes(&running, &reloaded), ["[listen.http.oauth]"]);
        if let Some(http) = reloaded.http.as_mut() {
            http.path = "/other".into();
            http.oauth = None;
        }
        assert_eq!(restart_only_changes(&running, &reloaded), ["[listen.http]", "[listen.http.oauth]"]);
    }
}
