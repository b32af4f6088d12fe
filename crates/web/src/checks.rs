//! DNS-rebinding protection: `Host` (always) and `Origin` (when present) must be loopback or configured. The same
//! rule as the MCP endpoint's (`toolgate-proxy`'s `downstream/http/checks.rs`), kept here because the console
//! and the proxy never depend on each other.

use axum::http::HeaderMap;
use axum::http::header::{HOST, ORIGIN};

const LOOPBACK_HOSTS: [&str; 3] = ["localhost", "127.0.0.1", "[::1]"];

/// Why a request was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Forbidden {
    Host,
    Origin,
}

/// Checks `Host` (exactly one, or the request URI's authority) and `Origin` (at most one, when present).
pub(crate) fn check_host_and_origin(
    headers: &HeaderMap,
    authority: Option<&str>,
    allowed_hosts: &[String],
    allowed_origins: &[String],
) -> Result<(), Forbidden> {
    let mut hosts = headers.get_all(HOST).iter();
    let host = match (hosts.next(), hosts.next()) {
        (Some(value), None) => value.to_str().ok(),
        (None, _) => authority,
        (Some(_), Some(_)) => None,
    };
    if !host.is_some_and(|host| host_allowed(host, allowed_hosts)) {
        return Err(Forbidden::Host);
    }
    let mut origins = headers.get_all(ORIGIN).iter();
    match (origins.next(), origins.next()) {
        (None, _) => Ok(()),
        (Some(origin), None) if origin.to_str().is_ok_and(|origin| origin_allowed(origin, allowed_origins)) => Ok(()),
        _ => Err(Forbidden::Origin),
    }
}

/// Splits `host[:port]` (or `[v6][:port]`) into a lowercase host name and an optional port.
fn split_host_port(value: &str) -> Option<(String, Option<&str>)> {
    let (name, port) = if value.starts_with('[') {
        let end = value.find(']')?;
        let rest = &value[end + 1..];
        let port = match rest.strip_prefix(':') {
            Some(port) => Some(port),
            None if rest.is_empty() => None,
            None => return None,
        };
        (&value[..=end], port)
    } else {
        match value.split_once(':') {
            Some((name, port)) => (name, Some(port)),
            None => (value, None),
        }
    };
    let port_ok =
        port.is_none_or(|port| !port.is_empty() && port.len() <= 5 && port.bytes().all(|b| b.is_ascii_digit()));
    if name.is_empty() || !port_ok {
        return None;
    }
    Some((name.to_ascii_lowercase(), port))
}

/// Loopback by name, or an extra entry (by name when it has no port, by name and port when it has one).
fn host_allowed(value: &str, extras: &[String]) -> bool {
    let Some((name, port)) = split_host_port(value.trim()) else {
        return false;
    };
    LOOPBACK_HOSTS.contains(&name.as_str())
        || extras.iter().any(|extra| match split_host_port(extra.trim()) {
            Some((extra_name, None)) => extra_name == name,
            Some((extra_name, Some(extra_port))) => extra_name == name && Some(extra_port) == port,
            None => false,
        })
}

/// `http(s)://` a loopback host on any port, or equal to an extra entry (`:*` matches any port).
fn origin_allowed(value: &str, extras: &[String]) -> bool {
    let value = value.trim().trim_end_matches('/').to_ascii_lowercase();
    let Some((scheme, authority)) = value.split_once("://") else {
        return false;
    };
    let Some((name, _port)) = split_host_port(authority) else {
        return false;
    };
    if matches!(scheme, "http" | "https") && LOOPBACK_HOSTS.contains(&name.as_str()) {
        return true;
    }
    extras.iter().any(|extra| {
        let extra = extra.trim().trim_end_matches('/').to_ascii_lowercase();
        match extra.strip_suffix(":*") {
            Some(prefix) => value == prefix || value.strip_prefix(prefix).is_some_and(|rest| rest.starts_with(':')),
            None => extra == value,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn extras(items: &[&str]) -> Vec<String> {
        items.iter().map(|item| item.to_string()).collect()
    }

    #[test]
    fn hosts() {
        let none = extras(&[]);
        for (host, allowed) in [
            ("localhost", true),
            ("127.0.0.1:3000", true),
            ("[::1]:443", true),
            ("evil.example", false),
            ("localhost.evil.example", false),
            ("localhost:", false),
            ("[::1", false),
            ("", false),
        ] {
            assert_eq!(host_allowed(host, &none), allowed, "{host}");
        }
        let some = extras(&["console.example.com", "api.example.com:8443"]);
        assert!(host_allowed("console.example.com:9000", &some));
        assert!(host_allowed("api.example.com:8443", &some));
        assert!(!host_allowed("api.example.com:8444", &some));
    }

    #[test]
    fn origins() {
        let some = extras(&["https://app.example.com", "http://tools.example.com:*"]);
        for (origin, allowed) in [
            ("http://localhost:5173", true),
            ("http://[::1]:8080", true),
            ("http://evil.example", false),
            ("null", false),
            ("file://localhost", false),
            ("https://app.example.com/", true),
            ("https://app.example.com:8443", false),
            ("http://tools.example.com:1234", true),
            ("http://tools.example.com.evil.example", false),
        ] {
            assert_eq!(origin_allowed(origin, &some), allowed, "{origin}");
        }
    }
}
