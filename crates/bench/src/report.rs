//! What a run found: latency statistics per measurement, via-minus-direct comparisons, memory readings, and their
//! rendering as a plain-text table or JSON.
//!
//! Latencies are exact order statistics of every timed call (the samples are sorted, nothing is bucketed):
//! pN is the nearest-rank percentile. Throughput is completed calls over the wall time of the timed phase.

use std::fmt::Write as _;

use serde::Serialize;

/// Statistics of one timed phase.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Stats {
    pub(crate) calls: usize,
    pub(crate) errors: usize,
    pub(crate) p50_us: f64,
    pub(crate) p99_us: f64,
    pub(crate) mean_us: f64,
    pub(crate) max_us: f64,
    pub(crate) calls_per_s: f64,
    /// CPU time toolgate used during the phase, per call (relayed paths only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) toolgate_cpu_us_per_call: Option<f64>,
    /// Context switches of toolgate's threads during the phase, per call (relayed paths only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) toolgate_switches_per_call: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) first_error: Option<String>,
}

impl Stats {
    /// Statistics of successful calls' latencies (nanoseconds), with `errors` failed calls, over `wall_s` seconds.
    pub(crate) fn from_samples(mut samples: Vec<u64>, errors: usize, wall_s: f64, first_error: Option<String>) -> Self {
        samples.sort_unstable();
        let us = |ns: u64| ns as f64 / 1000.0;
        let rank = |p: f64| {
            let n = samples.len();
            if n == 0 {
                return 0.0;
            }
            let index = ((p * n as f64).ceil() as usize).clamp(1, n) - 1;
            us(samples[index])
        };
        let sum: u128 = samples.iter().map(|&ns| u128::from(ns)).sum();
        let mean = if samples.is_empty() { 0.0 } else { sum as f64 / samples.len() as f64 / 1000.0 };
        Stats {
            calls: samples.len(),
            errors,
            p50_us: rank(0.50),
            p99_us: rank(0.99),
            mean_us: mean,
            max_us: samples.last().map_or(0.0, |&ns| us(ns)),
            calls_per_s: if wall_s > 0.0 { samples.len() as f64 / wall_s } else { 0.0 },
            toolgate_cpu_us_per_call: None,
            toolgate_switches_per_call: None,
            first_error,
        }
    }
}

/// One measured path in one scenario.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Row {
    /// `stdio`, `http` or `http-sessions`.
    pub(crate) scenario: String,
    /// `direct`, or `toolgate` followed by the upstream transport behind it (`toolgate/stdio`, `toolgate/http`).
    pub(crate) path: String,
    pub(crate) sessions: usize,
    /// Requests in flight per session.
    pub(crate) in_flight: usize,
    /// Present when the path could be measured.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) stats: Option<Stats>,
    /// Why the path could not be measured.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) unavailable: Option<String>,
}

/// A relayed path against the direct path of the same scenario and concurrency.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Comparison {
    pub(crate) scenario: String,
    pub(crate) path: String,
    pub(crate) sessions: usize,
    pub(crate) in_flight: usize,
    pub(crate) added_p50_us: f64,
    pub(crate) added_p99_us: f64,
    pub(crate) added_mean_us: f64,
    /// Relayed throughput over direct throughput.
    pub(crate) throughput_ratio: f64,
}

/// Memory of one toolgate process.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Memory {
    pub(crate) upstreams: usize,
    pub(crate) sessions: usize,
    /// `VmRSS` once listening, before any client session.
    pub(crate) idle_rss_kib: u64,
    /// `VmRSS` with every session open and having made a call.
    pub(crate) rss_kib: u64,
    /// `VmHWM` (peak RSS) at the same moment.
    pub(crate) hwm_kib: u64,
    pub(crate) how: String,
}

/// The machine and the run's parameters.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Meta {
    pub(crate) command: String,
    pub(crate) toolgate: String,
    /// CPUs this run may use (its affinity, which the client, the upstreams and toolgate inherit).
    pub(crate) cpus: usize,
    /// CPUs the machine has.
    pub(crate) cpus_online: usize,
    pub(crate) cpu_model: String,
    pub(crate) load_average_at_start: String,
    pub(crate) load_average_at_end: String,
    pub(crate) calls: usize,
    pub(crate) warmup: usize,
    pub(crate) rounds: usize,
    pub(crate) many_calls: usize,
    pub(crate) payload_bytes: usize,
}

