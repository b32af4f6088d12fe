//! The gateway's upstreams as a set that a config reload can change, and the difference between two configured
//! lists of upstreams ([`diff_upstreams`]).
//!
//! An upstream is known everywhere by its index (routes, the catalog's tools, metrics, relay quotas), so indices are
//! never reused: an added upstream takes a new slot at the end, a removed one keeps its slot withdrawn for good
//! (`UpstreamRuntime::withdraw`), and a changed one is withdrawn and started again in a new
//! slot. A call, a route or a late answer that names a withdrawn index can therefore never reach the upstream that
//! replaced it. Name precedence (which upstream wins a name two list unprefixed) is kept apart from the slots: it is
//! the config file's order, set at start and again by every reload (`UpstreamSet::follow_file_order`), so a
//! restarted upstream in its new slot wins the names it won before, as a fresh start with that file would. Data
//! only: starting and stopping run tasks is `crate::lifecycle::reload`'s.

use std::sync::{Arc, RwLock};

use tokio_util::sync::CancellationToken;
use toolgate_spec::UpstreamSpec;

use crate::upstreams::UpstreamRuntime;

/// Every upstream slot the gateway has had, withdrawn ones included, by index.
pub(crate) struct UpstreamSet {
    slots: RwLock<Arc<Vec<Arc<UpstreamRuntime>>>>,
    /// Name precedence: slot indices, the first wins a name. The live slots in the config file's order; a slot
    /// pushed since the file was last followed is appended.
    precedence: RwLock<Vec<usize>>,
    /// The gateway's shutdown: every upstream's run task stops with it.
    shutdown: CancellationToken,
}

impl UpstreamSet {
    /// The upstreams of a start, in configuration order, each stopped with `shutdown`.
    pub(crate) fn new(specs: &[UpstreamSpec], shutdown: &CancellationToken) -> UpstreamSet {
        let slots = specs
            .iter()
            .enumerate()
            .map(|(index, upstream)| Arc::new(UpstreamRuntime::under(index, upstream.clone(), shutdown)))
            .collect();
        let precedence = RwLock::new((0..specs.len()).collect());
        UpstreamSet { slots: RwLock::new(Arc::new(slots)), precedence, shutdown: shutdown.clone() }
    }

    /// Every slot with the name precedence that goes with it, read together (so no slot is missing from it).
    pub(crate) fn all_with_precedence(&self) -> (Arc<Vec<Arc<UpstreamRuntime>>>, Vec<usize>) {
        let Ok(slots) = self.slots.read() else { return (Arc::default(), Vec::new()) };
        let precedence = self.precedence.read().map(|order| order.clone()).unwrap_or_default();
        (Arc::clone(&slots), precedence)
    }

    /// Makes name precedence the order in which `file` (the config just applied) lists the live upstreams, and says
    /// whether the live ones changed places (a withdrawn slot dropping out changes no name's owner). Run after the
    /// reload's new slots were pushed and before they start, so their first listing is already weighed in the
    /// file's order.
    pub(crate) fn follow_file_order(&self, file: &[UpstreamSpec]) -> bool {
        let live = self.live();
        let order: Vec<usize> = file
            .iter()
            .filter_map(|spec| live.iter().find(|runtime| runtime.spec.name == spec.name))
            .map(|runtime| runtime.index)
            .collect();
        let Ok(mut precedence) = self.precedence.write() else { return false };
        let kept: Vec<usize> = precedence.iter().copied().filter(|index| order.contains(index)).collect();
        let changed = kept != order;
        *precedence = order;
        changed
    }

    /// Every slot, withdrawn ones included; a slot's position is its index.
    pub(crate) fn all(&self) -> Arc<Vec<Arc<UpstreamRuntime>>> {
        self.slots.read().map(|slots| Arc::clone(&slots)).unwrap_or_default()
    }

    /// The upstreams running or starting (not withdrawn), in slot order.
    pub(crate) fn live(&self) -> Vec<Arc<UpstreamRuntime>> {
        self.all().iter().filter(|runtime| !runtime.is_withdrawn()).cloned().collect()
    }

