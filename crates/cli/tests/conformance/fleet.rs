//! Both conformance suites through HAProxy (the shipped `deploy/haproxy.cfg`) in front of three `toolgate serve`
//! processes on one PostgreSQL database (`[store] url_env`; each process its own state directory and instance id),
//! each in front of its own fixture upstream: legacy sessions stay on the process that opened them, 2026-07-28
//! requests go to any process, and every check passes or fails exactly as it does against one process.

use toolgate_test_support::postgres::PostgresCluster;
use toolgate_test_support::toolgate::fleet::Fleet;
use toolgate_test_support::{Peers, fixture_stdio};

/// The variable `[store] url_env` names: the database's URL reaches the processes only through their environment.
const STORE_URL_ENV: &str = "TOOLGATE_CONFORMANCE_STORE_URL";

#[test]
fn both_suites_pass_through_haproxy_in_front_of_three_processes_on_postgres() {
    let peers = Peers::locate();
    let fixture = fixture_stdio();
    let url = PostgresCluster::shared().fresh_database();
    let dir = tempfile::tempdir().unwrap();
    let argv = fixture.argv();
    let name = std::path::Path::new(&argv[0]).file_name().unwrap().to_string_lossy().into_owned();
    // What `serve --listen 127.0.0.1:0 --policy permissive -- FIXTURE` builds, as a file that can name the store.
    let config = dir.path().join("gateway.toml");
    let text = format!(
        "[[upstream]]\nname = {name:?}\ncommand = {program:?}\nargs = {args:?}\n\n\
         [listen.http]\nbind = \"127.0.0.1:0\"\n\n\
         [policy]\nsession_taint = false\n\n[[policy.rule]]\nid = \"permissive\"\neffect = \"allow\"\n\n\
         [store]\nurl_env = \"{STORE_URL_ENV}\"\n",
        program = argv[0],
        args = &argv[1..],
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
        for (key, value) in &fixture.env {
            command.env(key, value);
        }
        command.env(STORE_URL_ENV, &url).env("TOOLGATE_INSTANCE_ID", format!("conformance-{index}"));
        command
    });
    let url = fleet.balancer.url();
    super::every_active_scenario_passes(&peers, &url);
    // A bridged call is held by the process that asked; a retry the balancer sends elsewhere is refused (never
    // replayed), so the round after a bridged question may pass or fail here by where it lands.
    super::modern::fails_only_the_listed_checks_but(&peers, &url, &super::modern::HELD_CALL_RETRIES);
}
