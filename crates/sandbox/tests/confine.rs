//! The command builder against the real mechanisms: a shell run under a profile finds the file system read-only
//! except its writable path, hidden paths and the host's socket directories empty, no network, only the passed
//! environment and a bounded process count. These tests need bubblewrap, util-linux and Linux 6.14 or later (CI installs bubblewrap).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;
use std::process::Command;

use toolgate_sandbox::{Profile, ResourceLimits, command, probe};

fn run(profile: &Profile, script: &str) -> (bool, String) {
    let sandboxed = command(profile, probe(), &[], "/bin/sh", &["-c".into(), script.into()])
        .unwrap_or_else(|error| panic!("{error}; {}", probe().summary()));
    let output = Command::new(&sandboxed.program).args(&sandboxed.args).output().expect("the sandbox runs");
    let text = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    (output.status.success(), text)
}

fn observing(scratch: &Path) -> Profile {
    Profile::observing(scratch.to_path_buf(), vec![("PATH".into(), "/usr/bin:/bin".into())])
}

#[test]
fn writes_only_inside_the_writable_path() {
    let scratch = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let script =
        format!("echo in > {0}/in.txt && echo out > {1}/out.txt", scratch.path().display(), outside.path().display());
    let (ok, text) = run(&observing(scratch.path()), &script);
    assert!(!ok, "{text}");
    assert!(text.contains("Read-only file system"), "{text}");
    assert!(scratch.path().join("in.txt").exists());
    assert!(!outside.path().join("out.txt").exists());
}

#[test]
fn hidden_paths_and_unpassed_variables_are_not_there() {
    let scratch = tempfile::tempdir().unwrap();
    let state = tempfile::tempdir().unwrap();
    std::fs::write(state.path().join("toolgate.db"), "secret").unwrap();
    let config = state.path().join("toolgate.toml");
    std::fs::write(&config, "token = \"secret\"").unwrap();
    let mut profile = observing(scratch.path());
    profile.hidden = vec![config.clone(), state.path().to_path_buf()];
    let script = format!(
        "ls -A {0}; cat {1}; echo \"secret=[$SANDBOX_TEST_SECRET] path=[$PATH]\"",
        state.path().display(),
        config.display()
    );
    let output = {
        let sandboxed = command(&profile, probe(), &[], "/bin/sh", &["-c".into(), script]).unwrap();
        Command::new(&sandboxed.program).args(&sandboxed.args).env("SANDBOX_TEST_SECRET", "hunter2").output().unwrap()
    };
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(!text.contains("toolgate.db") && !text.contains("secret\""), "{text}");
    assert!(text.contains("secret=[] path=[/usr/bin:/bin]"), "{text}");
}

#[test]
fn no_network_fails_fast() {
    let scratch = tempfile::tempdir().unwrap();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let script = format!("python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", {port}), timeout=20)'");
    let started = std::time::Instant::now();
    let (ok, text) = run(&observing(scratch.path()), &script);
    assert!(!ok && text.contains("Connection refused"), "{text}");
    // Refused at once by the empty network namespace, not after the 20 s timeout.
    assert!(started.elapsed() < std::time::Duration::from_secs(15));
}

#[test]
fn processes_are_bounded_for_root_too() {
    let scratch = tempfile::tempdir().unwrap();
    let mut profile = observing(scratch.path());
    profile.limits = ResourceLimits { max_processes: Some(300), ..ResourceLimits::default() };
    // Fork until the kernel refuses, then report how many children were started and end them.
    let script = "python3 -c 'import os, signal, time\nkids = []\ntry:\n    for _ in range(2000):\n        pid = os.fork()\n        if pid == 0:\n            time.sleep(30)\n            os._exit(0)\n        kids.append(pid)\nexcept OSError as error:\n    print(error)\nfor kid in kids:\n    os.kill(kid, signal.SIGKILL)\nprint(\"started=%d\" % len(kids))'";
    let (_, text) = run(&profile, script);
    let started: u32 = text.trim().rsplit('=').next().and_then(|count| count.trim().parse().ok()).unwrap_or(u32::MAX);
    assert!((100..=300).contains(&started), "{text}");
}

#[test]
fn host_sockets_under_run_are_hidden_and_a_writable_path_there_still_works() {
    // The observing profile (a verifier's) too: /run is an empty tmpfs, so the host's socket files are gone, while
    // a writable path under /run is bound after it and still takes writes.
    let dir = std::path::PathBuf::from(format!("/run/toolgate-confine-{}", std::process::id()));
    let scratch = dir.join("scratch");
    std::fs::create_dir_all(&scratch).unwrap();
    let socket = dir.join("s.sock");
    let listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
    listener.set_nonblocking(true).unwrap();
    let script = format!(
        "echo in > {0}/in.txt; python3 -c 'import socket; socket.socket(socket.AF_UNIX).connect(\"{1}\")'",
        scratch.display(),
        socket.display()
    );
    let (ok, text) = run(&observing(&scratch), &script);
    let accepted = listener.accept().is_ok();
    let wrote = scratch.join("in.txt").exists();
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(!accepted && !ok, "the sandbox reached the host socket: {text}");
    assert!(text.contains("No such file or directory"), "{text}");
    assert!(wrote, "the writable path under /run took no write: {text}");
}
