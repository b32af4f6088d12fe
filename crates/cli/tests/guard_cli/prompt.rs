//! `toolgate prompt`: the safety prompt for the bundled demo server, as the gateway's default trust sees it
//! (snapshot), and with declarations believed.

use crate::support::{toolgate, toolgate_binary};

#[test]
fn demo_prompt_under_default_trust() {
    let run = toolgate(&["prompt", "--", toolgate_binary().to_str().unwrap(), "demo-server"]);
    assert_eq!(run.code, Some(0), "{run:?}");
    insta::assert_snapshot!("prompt_demo_untrusted", run.stdout);
}

#[test]
fn believing_declarations_changes_the_groups() {
    let run = toolgate(&["prompt", "--trust", "pinned", "--", toolgate_binary().to_str().unwrap(), "demo-server"]);
    assert_eq!(run.code, Some(0), "{run:?}");
    // purge_notes declares itself read-only: believed here, which is why the gateway's default is untrusted.
    let read_only = run.stdout.split("\n## ").nth(1).unwrap_or_default();
    assert!(read_only.starts_with("Read-only tools") && read_only.contains("\"purge_notes\""), "{}", run.stdout);
    // `verified` counts only for fingerprints in a checked manifest (`--config`); without one, as in the relay, the
    // declarations are not believed.
    let unverified =
        toolgate(&["prompt", "--trust", "verified", "--", toolgate_binary().to_str().unwrap(), "demo-server"]);
    let read_only = unverified.stdout.split("\n## ").nth(1).unwrap_or_default();
    assert!(!read_only.contains("\"purge_notes\""), "{}", unverified.stdout);
    assert!(run.stdout.contains("## Destructive tools: confirmation required"), "{}", run.stdout);
}
