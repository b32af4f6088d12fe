//! Escapes tried from inside a strict sandbox and refused: writing outside the writable paths, reading the state
//! directory and the config file, reaching toolgate's own listening port, reading a variable toolgate has but did
//! not pass, and a fork bomb (bounded; toolgate and the upstream stay healthy). Reaching toolgate's port is refused
//! also when the upstream is granted the network (Landlock's port guard).

use serde_json::json;

use crate::{Sandboxed, call, fixture_upstream, is_error, texts};

fn start() -> (Sandboxed, std::path::PathBuf, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path().join("work");
    let data = dir.path().join("data");
    std::fs::create_dir(&work).unwrap();
    std::fs::create_dir(&data).unwrap();
    let sandbox = format!("mode = \"strict\"\nwritable = [{:?}]\nmax_processes = 300", data.to_string_lossy());
    let upstream = fixture_upstream("escaper", "escaper.py", &work, "GIVEN = \"given\"", &sandbox);
    let gateway = Sandboxed::start(dir, &upstream, &[("SANDBOX_TEST_SECRET", "hunter2")]);
    (gateway, work, data)
}

#[test]
fn writes_land_only_in_the_writable_paths() {
    let (gateway, work, data) = start();
    let mut session = gateway.session();
    let inside = call(&mut session, "write_path", json!({"path": data.join("ok.txt")}));
    assert!(!is_error(&inside), "{inside}");
    assert!(data.join("ok.txt").exists());
    for outside in [work.join("cwd.txt"), gateway.path("beside-config.txt"), std::env::temp_dir().join("escaped.txt")] {
        let result = call(&mut session, "write_path", json!({"path": outside}));
        assert!(is_error(&result) && texts(&result).contains("Read-only file system"), "{result}");
        assert!(!outside.exists(), "{} was written", outside.display());
    }
}

#[test]
fn the_state_directory_and_the_config_are_not_visible() {
    let (gateway, _work, _data) = start();
    let mut session = gateway.session();
    let state = gateway.path("state");
    assert!(state.join("toolgate.db").exists(), "the gateway keeps its store there");
    let listed = call(&mut session, "read_path", json!({"path": state}));
    assert_eq!(texts(&listed), "entries: ", "{listed}");
    let database = call(&mut session, "read_path", json!({"path": state.join("toolgate.db")}));
    assert!(is_error(&database) && texts(&database).contains("No such file"), "{database}");
    let config = call(&mut session, "read_path", json!({"path": gateway.path("gateway.toml")}));
    // The config's place holds an empty device node the sandbox may not open.
    let text = texts(&config);
    assert!(is_error(&config) && text.contains("Permission denied") && !text.contains("policy.rule"), "{config}");
    assert!(text.contains("toolgate's own files are hidden"), "{text}");
}

#[test]
fn only_passed_variables_are_visible() {
    let (gateway, _work, _data) = start();
    let mut session = gateway.session();
    let secret = call(&mut session, "read_env", json!({"name": "SANDBOX_TEST_SECRET"}));
    assert_eq!(texts(&secret), "unset", "{secret}");
    let given = call(&mut session, "read_env", json!({"name": "GIVEN"}));
    assert_eq!(texts(&given), "given", "{given}");
    let path = call(&mut session, "read_env", json!({"name": "PATH"}));
    assert_ne!(texts(&path), "unset", "PATH is passed by default: {path}");
}

#[test]
fn toolgates_own_port_is_not_reachable() {
    let (gateway, _work, _data) = start();
    let mut session = gateway.session();
    let port: u16 = gateway.serve.authority.rsplit(':').next().unwrap().parse().unwrap();
    let result = call(&mut session, "connect", json!({"port": port}));
    let text = texts(&result);
    assert!(is_error(&result) && text.contains("Connection refused"), "{result}");
    assert!(text.contains("(the sandbox has no network)"), "{text}");
}

#[test]
fn a_fork_bomb_is_bounded_and_toolgate_stays_healthy() {
    let (gateway, _work, _data) = start();
    let mut session = gateway.session();
    let bomb = call(&mut session, "fork_bomb", json!({"count": 5000}));
    let text = texts(&bomb);
    let started: usize = text.split_whitespace().nth(1).and_then(|count| count.parse().ok()).unwrap();
    assert!(started < 300 && text.contains("refused: [Errno 11]"), "{text}");
    // The gateway and the same upstream still answer.
    let after = call(&mut session, "read_env", json!({"name": "GIVEN"}));
    assert_eq!(texts(&after), "given", "{after}");
    let status =
        toolgate_test_support::toolgate::run(&["status", "--state-dir", &gateway.path("state").to_string_lossy()]);
    assert_eq!(status.code, Some(0), "{status:?}");
}

#[test]
fn toolgates_own_port_is_refused_even_with_the_network() {
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path().join("work");
    std::fs::create_dir(&work).unwrap();
    // A port for toolgate known before it starts (a guard is built before the listener opens).
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let other = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let other_port = other.local_addr().unwrap().port();
    let upstream = fixture_upstream("escaper", "escaper.py", &work, "", "mode = \"strict\"\nnetwork = true");
    let gateway = Sandboxed::start_on(dir, &upstream, &[], port);
    let mut session = gateway.session();
    let elsewhere = call(&mut session, "connect", json!({"port": other_port}));
    assert_eq!(texts(&elsewhere), "connected", "the network is granted: {elsewhere}");
    let own = call(&mut session, "connect", json!({"port": port}));
    let text = texts(&own);
    assert!(is_error(&own) && text.contains("Permission denied"), "{own}");
    assert!(text.contains(&format!("connections to toolgate's own ports {port} are refused")), "{text}");
}

#[test]
fn a_host_unix_socket_under_run_is_not_reachable() {
    // A read-only root still lets connect() reach a socket file; the sandbox hides /run behind an empty tmpfs.
    let dir = std::path::PathBuf::from(format!("/run/toolgate-sbtest-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let socket = dir.join("s.sock");
    let listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
    listener.set_nonblocking(true).unwrap();
    let (gateway, _work, _data) = start();
    let mut session = gateway.session();
    let result = call(&mut session, "connect_unix", json!({"path": socket}));
    let accepted = listener.accept().is_ok();
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(!accepted, "the sandboxed upstream reached the host socket: {result}");
    assert!(is_error(&result) && texts(&result).contains("No such file or directory"), "{result}");
}
