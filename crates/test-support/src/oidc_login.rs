//! A person's login at the test OpenID provider without a browser: follows the authorization request through the
//! provider's development login (`prompt=login` with the account's subject and any password) and its consent
//! (`prompt=consent`), keeping the provider's cookies, until the provider redirects to a URL outside itself (the
//! client's redirect URI with `code` and `state`), which it returns unvisited. The console tests use it to drive
//! the authorization code flow; the browser test logs in through the same pages in Chromium. A [`ProviderBrowser`]
//! keeps its cookies across calls, so a test can see the person's session at the provider outlive a login and end
//! with an RP-initiated logout (whose confirmation page it answers).
//!
//! Plain HTTP/1.1 to the provider on loopback only; test code, never shipped.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// Most redirects and form posts one login may take (a loop in the provider would otherwise never end).
const MAX_STEPS: usize = 20;

/// Logs `account` in at the provider on `port`, starting at `authorize_url`; returns the URL the provider sends
/// the browser to once done (the redirect URI with its query), or why the login did not get there. Each call is a
/// fresh browser: no session at the provider carries over (see [`ProviderBrowser`] for one that does).
pub fn log_in(port: u16, authorize_url: &str, account: &str) -> Result<String, String> {
    ProviderBrowser::new(port).log_in(authorize_url, account).map(|login| login.redirect)
}

/// Where a login at the provider ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProviderLogin {
    /// The URL the provider sent the browser to (the client's redirect URI with `code` and `state`).
    pub redirect: String,
    /// Whether the provider showed its login form: false when the person's session there was still open.
    pub asked_to_log_in: bool,
}

/// One browser's cookies at the provider, kept across requests, so the person's session there (opened by a login,
/// ended by an RP-initiated logout) carries over from one call to the next.
#[derive(Debug, Clone)]
pub struct ProviderBrowser {
    port: u16,
    jar: BTreeMap<String, String>,
}

impl ProviderBrowser {
    /// A browser with no cookies at the provider on `port`.
    pub fn new(port: u16) -> ProviderBrowser {
        ProviderBrowser { port, jar: BTreeMap::new() }
    }

    fn origin(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Follows `authorize_url` through the login (as `account`, any password) and consent pages the provider shows,
    /// until it redirects outside itself.
    pub fn log_in(&mut self, authorize_url: &str, account: &str) -> Result<ProviderLogin, String> {
        let origin = self.origin();
        let mut asked_to_log_in = false;
        let mut next = ("GET", authorize_url.strip_prefix(&origin).ok_or("not the provider's URL")?.to_owned(), None);
        for _ in 0..MAX_STEPS {
            let (method, path, body) = next;
            let answer = self.send(method, &path, body.as_deref())?;
            if let Some(location) = answer.location {
                if location.starts_with("http") && !location.starts_with(&origin) {
                    return Ok(ProviderLogin { redirect: location, asked_to_log_in });
                }
                next = ("GET", location.strip_prefix(&origin).unwrap_or(&location).to_owned(), None);
                continue;
            }
            if answer.status != 200 {
                return Err(format!("the provider answered {} on {path}: {}", answer.status, answer.body));
            }
            let login = answer.body.contains("name=\"login\"");
            asked_to_log_in |= login;
            let form =
                if login { format!("prompt=login&login={account}&password=any") } else { "prompt=consent".into() };
            next = ("POST", form_action(&answer.body, &path)?, Some(form));
        }
        Err("the login took too many steps".into())
    }

    /// Follows the provider's logout URL (its `end_session_endpoint` with the client's parameters), confirms the
    /// logout on the page it shows, and returns where the provider then sends the browser: a URL outside it (the
    /// client's post-logout redirect URI), or the body of its own page when it has none.
    pub fn log_out(&mut self, logout_url: &str) -> Result<String, String> {
        let origin = self.origin();
        let mut next = ("GET", logout_url.strip_prefix(&origin).ok_or("not the provider's URL")?.to_owned(), None);
        for _ in 0..MAX_STEPS {
            let (method, path, body) = next;
            let answer = self.send(method, &path, body.as_deref())?;
            if let Some(location) = answer.location {
                if location.starts_with("http") && !location.starts_with(&origin) {
                    return Ok(location);
                }
                next = ("GET", location.strip_prefix(&origin).unwrap_or(&location).to_owned(), None);
                continue;
            }
            if answer.status != 200 {
                return Err(format!("the provider answered {} on {path}: {}", answer.status, answer.body));
            }
            // The confirmation page: a form with the provider's `xsrf` field, and a button that sends `logout=yes`.
            if !answer.body.contains("name=\"xsrf\"") {
                return Ok(answer.body);
            }
            let xsrf = answer
                .body
                .split("name=\"xsrf\" value=\"")
                .nth(1)
                .and_then(|rest| rest.split('"').next())
                .ok_or("no xsrf value on the provider's logout page")?
                .to_owned();
            next = ("POST", form_action(&answer.body, &path)?, Some(format!("xsrf={xsrf}&logout=yes")));
        }
        Err("the logout took too many steps".into())
    }

    fn send(&mut self, method: &str, path: &str, body: Option<&str>) -> Result<Answer, String> {
        let answer = request(self.port, method, path, &self.jar, body)
            .map_err(|error| format!("{method} {path} at the provider: {error}"))?;
        for cookie in &answer.set_cookies {
            if let Some((name, value)) = cookie.split(';').next().and_then(|pair| pair.split_once('=')) {
                // An expired cookie (the provider ending a session) leaves the jar, as a browser drops it.
                if value.is_empty() || cookie.to_ascii_lowercase().contains("expires=thu, 01 jan 1970") {
                    self.jar.remove(name.trim());
                } else {
                    self.jar.insert(name.trim().to_owned(), value.to_owned());
                }
            }
        }
        Ok(answer)
    }
}

/// The `action` of the first form on a provider page.
fn form_action(page: &str, path: &str) -> Result<String, String> {
    page.split("action=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .map(|action| action.replace("&#x2F;", "/"))
        .ok_or_else(|| format!("no form on the provider's page {path}"))
}

struct Answer {
    status: u16,
    location: Option<String>,
    set_cookies: Vec<String>,
    body: String,
}

fn request(
    port: u16,
    method: &str,
    path: &str,
    jar: &BTreeMap<String, String>,
    body: Option<&str>,
) -> std::io::Result<Answer> {
    let mut stream = TcpStream::connect(("127.0.0.1", port))?;
    stream.set_read_timeout(Some(Duration::from_secs(60)))?;
    let mut head = format!("{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n");
    if !jar.is_empty() {
        let cookies: Vec<String> = jar.iter().map(|(name, value)| format!("{name}={value}")).collect();
        head.push_str(&format!("Cookie: {}\r\n", cookies.join("; ")));
    }
    if let Some(body) = body {
        head.push_str(&format!(
            "Content-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\n",
            body.len()
        ));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes())?;
    if let Some(body) = body {
        stream.write_all(body.as_bytes())?;
    }
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw)?;
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head.split(' ').nth(1).and_then(|code| code.parse().ok()).unwrap_or(0);
    let mut answer = Answer { status, location: None, set_cookies: Vec::new(), body: body.to_owned() };
    for line in head.lines().skip(1) {
        let Some((name, value)) = line.split_once(':') else { continue };
        match name.trim().to_ascii_lowercase().as_str() {
            "location" => answer.location = Some(value.trim().to_owned()),
            "set-cookie" => answer.set_cookies.push(value.trim().to_owned()),
            _ => {}
        }
    }
    Ok(answer)
}
