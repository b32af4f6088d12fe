//! What the calls of one tool show about its declared hints: findings (an observed contradiction, rule codes
//! `TG4xx` beside lint's catalogue in docs/lint-rules.md) and the [`Observed`] summary a record keeps.
//!
//! The effects the operating system recorded count whatever the call answered: an attempt is the evidence, and a
//! sandbox refusal is often why the call failed (a fetch with no network). A failed call (`isError`, a JSON-RPC
//! error, or an error answered without the flag: `observe` sets the call's `error` for all three) is never *support*, and a
//! repeat speaks about idempotence only when it and the call before it both succeeded (a repeat of a failure says
//! nothing). Pure: no IO.

use serde::Serialize;
use toolgate_core::hints::DeclaredHints;
use toolgate_core::lint::Severity;

use crate::{CallObservation, Observed};

/// One rule of the observation catalogue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Rule {
    /// The stable code (`TG401`).
    pub code: &'static str,
    /// The stable kebab-case name.
    pub name: &'static str,
    /// One line: what the rule checks.
    pub summary: &'static str,
    /// One line: how to fix the declaration.
    pub fix: &'static str,
}

/// The observation rules, in code order (all errors: the tool was seen doing it).
pub const RULES: [Rule; 4] = [
    Rule {
        code: "TG401",
        name: "read-only-wrote",
        summary: "a tool declared read-only wrote, or tried to write, a file",
        fix: "declare readOnlyHint false (and destructiveHint as the writes warrant)",
    },
    Rule {
        code: "TG402",
        name: "closed-world-connected",
        summary: "a tool declared closed-world (openWorldHint false) connected, or tried to connect, to the network",
        fix: "declare openWorldHint true",
    },
    Rule {
        code: "TG403",
        name: "idempotent-repeat-changed",
        summary: "a tool declared idempotent changed the state again when the same call was repeated",
        fix: "declare idempotentHint false",
    },
    Rule {
        code: "TG404",
        name: "not-destructive-destroyed",
        summary: "a tool declared not destructive removed or overwrote existing data",
        fix: "declare destructiveHint true",
    },
];

/// One observed contradiction, with its evidence.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    /// The rule's code.
    pub code: &'static str,
    /// The rule's name.
    pub rule: &'static str,
    /// Always [`Severity::Error`].
    pub severity: Severity,
    /// What was seen, naming the files, addresses or call.
    pub message: String,
    /// The rule's fix.
    pub fix: &'static str,
}

fn finding(index: usize, message: String) -> Finding {
    let rule = RULES[index];
    Finding { code: rule.code, rule: rule.name, severity: Severity::Error, message, fix: rule.fix }
}

/// The facts the calls establish.
pub fn observed_of(calls: &[CallObservation]) -> Observed {
    let succeeded = calls.iter().filter(|call| call.error.is_none()).count();
    let wrote = calls.iter().any(CallObservation::wrote);
    let connected = calls.iter().any(CallObservation::connected);
    // A local socket is not the network, so it contradicts no hint; but the daemon behind it may write or reach
    // out for the tool, so quiet calls that used one prove nothing.
    let local = calls.iter().any(CallObservation::reached_a_local_socket);
    Observed {
        calls: u32::try_from(calls.len()).unwrap_or(u32::MAX),
        succeeded: u32::try_from(succeeded).unwrap_or(u32::MAX),
        wrote,
        connected,
        repeat_changed: repeat_that_changed(calls).is_some(),
        destroyed: calls.iter().any(|call| call.tree.destroyed()),
        supported: !calls.is_empty() && succeeded == calls.len() && !wrote && !connected && !local,
    }
}

/// The index of the first repeat (after a successful identical call) that succeeded and changed the tree.
fn repeat_that_changed(calls: &[CallObservation]) -> Option<usize> {
    (1..calls.len()).find(|&index| {
        let (previous, call) = (&calls[index - 1], &calls[index]);
        previous.error.is_none() && call.error.is_none() && !call.tree.is_empty()
    })
}

