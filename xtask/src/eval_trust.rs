//! `cargo xtask eval`'s trust and decision figures: the trust rule's operating point per hint and per server, and
//! what the standard policy decides for an untrusted upstream, scored against the authors' declarations.
//!
//! Every figure goes through the functions the gateway's catalog and pipeline call, in the same order
//! (`assess_tool` on the definition as the upstream would list it, `trust::resolve_trusted_hints_observed` with
//! the untrusted level, the default bar and, under `--observations`, the tool's verification record, `policy::decide` under the default policy): nothing here re-implements a
//! rule. The rules are fixed text, not fitted to a corpus, so scoring a server never uses what it declared:
//! every figure is leave-one-server-out by construction. Whether a corpus is in-sample (the rules were tuned on it)
//! is for the reader to say; this module only counts.
//!
//! - **Honest declarations**: each declared relaxing value (`readOnlyHint: true`, `destructiveHint: false`,
//!   `idempotentHint: true`, `openWorldHint: false`) as declared, with the tool's other declarations; *accepted*
//!   when its rule confirms it: by inference, by the convention or (only with a record, `eval --observations`) by
//!   the record's support.
//! - **Synthetic lies**: each declared tightening value flipped to the relaxing one (a writer re-declared read-only,
//!   with its now meaningless `destructiveHint`/`idempotentHint` dropped, as a liar would; an open-world tool
//!   re-declared closed-world; ...); *caught* when the rule does not confirm it.
//! - **Decisions**: only tools that declare `readOnlyHint`. The reference verdict is the standard profile on the
//!   declared hints believed as declared (spec defaults for the rest). *Unsafe allow*: the reference confirms, the
//!   untrusted gateway allows. *Needless confirmation*: the reference allows (a read or an additive closed-world
//!   write), the untrusted gateway does not. Measured with every hint stripped (inference alone) and as declared.

use std::collections::BTreeMap;

use serde_json::{Map, Value};
use toolgate_core::corpus::CorpusEntry;
use toolgate_core::infer::Inference;
use toolgate_core::normalize::normalize_annotations;
use toolgate_core::policy::{CallFacts, CompiledPolicy, PolicySpec, Verdict, compile, decide};
use toolgate_core::trust::{
    Convention, DEFAULT_MIN_CONFIDENCE, HintRule, Observation, TrustLevel, resolve_trusted_hints_observed,
};
use toolgate_core::{DeclaredHints, Hint, HintOverrides, ToolDefinition};

use crate::eval_base::{label, ratio, short_name, show};

/// One tool's trust and decision outcomes.
pub(crate) struct TrustScored {
    pub(crate) server: String,
    pub(crate) name: String,
    /// Per hint: `Some(true)` accepted / caught, `Some(false)` rejected / missed, `None` no such check.
    pub(crate) honest: [Option<bool>; 4],
    pub(crate) lies: [Option<bool>; 4],
    decisions: Option<Decisions>,
}

/// The standard profile's verdicts for one tool that declares `readOnlyHint`.
#[derive(Clone, Copy)]
struct Decisions {
    /// On the declared hints, believed.
    reference: Verdict,
    /// Untrusted, every hint stripped: inference alone.
    stripped: Verdict,
    /// Untrusted, hints as declared.
    declared: Verdict,
}

/// Scores one corpus entry. `observation` is what `toolgate verify` saw the tool do (`eval --observations`), weighed
/// for every variant of its declarations: a lie keeps the tool's behaviour, only its declaration changes.
pub(crate) fn score_trust(
    entry: &CorpusEntry,
    policy: &CompiledPolicy,
    inference: &Inference,
    server: &Convention,
    bar: f32,
    observation: Option<&Observation>,
) -> TrustScored {
    // What the server's other tools declare: the tool's own declaration never vouches for itself.
    let others = server.without(&entry.labels);
    let judge = Judge { entry, inference, convention: &others, bar, observation };
    let mut honest = [None; 4];
    let mut lies = [None; 4];
    for (index, hint) in Hint::ALL.into_iter().enumerate() {
        let Some(declared) = label(&entry.labels, hint) else { continue };
        let relaxed = hint.relaxed_value();
        if declared == relaxed {
            honest[index] = Some(judge.confirmed(&entry.labels, hint));
        } else {
            let mut lie = entry.labels.clone();
            set(&mut lie, hint, relaxed);
            if hint == Hint::ReadOnly {
                // Meaningless once read-only; a liar drops a `destructiveHint: true` that would give it away.
                lie.destructive = None;
                lie.idempotent = None;
            }
            lies[index] = Some(!judge.confirmed(&lie, hint));
        }
    }
    let decisions = entry.labels.read_only.map(|_| {
        let stripped = DeclaredHints { title: entry.labels.title.clone(), ..DeclaredHints::default() };
        Decisions {
            // The authors' declarations are the reference; a record is evidence for the gateway, not a label.
            reference: Judge { observation: None, ..judge }.verdict(&entry.labels, TrustLevel::Verified, policy),
            // Stripped: the server declares nothing, so it shows no convention either.
            stripped: Judge { convention: &Convention::default(), ..judge }.verdict(
                &stripped,
                TrustLevel::Untrusted,
                policy,
            ),
            declared: judge.verdict(&entry.labels, TrustLevel::Untrusted, policy),
        }
    });
    TrustScored { server: entry.server.clone(), name: entry.name.clone(), honest, lies, decisions }
}

