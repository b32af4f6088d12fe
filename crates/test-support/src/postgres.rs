//! A real PostgreSQL server for tests: a fresh cluster in a temporary directory, started with the distribution's own
//! server binaries, one per test process ([`PostgresCluster::shared`]) with a database per test
//! ([`PostgresCluster::fresh_database`]), or one of a test's own that it may stop and start
//! ([`PostgresCluster::start_new`]).
//!
//! The binaries are found at run time (`TOOLGATE_PG_BINDIR`, `pg_config --bindir`, `initdb` on `PATH`, then
//! Debian's versioned `lib/postgresql/<version>/bin`); missing ones fail the test with the package to install, never
//! skip it. PostgreSQL refuses to run as root, so under root the cluster belongs to the `postgres` user (created with
//! `useradd -r` if absent) and its commands run through `runuser`. Clients connect over TCP on 127.0.0.1 with trust
//! authentication. A watchdog shell stops the server and removes its directory once the test process is gone, so
//! no server outlives its tests. Durability is off (`fsync=off`) unless a measurement asks for it: these clusters
//! hold test data only.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, Ordering};

/// The unprivileged user that owns clusters started by root.
const SERVER_USER: &str = "postgres";

/// A running PostgreSQL cluster.
#[derive(Debug)]
pub struct PostgresCluster {
    root: PathBuf,
    port: u16,
    bindir: PathBuf,
    run_as: Option<&'static str>,
    owned: bool,
    durable: bool,
}

static SHARED: OnceLock<PostgresCluster> = OnceLock::new();
static NAMES: AtomicU32 = AtomicU32::new(0);

impl PostgresCluster {
    /// The cluster of this test process, started at first use.
    pub fn shared() -> &'static PostgresCluster {
        SHARED.get_or_init(|| PostgresCluster::init(false, false))
    }

    /// A cluster of the caller's own (to stop and start), stopped and removed when dropped.
    pub fn start_new() -> PostgresCluster {
        PostgresCluster::init(true, false)
    }

    /// [`PostgresCluster::start_new`] with PostgreSQL's own durability (`fsync`, synchronous commits), for
    /// measurements that must pay what a production server pays.
    pub fn start_new_durable() -> PostgresCluster {
        PostgresCluster::init(true, true)
    }

    fn init(owned: bool, durable: bool) -> PostgresCluster {
        let bindir = server_bindir();
        let run_as = running_as_root().then(|| {
            ensure_server_user();
            SERVER_USER
        });
        let n = NAMES.fetch_add(1, Ordering::Relaxed);
        let root = std::env::temp_dir().join(format!("toolgate-pg-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(&root).unwrap_or_else(|error| panic!("cannot create {}: {error}", root.display()));
        if run_as.is_some() {
            let (uid, gid) = (id_of("-u"), id_of("-g"));
            std::os::unix::fs::chown(&root, Some(uid), Some(gid))
                .unwrap_or_else(|error| panic!("cannot give {} to {SERVER_USER}: {error}", root.display()));
        }
        let cluster = PostgresCluster { port: free_port(), root, bindir, run_as, owned, durable };
        let data = cluster.data_dir();
        cluster.run_server_tool("initdb", &["-D", path_str(&data), "-A", "trust", "-U", "postgres", "--no-sync"]);
        cluster.start();
        if !owned {
            cluster.watch_test_process();
        }
        cluster
    }

    /// The port the server listens on (127.0.0.1).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The URL of database `name`.
    pub fn url(&self, name: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{name}", self.port)
    }

    /// Creates a database no other test uses and returns its URL.
    pub fn fresh_database(&self) -> String {
        let name = format!("t_{}_{}", std::process::id(), NAMES.fetch_add(1, Ordering::Relaxed));
        let port = self.port.to_string();
        let output = Command::new(self.bindir.join("createdb"))
            .args(["-h", "127.0.0.1", "-p", &port, "-U", "postgres", &name])
            .output()
            .unwrap_or_else(|error| panic!("cannot run createdb: {error}"));
        assert!(output.status.success(), "createdb {name} failed: {}", String::from_utf8_lossy(&output.stderr));
        self.url(&name)
    }

    /// Starts the server (again) and waits until it accepts connections.
    pub fn start(&self) {
        let data = self.data_dir();
        let log = self.root.join("server.log");
        let fast = if self.durable { "" } else { " -c fsync=off -c synchronous_commit=off" };
        let options = format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1 -c max_connections=200{fast}",
            self.port,
            path_str(&self.root)
        );
        self.run_server_tool("pg_ctl", &["-D", path_str(&data), "-l", path_str(&log), "-o", &options, "-w", "start"]);
    }

    /// Stops the server as `pg_ctl restart` does (`fast`: every session is disconnected at once, what was committed
    /// is kept) and waits until it is down. Not `immediate`: with this cluster's asynchronous commits, a crash would
    /// lose the last commits, which is a server setting under test rather than toolgate.
    pub fn stop(&self) {
        let data = self.data_dir();
        self.run_server_tool("pg_ctl", &["-D", path_str(&data), "-m", "fast", "-w", "stop"]);
    }

    fn data_dir(&self) -> PathBuf {
        self.root.join("data")
    }

    /// Runs one of the server's tools as the cluster's owner; panics with its output when it fails.
    fn run_server_tool(&self, tool: &str, args: &[&str]) {
        let program = self.bindir.join(tool);
        let mut command = match self.run_as {
            Some(user) => {
                let mut command = Command::new("runuser");
                command.args(["-u", user, "--"]).arg(&program);
                command
            }
            None => Command::new(&program),
        };
        // The cluster directory is the working directory: the owner may not be able to read the caller's.
        let output = command
            .args(args)
            .current_dir(&self.root)
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|error| panic!("cannot run {}: {error}", program.display()));
        assert!(
            output.status.success(),
            "{tool} {args:?} failed: {}{}\n{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr),
            std::fs::read_to_string(self.root.join("server.log")).unwrap_or_default()
        );
    }

    /// A detached shell that stops the server and removes its directory once this process is gone.
    // Never waited for on purpose: it must outlive this process (init reaps it).
    #[allow(clippy::zombie_processes)]
    fn watch_test_process(&self) {
        let stop =
            format!("{} -D {} -m immediate -w stop", path_str(&self.bindir.join("pg_ctl")), path_str(&self.data_dir()));
        let stop = match self.run_as {
            Some(user) => format!("runuser -u {user} -- {stop}"),
            None => stop,
        };
        let script = format!(
            "while [ -d /proc/{pid} ]; do sleep 1; done; {stop} >/dev/null 2>&1; rm -rf {root}",
            pid = std::process::id(),
            root = path_str(&self.root)
        );
        Command::new("sh")
            .args(["-c", &script])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|error| panic!("cannot start the cluster's watchdog: {error}"));
    }
}

