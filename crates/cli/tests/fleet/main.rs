//! End-to-end tests of a fleet: three `toolgate serve` processes sharing one state store behind a real HAProxy
//! running the shipped `deploy/haproxy.cfg` (test-support's `toolgate::fleet`), driven through the balancer by
//! raw HTTP sessions, with a person deciding in another process's console (docs/deploy.md).
//!
//! - [`shared_decisions`]: a call waiting on one process is approved in another process's console and its client
//!   gets the result; a pinned upstream's tools, waiting on all three, are pinned in process 3's console and
//!   reach clients of every process.
//! - [`crash`]: `kill -9` of one process during a burst of calls: the others keep serving, the dead process's
//!   clients get a 404 for their session and a fresh session on re-initialize, no call runs twice, `toolgate audit
//!   verify` passes and every answered call has its row; every process names its instance in `/healthz/ready`,
//!   `/metrics` and `toolgate status`.
//! - [`health`]: `/healthz/live` and `/healthz/ready` answer without a token and say nothing an upstream wrote;
//!   ready is 503 while an upstream is down.
//!
//! The store is one SQLite state directory shared by the processes (what several processes on one machine share
//! today). HAProxy must be installed (the harness fails loudly otherwise). Loopback only; waits are on conditions,
//! bounded by the hang guard; no test asserts how long anything took.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod console;
mod crash;
mod health;
mod shared_decisions;

use std::process::Command;

use toolgate_test_support::toolgate::fleet::Fleet;
use toolgate_test_support::toolgate::{Setup, command};

/// Starts `count` processes of `toolgate serve --config CONFIG --state-dir STATE` (one state directory for all),
/// named `toolgate-1`..`toolgate-N`, behind HAProxy.
pub(crate) fn start_fleet(setup: &Setup, count: usize) -> Fleet {
    Fleet::start(count, |index| serve_command(setup, index))
}

fn serve_command(setup: &Setup, index: usize) -> Command {
    let mut serve = command();
    serve.args(["serve", "--config"]).arg(&setup.config).arg("--state-dir").arg(setup.state());
    serve.env("TOOLGATE_LOG", "info").env("TOOLGATE_INSTANCE_ID", format!("toolgate-{}", index + 1));
    serve
}

/// The index in `fleet` of the process holding the only open session, from `toolgate status --json` (each
/// process publishes its session count there).
pub(crate) fn holder_of_the_session(fleet: &Fleet, setup: &Setup) -> usize {
    let state = setup.state_arg();
    toolgate_test_support::toolgate::poll("the process holding the session", || {
        let run = toolgate_test_support::toolgate::run(&["status", "--json", "--state-dir", &state]);
        let runs: serde_json::Value = serde_json::from_str(&run.stdout).ok()?;
        let busy: Vec<u64> = runs
            .as_array()?
            .iter()
            .filter(|run| run["status"]["sessions"].as_u64() == Some(1))
            .filter_map(|run| run["pid"].as_u64())
            .collect();
        let [pid] = busy[..] else { return None };
        fleet
            .processes
            .iter()
            .position(|serving| serving.as_ref().is_some_and(|serving| u64::from(serving.child.id()) == pid))
    })
}
