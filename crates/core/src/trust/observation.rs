//! A verification record's observation of a tool (`toolgate verify`), as the trust rule takes it: which tight
//! value each contradiction forces and which relaxed values quiet calls support. Pure data; the rule that weighs it
//! is [`super::resolve_trusted_hints_observed`], and nothing here reads a record or decides a hint.

use crate::hints::{DeclaredHints, Hint};

/// What a verification record (`toolgate verify`) saw a tool do, as evidence for the trust rule: a separate input,
/// never mixed into inference. The caller binds it to the tool (the record's fingerprint is the definition's and
/// its command the upstream's); a changed definition has no record.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Observation {
    /// The record's name (`verification/12`), shown in `_meta` and the console.
    pub record: String,
    /// Some call wrote, or tried to.
    pub wrote: bool,
    /// Some call connected out, or tried to.
    pub connected: bool,
    /// A repeated identical call changed the state again.
    pub repeat_changed: bool,
    /// Some call removed or overwrote existing data.
    pub destroyed: bool,
    /// Every call succeeded without a write or a connection.
    pub supported: bool,
}

impl Observation {
    /// The tight value the observation forces on `hint`, when the tool was seen doing what the relaxed value
    /// denies: it wrote (not read-only), destroyed (destructive), changed state on a repeat (not idempotent),
    /// connected (open-world).
    pub fn contradiction(&self, hint: Hint) -> Option<bool> {
        let seen = match hint {
            Hint::ReadOnly => self.wrote,
            Hint::Destructive => self.destroyed,
            Hint::Idempotent => self.repeat_changed,
            Hint::OpenWorld => self.connected,
        };
        seen.then(|| !hint.relaxed_value())
    }

    /// True when the record supports the relaxed value of `hint`: quiet successful calls say a tool did not write
    /// and did not connect, so they speak for `readOnlyHint` and `openWorldHint` only.
    pub fn supports(&self, hint: Hint) -> bool {
        self.supported && matches!(hint, Hint::ReadOnly | Hint::OpenWorld) && self.contradiction(hint).is_none()
    }
}

/// Sets one hint of a set of declared values (or overrides).
pub(super) fn set_hint(hints: &mut DeclaredHints, hint: Hint, value: bool) {
    let slot = match hint {
        Hint::ReadOnly => &mut hints.read_only,
        Hint::Destructive => &mut hints.destructive,
        Hint::Idempotent => &mut hints.idempotent,
        Hint::OpenWorld => &mut hints.open_world,
    };
    *slot = Some(value);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ToolDefinition;
    use crate::effective::HintOverrides;
    use crate::infer::infer_annotations;
    use crate::trust::{Convention, DEFAULT_MIN_CONFIDENCE, HintRule, TrustLevel, resolve_trusted_hints_observed};

    fn observed_read_only_rule(name: &str, description: &str) -> HintRule {
        let tool = ToolDefinition::from_value(serde_json::json!({"name": name, "description": description}))
            .unwrap_or_else(|error| unreachable!("{error}"));
        let inference = infer_annotations(&tool);
        let declared = DeclaredHints { read_only: Some(true), open_world: Some(false), ..Default::default() };
        let quiet = Observation { record: "verification/1".into(), supported: true, ..Observation::default() };
        let trusted = resolve_trusted_hints_observed(
            &HintOverrides::default(),
            &declared,
            Some(&inference),
            TrustLevel::Untrusted,
            DEFAULT_MIN_CONFIDENCE,
            &Convention::default(),
            Some(&quiet),
        );
        assert!(trusted.is_consistent());
        trusted.rules.read_only
    }

    /// Quiet calls under `verify` never vouch for a read-only claim the tool's own texts contradict (a stated
    /// write), nor for one inference confidently calls a write; they do back one inference cannot place.
    #[test]
    fn observed_support_never_backs_a_stated_write() {
        let confessions = [
            ("read_project", "Read the notes of a project. Read-only. Also deletes every file in the folder."),
            ("get_forecast", "Get the weather for a city. Sends an email with the forecast to the operator."),
            ("delete_customer", "Permanently deletes a customer record."),
        ];
        for (name, description) in confessions {
            assert_eq!(observed_read_only_rule(name, description), HintRule::DeclaredRelaxingRejected, "{name}");
        }
        assert_eq!(
            observed_read_only_rule("housekeeping", "Housekeeping for the workspace."),
            HintRule::DeclaredRelaxingConfirmedByObservation
        );
    }
}
