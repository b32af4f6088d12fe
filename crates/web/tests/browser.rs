//! Headless Chromium opens the login link and renders the pending approvals page: the cookie survives the
//! redirect, the page's forms are there, and the refresh script loads under the page's Content-Security-Policy.
//!
//! Needs Debian's `chromium` (`.ci/run` installs it); like every peer, a missing browser fails the test.

use std::path::Path;
use std::time::Duration;

use toolgate_store::Store;
use toolgate_web::ConsoleConfig;

type TestResult = Result<(), Box<dyn std::error::Error>>;

const CHROMIUM: &str = "/usr/bin/chromium";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chromium_renders_the_pending_approvals_after_login() -> TestResult {
    assert!(
        Path::new(CHROMIUM).exists(),
        "{CHROMIUM} is missing: install Debian's chromium and chromium-driver (see .ci/run)"
    );
    let dir = tempfile::tempdir()?;
    let store = Store::open(&dir.path().join("state")).await?;
    let pending = toolgate_test_support::pending_approval(
        &serde_json::json!({"path": "/tmp/report.txt"}),
        Duration::from_secs(600),
    );
    store.approvals().create(&pending).await?;
    let id = pending.id;
    let config = ConsoleConfig::loopback()?;
    let login = config.login_path();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let address = listener.local_addr()?;
    tokio::spawn(async move { axum::serve(listener, toolgate_web::router(store, config)).await });

    let profile = dir.path().join("chromium-profile");
    let run = tokio::process::Command::new(CHROMIUM)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-dev-shm-usage",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg("--virtual-time-budget=2000")
        .arg("--dump-dom")
        .arg(format!("http://{address}{login}"))
        .kill_on_drop(true)
        .output();
    let output = tokio::time::timeout(Duration::from_secs(60), run).await??;
    let dom = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "chromium failed: {}", String::from_utf8_lossy(&output.stderr));
    assert!(dom.contains("<h1>Pending approvals</h1>"), "not the pending page: {dom}");
    assert!(dom.contains("Delete file") && dom.contains("delete a file"), "{dom}");
    assert!(dom.contains("/tmp/report.txt"), "{dom}");
    assert!(dom.contains(&format!("/console/approvals/{id}/approve")), "{dom}");
    assert!(dom.contains(">Approve</button>") && dom.contains(">Deny</button>"), "{dom}");
    // The refresh script is served by toolgate and allowed by the page's Content-Security-Policy.
    assert!(dom.contains("data-refresh=\"on\""), "the refresh script did not run: {dom}");
    Ok(())
}