    /// The upstream in slot `index` (withdrawn or not).
    pub(crate) fn get(&self, index: usize) -> Option<Arc<UpstreamRuntime>> {
        self.slots.read().ok().and_then(|slots| slots.get(index).cloned())
    }

    /// The configured name of the upstream in slot `index` (empty when there is none).
    pub(crate) fn name(&self, index: usize) -> String {
        self.get(index).map(|runtime| runtime.spec.name.clone()).unwrap_or_default()
    }

    /// How many slots there are.
    pub(crate) fn len(&self) -> usize {
        self.slots.read().map(|slots| slots.len()).unwrap_or(0)
    }

    /// Adds a slot for `spec` at the end and returns its runtime (not started).
    pub(crate) fn push(&self, spec: UpstreamSpec) -> Option<Arc<UpstreamRuntime>> {
        let mut slots = self.slots.write().ok()?;
        let runtime = Arc::new(UpstreamRuntime::under(slots.len(), spec, &self.shutdown));
        let mut grown = Vec::clone(&slots);
        grown.push(Arc::clone(&runtime));
        // Under the slots' lock, so a reader of both never sees a slot without its place.
        if let Ok(mut precedence) = self.precedence.write() {
            precedence.push(runtime.index);
        }
        *slots = Arc::new(grown);
        Some(runtime)
    }
}

/// How a reloaded file's upstream differs from the running one of the same name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UpstreamChange {
    /// The file names an upstream that is not running.
    Added(String),
    /// A running upstream is no longer in the file.
    Removed(String),
    /// The file configures a running upstream differently: which settings (never their values, which may be
    /// secrets).
    Changed {
        /// The upstream's name.
        name: String,
        /// The settings that differ, in words.
        fields: Vec<&'static str>,
    },
}

impl UpstreamChange {
    /// The upstream's name.
    pub fn name(&self) -> &str {
        match self {
            UpstreamChange::Added(name) | UpstreamChange::Removed(name) => name,
            UpstreamChange::Changed { name, .. } => name,
        }
    }
}

impl std::fmt::Display for UpstreamChange {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Config names are plain (`[A-Za-z0-9_-]`), but the words reach a log line, so they are escaped anyway.
        let name = toolgate_core::display::escape(self.name());
        match self {
            UpstreamChange::Added(_) => write!(formatter, "upstream `{name}` was added"),
            UpstreamChange::Removed(_) => write!(formatter, "upstream `{name}` was removed"),
            UpstreamChange::Changed { fields, .. } => {
                write!(formatter, "upstream `{name}` changed ({})", fields.join(", "))
            }
        }
    }
}

/// Each difference between the `running` upstreams and a reloaded file's, by name: the removed ones first (in
/// running order), then the changed and added ones in the file's order.
pub fn diff_upstreams(running: &[UpstreamSpec], reloaded: &[UpstreamSpec]) -> Vec<UpstreamChange> {
    let mut changes: Vec<UpstreamChange> = running
        .iter()
        .filter(|old| !reloaded.iter().any(|new| new.name == old.name))
        .map(|old| UpstreamChange::Removed(old.name.clone()))
        .collect();
    for new in reloaded {
        let Some(old) = running.iter().find(|old| old.name == new.name) else {
            changes.push(UpstreamChange::Added(new.name.clone()));
            continue;
        };
        let fields = changed_fields(old, new);
        if !fields.is_empty() {
            changes.push(UpstreamChange::Changed { name: new.name.clone(), fields });
        }
    }
    changes
}

