//! A raw HTTP/1.1 client of a `toolgate serve`'s MCP endpoint: one connection per request, so a test controls every
//! header (`Host` included) and sees every byte of the answer. No HTTP library in between, no retries; reads are
//! bounded by [`HANG_GUARD`].

use std::io::{Read, Write};
use std::net::TcpStream;

use serde_json::{Value, json};

use crate::HANG_GUARD;

/// One HTTP response.
#[derive(Debug)]
pub struct Reply {
    /// The status code.
    pub status: u16,
    /// The headers, in order, as sent.
    pub headers: Vec<(String, String)>,
    /// The body (chunked transfer decoded, invalid UTF-8 replaced).
    pub body: String,
}

impl Reply {
    /// A header's value (name case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(key, _)| key.eq_ignore_ascii_case(name)).map(|(_, value)| value.as_str())
    }

    /// The JSON-RPC messages in the body: the JSON body itself, or each SSE `data:` line.
    pub fn messages(&self) -> Vec<Value> {
        if self.header("content-type").is_some_and(|kind| kind.starts_with("text/event-stream")) {
            self.body
                .lines()
                .filter_map(|line| line.strip_prefix("data:"))
                .filter_map(|data| serde_json::from_str(data.trim()).ok())
                .collect()
        } else {
            serde_json::from_str(&self.body).into_iter().collect()
        }
    }

    /// The response with this id, if the body holds it.
    pub fn response(&self, id: &Value) -> Option<Value> {
        self.messages().into_iter().find(|message| &message["id"] == id && message.get("method").is_none())
    }
}

/// POSTs `body` to `http://AUTHORITY/mcp` on a fresh connection. `headers` are added as given; `Host` defaults to
/// the authority unless `headers` sets it.
pub fn post(authority: &str, headers: &[(&str, &str)], body: &Value) -> std::io::Result<Reply> {
    post_text(authority, headers, &body.to_string())
}

/// [`post`] with the body as written, byte for byte (a number no `Value` of the test's own would keep).
pub fn post_text(authority: &str, headers: &[(&str, &str)], body: &str) -> std::io::Result<Reply> {
    let mut stream = TcpStream::connect(authority)?;
    stream.set_read_timeout(Some(HANG_GUARD))?;
    let mut request = String::from("POST /mcp HTTP/1.1\r\n");
    if !headers.iter().any(|(name, _)| name.eq_ignore_ascii_case("host")) {
        request.push_str(&format!("Host: {authority}\r\n"));
    }
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str(&format!(
        "Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n{body}",
        body.len()
    ));
    stream.write_all(request.as_bytes())?;
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw)?;
    parse_reply(&raw)
}

/// `GET /metrics` on a fresh connection with `Authorization: Bearer TOKEN` (a configured caller's).
pub fn metrics(authority: &str, token: &str) -> std::io::Result<Reply> {
    let mut stream = TcpStream::connect(authority)?;
    stream.set_read_timeout(Some(HANG_GUARD))?;
    let request = format!(
        "GET /metrics HTTP/1.1\r\nHost: {authority}\r\nAuthorization: Bearer {token}\r\nConnection: close\r\n\r\n"
    );
    stream.write_all(request.as_bytes())?;
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw)?;
    parse_reply(&raw)
}

/// The value of one sample of a `/metrics` text (`name{labels}` exactly as rendered), 0 when absent.
pub fn sample(metrics: &str, series: &str) -> u64 {
    metrics
        .lines()
        .find_map(|line| line.strip_prefix(series).and_then(|rest| rest.trim().parse::<f64>().ok()))
        .map_or(0, |value| value as u64)
}

fn parse_reply(raw: &[u8]) -> std::io::Result<Reply> {
    let invalid = |what: &str| std::io::Error::new(std::io::ErrorKind::InvalidData, what.to_owned());
    let split = raw.windows(4).position(|window| window == b"\r\n\r\n").ok_or_else(|| invalid("no header end"))?;
    let head = String::from_utf8_lossy(&raw[..split]).into_owned();
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .and_then(|line| line.split(' ').nth(1))
        .and_then(|code| code.parse().ok())
        .ok_or_else(|| invalid("no status line"))?;
    let headers: Vec<(String, String)> = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(name, value)| (name.trim().to_owned(), value.trim().to_owned()))
        .collect();
    let mut body = raw[split + 4..].to_vec();
    let chunked = headers
        .iter()
        .any(|(name, value)| name.eq_ignore_ascii_case("transfer-encoding") && value.eq_ignore_ascii_case("chunked"));
    if chunked {
        body = dechunk(&body).ok_or_else(|| invalid("bad chunked body"))?;
    }
    Ok(Reply { status, headers, body: String::from_utf8_lossy(&body).into_owned() })
}

fn dechunk(mut data: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    loop {
        let line_end = data.windows(2).position(|window| window == b"\r\n")?;
        let size_text = String::from_utf8_lossy(&data[..line_end]).into_owned();
        let size = usize::from_str_radix(size_text.split(';').next()?.trim(), 16).ok()?;
        data = &data[line_end + 2..];
        if size == 0 {
            return Some(out);
        }
        out.extend_from_slice(data.get(..size)?);
        data = data.get(size + 2..).unwrap_or_default();
    }
}

/// An MCP session over raw HTTP: initialize, then requests carrying its session id.
#[derive(Clone)]
pub struct HttpSession {
    /// `127.0.0.1:PORT`.
    pub authority: String,
    /// The `Mcp-Session-Id` the gateway gave it.
    pub id: String,
    /// Extra headers on every request (a caller's token).
    pub auth: Vec<(String, String)>,
    next: u64,
}

impl HttpSession {
    /// Initializes a session (no client capabilities) with these extra headers.
    pub fn open(authority: &str, auth: &[(&str, &str)]) -> std::io::Result<HttpSession> {
        let initialize = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "guardrails", "version": "0"}}});
        let reply = post(authority, auth, &initialize)?;
        let id = reply.header("mcp-session-id").map(str::to_owned);
        let Some(id) = id.filter(|_| reply.status == 200) else {
            return Err(std::io::Error::other(format!("initialize failed: {reply:?}")));
        };
        let auth: Vec<(String, String)> =
            auth.iter().map(|(name, value)| ((*name).to_owned(), (*value).to_owned())).collect();
        let session = HttpSession { authority: authority.to_owned(), id, auth, next: 1 };
        session.post(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))?;
        Ok(session)
    }

    /// POSTs a message with the session's headers.
    pub fn post(&self, message: &Value) -> std::io::Result<Reply> {
        self.post_text(&message.to_string())
    }

    /// POSTs a message written as text with the session's headers.
    pub fn post_text(&self, message: &str) -> std::io::Result<Reply> {
        let mut headers: Vec<(&str, &str)> =
            self.auth.iter().map(|(name, value)| (name.as_str(), value.as_str())).collect();
        headers.push(("Mcp-Session-Id", &self.id));
        headers.push(("MCP-Protocol-Version", "2025-11-25"));
        post_text(&self.authority, &headers, message)
    }

    /// Sends a request and returns its response message.
    pub fn request(&mut self, method: &str, params: Value) -> std::io::Result<Value> {
        let id = json!(self.next);
        self.next += 1;
        let reply = self.post(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))?;
        reply.response(&id).ok_or_else(|| std::io::Error::other(format!("no response to {id}: {reply:?}")))
    }
}
