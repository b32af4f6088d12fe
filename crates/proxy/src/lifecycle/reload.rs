//! Applying a reloaded configuration's upstreams to the running gateway: each one the file removes is stopped, each
//! one it changes is stopped and started again with the new settings, each one it adds is started.
//!
//! Fail closed: an upstream leaves service before anything else happens (`UpstreamRuntime::withdraw` drops its
//! connection and listing under one lock, and nothing its run task publishes afterwards counts), then the catalog is
//! rebuilt without it and clients are told to re-list, so from the moment of the withdrawal no call finds a
//! connection to it and, once the rebuild is installed, none resolves its tools. Approvals waiting on its tools lapse
//! with the reason; calls in flight to it are answered with `UpstreamError::Withdrawn` when its connection closes;
//! only then is its run task awaited, so its child process is gone when the reload is done. A changed upstream
//! comes back in a new slot (`crate::upstream_set`), so nothing addressed to the old one reaches the new; name
//! precedence follows the file's order again before any new slot starts, so an exposed name reaches the upstream a
//! fresh start with the file would give it. This module never decides a call; it does not compare settings (that is `diff_upstreams`) or read config files.

use std::sync::Arc;

use toolgate_spec::UpstreamSpec;
use toolgate_upstream::ListKind;

use crate::guard::waiting::lapse_for_upstreams;
use crate::lifecycle::catalog::rebuild_catalog;
use crate::lifecycle::run::run_upstream;
use crate::state::shared::Shared;
use crate::upstream_set::{UpstreamChange, diff_upstreams};
use crate::upstreams::UpstreamRuntime;

/// Starts the run task of `runtime` and remembers it, so a later withdrawal can wait for its end.
pub(crate) fn start_upstream(gateway: &Arc<Shared>, runtime: &Arc<UpstreamRuntime>) {
    let task = tokio::spawn(run_upstream(Arc::clone(gateway), Arc::clone(runtime)));
    runtime.set_task(task);
}

/// Makes the running upstreams those of `reloaded` (a config file read again), in the steps the module describes,
/// and returns each change applied, in [`diff_upstreams`]'s order.
pub(crate) async fn apply_upstreams(gateway: &Arc<Shared>, reloaded: &[UpstreamSpec]) -> Vec<UpstreamChange> {
    // What the configuration says holds from now on, whatever is still running or restarting.
    gateway.configure_upstreams(reloaded);
    let live = gateway.upstreams.live();
    let running: Vec<UpstreamSpec> = live.iter().map(|runtime| runtime.spec.clone()).collect();
    let changes = diff_upstreams(&running, reloaded);
    if changes.is_empty() {
        // The file may still list the same upstreams in another order: which one wins a name follows it.
        if gateway.upstreams.follow_file_order(reloaded) {
            rebuild_catalog(gateway);
            gateway.notify_list_changed(&[ListKind::Tools, ListKind::Prompts, ListKind::Resources]);
        }
        return changes;
    }
    // 1. Out of service at once: the removed ones and the old settings of the changed ones.
    let mut withdrawn = Vec::new();
    for change in &changes {
        let why = match change {
            UpstreamChange::Added(_) => continue,
            UpstreamChange::Removed(_) => "it was removed from the configuration by a reload",
            UpstreamChange::Changed { .. } => "a config reload changed its settings; it restarts with the new ones",
        };
        let Some(runtime) = live.iter().find(|runtime| runtime.spec.name == change.name()) else { continue };
        if runtime.withdraw(why.to_owned()) {
            tracing::info!(upstream = %runtime.spec.name, why, "upstream taken out of service");
            withdrawn.push(Arc::clone(runtime));
        }
    }
    if !withdrawn.is_empty() {
        // 2. Its tools leave the catalog, clients re-list, and nobody waits for an approval that cannot be used.
        rebuild_catalog(gateway);
        gateway.notify_list_changed(&[ListKind::Tools, ListKind::Prompts, ListKind::Resources]);
        let indices: Vec<usize> = withdrawn.iter().map(|runtime| runtime.index).collect();
        lapse_for_upstreams(gateway, &indices, "its upstream was removed or restarted by a config reload").await;
        // 3. Each run task closes its connection (calls in flight are answered) and ends; a child is reaped.
        let stopping: Vec<_> = withdrawn
            .iter()
            .map(|runtime| {
                let runtime = Arc::clone(runtime);
                tokio::spawn(async move { runtime.stop_and_wait().await })
            })
            .collect();
        for task in stopping {
            let _ = task.await;
        }
    }
    // 4. The added ones and the new settings of the changed ones, each in a new slot, in the file's order.
    let mut added = Vec::new();
    for change in &changes {
        if matches!(change, UpstreamChange::Removed(_)) {
            continue;
        }
        let Some(spec) = reloaded.iter().find(|spec| spec.name == change.name()) else { continue };
        let Some(runtime) = gateway.upstreams.push(spec.clone()) else { continue };
        gateway.metrics.add_upstream(&spec.name);
        added.push(runtime);
    }
    // 5. Name precedence is the file's order again (a new slot would otherwise come last and lose the names it won),
    //    before any new slot lists: its first catalog is then built in that order. The ones kept running may have
    //    moved too, so their names are decided again now.
    if gateway.upstreams.follow_file_order(reloaded) {
        rebuild_catalog(gateway);
        gateway.notify_list_changed(&[ListKind::Tools, ListKind::Prompts, ListKind::Resources]);
    }
    // 6. Each new slot starts and announces its tools with `list_changed` once it has listed them, as at start.
    for runtime in &added {
        start_upstream(gateway, runtime);
    }
    changes
}
