//! `kill -9` of one of three processes during a burst of calls through the balancer: the other two keep serving;
//! a client of the dead process gets a 404 for its session, initializes a fresh one (on a live process) and goes
//! on; the balancer never sends a delivered call to a second process, so no call runs twice; `toolgate audit
//! verify` passes over the shared log (one chain in PostgreSQL) and every answered call has its row, the dead
//! process's recovered from its journal by whichever process reads it. Before the burst, every process names
//! its instance in `/healthz/ready`, `/metrics` and `toolgate status`.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use serde_json::{Value, json};
use toolgate_store::digest_arguments;
use toolgate_test_support::toolgate::fleet::get;
use toolgate_test_support::toolgate::raw_http::HttpSession;
use toolgate_test_support::toolgate::{Setup, poll, run as toolgate};

use crate::start_fleet;

const WORKERS: usize = 6;
const CALLS_PER_WORKER: usize = 120;
/// Answers seen before the kill.
const KILL_AFTER: usize = 60;

/// What one client saw.
#[derive(Default)]
struct Seen {
    answered: Vec<Value>,
    answered_after_kill: usize,
    /// A 404 for its session, followed by a fresh session that worked.
    reconnected: bool,
    /// Calls whose connection broke or got a 502: they may have run, and the client does not retry them.
    broken: usize,
}

fn worker(balancer: String, index: usize, answered: Arc<AtomicUsize>, killed: Arc<AtomicBool>) -> Seen {
    let mut seen = Seen::default();
    let mut session = HttpSession::open(&balancer, &[]).expect("a session through the balancer");
    for call in 0..CALLS_PER_WORKER {
        let arguments = json!({"title": format!("burst {index}-{call}"), "body": "fleet kill -9"});
        let message = json!({"jsonrpc": "2.0", "id": call + 1, "method": "tools/call",
            "params": {"name": "add_note", "arguments": arguments}});
        let was_killed = killed.load(Ordering::SeqCst);
        match session.post(&message) {
            Ok(reply) if reply.status == 200 => {
                let response = reply.response(&json!(call + 1)).unwrap_or_default();
                assert!(
                    response.get("result").is_some() && response["result"]["isError"] != json!(true),
                    "a call failed: {response}"
                );
                seen.answered.push(arguments);
                answered.fetch_add(1, Ordering::SeqCst);
                if was_killed {
                    seen.answered_after_kill += 1;
                }
            }
            Ok(reply) if reply.status == 404 => {
                assert!(killed.load(Ordering::SeqCst), "a 404 before any process died: {reply:?}");
                assert!(reply.body.contains("session"), "the 404 says the session is unknown: {reply:?}");
                // The call was refused before anything ran: a fresh session, and the client goes on.
                session = HttpSession::open(&balancer, &[]).expect("a fresh session after the 404");
                seen.reconnected = true;
            }
            Ok(reply) => {
                assert!(killed.load(Ordering::SeqCst), "a failure before any process died: {reply:?}");
                seen.broken += 1;
            }
            Err(error) => {
                assert!(killed.load(Ordering::SeqCst), "a transport failure before any process died: {error}");
                seen.broken += 1;
            }
        }
    }
    seen
}

#[test]
fn kill_9_of_one_process_mid_burst_loses_no_answered_call_and_runs_none_twice() {
    let setup =
        Setup::demo("[policy]\nsession_taint = false\n\n[[policy.rule]]\nid = \"allow-all\"\neffect = \"allow\"\n");
    let mut fleet = start_fleet(&setup, 3);

    // Each process names itself.
    for index in 0..3 {
        let status = toolgate(&["status", "--state-dir", &fleet.state_arg(index)]);
        let serving = fleet.process(index);
        let instance = format!("toolgate-{}", index + 1);
        let (code, body) = get(&serving.authority, "/healthz/ready").expect("ready answers");
        assert_eq!(code, 200, "{body}");
        assert!(body.contains(&format!("\"instance\":\"{instance}\"")), "{body}");
        let (code, metrics) = get(&serving.authority, "/metrics").expect("metrics answer");
        assert_eq!(code, 200);
        assert!(metrics.contains(&format!("toolgate_instance_info{{instance=\"{instance}\"}} 1")), "{metrics}");
        assert!(status.stdout.contains(&format!("(instance {instance})")), "{instance}: {}", status.stdout);
    }

    let answered = Arc::new(AtomicUsize::new(0));
    let killed = Arc::new(AtomicBool::new(false));
    let workers: Vec<_> = (0..WORKERS)
        .map(|index| {
            let (balancer, answered, killed) =
                (fleet.balancer.authority.clone(), Arc::clone(&answered), Arc::clone(&killed));
            std::thread::spawn(move || worker(balancer, index, answered, killed))
        })
        .collect();
    poll("enough answered calls before the kill", || (answered.load(Ordering::SeqCst) >= KILL_AFTER).then_some(()));
    killed.store(true, Ordering::SeqCst);
    fleet.kill(0);
    let seen: Vec<Seen> = workers.into_iter().map(|worker| worker.join().expect("a client")).collect();

    let total: usize = seen.iter().map(|seen| seen.answered.len()).sum();
    assert!(total < WORKERS * CALLS_PER_WORKER, "the kill happened mid-burst (otherwise raise CALLS_PER_WORKER)");
    assert!(seen.iter().all(|seen| seen.answered_after_kill > 0), "every client was served after the kill");
    assert!(seen.iter().any(|seen| seen.reconnected), "some client's session was on the dead process");
    let broken: usize = seen.iter().map(|seen| seen.broken).sum();
    assert!(broken <= WORKERS, "only calls in flight at the kill broke: {broken}\n{}", fleet.output_text());

    // A supervisor starts the dead process again on its state directory: it records what its journal holds for
    // answered calls whose rows had not reached the database yet.
    fleet.restart(0);
    let answered_calls: Vec<&Value> = seen.iter().flat_map(|seen| &seen.answered).collect();
    let runs = poll("a row for every answered call", || {
        let rows = fleet.toolgate(&["audit", "--json", "--kind", "call"]);
        assert_eq!(rows.code, Some(0), "{rows:?}");
        let mut runs: HashMap<String, usize> = HashMap::new();
        for row in rows.stdout.lines().filter_map(|line| serde_json::from_str::<Value>(line).ok()) {
            if row["tool"] == "add_note"
                && let Some(digest) = row["args_digest"].as_str()
            {
                *runs.entry(digest.to_owned()).or_default() += 1;
            }
        }
        answered_calls.iter().all(|arguments| runs.contains_key(&digest_arguments(arguments))).then_some(runs)
    });
    let verify = fleet.toolgate(&["audit", "verify"]);
    assert_eq!(verify.code, Some(0), "audit verify after kill -9 of one process: {verify:?}");
    let twice: Vec<(&String, &usize)> = runs.iter().filter(|(_, count)| **count > 1).collect();
    assert!(twice.is_empty(), "calls recorded more than once (run twice): {twice:?}");
}