/// The findings of one tool: each declared hint the calls contradict.
pub fn findings_for(declared: &DeclaredHints, calls: &[CallObservation]) -> Vec<Finding> {
    let mut findings = Vec::new();
    if declared.read_only == Some(true)
        && let Some((index, call)) = calls.iter().enumerate().find(|(_, call)| call.wrote())
    {
        findings.push(finding(0, format!("declares readOnlyHint true, yet call {} {}", index + 1, writes_of(call))));
    }
    if declared.open_world == Some(false)
        && let Some((index, call)) = calls.iter().enumerate().find(|(_, call)| call.connected())
    {
        findings.push(finding(
            1,
            format!(
                "declares openWorldHint false, yet call {} connected to {}",
                index + 1,
                call.connections.join(", ")
            ),
        ));
    }
    let writer = declared.read_only != Some(true);
    if writer
        && declared.idempotent == Some(true)
        && let Some(index) = repeat_that_changed(calls)
    {
        findings.push(finding(
            2,
            format!(
                "declares idempotentHint true, yet repeating the same call (call {}) {}",
                index + 1,
                tree_of(&calls[index])
            ),
        ));
    }
    if writer
        && declared.destructive == Some(false)
        && let Some((index, call)) = calls.iter().enumerate().find(|(_, call)| call.tree.destroyed())
    {
        let mut destroyed: Vec<String> = call.tree.removed.iter().map(|path| format!("removed {path}")).collect();
        destroyed.extend(
            call.tree
                .changed
                .iter()
                .filter(|change| change.kind == crate::snapshot::ChangeKind::Rewritten)
                .map(|change| format!("overwrote {}", change.path)),
        );
        findings.push(finding(
            3,
            format!("declares destructiveHint false, yet call {} {}", index + 1, destroyed.join(", ")),
        ));
    }
    findings
}

fn writes_of(call: &CallObservation) -> String {
    let mut parts = Vec::new();
    if !call.tree.is_empty() {
        parts.push(tree_of(call));
    }
    if !call.refused_writes.is_empty() {
        parts.push(format!("tried to write outside the copy (refused: {})", call.refused_writes.join(", ")));
    }
    parts.join("; ")
}

