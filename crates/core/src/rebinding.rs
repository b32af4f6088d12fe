//! The DNS-rebinding rule every HTTP listener applies: which `Host` and `Origin` values a listener bound to
//! loopback accepts. Loopback names always pass; anything else must be configured.
//!
//! Pure string functions: the MCP endpoint, the metrics endpoint and the approval console extract the header
//! values themselves (each with its own response on refusal) and ask these for the verdict.

/// Host names that always count as loopback.
pub const LOOPBACK_HOSTS: [&str; 3] = ["localhost", "127.0.0.1", "[::1]"];

/// Splits `host[:port]` (or `[v6][:port]`) into a lowercase host name and an optional port; `None` when malformed
/// (empty name, empty or non-numeric port, an unclosed bracket).
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

/// A `Host` value is allowed when its name is loopback, or it matches an extra entry (by name when the entry has no
/// port, by name and port when it has one).
pub fn host_allowed(value: &str, extras: &[String]) -> bool {
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

/// An `Origin` is allowed when it is `http(s)://` a loopback host on any port, or equals an extra entry (an entry
/// ending in `:*` matches any port). Compared case-insensitively, a trailing `/` ignored.
pub fn origin_allowed(value: &str, extras: &[String]) -> bool {
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
            ("LOCALHOST:8080", true),
            ("127.0.0.1:3000", true),
            ("[::1]:443", true),
            ("[::1]", true),
            ("evil.example", false),
            ("localhost.evil.example", false),
            ("localhost:", false),
            ("localhost:123456", false),
            ("localhost:80a", false),
            ("localhost:80:80", false),
            ("127.0.0.2", false),
            ("[::1]x", false),
            ("[::1", false),
            ("", false),
        ] {
            assert_eq!(host_allowed(host, &none), allowed, "{host}");
        }
        let some = extras(&["console.example.com", "api.example.com:8443"]);
        assert!(host_allowed("console.example.com:9000", &some));
        assert!(host_allowed("api.example.com:8443", &some));
        assert!(!host_allowed("api.example.com:8444", &some));
        assert!(!host_allowed("api.example.com", &some));
    }

    #[test]
    fn origins() {
        let some = extras(&["https://app.example.com", "http://tools.example.com:*"]);
        for (origin, allowed) in [
            ("http://localhost:5173", true),
            ("https://127.0.0.1", true),
            ("http://[::1]:8080", true),
            ("http://evil.example", false),
            ("null", false),
            ("file://localhost", false),
            ("https://app.example.com/", true),
            ("HTTPS://APP.EXAMPLE.COM", true),
            ("https://app.example.com:8443", false),
            ("http://tools.example.com", true),
            ("http://tools.example.com:1234", true),
            ("http://tools.example.com.evil.example", false),
        ] {
            assert_eq!(origin_allowed(origin, &some), allowed, "{origin}");
        }
    }
}
