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
//! - [`console_sessions`]: a console session opened on one process is used on another (list, approve with the
//!   CSRF token of the first's page), logging out on one ends it on every process, and a tampered cookie or one
//!   sealed by another store is refused.
//! - [`store_outage`]: a PostgreSQL restart under a serving process: what needs the database at once (an approval)
//!   is refused visibly, journaled calls go on, service resumes by itself and every answered call has its row.
//! - [`health`]: `/healthz/live` and `/healthz/ready` answer without a token and say nothing an upstream wrote;
//!   ready is 503 while an upstream is down.
//!
//! The store is one PostgreSQL database (a fresh one per test on the test cluster, `[store] url_env`); each process
//! has its own state directory and instance id, as processes on several machines do. HAProxy must be installed (the harness fails loudly otherwise). Loopback only; waits are on conditions,
//! bounded by the hang guard; no test asserts how long anything took.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod console;
mod console_sessions;
mod crash;
mod health;
mod shared_decisions;
mod store_outage;

use std::ops::{Deref, DerefMut};
use std::path::{Path, PathBuf};
use std::process::Command;

use toolgate_test_support::postgres::PostgresCluster;
use toolgate_test_support::toolgate::fleet::{Fleet, get};
use toolgate_test_support::toolgate::{Serving, Setup, command, poll};
use toolgate_test_support::{Run, run_guarded};

/// The variable the fleet's `[store] url_env` names: the database's URL reaches every process through its
/// environment, never through the config file.
const STORE_URL_ENV: &str = "TOOLGATE_FLEET_STORE_URL";

/// A fleet on one PostgreSQL database: each process has its own state directory and instance id.
pub(crate) struct PgFleet {
    fleet: Fleet,
    url: String,
    config: PathBuf,
    /// A state directory no process serves from, for the state commands (they reach the database by `--config`).
    reader: PathBuf,
    states: Vec<PathBuf>,
}

impl Deref for PgFleet {
    type Target = Fleet;
    fn deref(&self) -> &Fleet {
        &self.fleet
    }
}

impl DerefMut for PgFleet {
    fn deref_mut(&mut self) -> &mut Fleet {
        &mut self.fleet
    }
}

impl PgFleet {
    /// `toolgate ARGS --config CONFIG --state-dir READER` with the database's URL in its environment: a state
    /// command run by another process than any `serve`.
    pub(crate) fn toolgate(&self, args: &[&str]) -> Run {
        state_command(&self.config, &self.reader, &self.url, args)
    }

    /// Starts the process at `index` again on its state directory and instance id (after [`Fleet::kill`]), as a
    /// supervisor would, and waits until it is ready; it is not put back behind the balancer.
    pub(crate) fn restart(&mut self, index: usize) {
        let serving = Serving::start(serve_command(&self.config, &self.states[index], &self.url, index));
        let authority = serving.authority.clone();
        poll(&format!("{authority} ready again"), || {
            (get(&authority, "/healthz/ready").map(|(status, _)| status) == Some(200)).then_some(())
        });
        self.fleet.processes[index] = Some(serving);
    }

    /// The state directory of the process at `index`, as an argument.
    pub(crate) fn state_arg(&self, index: usize) -> String {
        self.states[index].to_string_lossy().into_owned()
    }
}

/// Starts `count` processes of `toolgate serve --config CONFIG --state-dir STATE-N`, named `toolgate-1`..
/// `toolgate-N`, behind HAProxy, all on one fresh PostgreSQL database (`[store] url_env`, appended to the
/// setup's config).
pub(crate) fn start_fleet(setup: &Setup, count: usize) -> PgFleet {
    let url = PostgresCluster::shared().fresh_database();
    let mut text = std::fs::read_to_string(&setup.config).expect("read the config");
    text.push_str(&format!("\n[store]\nurl_env = \"{STORE_URL_ENV}\"\n"));
    std::fs::write(&setup.config, text).expect("write the config");
    let states: Vec<PathBuf> = (0..count).map(|index| setup.dir.path().join(format!("state-{}", index + 1))).collect();
    let fleet = Fleet::start(count, |index| serve_command(&setup.config, &states[index], &url, index));
    PgFleet { fleet, url, config: setup.config.clone(), reader: setup.state(), states }
}

/// `toolgate ARGS --config CONFIG --state-dir READER` with the database `url` in its environment: a state command
/// run by another process than any `serve`, whether or not the test runs a fleet.
pub(crate) fn state_command(config: &Path, reader: &Path, url: &str, args: &[&str]) -> Run {
    let mut run = command();
    run.args(args).arg("--config").arg(config).arg("--state-dir").arg(reader);
    run.env(STORE_URL_ENV, url);
    run_guarded(run, &format!("toolgate {args:?} --config"))
}

/// `toolgate serve --config CONFIG --state-dir STATE` named `toolgate-N` (N = `index` + 1), on the database `url`.
fn serve_command(config: &Path, state: &Path, url: &str, index: usize) -> Command {
    let mut serve = command();
    serve.args(["serve", "--config"]).arg(config).arg("--state-dir").arg(state);
    serve.env("TOOLGATE_LOG", "info").env("TOOLGATE_INSTANCE_ID", format!("toolgate-{}", index + 1));
    serve.env(STORE_URL_ENV, url);
    serve
}

/// The index in `fleet` of the process holding the only open session, from each process's `toolgate status
/// --json` (each publishes its session count in its own state directory).
pub(crate) fn holder_of_the_session(fleet: &PgFleet) -> usize {
    poll("the process holding the session", || {
        let busy: Vec<usize> = (0..fleet.processes.len())
            .filter(|index| fleet.processes[*index].is_some())
            .filter(|index| {
                let state = fleet.state_arg(*index);
                let run = toolgate_test_support::toolgate::run(&["status", "--json", "--state-dir", &state]);
                let runs: serde_json::Value = serde_json::from_str(&run.stdout).unwrap_or_default();
                runs.as_array().is_some_and(|runs| runs.iter().any(|run| run["status"]["sessions"].as_u64() == Some(1)))
            })
            .collect();
        let [index] = busy[..] else { return None };
        Some(index)
    })
}
