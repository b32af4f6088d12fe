//! `cargo xtask eval`'s measurement of a server-convention signal (issue 15, "use what a server already says about
//! itself"): how much better a hint is guessed when the other tools of the same server vote, one tool's
//! declaration masked at a time.
//!
//! A measurement only: nothing here feeds the gateway. The convention is deliberately simple so the figure says
//! whether the signal is worth building into `toolgate-core`: among the *other* tools of the server that declare
//! the hint (for `destructiveHint`/`idempotentHint` only declared writers, as the corpus rules count them), at least
//! [`MIN_VOTES`] declare it and at least [`MIN_AGREEMENT`] of them agree; then the convention's value replaces
//! inference's. `readOnlyHint` is measured too, though the gateway never lets a convention speak for it (whether a
//! tool writes is its own, and a server honest about nine reads can lie about the tenth): the row shows what such a
//! convention would add and, in `writers covered`, how many declared writers a read-only house style would have
//! called read-only. The masked tool's own label never votes on itself.

use std::collections::BTreeMap;

use toolgate_core::Hint;

use crate::eval_base::{Scored, label, ratio, short_name, show};

/// Fewest other declarations for a convention.
const MIN_VOTES: usize = 3;
/// Least share of the other declarations that must agree.
const MIN_AGREEMENT: f64 = 0.9;
/// The hints measured: the three a server's convention may speak for in the gateway, and `readOnlyHint` to show why
/// it may not.
const CONVENTION_HINTS: [Hint; 4] = [Hint::ReadOnly, Hint::Destructive, Hint::Idempotent, Hint::OpenWorld];

/// The convention the other declarations show, if they agree enough.
fn convention(votes: &[bool]) -> Option<bool> {
    let yes = votes.iter().filter(|vote| **vote).count();
    let majority = yes * 2 >= votes.len();
    let agreeing = if majority { yes } else { votes.len() - yes };
    (votes.len() >= MIN_VOTES && ratio(agreeing, votes.len()).is_some_and(|share| share >= MIN_AGREEMENT))
        .then_some(majority)
}

/// Counts for one hint.
#[derive(Default)]
struct Gain {
    /// Tools with the label.
    n: usize,
    /// Inference right, over all.
    inference_right: usize,
    /// Convention where there is one, else inference: right, over all.
    backed_right: usize,
    /// Tools whose server showed a convention without them.
    covered: usize,
    /// On those: inference right, convention right.
    covered_inference_right: usize,
    covered_convention_right: usize,
    /// Tools whose convention gives the relaxing value while they declare the other one: for `readOnlyHint`, the
    /// declared writers a read-only house style would have called read-only.
    relaxed_wrongly: usize,
}

/// Prints, per hint, inference alone against inference backed by the server's convention.
pub(crate) fn print_convention(entries: &[&Scored]) {
    let mut servers: BTreeMap<&str, Vec<&Scored>> = BTreeMap::new();
    for entry in entries {
        servers.entry(entry.server.as_str()).or_default().push(entry);
    }
    println!(
        "== server convention: one declaration masked, the server's other declarations vote (>= {MIN_VOTES}, \
         >= {MIN_AGREEMENT} agree) =="
    );
    println!(
        "{:<13} {:>5} {:>10} {:>10} {:>8} {:>9} {:>22} {:>16}",
        "hint", "n", "inference", "backed", "gain", "covered", "covered: inf / conv", "wrongly relaxed"
    );
    for hint in CONVENTION_HINTS {
        let index = Hint::ALL.iter().position(|each| *each == hint).unwrap_or_default();
        let mut gain = Gain::default();
        for group in servers.values() {
            for (position, entry) in group.iter().enumerate() {
                let Some(declared) = label(&entry.labels, hint) else { continue };
                let votes: Vec<bool> = group
                    .iter()
                    .enumerate()
                    .filter(|(other, _)| *other != position)
                    .filter_map(|(_, other)| label(&other.labels, hint))
                    .collect();
                let inferred = entry.engine[index].0;
                let voted = convention(&votes);
                gain.n += 1;
                gain.inference_right += usize::from(inferred == declared);
                gain.backed_right += usize::from(voted.unwrap_or(inferred) == declared);
                if let Some(voted) = voted {
                    gain.covered += 1;
                    gain.covered_inference_right += usize::from(inferred == declared);
                    gain.covered_convention_right += usize::from(voted == declared);
                    gain.relaxed_wrongly += usize::from(voted == hint.relaxed_value() && declared != voted);
                }
            }
        }
        let inference = ratio(gain.inference_right, gain.n);
        let backed = ratio(gain.backed_right, gain.n);
        let difference = inference.zip(backed).map(|(inference, backed)| backed - inference);
        println!(
            "{:<13} {:>5} {:>10} {:>10} {:>8} {:>9} {:>22} {:>16}",
            short_name(hint),
            gain.n,
            show(inference),
            show(backed),
            difference.map_or_else(|| "-".to_owned(), |value| format!("{value:+.3}")),
            gain.covered,
            format!(
                "{} / {}",
                show(ratio(gain.covered_inference_right, gain.covered)),
                show(ratio(gain.covered_convention_right, gain.covered))
            ),
            gain.relaxed_wrongly,
        );
    }
    println!();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_convention_needs_enough_agreeing_votes() {
        assert_eq!(convention(&[true, true]), None);
        assert_eq!(convention(&[true, true, true]), Some(true));
        assert_eq!(convention(&[false, false, false, false]), Some(false));
        assert_eq!(convention(&[true, true, false]), None);
        assert_eq!(convention(&[false; 9].iter().copied().chain([true]).collect::<Vec<_>>()), Some(false));
    }
}
