//! Retention through `toolgate serve` (issue 17): with `[audit] max_bytes` and `export_dir`, the running gateway
//! prunes the oldest rows by itself, `toolgate audit verify` stays green from the checkpoint, and the exported files
//! re-verify and end where the database's checkpoint says.

use serde_json::json;

use crate::support::{HttpSession, Setup, poll, start_serve, toolgate};

const CALLS: usize = 600;

#[test]
fn the_gateway_prunes_by_size_and_verify_stays_green_from_the_checkpoint_and_over_the_export() {
    let setup = Setup::demo(
        "[policy]\nsession_taint = false\n\n[[policy.rule]]\nid = \"allow-all\"\neffect = \"allow\"\n\n\
         [audit]\nmax_bytes = 262144\nexport_dir = \"exported\"\n",
    );
    let serve = start_serve(&setup, &[]);
    let mut session = HttpSession::open(&serve.authority, &[]).expect("a session");
    for call in 0..CALLS {
        let arguments = json!({"title": format!("retention {call}"), "body": "x".repeat(64)});
        let response =
            session.request("tools/call", json!({"name": "add_note", "arguments": arguments})).expect("answered");
        assert!(response["result"]["isError"] != json!(true), "{response}");
    }
    let exported_dir = setup.dir.path().join("exported");
    // The writer's upkeep runs every 10 s: wait for its first pruning run to end (its log line), then take the files.
    poll("retention's log line", || serve.stderr_text().contains("audit rows pruned by retention").then_some(()));
    let files = poll("retention's exported segments", || {
        let mut files: Vec<String> = std::fs::read_dir(&exported_dir)
            .ok()?
            .filter_map(Result::ok)
            .map(|entry| entry.path().to_string_lossy().into_owned())
            .filter(|path| path.ends_with(".jsonl"))
            .collect();
        files.sort();
        (!files.is_empty()).then_some(files)
    });

    let state = setup.state_arg();
    let verify = toolgate(&["audit", "verify", "--state-dir", &state]);
    assert_eq!(verify.code, Some(0), "{verify:?}");
    assert!(verify.stdout.contains("chain intact") && verify.stdout.contains("checkpoint"), "{verify:?}");

    let mut args = vec!["audit", "verify", "--state-dir", &state, "--exported"];
    args.extend(files.iter().map(String::as_str));
    let exported = toolgate(&args);
    assert_eq!(exported.code, Some(0), "{exported:?}");
    assert!(exported.stdout.contains("exported rows, chain intact"), "{exported:?}");
    assert!(exported.stdout.contains("continues from the last exported row"), "{exported:?}");

    // A changed exported line is found.
    let first = std::fs::read_to_string(&files[0]).expect("export");
    assert!(first.contains("\"outcome\":\"ok\""), "{first}");
    std::fs::write(&files[0], first.replacen("\"outcome\":\"ok\"", "\"outcome\":\"is_error\"", 1)).expect("tamper");
    let tampered = toolgate(&args);
    assert_eq!(tampered.code, Some(1), "{tampered:?}");
    assert!(tampered.stdout.contains("BROKEN"), "{tampered:?}");
}
