//! `toolgate-bench soak`: a steady paced load for minutes, with toolgate's memory read all along.
//!
//! The promise checked: at a steady rate toolgate neither leaks nor slows down. One `toolgate serve --config` with
//! stdio echo upstreams and an HTTP listener gets `rate` calls a second from `sessions` keep-alive sessions, each
//! paced by its own ticker (a call that would be late is sent at once, so the offered rate holds while latency stays
//! below the session's interval). Every `sample` seconds the RSS of the toolgate process and the latencies of that
//! window are taken. A leak shows as RSS that keeps rising after the first windows; the report gives the first, the
//! highest and the last reading. It measures; it asserts nothing. Loopback only.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::BoxError;
use crate::client::{HttpConn, call_line, check_echo};
use crate::procs::{self, Scratch};

/// What a soak run is asked to do.
#[derive(Debug, Clone)]
pub(crate) struct SoakPlan {
    pub(crate) bench: PathBuf,
    pub(crate) toolgate: PathBuf,
    pub(crate) rate: u64,
    pub(crate) duration: Duration,
    pub(crate) sessions: usize,
    pub(crate) upstreams: usize,
    pub(crate) sample: Duration,
}

/// One sampling window.
#[derive(Debug, Serialize)]
pub(crate) struct Window {
    pub(crate) at_s: u64,
    pub(crate) rss_kib: u64,
    pub(crate) calls: usize,
    pub(crate) errors: u64,
    pub(crate) p50_us: u64,
    pub(crate) p99_us: u64,
}

/// What a soak run found.
#[derive(Debug, Serialize)]
pub(crate) struct SoakReport {
    pub(crate) rate: u64,
    pub(crate) seconds: u64,
    pub(crate) sessions: usize,
    pub(crate) upstreams: usize,
    pub(crate) answered: u64,
    pub(crate) errors: u64,
    pub(crate) windows: Vec<Window>,
}

impl SoakReport {
    pub(crate) fn text(&self) -> String {
        let mut text = format!(
            "soak: {} calls/s offered for {} s over {} sessions, {} upstreams: {} answered, {} errors\n\
             {:>6} {:>10} {:>8} {:>7} {:>8} {:>8}\n",
            self.rate,
            self.seconds,
            self.sessions,
            self.upstreams,
            self.answered,
            self.errors,
            "at s",
            "RSS KiB",
            "calls",
            "errors",
            "p50 µs",
            "p99 µs"
        );
        for window in &self.windows {
            text.push_str(&format!(
                "{:>6} {:>10} {:>8} {:>7} {:>8} {:>8}\n",
                window.at_s, window.rss_kib, window.calls, window.errors, window.p50_us, window.p99_us
            ));
        }
        text
    }
}

#[derive(Default)]
struct Shared {
    latencies_us: Mutex<Vec<u64>>,
    answered: AtomicU64,
    errors: AtomicU64,
    window_errors: AtomicU64,
    stop: AtomicBool,
}

pub(crate) async fn run(plan: &SoakPlan) -> Result<SoakReport, BoxError> {
    if plan.rate == 0 || plan.sessions == 0 || plan.upstreams == 0 || plan.sample.is_zero() {
        return Err("--rate, --sessions, --upstreams and --sample-seconds must be at least 1".into());
    }
    let scratch = Scratch::new()?;
    let addr = procs::free_addr()?;
    let config = scratch.path("gateway.toml");
    std::fs::write(&config, crate::scenario::config_text(&plan.bench, plan.upstreams, addr)?)?;
    let args = vec!["serve".to_owned(), "--config".to_owned(), config.to_string_lossy().into_owned()];
    let log = scratch.path("toolgate-soak.log");
    let gateway = procs::spawn_listening("toolgate serve (soak)", &plan.toolgate, &args, addr, log).await?;
    let pid = gateway.pid().ok_or("toolgate exited")?;

    let shared = Arc::new(Shared::default());
    // Each session gets an equal share of the rate.
    let interval = Duration::from_secs_f64(plan.sessions as f64 / plan.rate as f64);
    let mut drivers = Vec::new();
    for session in 0..plan.sessions {
        drivers.push(tokio::spawn(drive(addr, session, interval, Arc::clone(&shared))));
    }
    let started = Instant::now();
    let mut windows = Vec::new();
    while started.elapsed() < plan.duration {
        tokio::time::sleep(plan.sample.min(plan.duration.saturating_sub(started.elapsed()))).await;
        let (rss_kib, _) = procs::memory_kib(pid)?;
        let mut latencies = shared.latencies_us.lock().map(|mut list| std::mem::take(&mut *list)).unwrap_or_default();
        latencies.sort_unstable();
        let pick = |share: f64| {
            let index = ((latencies.len() as f64) * share) as usize;
            latencies.get(index.min(latencies.len().saturating_sub(1))).copied().unwrap_or(0)
        };
        windows.push(Window {
            at_s: started.elapsed().as_secs(),
            rss_kib,
            calls: latencies.len(),
            errors: shared.window_errors.swap(0, Ordering::Relaxed),
            p50_us: pick(0.5),
            p99_us: pick(0.99),
        });
    }
    shared.stop.store(true, Ordering::Relaxed);
    for driver in drivers {
        let _ = driver.await;
    }
    gateway.stop().await;
    Ok(SoakReport {
        rate: plan.rate,
        seconds: plan.duration.as_secs(),
        sessions: plan.sessions,
        upstreams: plan.upstreams,
        answered: shared.answered.load(Ordering::Relaxed),
        errors: shared.errors.load(Ordering::Relaxed),
        windows,
    })
}

/// One session paced at `interval`, with unique arguments per call; reconnects after a transport failure.
async fn drive(addr: SocketAddr, session_index: usize, interval: Duration, shared: Arc<Shared>) {
    let mut ticker = tokio::time::interval(interval);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
    let mut serial = 0u64;
    while !shared.stop.load(Ordering::Relaxed) {
        let Ok(mut conn) = HttpConn::connect(addr, "/mcp").await else {
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        };
        let Ok((session, tool)) = conn.open_session().await else {
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        };
        while !shared.stop.load(Ordering::Relaxed) {
            ticker.tick().await;
            serial += 1;
            let text = format!("soak-s{session_index}-n{serial}");
            let sent = Instant::now();
            let reply = conn.request(Some(&session), serial + 10, call_line(serial + 10, &tool, &text)).await;
            match reply.map(|reply| check_echo(reply, &text)) {
                Ok(Ok(())) => {
                    let micros = u64::try_from(sent.elapsed().as_micros()).unwrap_or(u64::MAX);
                    if let Ok(mut latencies) = shared.latencies_us.lock() {
                        latencies.push(micros);
                    }
                    shared.answered.fetch_add(1, Ordering::Relaxed);
                }
                Ok(Err(_)) => {
                    shared.errors.fetch_add(1, Ordering::Relaxed);
                    shared.window_errors.fetch_add(1, Ordering::Relaxed);
                }
                Err(_) => {
                    shared.errors.fetch_add(1, Ordering::Relaxed);
                    shared.window_errors.fetch_add(1, Ordering::Relaxed);
                    break;
                }
            }
        }
    }
}
