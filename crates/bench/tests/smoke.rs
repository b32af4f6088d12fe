//! Smoke test of `toolgate-bench run`: every scenario runs against the debug toolgate with a tiny number of calls
//! and reports sane figures (every call succeeded, 0 < p50 <= p99, a comparison for every relayed path, a memory
//! reading). It asserts no time thresholds: debug builds on a shared machine say nothing about performance.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::PathBuf;
use std::process::Command;

use serde_json::Value;

/// The toolgate binary of the same build, next to this test's directory (`target/debug/toolgate`).
fn toolgate() -> PathBuf {
    let exe = std::env::current_exe().unwrap_or_default();
    let dir = exe.parent().and_then(|deps| deps.parent()).map(PathBuf::from).unwrap_or_default();
    let toolgate = dir.join(format!("toolgate{}", std::env::consts::EXE_SUFFIX));
    assert!(
        toolgate.exists(),
        "{} is missing: build it first with `cargo build -p toolgate` (or run `cargo test --workspace`)",
        toolgate.display()
    );
    toolgate
}

#[test]
fn every_scenario_runs_and_reports_sane_numbers() {
    let output = Command::new(env!("CARGO_BIN_EXE_toolgate-bench"))
        .args(["run", "--json", "--calls", "40", "--warmup", "4", "--in-flight", "1,3"])
        .args(["--sessions", "3", "--session-in-flight", "2", "--many-calls", "60"])
        .args(["--memory-sessions", "6", "--memory-upstreams", "2"])
        .arg("--toolgate")
        .arg(toolgate())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "toolgate-bench run failed: {stderr}");
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();

    let rows = report["rows"].as_array().unwrap();
    // stdio: 2 paths x 2 levels; http: 3 paths x 2 levels; http-sessions: 3 paths.
    assert_eq!(rows.len(), 4 + 6 + 3, "{report:#}");
    for row in rows {
        let stats = &row["stats"];
        assert!(stats.is_object(), "not measured: {row}");
        let calls = if row["scenario"] == "http-sessions" { 60 } else { 40 };
        assert_eq!(stats["calls"], calls, "{row}");
        assert_eq!(stats["errors"], 0, "{row}");
        let (p50, p99, max) = (f(&stats["p50_us"]), f(&stats["p99_us"]), f(&stats["max_us"]));
        assert!(0.0 < p50 && p50 <= p99 && p99 <= max, "{row}");
        assert!(f(&stats["mean_us"]) > 0.0 && f(&stats["calls_per_s"]) > 0.0, "{row}");
        let relayed = row["path"] != "direct";
        assert_eq!(stats.get("toolgate_cpu_us_per_call").is_some(), relayed, "{row}");
    }

    let comparisons = report["comparisons"].as_array().unwrap();
    assert_eq!(comparisons.len(), 2 + 4 + 2, "{report:#}");
    for comparison in comparisons {
        assert!(f(&comparison["throughput_ratio"]) > 0.0, "{comparison}");
    }

    let memory = &report["memory"];
    assert!(memory.is_object(), "no memory reading: {report:#}");
    assert_eq!(memory["sessions"], 6);
    let (rss, hwm) = (f(&memory["rss_kib"]), f(&memory["hwm_kib"]));
    assert!(0.0 < rss && rss <= hwm, "{memory}");
}

fn f(value: &Value) -> f64 {
    value.as_f64().unwrap_or_else(|| panic!("not a number: {value}"))
}

#[test]
fn the_sandbox_scenario_reports_start_times_and_latency() {
    let output = Command::new(env!("CARGO_BIN_EXE_toolgate-bench"))
        .args(["run", "--json", "--only", "sandbox", "--calls", "20", "--warmup", "2", "--in-flight", "1"])
        .arg("--toolgate")
        .arg(toolgate())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "toolgate-bench run failed: {stderr}");
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    let rows = report["rows"].as_array().unwrap();
    let paths: Vec<&str> = rows.iter().map(|row| row["path"].as_str().unwrap()).collect();
    assert_eq!(paths, ["direct", "toolgate/stdio", "toolgate/sandboxed"], "{report:#}");
    for row in rows {
        assert_eq!(row["stats"]["errors"], 0, "{row}");
    }
    let starts = &report["sandbox_starts"];
    for kind in ["plain_ms", "sandboxed_ms"] {
        let samples = starts[kind].as_array().unwrap();
        assert!(samples.len() == 5 && samples.iter().all(|ms| f(ms) > 0.0), "{report:#}");
    }
}