/// The default policy (standard profile, normal mode, no rules), as `serve` runs without a `[policy]`.
pub(crate) fn standard_policy() -> anyhow::Result<CompiledPolicy> {
    Ok(compile(&PolicySpec::default())?)
}

fn set(hints: &mut DeclaredHints, hint: Hint, value: bool) {
    let slot = match hint {
        Hint::ReadOnly => &mut hints.read_only,
        Hint::Destructive => &mut hints.destructive,
        Hint::Idempotent => &mut hints.idempotent,
        Hint::OpenWorld => &mut hints.open_world,
    };
    *slot = Some(value);
}

/// `declared` as a tool's `annotations` object on the wire: its title and the hints it declares.
pub(crate) fn annotations_of(declared: &DeclaredHints) -> Map<String, Value> {
    let mut annotations = Map::new();
    if let Some(title) = &declared.title {
        annotations.insert("title".into(), Value::String(title.clone()));
    }
    for hint in Hint::ALL {
        if let Some(value) = declared.get(hint) {
            annotations.insert(hint.wire_key().into(), Value::Bool(value));
        }
    }
    annotations
}

/// The tool as the upstream would list it with `declared` as its annotations.
fn declaring(entry: &CorpusEntry, declared: &DeclaredHints) -> ToolDefinition {
    let mut raw = entry.tool.raw().clone();
    raw.insert("annotations".into(), Value::Object(annotations_of(declared)));
    ToolDefinition::from_map(raw).unwrap_or_else(|_| entry.tool.clone())
}

/// One tool judged the way the catalog does, with its inference (computed once: inference never reads the
/// declared hints, so every variant of the tool's declarations has the same one), the server's convention, the
/// trust bar and, when there is one, the verification record's observation of the tool.
#[derive(Clone, Copy)]
struct Judge<'a> {
    entry: &'a CorpusEntry,
    inference: &'a Inference,
    convention: &'a Convention,
    bar: f32,
    observation: Option<&'a Observation>,
}

impl Judge<'_> {
    /// The catalog's steps for one definition: the declared hints normalized as `assess_tool` reads them, then
    /// `resolve_trusted_hints_observed` under `trust` (with no observation it is `resolve_trusted_hints_with`).
    fn trusted(&self, declared: &DeclaredHints, trust: TrustLevel) -> toolgate_core::trust::TrustedHints {
        let overrides = HintOverrides::default();
        let normalized = normalize_annotations(&declaring(self.entry, declared));
        let inference = (trust == TrustLevel::Untrusted).then_some(self.inference);
        resolve_trusted_hints_observed(
            &overrides,
            &normalized.declared,
            inference,
            trust,
            self.bar,
            self.convention,
            self.observation,
        )
    }

    /// True when an untrusted relaxing declaration of `hint` is kept (by inference, the convention or an
    /// observation's support).
    fn confirmed(&self, declared: &DeclaredHints, hint: Hint) -> bool {
        matches!(
            self.trusted(declared, TrustLevel::Untrusted).rules.get(hint),
            HintRule::DeclaredRelaxingConfirmedByInference
                | HintRule::DeclaredRelaxingConfirmedByConvention
                | HintRule::DeclaredRelaxingConfirmedByObservation
        )
    }

    fn verdict(&self, declared: &DeclaredHints, trust: TrustLevel, policy: &CompiledPolicy) -> Verdict {
        let hints = self.trusted(declared, trust);
        decide(policy, &CallFacts::new(&self.entry.server, &self.entry.name, &hints)).verdict
    }
}

/// Counts of one kind of check.
#[derive(Default, Clone, Copy)]
struct Tally {
    n: usize,
    passed: usize,
}

impl Tally {
    fn add(&mut self, outcome: Option<bool>) {
        if let Some(passed) = outcome {
            self.n += 1;
            self.passed += usize::from(passed);
        }
    }

    fn share(&self) -> Option<f64> {
        ratio(self.passed, self.n)
    }

