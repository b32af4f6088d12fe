//! Several `toolgate serve` processes behind a real HAProxy, for the end-to-end tests of a fleet (docs/deploy.md):
//! [`Fleet::start`] starts N processes from commands the test builds (they share whatever store the test gives
//! them), writes the shipped `deploy/haproxy.cfg` with only its `bind` address and `server` lines changed, and
//! runs `haproxy -f FILE -db` in the foreground ([`Balancer`]), so the tests check the configuration operators
//! get, not a copy of it.
//!
//! HAProxy is a test dependency like the peers: when `haproxy` is not on `PATH` the harness panics with how to
//! install it (Debian's `haproxy`), never skips. Every wait is on a condition, bounded by [`HANG_GUARD`]; nothing
//! here sleeps for a fixed time or asserts how long anything took. Every child is killed when its guard drops.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};

use super::{Serving, poll};
use crate::HANG_GUARD;

/// The shipped configuration and its rewrite, shared with the benchmark (`deploy/haproxy_config.rs`).
#[path = "../../../../deploy/haproxy_config.rs"]
mod shipped;

/// The HAProxy configuration toolgate ships, as the tests run it.
pub const SHIPPED_CONFIG: &str = shipped::SHIPPED_CONFIG;

/// `haproxy` on `PATH`, else in `/usr/sbin` (where Debian puts it, often off an unprivileged user's `PATH`).
pub fn find_haproxy() -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/sbin")])
        .map(|directory| directory.join("haproxy"))
        .find(|candidate| candidate.is_file())
}

/// [`find_haproxy`], or a panic with the install command: the fleet tests never skip.
pub fn haproxy_binary() -> PathBuf {
    find_haproxy().unwrap_or_else(|| {
        panic!(
            "haproxy is not installed: the fleet tests run a real HAProxy in front of toolgate. Install Debian's \
             package (`apt-get install -y haproxy`; `.ci/run` does)"
        )
    })
}

/// The shipped configuration with its frontend bound to `listen` and one `server` line per backend authority
/// (`toolgate-1 127.0.0.1:PORT`, ...); everything else is as shipped.
pub fn haproxy_config(listen: &str, backends: &[String]) -> String {
    shipped::haproxy_config(listen, backends).expect("deploy/haproxy.cfg has no `server` lines to replace")
}

/// A running `haproxy -f FILE -db`; killed when dropped.
pub struct Balancer {
    child: Child,
    /// `127.0.0.1:PORT` of the frontend.
    pub authority: String,
    output: Arc<Mutex<Vec<String>>>,
    _dir: tempfile::TempDir,
}

impl Balancer {
    /// Writes the shipped configuration for `backends` to a temporary file, starts HAProxy on a free loopback
    /// port and waits until it forwards a readiness check to a backend (200). Panics with HAProxy's output
    /// otherwise.
    pub fn start(backends: &[String]) -> Balancer {
        let binary = haproxy_binary();
        let dir = tempfile::tempdir().expect("a temporary directory");
        let port = free_port();
        let authority = format!("127.0.0.1:{port}");
        let file = dir.path().join("haproxy.cfg");
        std::fs::write(&file, haproxy_config(&authority, backends)).expect("write the HAProxy config");
        let mut child = Command::new(binary)
            .arg("-f")
            .arg(&file)
            .arg("-db")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|error| panic!("haproxy does not start: {error}"));
        let output = Arc::new(Mutex::new(Vec::new()));
        let stdout = child.stdout.take().map(|pipe| Box::new(pipe) as Box<dyn Read + Send>);
        let stderr = child.stderr.take().map(|pipe| Box::new(pipe) as Box<dyn Read + Send>);
        for pipe in [stdout, stderr].into_iter().flatten() {
            let lines = Arc::clone(&output);
            std::thread::spawn(move || {
                for line in BufReader::new(pipe).lines().map_while(Result::ok) {
                    lines.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(line);
                }
            });
        }
        poll("HAProxy forwarding a readiness check", || {
            if let Ok(Some(status)) = child.try_wait() {
                let said = output.lock().unwrap_or_else(std::sync::PoisonError::into_inner).join("\n");
                panic!("haproxy exited ({status}):\n{said}");
            }
            (get(&authority, "/healthz/ready").map(|(status, _)| status) == Some(200)).then_some(())
        });
        Balancer { child, authority, output, _dir: dir }
    }

    /// `http://127.0.0.1:PORT/mcp`.
    pub fn url(&self) -> String {
        format!("http://{}/mcp", self.authority)
    }

    /// What HAProxy wrote (its log lines), one line each.
    pub fn output_text(&self) -> String {
        self.output.lock().unwrap_or_else(std::sync::PoisonError::into_inner).join("\n")
    }
}

