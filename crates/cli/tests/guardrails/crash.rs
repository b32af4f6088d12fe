//! `kill -9` in the middle of a burst of calls: the audit chain stays intact (`toolgate audit verify` exits 0) and
//! every call that got an answer before the kill has its `call` row, because that row is committed before the call
//! is forwarded.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::{Value, json};
use toolgate_store::digest_arguments;

use crate::support::{HttpSession, Setup, poll, start_serve, toolgate};

const TASKS: usize = 4;
const CALLS_PER_TASK: usize = 400;
/// Answers seen before the kill.
const KILL_AFTER: usize = 60;

#[test]
fn kill_9_mid_burst_leaves_an_intact_audit_chain_with_a_call_row_for_every_answered_call() {
    // Everything allowed, as `--policy permissive` would: no taint floor either (the demo's untrusted `add_note`
    // counts as open-world, so without this the second call of a session would wait for a person).
    let setup =
        Setup::demo("[policy]\nsession_taint = false\n\n[[policy.rule]]\nid = \"allow-all\"\neffect = \"allow\"\n");
    let mut serve = start_serve(&setup, &[]);
    let answered = Arc::new(AtomicUsize::new(0));
    let workers: Vec<_> = (0..TASKS)
        .map(|task| {
            let authority = serve.authority.clone();
            let answered = Arc::clone(&answered);
            std::thread::spawn(move || {
                let mut done: Vec<Value> = Vec::new();
                let Ok(mut session) = HttpSession::open(&authority, &[]) else { return done };
                for call in 0..CALLS_PER_TASK {
                    let arguments = json!({"title": format!("burst {task}-{call}"), "body": "kill -9 test"});
                    match session.request("tools/call", json!({"name": "add_note", "arguments": arguments})) {
                        Ok(response)
                            if response["result"]["isError"] != json!(true) && response.get("result").is_some() =>
                        {
                            done.push(arguments);
                            answered.fetch_add(1, Ordering::SeqCst);
                        }
                        Ok(response) => panic!("a call failed before the kill: {response}"),
                        Err(_) => break,
                    }
                }
                done
            })
        })
        .collect();
    poll("enough answered calls before the kill", || (answered.load(Ordering::SeqCst) >= KILL_AFTER).then_some(()));
    serve.child.kill().expect("SIGKILL toolgate");
    let _ = serve.child.wait();
    let answered_calls: Vec<Value> = workers.into_iter().flat_map(|worker| worker.join().expect("worker")).collect();
    assert!(answered_calls.len() >= KILL_AFTER);
    assert!(
        answered_calls.len() < TASKS * CALLS_PER_TASK,
        "the kill happened mid-burst (otherwise raise CALLS_PER_TASK)"
    );

    let state = setup.state_arg();
    let verify = toolgate(&["audit", "verify", "--state-dir", &state]);
    assert_eq!(verify.code, Some(0), "audit verify after kill -9: {verify:?}");
    assert!(verify.stdout.contains("chain intact"), "{verify:?}");
    let rows = toolgate(&["audit", "--json", "--kind", "call", "--state-dir", &state]);
    assert_eq!(rows.code, Some(0), "{rows:?}");
    let digests: HashSet<String> = rows
        .stdout
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|row| row["tool"] == "add_note")
        .filter_map(|row| row["args_digest"].as_str().map(str::to_owned))
        .collect();
    let missing: Vec<&Value> =
        answered_calls.iter().filter(|arguments| !digests.contains(&digest_arguments(arguments))).collect();
    assert!(missing.is_empty(), "{} answered calls have no `call` row: {missing:?}", missing.len());
}
