//! A real headless Chromium driven over W3C WebDriver: Debian's `chromedriver` started on a free loopback port, and
//! `fantoccini` as the client. A missing browser or driver fails the test with the install command; every wait is
//! bounded by [`HANG_GUARD`] and polls, so nothing here measures time.
//!
//! Also here: the HTTP status of the page the browser shows (the Navigation Timing entry's `responseStatus`),
//! screenshots into `$TOOLGATE_SCREENSHOTS` when set (`cargo xtask screenshots`), and a tiny "other site" server
//! whose pages auto-submit forms to the console.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use fantoccini::{Client, ClientBuilder, Locator};
use hyper_util::client::legacy::connect::HttpConnector;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

use crate::support::HANG_GUARD;

/// The window every page is rendered in (screenshots have this size).
const WINDOW: (u32, u32) = (1000, 760);

/// The first of `names` found in `PATH` or `/usr/bin`.
fn find_program(names: &[&str]) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let dirs: Vec<PathBuf> = std::env::split_paths(&path).chain([PathBuf::from("/usr/bin")]).collect();
    names.iter().flat_map(|name| dirs.iter().map(move |dir| dir.join(name))).find(|candidate| candidate.is_file())
}

/// Whether a WebDriver error only says the document changed under the command (a redirect replaced it).
pub(crate) fn changing_page(error: &fantoccini::error::CmdError) -> bool {
    error.is_stale_element_reference() || error.is_no_such_element()
}

pub(crate) fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a free loopback port");
    listener.local_addr().expect("its address").port()
}

/// A headless Chromium session; call [`Browser::close`] at the end. On drop (a failed test too) the driver's
/// process group, Chromium included, is killed, so no browser outlives its test.
pub(crate) struct Browser {
    pub(crate) client: Client,
    driver: tokio::process::Child,
    _profile: tempfile::TempDir,
}

impl Drop for Browser {
    fn drop(&mut self) {
        if let Some(group) = self.driver.id() {
            let _ = std::process::Command::new("kill").args(["-s", "KILL", "--"]).arg(format!("-{group}")).status();
        }
    }
}

