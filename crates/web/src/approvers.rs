//! Who may decide: the console's approver rules (the SSO approver group, `forbid_self_approval`) for call
//! approvals and pin decisions alike. It reads the session and the console's config and decides nothing else; the
//! handlers that take decisions (`handlers`, `tools`, `onboarding`) ask it before they write.

use crate::Console;
use crate::session::Session;

/// Why a person may not make a decision.
pub(crate) enum NotAllowed {
    /// The approver group is required and the person is not in it.
    NotApprover(String),
    /// The call is the person's own and self-approval is forbidden.
    OwnCall,
}

impl NotAllowed {
    /// The reason, for the page and the audit row.
    pub(crate) fn reason(&self) -> String {
        match self {
            NotAllowed::NotApprover(group) => {
                format!("the person is not in the approver group \"{group}\" the console requires")
            }
            NotAllowed::OwnCall => {
                "the call is the person's own, and the console forbids approving one's own call".into()
            }
        }
    }
}

/// Whether `session` may take `approve` (true) or deny (false) on a call made by `caller`, or (with no caller) pin
/// (true) or reject (false) a definition: the approver group applies to both, self-approval only to calls.
pub(crate) fn may_decide(
    console: &Console,
    session: &Session,
    caller: Option<&str>,
    approve: bool,
) -> Result<(), NotAllowed> {
    if let (Some(groups), Some(group)) =
        (&session.groups, console.provider.as_ref().and_then(|provider| provider.config().approver_group.as_ref()))
        && !groups.contains(group)
    {
        return Err(NotAllowed::NotApprover(group.clone()));
    }
    if approve && console.config.forbid_self_approval && caller.is_some() && session.own_caller.as_deref() == caller {
        return Err(NotAllowed::OwnCall);
    }
    Ok(())
}
