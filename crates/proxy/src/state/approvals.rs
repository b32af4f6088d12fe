//! What the gateway knows about its approval queue beyond the store: the approvals its calls are waiting on now
//! (lapsed when it stops), and where a person decides a queued call ([`ApprovalDirections`]). Data only: keeping a
//! waiting call truthful is `guard::waiting`'s.

use std::collections::HashMap;
use std::sync::Mutex;

use toolgate_store::ApprovalId;

/// Where a person decides a queued call, as the process that runs the gateway knows it: the console exists only
/// when an HTTP listener serves it (its address is known once it is bound), and `toolgate approvals` needs
/// `--state-dir` only when the gateway's state is not where the command looks by default.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ApprovalDirections {
    /// The console's approvals page (`http://HOST:PORT/console`).
    pub console_url: Option<String>,
    /// The state directory to name with `--state-dir`, when it is not the default one.
    pub state_dir: Option<String>,
}

impl ApprovalDirections {
    /// The exact command that decides approval `id` (`verb`: `approve` or `deny`).
    pub fn command(&self, verb: &str, id: &ApprovalId) -> String {
        match &self.state_dir {
            Some(dir) => format!("toolgate approvals {verb} {id} --state-dir {}", shell_word(dir)),
            None => format!("toolgate approvals {verb} {id}"),
        }
    }
}

/// `text` as one shell word: unchanged when it holds only characters no shell treats specially, else single-quoted.
fn shell_word(text: &str) -> String {
    let plain = !text.is_empty()
        && text.chars().all(|character| character.is_ascii_alphanumeric() || "/._-+:,@%".contains(character));
    if plain { text.to_owned() } else { format!("'{}'", text.replace('\'', r"'\''")) }
}

/// The approvals this gateway is waiting on, so stopping the gateway lapses them before the process ends: a call
/// task may never run again once the runtime shuts down.
#[derive(Default)]
pub(crate) struct WaitingApprovals {
    calls: Mutex<HashMap<String, WaitingCall>>,
}

/// The call that waits on an approval.
pub(crate) struct WaitingCall {
    pub(crate) id: ApprovalId,
    /// The index of the upstream whose tool it calls (a reload that withdraws it lapses the approval).
    pub(crate) upstream: usize,
}

impl WaitingApprovals {
    pub(crate) fn insert(&self, call: WaitingCall) {
        if let Ok(mut calls) = self.calls.lock() {
            calls.insert(call.id.as_str().to_owned(), call);
        }
    }

    pub(crate) fn remove(&self, id: &ApprovalId) {
        if let Ok(mut calls) = self.calls.lock() {
            calls.remove(id.as_str());
        }
    }

    /// Takes every call still waiting on a tool of one of `upstreams` (a reload took them out of service).
    pub(crate) fn take_for_upstreams(&self, upstreams: &[usize]) -> Vec<WaitingCall> {
        let Ok(mut calls) = self.calls.lock() else { return Vec::new() };
        let ids: Vec<String> =
            calls.iter().filter(|(_, call)| upstreams.contains(&call.upstream)).map(|(id, _)| id.clone()).collect();
        ids.iter().filter_map(|id| calls.remove(id)).collect()
    }

    /// Takes every call still waiting (the gateway is stopping and nothing will use their approvals).
    pub(crate) fn take_all(&self) -> Vec<WaitingCall> {
        self.calls.lock().map(|mut calls| calls.drain().map(|(_, call)| call).collect()).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_names_the_state_directory_only_when_needed_and_quotes_it() {
        let id = ApprovalId::from_text("abc");
        assert_eq!(ApprovalDirections::default().command("approve", &id), "toolgate approvals approve abc");
        let plain = ApprovalDirections { state_dir: Some("/srv/toolgate".into()), ..ApprovalDirections::default() };
        assert_eq!(plain.command("deny", &id), "toolgate approvals deny abc --state-dir /srv/toolgate");
        let spaced = ApprovalDirections { state_dir: Some("/my state/it's".into()), ..ApprovalDirections::default() };
        assert_eq!(spaced.command("approve", &id), r"toolgate approvals approve abc --state-dir '/my state/it'\''s'");
    }
}
