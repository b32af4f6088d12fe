//! Both conformance suites through HAProxy (the shipped `deploy/haproxy.cfg`) in front of three `toolgate serve`
//! processes on one PostgreSQL database (`[store] url_env`; each process its own state directory and instance id),
//! in front of one fixture upstream over Streamable HTTP (each process its own session to it; over HTTP each call's
//! mid-call requests come on its own stream, as in `modern`): legacy sessions stay on the process that opened them,
//! 2026-07-28 requests go to any process, and every check passes or fails exactly as it does against one process,
//! but the retries of held calls, which pass on the process that holds the call and are refused cleanly elsewhere.

use std::process::Stdio;

use toolgate_test_support::postgres::PostgresCluster;
use toolgate_test_support::toolgate::fleet::Fleet;
use toolgate_test_support::{Peers, fixture_http};

/// The variable `[store] url_env` names: the database's URL reaches the processes only through their environment.
const STORE_URL_ENV: &str = "TOOLGATE_CONFORMANCE_STORE_URL";

#[test]
fn both_suites_pass_through_haproxy_in_front_of_three_processes_on_postgres() {
    let peers = Peers::locate();
    let port = super::free_port();
    let fixture = fixture_http(port);
    let mut fixture_command = fixture.command();
    fixture_command.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null());
    let _fixture = super::Guard(fixture_command.spawn().expect("the fixture starts"));
    super::wait_for_port(port);
    let url = PostgresCluster::shared().fresh_database();
    let dir = tempfile::tempdir().unwrap();
    // What `serve --listen 127.0.0.1:0 --policy permissive --upstream-url URL` builds, as a file that can name the
    // store.
    let config = dir.path().join("gateway.toml");
    let text = format!(
        "[[upstream]]\nname = \"fixture\"\nurl = \"http://127.0.0.1:{port}/mcp\"\n\n\
         [listen.http]\nbind = \"127.0.0.1:0\"\n\n\
         [policy]\nsession_taint = false\n\n[[policy.rule]]\nid = \"permissive\"\neffect = \"allow\"\n\n\
         [store]\nurl_env = \"{STORE_URL_ENV}\"\n",
    );
    std::fs::write(&config, text).unwrap();
    let fleet = Fleet::start(3, |index| {
        let mut command = toolgate_test_support::toolgate::command();
        command
            .args(["serve", "--config"])
            .arg(&config)
            .arg("--state-dir")
            .arg(dir.path().join(format!("state-{index}")));
        command.env("PATH", peers.path_env()).env("TOOLGATE_LOG", "warn");
        command.env(STORE_URL_ENV, &url).env("TOOLGATE_INSTANCE_ID", format!("conformance-{index}"));
        command
    });
    let url = fleet.balancer.url();
    super::every_active_scenario_passes(&peers, &url);
    // A bridged call is held by the process that asked (its upstream call is open there, waiting for the answer);
    // HAProxy balances 2026-07-28 requests round-robin, so a retry lands on that process or on another, which
    // refuses it (-32602, "does not hold") and sends nothing upstream: re-sending a call could run a tool twice.
    // Those retries pass or fail by where they land, and may fail with that refusal only (the two multi-round
    // checks, whose messages name no error, with their own message).
    super::modern::fails_only_the_listed_checks_but(&peers, &url, &super::modern::HELD_CALL_RETRIES);
}