impl Drop for PostgresCluster {
    fn drop(&mut self) {
        if self.owned {
            let data = self.data_dir();
            let program = self.bindir.join("pg_ctl");
            let mut command = match self.run_as {
                Some(user) => {
                    let mut command = Command::new("runuser");
                    command.args(["-u", user, "--"]).arg(&program);
                    command
                }
                None => Command::new(&program),
            };
            let _ =
                command.args(["-D", path_str(&data), "-m", "immediate", "-w", "stop"]).current_dir(&self.root).output();
            let _ = std::fs::remove_dir_all(&self.root);
        }
    }
}

fn path_str(path: &Path) -> &str {
    path.to_str().unwrap_or_else(|| panic!("not a UTF-8 path: {}", path.display()))
}

/// Where `initdb`, `pg_ctl` and `createdb` are.
fn server_bindir() -> PathBuf {
    let has_server = |dir: &Path| dir.join("initdb").is_file() && dir.join("pg_ctl").is_file();
    if let Some(dir) = std::env::var_os("TOOLGATE_PG_BINDIR").map(PathBuf::from) {
        assert!(has_server(&dir), "TOOLGATE_PG_BINDIR={} has no initdb and pg_ctl", dir.display());
        return dir;
    }
    let from_pg_config = Command::new("pg_config")
        .arg("--bindir")
        .output()
        .ok()
        .filter(|output| output.status.success())
        .map(|output| PathBuf::from(String::from_utf8_lossy(&output.stdout).trim()));
    // Debian's server binaries live in a versioned directory, not on PATH; the newest version wins.
    let mut debian: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .map(|entries| entries.filter_map(Result::ok).map(|entry| entry.path().join("bin")).collect())
        .unwrap_or_default();
    debian.sort_by_key(|dir| {
        dir.parent()
            .and_then(Path::file_name)
            .and_then(|name| name.to_str())
            .and_then(|name| name.parse::<u32>().ok())
            .unwrap_or(0)
    });
    let on_path = std::env::var_os("PATH")
        .map(|path| std::env::split_paths(&path).collect::<Vec<_>>())
        .unwrap_or_default()
        .into_iter()
        .filter(|dir| dir.join("initdb").is_file())
        .filter_map(|dir| std::fs::canonicalize(dir.join("initdb")).ok())
        .filter_map(|initdb| initdb.parent().map(Path::to_path_buf));
    from_pg_config
        .into_iter()
        .chain(on_path)
        .chain(debian.into_iter().rev())
        .find(|dir| has_server(dir))
        .unwrap_or_else(|| {
            panic!(
                "PostgreSQL's server binaries (initdb, pg_ctl) were not found: install Debian's `postgresql` package \
                 (apt-get install -y postgresql) or set TOOLGATE_PG_BINDIR"
            )
        })
}

fn running_as_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .map(|output| String::from_utf8_lossy(&output.stdout).trim() == "0")
        .unwrap_or(false)
}

fn ensure_server_user() {
    let exists = Command::new("id").arg(SERVER_USER).stdout(Stdio::null()).stderr(Stdio::null()).status();
    if exists.is_ok_and(|status| status.success()) {
        return;
    }
    let created = Command::new("useradd").args(["-r", SERVER_USER]).status();
    // Two test processes may race to create it: what matters is that it exists now.
    let exists = Command::new("id").arg(SERVER_USER).stdout(Stdio::null()).stderr(Stdio::null()).status();
    assert!(exists.is_ok_and(|status| status.success()), "cannot create the {SERVER_USER} user: {created:?}");
}

fn id_of(flag: &str) -> u32 {
    let output = Command::new("id").args([flag, SERVER_USER]).output().expect("id");
    String::from_utf8_lossy(&output.stdout).trim().parse().unwrap_or_else(|error| panic!("id {flag}: {error}"))
}

/// A port nothing listens on now (the server binds it moments later).
fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a free port");
    listener.local_addr().expect("local address").port()
}
