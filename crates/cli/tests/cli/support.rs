//! Running the built `toolgate` binary with a hang guard (with a peer's environment), and redactions for snapshots.

pub(crate) use toolgate_test_support::Run;
use toolgate_test_support::{PeerCommand, run_guarded};

/// Runs `toolgate ARGS...` (test-support's command and environment), with a peer's environment when given.
pub(crate) fn toolgate(args: &[&str], peer_env: Option<&PeerCommand>) -> Run {
    let mut command = toolgate_test_support::toolgate::command();
    command.args(args);
    if let Some(peer) = peer_env {
        for (key, value) in &peer.env {
            command.env(key, value);
        }
    }
    run_guarded(command, &format!("toolgate {args:?}"))
}

/// `toolgate <command> [flags] -- <peer argv>`.
pub(crate) fn toolgate_against(command: &[&str], peer: &PeerCommand) -> Run {
    let argv = peer.argv();
    let mut args: Vec<&str> = command.to_vec();
    args.push("--");
    args.extend(argv.iter().map(String::as_str));
    toolgate(&args, Some(peer))
}

/// Insta settings that hide machine-specific paths.
pub(crate) fn snapshot_settings(paths: &[&std::path::Path]) -> insta::Settings {
    let mut settings = insta::Settings::clone_current();
    for path in paths {
        let text = path.to_string_lossy().into_owned();
        settings.add_filter(&regex_escape(&text), "[TEMP]");
        if let Ok(canonical) = std::fs::canonicalize(path) {
            settings.add_filter(&regex_escape(&canonical.to_string_lossy()), "[TEMP]");
        }
    }
    settings
}

fn regex_escape(text: &str) -> String {
    let mut escaped = String::new();
    for character in text.chars() {
        if "\\.+*?()|[]{}^$#&-~".contains(character) {
            escaped.push('\\');
        }
        escaped.push(character);
    }
    escaped
}

/// Parses stdout as JSON, with the run in the panic message when it is not.
pub(crate) fn json_stdout(run: &Run) -> serde_json::Value {
    serde_json::from_str(&run.stdout).unwrap_or_else(|error| panic!("stdout is not JSON ({error}): {run:?}"))
}
