//! A full disk under load (issue 17): with the state directory on a 2 MiB tmpfs that fills while calls run, calls
//! are refused visibly; once space returns the audit writer comes back by itself (same process, no restart) and
//! every call that was answered has its `call` row with its outcome, and the chain verifies.
//!
//! Mounting needs root (CI runs as root); where it is impossible the test fails loudly, it never skips.

use std::collections::HashSet;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use toolgate_store::digest_arguments;

use crate::support::{HttpSession, Setup, poll, start_serve, toolgate};

const WORKERS: usize = 4;

/// A tmpfs mounted for the test; unmounted when dropped.
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(path: &Path, size: &str) -> Tmpfs {
        std::fs::create_dir_all(path).expect("mount point");
        let status = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(path)
            .status()
            .expect("run mount");
        assert!(
            status.success(),
            "cannot mount a {size} tmpfs at {} ({status}): this test needs root to put the state directory on a \
             small filesystem; it must not be skipped",
            path.display()
        );
        Tmpfs(path.to_path_buf())
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

/// Fills the filesystem with a file and keeps it full (taking any space that is freed, such as the journal's when
/// it is truncated) until `stop` is set, so the journal and the database both meet the full disk.
fn keep_full(path: PathBuf, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let mut file = std::fs::File::create(&path).expect("ballast");
        let chunk = vec![0_u8; 16 * 1024];
        while !stop.load(Ordering::SeqCst) {
            let mut wrote = false;
            while file.write_all(&chunk).is_ok() {
                wrote = true;
            }
            while file.write_all(&chunk[..512]).is_ok() {
                wrote = true;
            }
            if !wrote {
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
        }
    })
}

#[derive(Default)]
struct Load {
    stop: AtomicBool,
    answered: Mutex<Vec<Value>>,
    answered_count: AtomicUsize,
    refused: AtomicUsize,
}

#[test]
fn a_full_disk_refuses_calls_and_the_writer_recovers_by_itself_without_losing_an_answered_call() {
    let setup =
        Setup::demo("[policy]\nsession_taint = false\n\n[[policy.rule]]\nid = \"allow-all\"\neffect = \"allow\"\n");
    let state = setup.state();
    let mount = Tmpfs::mount(&state, "2m");
    let mut serve = start_serve(&setup, &[]);
    let load = Arc::new(Load::default());
    let workers: Vec<_> = (0..WORKERS)
        .map(|worker| {
            let authority = serve.authority.clone();
            let load = Arc::clone(&load);
            std::thread::spawn(move || {
                let mut session = HttpSession::open(&authority, &[]).expect("a session");
                let mut call = 0_u64;
                while !load.stop.load(Ordering::SeqCst) {
                    call += 1;
                    let arguments = json!({"title": format!("disk {worker}-{call}"), "body": "full disk test"});
                    let response = session
                        .request("tools/call", json!({"name": "add_note", "arguments": arguments}))
                        .expect("the gateway answers every call");
                    if response["result"]["isError"] == json!(true) {
                        let text = response["result"]["content"][0]["text"].as_str().unwrap_or_default().to_owned();
                        assert!(text.contains("audit"), "a refusal names the audit log: {response}");
                        load.refused.fetch_add(1, Ordering::SeqCst);
                        std::thread::sleep(std::time::Duration::from_millis(5));
                    } else {
                        assert!(response.get("result").is_some(), "{response}");
                        load.answered.lock().unwrap().push(arguments);
                        load.answered_count.fetch_add(1, Ordering::SeqCst);
                    }
                }
            })
        })
        .collect();
    poll("calls answered before the disk fills", || (load.answered_count.load(Ordering::SeqCst) >= 50).then_some(()));

    let ballast = state.join("ballast");
    let full = Arc::new(AtomicBool::new(false));
    let filler = keep_full(ballast.clone(), Arc::clone(&full));
    poll("calls refused while the disk is full", || (load.refused.load(Ordering::SeqCst) >= 20).then_some(()));
    // Keep the load on a full disk a moment longer, so the writer meets it too, then give the space back.
    let refused = load.refused.load(Ordering::SeqCst);
    poll("more refusals on the full disk", || (load.refused.load(Ordering::SeqCst) >= refused + 50).then_some(()));
    poll("the audit writer meeting the full disk", || {
        serve.stderr_text().contains("audit rows cannot be written").then_some(())
    });
    full.store(true, Ordering::SeqCst);
    filler.join().expect("filler");
    std::fs::remove_file(&ballast).expect("free the space");
    let answered = load.answered_count.load(Ordering::SeqCst);
    poll("calls answered again after space returned", || {
        (load.answered_count.load(Ordering::SeqCst) >= answered + 100).then_some(())
    });
    load.stop.store(true, Ordering::SeqCst);
    for worker in workers {
        worker.join().expect("worker");
    }
    assert!(serve.child.try_wait().expect("status").is_none(), "the gateway kept running: no restart");

    // Every answered call has its row, with its outcome, in the database the running gateway writes.
    let answered: Vec<Value> = load.answered.lock().unwrap().clone();
    let state_arg = setup.state_arg();
    let started = std::time::Instant::now();
    let missing = poll("every answered call's row", || {
        let rows = toolgate(&["audit", "--json", "--kind", "call", "--state-dir", &state_arg]);
        assert_eq!(rows.code, Some(0), "{rows:?}");
        let recorded: HashSet<String> = rows
            .stdout
            .lines()
            .filter_map(|line| serde_json::from_str::<Value>(line).ok())
            .filter(|row| row["tool"] == "add_note" && row["outcome"] == "ok")
            .filter_map(|row| row["args_digest"].as_str().map(str::to_owned))
            .collect();
        let missing: Vec<&Value> =
            answered.iter().filter(|arguments| !recorded.contains(&digest_arguments(arguments))).collect();
        if !missing.is_empty() && started.elapsed() > crate::support::HANG_GUARD / 2 {
            panic!(
                "{} of {} answered calls have no row with their outcome: {:?}",
                missing.len(),
                answered.len(),
                missing.first()
            );
        }
        missing.is_empty().then_some(missing.len())
    });
    assert_eq!(missing, 0);
    poll("the writer's recovery in the log", || {
        serve.stderr_text().contains("the audit writer recovered").then_some(())
    });
    let verify = toolgate(&["audit", "verify", "--state-dir", &state_arg]);
    assert_eq!(verify.code, Some(0), "audit verify after the full disk: {verify:?}");
    eprintln!(
        "full disk: {} calls answered, {} refused; stderr:\n{}",
        answered.len(),
        load.refused.load(Ordering::SeqCst),
        serve
            .stderr_text()
            .lines()
            .filter(|line| line.contains("audit") && !line.contains("the call is not forwarded"))
            .take(12)
            .collect::<Vec<_>>()
            .join("\n")
    );
    let _ = serve.child.kill();
    let _ = serve.child.wait();
    drop(mount);
}