/// The settings of one upstream that differ, in words. Every field of [`UpstreamSpec`] is compared (the
/// destructuring below stops compiling when one is added), so no change goes unapplied.
fn changed_fields(old: &UpstreamSpec, new: &UpstreamSpec) -> Vec<&'static str> {
    let UpstreamSpec {
        name: _,
        endpoint,
        prefix,
        overrides,
        initialize_timeout,
        request_timeout,
        max_in_flight,
        trust,
        sandbox,
        era,
        credentials,
    } = old;
    [
        ("command, URL, headers or environment", *endpoint != new.endpoint),
        ("prefix", *prefix != new.prefix),
        ("tool overrides", *overrides != new.overrides),
        ("timeouts", (*initialize_timeout, *request_timeout) != (new.initialize_timeout, new.request_timeout)),
        ("max_in_flight", *max_in_flight != new.max_in_flight),
        ("trust", *trust != new.trust),
        ("sandbox", *sandbox != new.sandbox),
        ("era", *era != new.era),
        ("credentials", *credentials != new.credentials),
    ]
    .into_iter()
    .filter_map(|(field, changed)| changed.then_some(field))
    .collect()
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use toolgate_spec::{Endpoint, Prefix};

    use super::*;

    fn upstream(name: &str, args: &[&str]) -> UpstreamSpec {
        UpstreamSpec::new(name, Endpoint::stdio("server", args.iter().copied()))
    }

    #[test]
    fn each_upstream_added_removed_or_changed_is_named_with_the_settings_that_differ() {
        let running = [upstream("a", &[]), upstream("b", &[]), upstream("c", &[])];
        let mut changed = upstream("b", &["--flag"]);
        changed.prefix = Prefix::With("b".into());
        changed.request_timeout = Duration::from_secs(1);
        let reloaded = [upstream("a", &[]), changed, upstream("d", &[])];
        let changes = diff_upstreams(&running, &reloaded);
        assert_eq!(
            changes,
            [
                UpstreamChange::Removed("c".into()),
                UpstreamChange::Changed {
                    name: "b".into(),
                    fields: vec!["command, URL, headers or environment", "prefix", "timeouts"]
                },
                UpstreamChange::Added("d".into()),
            ]
        );
        let texts: Vec<String> = changes.iter().map(ToString::to_string).collect();
        assert_eq!(
            texts,
            [
                "upstream `c` was removed",
                "upstream `b` changed (command, URL, headers or environment, prefix, timeouts)",
                "upstream `d` was added"
            ]
        );
        assert!(diff_upstreams(&running, &running).is_empty());
    }

    #[test]
    fn a_name_is_escaped_in_the_words() {
        let change = UpstreamChange::Added("evil\nline".into());
        assert!(!change.to_string().contains('\n'), "{change}");
    }

    #[test]
    fn slots_are_appended_and_never_reused() {
        let set = UpstreamSet::new(&[upstream("a", &[])], &CancellationToken::new());
        let added = set.push(upstream("b", &[]));
        assert_eq!(added.map(|runtime| runtime.index), Some(1));
        assert_eq!(set.len(), 2);
        assert_eq!(set.name(1), "b");
        if let Some(runtime) = set.get(0) {
            runtime.withdraw("removed".into());
        }
        let live: Vec<String> = set.live().iter().map(|runtime| runtime.spec.name.clone()).collect();
        assert_eq!(live, ["b"]);
        assert_eq!(set.all().len(), 2, "a withdrawn slot keeps its index");
    }

    #[test]
    fn precedence_follows_the_files_order_not_the_slots() {
        let set = UpstreamSet::new(&[upstream("a", &[]), upstream("b", &[])], &CancellationToken::new());
        // `a` restarts: its old slot is withdrawn and a new one comes last.
        if let Some(runtime) = set.get(0) {
            runtime.withdraw("changed".into());
        }
        let _ = set.push(upstream("a", &["--flag"]));
        assert_eq!(set.all_with_precedence().1, [0, 1, 2], "a new slot is placed last until the file is followed");
        assert!(set.follow_file_order(&[upstream("a", &["--flag"]), upstream("b", &[])]));
        assert_eq!(set.all_with_precedence().1, [2, 1], "the file's order: `a` first again");
        assert!(!set.follow_file_order(&[upstream("a", &["--flag"]), upstream("b", &[])]), "nothing changed");
    }
}