    fn cell(&self) -> String {
        if self.n == 0 { "-".to_owned() } else { format!("{} ({})", show(self.share()), self.n) }
    }
}

/// Aggregated figures of a group of tools.
#[derive(Default)]
pub(crate) struct TrustFigures {
    honest: [Tally; 4],
    lies: [Tally; 4],
    /// Stripped and declared: (unsafe allows among reference confirms, needless confirmations among reference
    /// allows).
    stripped: (Tally, Tally),
    declared: (Tally, Tally),
}

impl TrustFigures {
    pub(crate) fn of(entries: &[&TrustScored]) -> TrustFigures {
        let mut figures = TrustFigures::default();
        for entry in entries {
            for index in 0..4 {
                figures.honest[index].add(entry.honest[index]);
                figures.lies[index].add(entry.lies[index]);
            }
            if let Some(decisions) = entry.decisions {
                let needs_person = decisions.reference != Verdict::Allow;
                let count = |(unsafe_allows, needless): &mut (Tally, Tally), verdict: Verdict| {
                    if needs_person {
                        unsafe_allows.add(Some(verdict == Verdict::Allow));
                    } else {
                        needless.add(Some(verdict != Verdict::Allow));
                    }
                };
                count(&mut figures.stripped, decisions.stripped);
                count(&mut figures.declared, decisions.declared);
            }
        }
        figures
    }

    /// The figures by the names `--check` thresholds use.
    pub(crate) fn named(&self) -> Vec<(String, Option<f64>)> {
        let mut named = Vec::new();
        for (index, hint) in Hint::ALL.into_iter().enumerate() {
            let key = short_name(hint);
            named.push((format!("trust.{key}.honest_accepted"), self.honest[index].share()));
            named.push((format!("trust.{key}.lies_caught"), self.lies[index].share()));
        }
        named.push(("decision.stripped.unsafe_allows".into(), self.stripped.0.share()));
        named.push(("decision.stripped.needless_confirmations".into(), self.stripped.1.share()));
        named.push(("decision.declared.unsafe_allows".into(), self.declared.0.share()));
        named.push(("decision.declared.needless_confirmations".into(), self.declared.1.share()));
        named
    }
}

/// Prints the operating point (micro, then per server) and the decision figures.
pub(crate) fn print_trust(entries: &[&TrustScored], per_server: bool) {
    let figures = TrustFigures::of(entries);
    let mut groups: BTreeMap<&str, Vec<&TrustScored>> = BTreeMap::new();
    for entry in entries {
        groups.entry(entry.server.as_str()).or_default().push(entry);
    }
    let per_group: Vec<TrustFigures> = groups.values().map(|group| TrustFigures::of(group)).collect();
    // Macro: each server's share averaged over the servers with such a check, so one large server counts once.
    let mean = |pick: &dyn Fn(&TrustFigures) -> Tally| {
        let shares: Vec<f64> = per_group.iter().filter_map(|figures| pick(figures).share()).collect();
        let mean = (!shares.is_empty()).then(|| shares.iter().sum::<f64>() / shares.len() as f64);
        format!("{} [{}]", show(mean), shares.len())
    };
    println!("== trust rule operating point: untrusted upstream, bar {DEFAULT_MIN_CONFIDENCE} ==");
    println!("micro: share (checks); macro: mean of per-server shares [servers]");
    println!("{:<13} {:>16} {:>16} {:>16} {:>16}", "hint", "honest accepted", "macro", "lies caught", "macro");
    for (index, hint) in Hint::ALL.into_iter().enumerate() {
        println!(
            "{:<13} {:>16} {:>16} {:>16} {:>16}",
            short_name(hint),
            figures.honest[index].cell(),
            mean(&|figures: &TrustFigures| figures.honest[index]),
            figures.lies[index].cell(),
            mean(&|figures: &TrustFigures| figures.lies[index]),
        );
    }
    println!();
    println!("== decisions: standard profile, untrusted upstream (tools declaring readOnlyHint) ==");
    println!("{:<40} {:>16} {:>16}", "", "hints stripped", "hints declared");
    println!(
        "{:<40} {:>16} {:>16}",
        "unsafe allows (of reference confirms)",
        figures.stripped.0.cell(),
        figures.declared.0.cell()
    );
    println!(
        "{:<40} {:>16} {:>16}",
        "needless confirmations (of ref. allows)",
        figures.stripped.1.cell(),
        figures.declared.1.cell()
    );
    println!();
    if per_server {
        println!("-- per server: honest accepted / lies caught, share (n) --");
        println!("{:<24} {:>22} {:>22} {:>22} {:>22}", "server", "readOnly", "destructive", "idempotent", "openWorld");
        for (server, group) in groups {
            let figures = TrustFigures::of(&group);
            let cells: Vec<String> = (0..4)
                .map(|index| {
                    let (honest, lies) = (figures.honest[index], figures.lies[index]);
                    let part = |tally: Tally| {
                        if tally.n == 0 { "-".to_owned() } else { format!("{}({})", show(tally.share()), tally.n) }
                    };
                    format!("{}/{}", part(honest), part(lies))
                })
                .collect();
            println!("{:<24} {:>22} {:>22} {:>22} {:>22}", server, cells[0], cells[1], cells[2], cells[3]);
        }
        println!();
    }
}

