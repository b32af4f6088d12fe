//! The approval console of one process, over raw HTTP as a browser would use it: log in with a console user's
//! token, read a page, post a form with the page's CSRF token.

use std::io::{Read, Write};
use std::net::TcpStream;

use toolgate_test_support::HANG_GUARD;

/// A console user's token; [`USER_CONFIG`] names it by its SHA-256.
pub(crate) const REVIEWER: &str = "reviewer-fleet-console-bb67ae8584caa73b";

/// The `[[console.user]]` table for [`REVIEWER`].
pub(crate) fn user_config() -> String {
    format!(
        "[[console.user]]\nname = \"reviewer\"\ntoken_sha256 = \"{}\"\n",
        toolgate_core::fingerprint::digest_bytes(REVIEWER.as_bytes())
    )
}

/// A logged-in console session on one process.
pub(crate) struct Console {
    authority: String,
    cookie: String,
}

impl Console {
    /// Logs in to the console of the process at `authority`.
    pub(crate) fn login(authority: &str) -> Console {
        let answer = request(authority, "POST", "/console/login", None, &format!("token={REVIEWER}"));
        let cookie = answer
            .lines()
            .take_while(|line| !line.is_empty())
            .filter_map(|line| line.split_once(':'))
            .find(|(name, _)| name.eq_ignore_ascii_case("set-cookie"))
            .and_then(|(_, value)| value.trim().split(';').next().map(str::to_owned))
            .unwrap_or_else(|| panic!("the console login sets a cookie:\n{answer}"));
        Console { authority: authority.to_owned(), cookie }
    }

    /// The same cookie sent to the process at `authority` (a balancer without affinity does this).
    pub(crate) fn at(&self, authority: &str) -> Console {
        Console { authority: authority.to_owned(), cookie: self.cookie.clone() }
    }

    /// This session with another cookie, as a browser could send it.
    pub(crate) fn with_cookie(&self, cookie: String) -> Console {
        Console { authority: self.authority.clone(), cookie }
    }

    /// The `name=value` cookie this session sends.
    pub(crate) fn cookie(&self) -> &str {
        &self.cookie
    }

    /// The whole answer (head and body) to `GET path`.
    pub(crate) fn get(&self, path: &str) -> String {
        request(&self.authority, "GET", path, Some(&self.cookie), "")
    }

    /// Posts `fields` (form-encoded) to `path`; the whole answer.
    pub(crate) fn post(&self, path: &str, fields: &[(String, String)]) -> String {
        let body: Vec<String> =
            fields.iter().map(|(name, value)| format!("{}={}", encode(name), encode(value))).collect();
        request(&self.authority, "POST", path, Some(&self.cookie), &body.join("&"))
    }
}

/// The hidden fields of the first form in `page` whose action is `action`, in order.
pub(crate) fn form_fields(page: &str, action: &str) -> Vec<(String, String)> {
    let start = page.find(&format!("action=\"{action}\"")).unwrap_or_else(|| panic!("no form to {action}:\n{page}"));
    let form = &page[start..page[start..].find("</form>").map_or(page.len(), |end| start + end)];
    form.split("<input type=\"hidden\" ")
        .skip(1)
        .filter_map(|input| {
            let name = input.split("name=\"").nth(1)?.split('"').next()?;
            let value = input.split("value=\"").nth(1)?.split('"').next()?;
            Some((name.to_owned(), value.replace("&amp;", "&")))
        })
        .collect()
}

/// The status code of a raw answer.
pub(crate) fn status_of(answer: &str) -> u16 {
    answer.split(' ').nth(1).and_then(|code| code.parse().ok()).unwrap_or(0)
}

fn encode(text: &str) -> String {
    text.bytes()
        .map(|byte| match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (byte as char).to_string(),
            _ => format!("%{byte:02X}"),
        })
        .collect()
}

fn request(authority: &str, method: &str, path: &str, cookie: Option<&str>, body: &str) -> String {
    let mut stream = TcpStream::connect(authority).expect("connect to the console");
    stream.set_read_timeout(Some(HANG_GUARD)).expect("read timeout");
    let cookie = cookie.map(|cookie| format!("Cookie: {cookie}\r\n")).unwrap_or_default();
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: {authority}\r\n{cookie}Content-Type: application/x-www-form-urlencoded\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).expect("send the request");
    let mut raw = String::new();
    stream.read_to_string(&mut raw).expect("read the answer");
    raw
}
