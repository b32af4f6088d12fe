//! Both conformance suites through HAProxy (the shipped `deploy/haproxy.cfg`) in front of three `toolgate serve`
//! processes sharing one state directory, each in front of its own fixture upstream: legacy sessions stay on the
//! process that opened them, 2026-07-28 requests go to any process, and every check passes or fails exactly as it
//! does against one process.

use toolgate_test_support::toolgate::fleet::Fleet;
use toolgate_test_support::{Peers, fixture_stdio};

#[test]
fn both_suites_pass_through_haproxy_in_front_of_three_processes() {
    let peers = Peers::locate();
    let fixture = fixture_stdio();
    let state = tempfile::tempdir().unwrap();
    let mut arguments = vec!["--".to_owned()];
    arguments.extend(fixture.argv());
    let fleet = Fleet::start(3, |index| {
        let mut command = super::toolgate_command(&arguments, &fixture, &peers);
        command.env("TOOLGATE_STATE_DIR", state.path()).env("TOOLGATE_INSTANCE_ID", format!("conformance-{index}"));
        command
    });
    let url = fleet.balancer.url();
    super::every_active_scenario_passes(&peers, &url);
    super::modern::fails_only_the_listed_checks(&peers, &url);
}