impl Browser {
    /// Starts chromedriver and a fresh Chromium profile. `evil_host` resolves to 127.0.0.1 inside this browser
    /// only, so a page can be served from a non-loopback origin without touching the machine's resolver.
    pub(crate) async fn start(evil_host: &str) -> Browser {
        let hint = "install Debian's chromium and chromium-driver (`apt-get install chromium chromium-driver`, as \
                    .ci/run does)";
        let Some(chromium) = find_program(&["chromium", "chromium-browser"]) else {
            panic!("chromium is missing: {hint}")
        };
        let Some(driver) = find_program(&["chromedriver"]) else { panic!("chromedriver is missing: {hint}") };
        let port = free_port();
        let profile = tempfile::tempdir().expect("a profile directory");
        // Null stdio: Chromium inherits it, and a leftover renderer must not hold the test's pipes open.
        let driver_child = tokio::process::Command::new(&driver)
            .arg(format!("--port={port}"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            // Its own process group, which Chromium joins: one signal ends them all.
            .process_group(0)
            .spawn()
            .unwrap_or_else(|error| panic!("{} does not start: {error}", driver.display()));
        let args = vec![
            "--headless=new".to_owned(),
            "--no-sandbox".to_owned(),
            "--disable-gpu".to_owned(),
            "--disable-dev-shm-usage".to_owned(),
            "--no-first-run".to_owned(),
            "--disable-background-networking".to_owned(),
            "--disable-component-update".to_owned(),
            "--disable-sync".to_owned(),
            "--disable-features=HttpsUpgrades,HttpsFirstBalancedModeAutoEnable".to_owned(),
            format!("--window-size={},{}", WINDOW.0, WINDOW.1),
            format!("--host-resolver-rules=MAP {evil_host} 127.0.0.1"),
            format!("--user-data-dir={}", profile.path().display()),
        ];
        let capabilities = json!({
            "browserName": "chrome",
            "goog:chromeOptions": {"binary": chromium.to_string_lossy(), "args": args},
        });
        let Value::Object(capabilities) = capabilities else { unreachable!("an object literal") };
        let url = format!("http://127.0.0.1:{port}");
        let started = Instant::now();
        let client = loop {
            let attempt =
                ClientBuilder::new(HttpConnector::new()).capabilities(capabilities.clone()).connect(&url).await;
            match attempt {
                Ok(client) => break client,
                Err(error) if started.elapsed() < HANG_GUARD => {
                    let _ = error;
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                Err(error) => panic!("no WebDriver session from {} within {HANG_GUARD:?}: {error}", driver.display()),
            }
        };
        Browser { client, driver: driver_child, _profile: profile }
    }

    /// Opens `url` and waits for its document.
    pub(crate) async fn goto(&self, url: &str) {
        self.client.goto(url).await.unwrap_or_else(|error| panic!("cannot open {url}: {error}"));
    }

    /// The HTTP status of the document shown (Navigation Timing's `responseStatus`).
    pub(crate) async fn status(&self) -> u64 {
        let script =
            "const entry = performance.getEntriesByType('navigation')[0]; return entry ? entry.responseStatus : 0;";
        let value = self.client.execute(script, vec![]).await.expect("the navigation entry");
        value.as_u64().unwrap_or_default()
    }

    /// The page's visible text. A form's redirect can replace the document between finding its body and
    /// reading it (WebDriver's "stale element reference"), so the body is found again until one read holds.
    pub(crate) async fn text(&self) -> String {
        let started = Instant::now();
        loop {
            let read = match self.client.find(Locator::Css("body")).await {
                Ok(body) => body.text().await,
                Err(error) => Err(error),
            };
            match read {
                Ok(text) => return text,
                Err(error) if changing_page(&error) && started.elapsed() < HANG_GUARD => {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                Err(error) => panic!("the body's text: {error}"),
            }
        }
    }

    /// The document's URL.
    pub(crate) async fn url(&self) -> String {
        self.client.current_url().await.expect("the current URL").to_string()
    }

    /// Waits until `css` matches an element, polling without reloading the page.
    pub(crate) async fn wait_for(&self, css: &str, what: &str) -> fantoccini::elements::Element {
        let started = Instant::now();
        loop {
            if let Ok(element) = self.client.find(Locator::Css(css)).await {
                return element;
            }
            if started.elapsed() > HANG_GUARD {
                let source = self.client.source().await.unwrap_or_default();
                panic!("never saw {what} ({css}) within {HANG_GUARD:?}; the page:\n{source}");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Waits until the page's text contains `needle` (after a form submission navigates).
    pub(crate) async fn wait_for_text(&self, needle: &str) -> String {
        let started = Instant::now();
        loop {
            let text = match self.client.find(Locator::Css("body")).await {
                Ok(body) => body.text().await.unwrap_or_default(),
                Err(_) => String::new(),
            };
            if text.contains(needle) {
                return text;
            }
            assert!(started.elapsed() < HANG_GUARD, "the page never said {needle:?}; it says:\n{text}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Saves a PNG of the window as `NAME.png` in `$TOOLGATE_SCREENSHOTS`, when that is set.
    pub(crate) async fn screenshot(&self, name: &str) {
        let Some(dir) = std::env::var_os("TOOLGATE_SCREENSHOTS") else { return };
        let png = self.client.screenshot().await.expect("a screenshot");
        assert!(png.starts_with(b"\x89PNG"), "the screenshot is a PNG");
        let path = Path::new(&dir).join(format!("{name}.png"));
        std::fs::create_dir_all(Path::new(&dir)).expect("the screenshot directory");
        std::fs::write(&path, png).unwrap_or_else(|error| panic!("cannot write {}: {error}", path.display()));
    }

    /// Ends the WebDriver session (Chromium exits).
    pub(crate) async fn close(self) {
        self.client.clone().close().await.expect("the WebDriver session ends");
    }
}

/// Another web site on loopback: answers `GET PATH` with the page registered for it (anything else: 404).
pub(crate) struct OtherSite {
    pub(crate) port: u16,
}

impl OtherSite {
    pub(crate) async fn serve(pages: HashMap<String, String>) -> OtherSite {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("the other site's port");
        let port = listener.local_addr().expect("its address").port();
        let pages = Arc::new(pages);
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                let pages = Arc::clone(&pages);
                tokio::spawn(async move {
                    let mut head = Vec::new();
                    let mut byte = [0u8; 1];
                    while !head.ends_with(b"\r\n\r\n") && head.len() < 16 * 1024 {
                        match stream.read(&mut byte).await {
                            Ok(1) => head.push(byte[0]),
                            _ => return,
                        }
                    }
                    let head = String::from_utf8_lossy(&head);
                    let path = head.split(' ').nth(1).unwrap_or("/");
                    let (status, body) = match pages.get(path) {
                        Some(page) => ("200 OK", page.as_str()),
                        None => ("404 Not Found", "not found"),
                    };
                    let reply = format!(
                        "HTTP/1.1 {status}\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: {}\r\n\
                         Connection: close\r\n\r\n{body}",
                        body.len()
                    );
                    let _ = stream.write_all(reply.as_bytes()).await;
                });
            }
        });
        OtherSite { port }
    }
}

/// A page that posts a form to `action` as soon as it loads, with these hidden fields.
pub(crate) fn auto_submit_page(action: &str, fields: &[(&str, &str)]) -> String {
    let inputs: String = fields
        .iter()
        .map(|(name, value)| format!("<input type=\"hidden\" name=\"{name}\" value=\"{value}\">"))
        .collect();
    format!(
        "<!doctype html><html><body><form id=\"attack\" method=\"post\" action=\"{action}\">{inputs}</form>\
         <script>document.getElementById('attack').submit();</script></body></html>"
    )
}