impl Drop for Balancer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// N `toolgate serve` processes and the balancer in front of them.
pub struct Fleet {
    /// The processes, in order: `toolgate-1` is `processes[0]`. `None` once killed.
    pub processes: Vec<Option<Serving>>,
    /// HAProxy.
    pub balancer: Balancer,
}

impl Fleet {
    /// Starts `count` processes, each from `command(index)` (a `toolgate serve` with an HTTP listener on a port the
    /// OS picks; the test gives them their shared store and instance ids), waits for each to announce its URL and
    /// be ready, then starts the balancer in front of them.
    pub fn start(count: usize, mut command: impl FnMut(usize) -> Command) -> Fleet {
        let processes: Vec<Serving> = (0..count).map(|index| Serving::start(command(index))).collect();
        for serving in &processes {
            poll(&format!("{} ready", serving.url), || {
                (get(&serving.authority, "/healthz/ready").map(|(status, _)| status) == Some(200)).then_some(())
            });
        }
        let backends: Vec<String> = processes.iter().map(|serving| serving.authority.clone()).collect();
        let balancer = Balancer::start(&backends);
        Fleet { processes: processes.into_iter().map(Some).collect(), balancer }
    }

    /// The process at `index`; panics when it was killed.
    pub fn process(&self, index: usize) -> &Serving {
        self.processes[index].as_ref().unwrap_or_else(|| panic!("process {index} was killed"))
    }

    /// `kill -9` of the process at `index`, waited for.
    pub fn kill(&mut self, index: usize) {
        if let Some(mut serving) = self.processes[index].take() {
            serving.child.kill().expect("SIGKILL toolgate");
            let _ = serving.child.wait();
        }
    }

    /// Everything the processes and the balancer wrote, for a failure message.
    pub fn output_text(&self) -> String {
        let mut text = String::new();
        for (index, serving) in self.processes.iter().enumerate() {
            if let Some(serving) = serving {
                text.push_str(&format!("--- toolgate-{}:\n{}\n", index + 1, serving.stderr_text()));
            }
        }
        text.push_str(&format!("--- haproxy:\n{}\n", self.balancer.output_text()));
        text
    }
}

/// `GET PATH` on a fresh connection: the status and the body, `None` when the connection fails.
pub fn get(authority: &str, path: &str) -> Option<(u16, String)> {
    get_with_host(authority, path, authority)
}

/// [`get`] with this `Host` header.
pub fn get_with_host(authority: &str, path: &str, host: &str) -> Option<(u16, String)> {
    let mut stream = TcpStream::connect(authority).ok()?;
    stream.set_read_timeout(Some(HANG_GUARD)).ok()?;
    let request = format!("GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).ok()?;
    let mut raw = String::new();
    stream.read_to_string(&mut raw).ok()?;
    let status = raw.split(' ').nth(1)?.parse().ok()?;
    let body = raw.split_once("\r\n\r\n").map(|(_, body)| body.to_owned()).unwrap_or_default();
    Some((status, body))
}

/// A loopback port nothing listens on right now.
pub fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a loopback port");
    let port = listener.local_addr().expect("its address").port();
    drop(listener);
    port
}