/// Prints, on the same tools, the operating point and the decision figures with inference alone and with each
/// tool's verification record weighed (`eval --observations`): share (checks), alone -> with the observation.
pub(crate) fn print_observed_comparison(alone: &[&TrustScored], observed: &[&TrustScored]) {
    let (before, after) = (TrustFigures::of(alone), TrustFigures::of(observed));
    let pair = |was: Tally, now: Tally| format!("{} -> {}", was.cell(), now.cell());
    println!(
        "== evidence from behaviour: untrusted upstream, bar {DEFAULT_MIN_CONFIDENCE}, the same {} tools ==",
        alone.len()
    );
    println!("share (checks): inference alone -> with the verification record");
    println!("{:<13} {:>30} {:>30}", "hint", "honest accepted", "lies caught");
    for (index, hint) in Hint::ALL.into_iter().enumerate() {
        println!(
            "{:<13} {:>30} {:>30}",
            short_name(hint),
            pair(before.honest[index], after.honest[index]),
            pair(before.lies[index], after.lies[index]),
        );
    }
    println!();
    println!("== decisions on those tools: standard profile, untrusted upstream (tools declaring readOnlyHint) ==");
    println!("{:<40} {:>30} {:>30}", "", "hints stripped", "hints declared");
    println!(
        "{:<40} {:>30} {:>30}",
        "unsafe allows (of reference confirms)",
        pair(before.stripped.0, after.stripped.0),
        pair(before.declared.0, after.declared.0)
    );
    println!(
        "{:<40} {:>30} {:>30}",
        "needless confirmations (of ref. allows)",
        pair(before.stripped.1, after.stripped.1),
        pair(before.declared.1, after.declared.1)
    );
    println!();
}

/// Lists the honest declarations of `hint` the rule rejects and the lies it lets through.
pub(crate) fn print_trust_errors(entries: &[&TrustScored], hint: Hint) {
    let index = Hint::ALL.iter().position(|each| *each == hint).unwrap_or_default();
    println!("-- {} under the trust rule: honest rejected, lies confirmed --", hint.wire_key());
    for entry in entries {
        if entry.honest[index] == Some(false) {
            println!("{:<24} {:<50} honest declaration rejected", entry.server, entry.name);
        }
        if entry.lies[index] == Some(false) {
            println!("{:<24} {:<50} lie confirmed", entry.server, entry.name);
        }
    }
    println!();
}

/// The bars the operating-point table tries: the trust rule's trade-off as an operator choosing
/// `trust.min_confidence` would see it.
pub(crate) const OPERATING_BARS: [f32; 9] = [0.5, 0.6, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95, 0.98];

/// Prints, per bar, what the whole trust rule gives (inference, veto of a declared writer, convention) at that bar:
/// readOnly honest accepted and lies caught, the same for all four hints together, and the decision figures.
pub(crate) fn print_operating_points(rows: &[(f32, TrustFigures)]) {
    println!("== operating points: the trust rule at other bars (untrusted upstream, standard profile) ==");
    println!(
        "{:<6} {:>15} {:>15} {:>15} {:>15} {:>17} {:>17} {:>17}",
        "bar",
        "ro honest acc.",
        "ro lies caught",
        "all honest acc.",
        "all lies caught",
        "stripped unsafe",
        "stripped needless",
        "declared needless"
    );
    for (bar, figures) in rows {
        let mut all_honest = Tally::default();
        let mut all_lies = Tally::default();
        for index in 0..4 {
            all_honest.n += figures.honest[index].n;
            all_honest.passed += figures.honest[index].passed;
            all_lies.n += figures.lies[index].n;
            all_lies.passed += figures.lies[index].passed;
        }
        println!(
            "{:<6} {:>15} {:>15} {:>15} {:>15} {:>17} {:>17} {:>17}",
            format!("{bar:.2}"),
            show(figures.honest[0].share()),
            show(figures.lies[0].share()),
            show(all_honest.share()),
            show(all_lies.share()),
            show(figures.stripped.0.share()),
            show(figures.stripped.1.share()),
            show(figures.declared.1.share()),
        );
    }
    println!();
}
