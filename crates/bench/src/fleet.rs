//! The `fleet` scenario of `toolgate-bench run --only fleet`: calls per second through one `toolgate serve` and
//! through three behind HAProxy (the shipped `deploy/haproxy.cfg` with only its `bind` and `server` lines changed,
//! through `deploy/haproxy_config.rs`, the rewrite the tests run too), with the same many-session workload, one after the other in the
//! same run; the report's ratio is the three processes' throughput over the one's (docs/benchmarks.md).
//!
//! Each toolgate fronts its own stdio echo upstream; the three share one state directory, as processes on one
//! machine do, or, with `TOOLGATE_BENCH_STORE_URL` set, one PostgreSQL database. A third lane, HAProxy in front of
//! one process, separates the balancer's own cost. HAProxy must be installed: without it the balanced lanes say so
//! instead of a figure. Nothing here asserts a timing.

use std::net::SocketAddr;
use std::path::Path;
use std::process::Stdio;

use crate::BoxError;
use crate::procs::{self, Proc, Scratch};
use crate::report::{ONE_PROCESS, Row};
use crate::scenario::{Plan, http_lanes_at, measure};

/// The shipped configuration's rewrite, shared with test-support (`deploy/haproxy_config.rs`).
#[path = "../../../deploy/haproxy_config.rs"]
mod shipped;

/// When set, a PostgreSQL URL every process of the scenario keeps its state in (`[store] url_env`); otherwise
/// SQLite in their state directories.
const STORE_URL_ENV: &str = "TOOLGATE_BENCH_STORE_URL";

const BALANCED_ONE: &str = "haproxy + toolgate x1";
const BALANCED_THREE: &str = "haproxy + toolgate x3";

/// Starts one `toolgate serve --listen` in front of a stdio echo upstream, on `state`.
async fn start_toolgate(
    plan: &Plan,
    scratch: &Scratch,
    name: &str,
    state: &Path,
) -> Result<(Proc, SocketAddr), BoxError> {
    let addr = procs::free_addr()?;
    let bench = plan.bench.to_string_lossy().into_owned();
    let args = if std::env::var_os(STORE_URL_ENV).is_some() {
        // The same gateway as `--listen ADDR -- BENCH upstream`, written as a file because only a config file can
        // name the store; the URL stays in the environment the process inherits.
        let config = scratch.path(&format!("{name}.toml"));
        let text = format!(
            "[[upstream]]\nname = \"upstream\"\ncommand = {bench:?}\nargs = [\"upstream\"]\n\n\
             [listen.http]\nbind = \"{addr}\"\n\n[store]\nurl_env = \"{STORE_URL_ENV}\"\n"
        );
        std::fs::write(&config, text)?;
        vec!["serve".to_owned(), "--config".to_owned(), config.to_string_lossy().into_owned()]
    } else {
        vec!["serve".to_owned(), "--listen".to_owned(), addr.to_string(), "--".to_owned(), bench, "upstream".to_owned()]
    };
    let log = scratch.path(&format!("{name}.log"));
    let proc = procs::spawn_instance_in(name, &plan.toolgate, &args, addr, log, state, name).await?;
    Ok((proc, addr))
}

/// Starts HAProxy with the shipped configuration in front of `backends`.
async fn start_haproxy(scratch: &Scratch, name: &str, backends: &[SocketAddr]) -> Result<(Proc, SocketAddr), BoxError> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let binary = std::env::split_paths(&path)
        .chain([std::path::PathBuf::from("/usr/sbin")])
        .map(|directory| directory.join("haproxy"))
        .find(|candidate| candidate.is_file())
        .ok_or("haproxy is not installed (Debian: apt-get install -y haproxy)")?;
    let addr = procs::free_addr()?;
    let backends: Vec<String> = backends.iter().map(ToString::to_string).collect();
    let config = scratch.path(&format!("{name}.cfg"));
    let text =
        shipped::haproxy_config(&addr.to_string(), &backends).ok_or("deploy/haproxy.cfg has no `server` line")?;
    std::fs::write(&config, text)?;
    let log = scratch.path(&format!("{name}.log"));
    let mut command = tokio::process::Command::new(&binary);
    command.arg("-f").arg(&config).arg("-db").stdin(Stdio::null()).kill_on_drop(true);
    command.stderr(Stdio::from(std::fs::File::create(&log)?));
    let proc = procs::wait_listening(command, name, &binary, addr, log).await?;
    Ok((proc, addr))
}

/// The fleet scenario: one process, HAProxy in front of one, HAProxy in front of three.
pub(crate) async fn fleet(plan: &Plan, scratch: &Scratch) -> Vec<Row> {
    let mut procs = Vec::new();
    let mut targets: Vec<(&'static str, Result<SocketAddr, String>, Option<u32>)> = Vec::new();
    let alone = scratch.path("state-fleet-alone");
    match start_toolgate(plan, scratch, "toolgate-alone", &alone).await {
        Ok((proc, addr)) => {
            targets.push((ONE_PROCESS, Ok(addr), proc.pid()));
            match start_haproxy(scratch, "haproxy-one", &[addr]).await {
                Ok((balancer, front)) => {
                    targets.push((BALANCED_ONE, Ok(front), proc.pid()));
                    procs.push(balancer);
                }
                Err(error) => targets.push((BALANCED_ONE, Err(error.to_string()), None)),
            }
            procs.push(proc);
        }
        Err(error) => targets.push((ONE_PROCESS, Err(error.to_string()), None)),
    }
    let shared = scratch.path("state-fleet-shared");
    let mut backends = Vec::new();
    let mut failure = None;
    for index in 1..=3 {
        match start_toolgate(plan, scratch, &format!("toolgate-fleet-{index}"), &shared).await {
            Ok((proc, addr)) => {
                backends.push(addr);
                procs.push(proc);
            }
            Err(error) => failure = Some(error.to_string()),
        }
    }
    let three = match failure {
        Some(error) => Err(error),
        None => start_haproxy(scratch, "haproxy-three", &backends)
            .await
            .map(|(balancer, front)| {
                procs.push(balancer);
                front
            })
            .map_err(|error| error.to_string()),
    };
    // The three processes' CPU is not one pid's: the row reports none for them.
    targets.push((BALANCED_THREE, three, None));
    let mut lanes = http_lanes_at(&targets, plan.sessions, plan.session_in_flight).await;
    measure(&mut lanes, plan, plan.many_calls).await;
    let rows = lanes.into_iter().map(|lane| lane.row("fleet", plan.sessions, plan.session_in_flight)).collect();
    for proc in procs {
        proc.stop().await;
    }
    rows
}