/// How long `toolgate serve --config` takes from spawn to its first answered call, with its one stdio upstream
/// plain and sandboxed, alternating (milliseconds, one sample per start).
#[derive(Debug, Clone, Default, Serialize)]
pub(crate) struct SandboxStarts {
    pub(crate) plain_ms: Vec<f64>,
    pub(crate) sandboxed_ms: Vec<f64>,
}

/// The fleet scenario's baseline lane, the one its other lanes are compared with (scenario rows name it).
pub(crate) const ONE_PROCESS: &str = "toolgate x1";

/// Everything a run reports.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Report {
    pub(crate) meta: Meta,
    pub(crate) rows: Vec<Row>,
    pub(crate) comparisons: Vec<Comparison>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) memory: Option<Memory>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) memory_unavailable: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) sandbox_starts: Option<SandboxStarts>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) sandbox_unavailable: Option<String>,
}

impl Report {
    /// Adds a comparison for every relayed row against the direct row with the same scenario and concurrency.
    pub(crate) fn compare(&mut self) {
        let mut comparisons = Vec::new();
        // Each scenario's baseline: the direct path, or for the fleet one process.
        let baseline = |scenario: &str| if scenario == "fleet" { ONE_PROCESS } else { "direct" };
        for row in self.rows.iter().filter(|row| row.path != baseline(&row.scenario)) {
            let Some(via) = &row.stats else { continue };
            let direct = self.rows.iter().find(|other| {
                other.path == baseline(&other.scenario)
                    && other.scenario == row.scenario
                    && other.sessions == row.sessions
                    && other.in_flight == row.in_flight
            });
            let Some(direct) = direct.and_then(|direct| direct.stats.as_ref()) else { continue };
            comparisons.push(Comparison {
                scenario: row.scenario.clone(),
                path: row.path.clone(),
                sessions: row.sessions,
                in_flight: row.in_flight,
                added_p50_us: via.p50_us - direct.p50_us,
                added_p99_us: via.p99_us - direct.p99_us,
                added_mean_us: via.mean_us - direct.mean_us,
                throughput_ratio: if direct.calls_per_s > 0.0 { via.calls_per_s / direct.calls_per_s } else { 0.0 },
            });
        }
        self.comparisons = comparisons;
    }

