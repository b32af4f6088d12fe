//! A person's login at the test OpenID provider without a browser: follows the authorization request through the
//! provider's development login (`prompt=login` with the account's subject and any password) and its consent
//! (`prompt=consent`), keeping the provider's cookies, until the provider redirects to a URL outside itself (the
//! client's redirect URI with `code` and `state`), which it returns unvisited. The console tests use it to drive
//! the authorization code flow; the browser test logs in through the same pages in Chromium.
//!
//! Plain HTTP/1.1 to the provider on loopback only; test code, never shipped.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// Most redirects and form posts one login may take (a loop in the provider would otherwise never end).
const MAX_STEPS: usize = 20;

/// Logs `account` in at the provider on `port`, starting at `authorize_url`; returns the URL the provider sends
/// the browser to once done (the redirect URI with its query), or why the login did not get there.
pub fn log_in(port: u16, authorize_url: &str, account: &str) -> Result<String, String> {
    let origin = format!("http://127.0.0.1:{port}");
    let mut jar: BTreeMap<String, String> = BTreeMap::new();
    let mut next = ("GET", authorize_url.strip_prefix(&origin).ok_or("not the provider's URL")?.to_owned(), None);
    for _ in 0..MAX_STEPS {
        let (method, path, body) = next;
        let answer = request(port, method, &path, &jar, body.as_deref())
            .map_err(|error| format!("{method} {path} at the provider: {error}"))?;
        for cookie in &answer.set_cookies {
            if let Some((name, value)) = cookie.split(';').next().and_then(|pair| pair.split_once('=')) {
                jar.insert(name.trim().to_owned(), value.to_owned());
            }
        }
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
        let prompt = if answer.body.contains("name=\"login\"") { "login" } else { "consent" };
        let form = if prompt == "login" {
            format!("prompt=login&login={account}&password=any")
        } else {
            "prompt=consent".to_owned()
        };
        let action = answer
            .body
            .split("action=\"")
            .nth(1)
            .and_then(|rest| rest.split('"').next())
            .map(|action| action.replace("&#x2F;", "/"))
            .ok_or_else(|| format!("no form on the provider's page {path}"))?;
        next = ("POST", action, Some(form));
    }
    Err("the login took too many steps".into())
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