fn tree_of(call: &CallObservation) -> String {
    let tree = &call.tree;
    let mut parts = Vec::new();
    if !tree.created.is_empty() {
        parts.push(format!("created {}", tree.created.join(", ")));
    }
    if !tree.changed.is_empty() {
        let changed: Vec<String> = tree
            .changed
            .iter()
            .map(|change| {
                let how = match change.kind {
                    crate::snapshot::ChangeKind::Appended => "appended to",
                    crate::snapshot::ChangeKind::Rewritten => "rewrote",
                };
                format!("{how} {}", change.path)
            })
            .collect();
        parts.push(changed.join(", "));
    }
    if !tree.removed.is_empty() {
        parts.push(format!("removed {}", tree.removed.join(", ")));
    }
    parts.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::{Change, ChangeKind, TreeDiff};

    fn call(tree: TreeDiff) -> CallObservation {
        CallObservation { tree, ..CallObservation::default() }
    }

    fn codes(declared: &DeclaredHints, calls: &[CallObservation]) -> Vec<&'static str> {
        findings_for(declared, calls).into_iter().map(|finding| finding.code).collect()
    }

    #[test]
    fn each_declared_hint_a_call_contradicts_is_a_finding() {
        let appended = TreeDiff {
            changed: vec![Change { path: "modes.log".into(), kind: ChangeKind::Appended }],
            ..TreeDiff::default()
        };
        let created = TreeDiff { created: vec!["modes.log".into()], ..TreeDiff::default() };
        let read_only = DeclaredHints { read_only: Some(true), open_world: Some(false), ..Default::default() };
        assert_eq!(codes(&read_only, &[call(created.clone())]), ["TG401"]);
        let idempotent = DeclaredHints { read_only: Some(false), idempotent: Some(true), ..Default::default() };
        assert_eq!(codes(&idempotent, &[call(created.clone()), call(appended.clone())]), ["TG403"]);
        let failed_first = CallObservation { error: Some("boom".into()), ..call(created) };
        assert!(codes(&idempotent, &[failed_first, call(appended)]).is_empty(), "a repeat of a failure says nothing");
        let removed = TreeDiff { removed: vec!["notes.txt".into()], ..TreeDiff::default() };
        let not_destructive = DeclaredHints { read_only: Some(false), destructive: Some(false), ..Default::default() };
        assert_eq!(codes(&not_destructive, &[call(removed), call(TreeDiff::default())]), ["TG404"]);
        let refused = CallObservation {
            error: Some("connection refused".into()),
            connections: vec!["127.0.0.1:9 (refused: ECONNREFUSED)".into()],
            ..CallObservation::default()
        };
        assert_eq!(
            codes(&read_only, std::slice::from_ref(&refused)),
            ["TG402"],
            "an attempt counts even when the call failed"
        );
        assert!(!observed_of(&[refused]).supported);
    }

    /// A call that answered an error without `isError` (observe records it as the call's error) is a failed call:
    /// quiet, it is still no support, and a repeat after it says nothing about idempotence.
    #[test]
    fn an_error_answered_without_is_error_is_no_success() {
        let quiet_error = || CallObservation {
            error: Some(format!("{} \"Error: confirm=true required\"", crate::QUIET_ERROR)),
            ..CallObservation::default()
        };
        let observed = observed_of(&[quiet_error(), quiet_error()]);
        assert!(!observed.supported && observed.succeeded == 0, "{observed:?}");
        let created = TreeDiff { created: vec!["ticket.json".into()], ..TreeDiff::default() };
        let idempotent = DeclaredHints { read_only: Some(false), idempotent: Some(true), ..Default::default() };
        let failed_first = CallObservation { tree: created.clone(), ..quiet_error() };
        assert!(codes(&idempotent, &[failed_first, call(created.clone())]).is_empty());
        let failed_repeat = CallObservation { tree: created.clone(), ..quiet_error() };
        assert!(codes(&idempotent, &[call(created.clone()), failed_repeat]).is_empty());
        assert_eq!(codes(&idempotent, &[call(created.clone()), call(created)]), ["TG403"], "the same, succeeding");
    }

    #[test]
    fn every_rule_is_documented_beside_lint_s() {
        let catalogue = include_str!("../../../docs/lint-rules.md");
        let guide = include_str!("../../../docs/verify.md");
        for rule in RULES {
            let heading = format!("## {} `{}`", rule.code, rule.name);
            assert!(catalogue.contains(&heading), "docs/lint-rules.md lacks `{heading}`");
            assert!(
                guide.contains(&format!("| `{}` | `{}` |", rule.code, rule.name)),
                "docs/verify.md lacks {}",
                rule.code
            );
            assert!(!rule.fix.ends_with('.') && !rule.summary.ends_with('.'));
        }
    }

    #[test]
    fn quiet_successful_calls_are_support() {
        let quiet = [call(TreeDiff::default()), call(TreeDiff::default())];
        let observed = observed_of(&quiet);
        assert!(observed.supported && observed.succeeded == 2 && !observed.wrote);
        // A local daemon's socket is not the network (no TG402) but the calls then prove nothing.
        let socket = CallObservation {
            local_connections: vec!["unix:/run/docker.sock (attempted)".into()],
            ..CallObservation::default()
        };
        let local = observed_of(&[socket.clone(), call(TreeDiff::default())]);
        assert!(!local.supported && !local.connected && !local.wrote, "{local:?}");
        let closed = DeclaredHints { read_only: Some(true), open_world: Some(false), ..Default::default() };
        assert!(codes(&closed, &[socket]).is_empty());
        assert!(!observed_of(&[]).supported);
    }
}