    /// The report as aligned plain-text tables.
    pub(crate) fn table(&self) -> String {
        let meta = &self.meta;
        let mut out = String::new();
        let _ = writeln!(out, "command: {}", meta.command);
        let _ = writeln!(out, "toolgate: {}", meta.toolgate);
        let confined = if meta.cpus < meta.cpus_online {
            format!(" (this run confined to {} of them by CPU affinity)", meta.cpus)
        } else {
            String::new()
        };
        let _ = writeln!(
            out,
            "machine: {} CPU(s){confined}, {}; load average at start {}, at end {}",
            meta.cpus_online.max(meta.cpus),
            meta.cpu_model,
            meta.load_average_at_start,
            meta.load_average_at_end
        );
        let _ = writeln!(
            out,
            "calls per measurement: {} (+{} warm-up) in {} alternating rounds, many-session phase: {}; payload {} bytes\n",
            meta.calls, meta.warmup, meta.rounds, meta.many_calls, meta.payload_bytes
        );
        let _ = writeln!(
            out,
            "{:<14} {:<14} {:>8} {:>9} {:>8} {:>9} {:>9} {:>9} {:>10} {:>9} {:>8} {:>6}",
            "scenario",
            "path",
            "sessions",
            "in-flight",
            "p50 us",
            "p99 us",
            "mean us",
            "max us",
            "calls/s",
            "tg cpu/c",
            "tg cs/c",
            "errors"
        );
        for row in &self.rows {
            match &row.stats {
                Some(stats) => {
                    let cpu = stats.toolgate_cpu_us_per_call.map_or("-".to_owned(), |cpu| format!("{cpu:.1}"));
                    let switches = stats.toolgate_switches_per_call.map_or("-".to_owned(), |n| format!("{n:.2}"));
                    let _ = writeln!(
                        out,
                        "{:<14} {:<14} {:>8} {:>9} {:>8.1} {:>9.1} {:>9.1} {:>9.1} {:>10.0} {:>9} {:>8} {:>6}",
                        row.scenario,
                        row.path,
                        row.sessions,
                        row.in_flight,
                        stats.p50_us,
                        stats.p99_us,
                        stats.mean_us,
                        stats.max_us,
                        stats.calls_per_s,
                        cpu,
                        switches,
                        stats.errors
                    );
                    if let Some(error) = &stats.first_error {
                        let _ = writeln!(out, "{:<14}   first error: {error}", "");
                    }
                }
                None => {
                    let why = row.unavailable.as_deref().unwrap_or("not measured");
                    let _ = writeln!(
                        out,
                        "{:<14} {:<14} {:>8} {:>9}   unavailable: {why}",
                        row.scenario, row.path, row.sessions, row.in_flight
                    );
                }
            }
        }
        let _ = writeln!(out, "tg cpu/c: toolgate's CPU time per call (us); tg cs/c: its context switches per call");
        if !self.comparisons.is_empty() {
            let _ = writeln!(out, "\nadded by toolgate (via - direct, same run, same client):");
            let _ = writeln!(
                out,
                "{:<14} {:<14} {:>8} {:>9} {:>11} {:>11} {:>11} {:>12}",
                "scenario", "path", "sessions", "in-flight", "+p50 us", "+p99 us", "+mean us", "calls/s x"
            );
            for c in &self.comparisons {
                let _ = writeln!(
                    out,
                    "{:<14} {:<14} {:>8} {:>9} {:>11.1} {:>11.1} {:>11.1} {:>12.2}",
                    c.scenario,
                    c.path,
                    c.sessions,
                    c.in_flight,
                    c.added_p50_us,
                    c.added_p99_us,
                    c.added_mean_us,
                    c.throughput_ratio
                );
            }
        }
        let _ = writeln!(out);
        match (&self.memory, &self.memory_unavailable) {
            (Some(memory), _) => {
                let mib = |kib: u64| kib as f64 / 1024.0;
                let _ = writeln!(
                    out,
                    "memory: toolgate with {} upstream(s) and {} HTTP sessions: VmRSS {:.1} MiB, VmHWM {:.1} MiB \
                     (idle {:.1} MiB; {})",
                    memory.upstreams,
                    memory.sessions,
                    mib(memory.rss_kib),
                    mib(memory.hwm_kib),
                    mib(memory.idle_rss_kib),
                    memory.how
                );
            }
            (None, Some(why)) => {
                let _ = writeln!(out, "memory: unavailable: {why}");
            }
            (None, None) => {}
        }
        match (&self.sandbox_starts, &self.sandbox_unavailable) {
            (Some(starts), _) => {
                let _ = writeln!(
                    out,
                    "sandbox: toolgate serve to its first answered call, median of {}: plain upstream {:.0} ms, \
                     sandboxed upstream {:.0} ms",
                    starts.plain_ms.len(),
                    median(&starts.plain_ms),
                    median(&starts.sandboxed_ms)
                );
            }
            (None, Some(why)) => {
                let _ = writeln!(out, "sandbox: unavailable: {why}");
            }
            (None, None) => {}
        }
        out
    }
}

/// The median of a few samples (0 for none).
fn median(samples: &[f64]) -> f64 {
    let mut sorted = samples.to_vec();
    sorted.sort_by(f64::total_cmp);
    sorted.get(sorted.len() / 2).copied().unwrap_or(0.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let samples: Vec<u64> = (1..=100).map(|n| n * 1000).collect();
        let stats = Stats::from_samples(samples, 0, 1.0, None);
        assert_eq!(stats.p50_us, 50.0);
        assert_eq!(stats.p99_us, 99.0);
        assert_eq!(stats.max_us, 100.0);
        assert_eq!(stats.mean_us, 50.5);
        assert_eq!(stats.calls_per_s, 100.0);
        let one = Stats::from_samples(vec![7000], 0, 1.0, None);
        assert_eq!((one.p50_us, one.p99_us), (7.0, 7.0));
        let none = Stats::from_samples(Vec::new(), 3, 1.0, None);
        assert_eq!((none.calls, none.errors, none.p99_us), (0, 3, 0.0));
    }
}
