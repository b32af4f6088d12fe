//! The shape rules for single values (names, prefixes, URLs, headers, commands, addresses), as pure functions.
//!
//! Each returns `Err(message)` with what is wrong and, when there is one, the fix; callers add the position and the
//! upstream's name. Nothing here reads the environment or the file system, and no rule silently rewrites a value
//! the user wrote: a config says exactly what runs.

use std::net::{Ipv4Addr, SocketAddr};

/// Longest upstream name and prefix.
pub(crate) const MAX_NAME_CHARS: usize = 32;

/// Upstream names and prefixes: 1 to 32 characters of `[A-Za-z0-9_-]`.
pub(crate) fn check_name(what: &str, value: &str) -> Result<(), String> {
    if value.is_empty() {
        return Err(format!("{what} is empty"));
    }
    if value.chars().count() > MAX_NAME_CHARS {
        return Err(format!("{what} \"{value}\" is longer than {MAX_NAME_CHARS} characters"));
    }
    if !value.chars().all(is_name_char) {
        let suggestion = sanitize_name(value);
        return Err(format!("{what} \"{value}\" may only contain A-Z, a-z, 0-9, `_` and `-` (try \"{suggestion}\")"));
    }
    Ok(())
}

fn is_name_char(character: char) -> bool {
    character.is_ascii_alphanumeric() || character == '_' || character == '-'
}

/// `value` with every character outside `[A-Za-z0-9_-]` replaced by `_`, cut to 32 characters (never empty).
pub(crate) fn sanitize_name(value: &str) -> String {
    let sanitized: String = value
        .chars()
        .map(|character| if is_name_char(character) { character } else { '_' })
        .take(MAX_NAME_CHARS)
        .collect();
    if sanitized.is_empty() { "server".to_owned() } else { sanitized }
}

/// A stdio `command`: not empty, and not a shell command line when no `args` were given.
pub(crate) fn check_command(command: &str, has_args: bool) -> Result<(), String> {
    if command.trim().is_empty() {
        return Err("`command` is empty".to_owned());
    }
    if !has_args && command.contains(char::is_whitespace) {
        let mut words = command.split_whitespace();
        let program = words.next().unwrap_or_default();
        let args: Vec<String> = words.map(toml_string).collect();
        return Err(format!(
            "`command` {} contains spaces and toolgate runs no shell: write command = {} and args = [{}] \
             (or args = [] if the program's path really contains spaces)",
            toml_string(command),
            toml_string(program),
            args.join(", ")
        ));
    }
    Ok(())
}

/// A Streamable HTTP upstream URL: `http` or `https`, a host, no credentials in it. Returns the host.
pub(crate) fn check_url(url: &str) -> Result<&str, String> {
    if url.contains(char::is_whitespace) {
        return Err(format!("url \"{url}\" contains whitespace"));
    }
    let Some((scheme, rest)) = url.split_once("://") else {
        return Err(format!("url \"{url}\" must start with http:// or https://"));
    };
    if !scheme.eq_ignore_ascii_case("http") && !scheme.eq_ignore_ascii_case("https") {
        let hint = if scheme.eq_ignore_ascii_case("ws") || scheme.eq_ignore_ascii_case("wss") {
            " (toolgate speaks Streamable HTTP, not WebSocket)"
        } else {
            ""
        };
        return Err(format!("url scheme `{scheme}` is not supported: use http or https{hint}"));
    }
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    if authority.contains('@') {
        return Err("url contains credentials (`user:password@`): use `headers` or `bearer_token_env`".to_owned());
    }
    let host = host_of(authority);
    if host.is_empty() {
        return Err(format!("url \"{url}\" has no host"));
    }
    Ok(host)
}

/// The host part of `host[:port]` or `[v6][:port]`, without brackets.
fn host_of(authority: &str) -> &str {
    if let Some(rest) = authority.strip_prefix('[') {
        return rest.split(']').next().unwrap_or_default();
    }
    authority.split(':').next().unwrap_or_default()
}

/// True for `localhost`, `127.x.y.z` and `::1`.
pub(crate) fn is_loopback_host(host: &str) -> bool {
    host.eq_ignore_ascii_case("localhost")
        || host.parse::<std::net::IpAddr>().is_ok_and(|address| address.is_loopback())
}

/// Why `url` is not an `https://` URL, or an `http://` one on loopback: the console's, its identity provider's and
/// OAuth addresses, where a session, an ID token or a code travels.
pub(crate) fn check_secure_url(url: &str) -> Result<(), &'static str> {
    let (secure, rest) = if let Some(rest) = url.strip_prefix("https://") {
        (true, rest)
    } else if let Some(rest) = url.strip_prefix("http://") {
        (false, rest)
    } else {
        return Err("must be an https:// URL (http:// only on loopback)");
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let host = match authority.strip_prefix('[') {
        Some(bracketed) => bracketed.split(']').next().unwrap_or_default(),
        None => authority.rsplit_once(':').map_or(authority, |(host, _)| host),
    };
    if host.is_empty() {
        return Err("has no host");
    }
    if !secure && !is_loopback_host(host) {
        return Err("must use https:// (http:// only on loopback: the ID token and code would travel in the clear)");
    }
    Ok(())
}

/// Headers toolgate sets itself on every upstream request; a config may not override them.
const MANAGED_HEADERS: [&str; 6] =
    ["accept", "content-type", "content-length", "host", "mcp-session-id", "mcp-protocol-version"];

/// An HTTP header name (an RFC 9110 token) that toolgate does not manage itself.
pub(crate) fn check_header_name(name: &str) -> Result<(), String> {
    let is_token_char = |character: char| character.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(character);
    if name.is_empty() || !name.chars().all(is_token_char) {
        return Err(format!("header name \"{name}\" is not a valid HTTP header name"));
    }
    if MANAGED_HEADERS.contains(&name.to_ascii_lowercase().as_str()) {
        return Err(format!("header `{name}` is set by toolgate itself and cannot be configured"));
    }
    Ok(())
}

/// An HTTP header value: visible ASCII, spaces and tabs (so no line breaks).
pub(crate) fn is_header_value(value: &str) -> bool {
    value.chars().all(|character| character == '\t' || (' '..='~').contains(&character))
}

/// An environment variable name as shells write it.
pub(crate) fn check_env_var_name(name: &str) -> Result<(), String> {
    let mut characters = name.chars();
    let first_ok = characters.next().is_some_and(|first| first.is_ascii_alphabetic() || first == '_');
    if !first_ok || !characters.all(|character| character.is_ascii_alphanumeric() || character == '_') {
        return Err(format!("\"{name}\" is not an environment variable name (letters, digits and `_`)"));
    }
    Ok(())
}

/// A listener `bind` address; `localhost` means 127.0.0.1.
pub(crate) fn parse_bind(bind: &str) -> Result<SocketAddr, String> {
    if let Some(Ok(port)) = bind.strip_prefix("localhost:").map(str::parse::<u16>) {
        return Ok(SocketAddr::from((Ipv4Addr::LOCALHOST, port)));
    }
    bind.parse::<SocketAddr>()
        .map_err(|_| format!("`bind` \"{bind}\" is not an address with a port, like 127.0.0.1:8765 or [::1]:8765"))
}

/// The HTTP listener's endpoint path.
pub(crate) fn check_endpoint_path(path: &str) -> Result<(), String> {
    if !path.starts_with('/') {
        return Err(format!("`path` \"{path}\" must start with `/`"));
    }
    if path.contains(|character: char| character.is_whitespace() || character == '?' || character == '#') {
        return Err(format!("`path` \"{path}\" may not contain whitespace, `?` or `#`"));
    }
    Ok(())
}

/// An `Origin` value: `scheme://host[:port]`, nothing after it.
pub(crate) fn check_origin(origin: &str) -> Result<(), String> {
    if origin == "*" {
        return Err("`*` would accept every web page: list the origins explicitly".to_owned());
    }
    let Some((scheme, authority)) = origin.split_once("://") else {
        return Err(format!("origin \"{origin}\" must look like https://host or http://host:port"));
    };
    let scheme_ok = scheme.chars().next().is_some_and(|first| first.is_ascii_alphabetic())
        && scheme.chars().all(|character| character.is_ascii_alphanumeric() || "+.-".contains(character));
    if !scheme_ok || authority.is_empty() || authority.contains(char::is_whitespace) {
        return Err(format!("origin \"{origin}\" must look like https://host or http://host:port"));
    }
    if authority.contains('/') {
        let trimmed = format!("{scheme}://{}", authority.split('/').next().unwrap_or_default());
        return Err(format!("origin \"{origin}\" has a path; an origin is only scheme, host and port (\"{trimmed}\")"));
    }
    Ok(())
}

/// A `Host` value: `host` or `host:port`, no scheme.
pub(crate) fn check_host(host: &str) -> Result<(), String> {
    if host == "*" {
        return Err("`*` would disable DNS-rebinding protection: list the host names explicitly".to_owned());
    }
    if host.is_empty()
        || host.contains("://")
        || host.contains(|character: char| character.is_whitespace() || character == '/')
    {
        return Err(format!("host \"{host}\" must be a host name with an optional port, like example.com:8765"));
    }
    Ok(())
}

/// `value` as a TOML basic string, quoted and escaped.
pub(crate) fn toml_string(value: &str) -> String {
    let mut quoted = String::with_capacity(value.len() + 2);
    quoted.push('"');
    for character in value.chars() {
        match character {
            '"' => quoted.push_str("\\\""),
            '\\' => quoted.push_str("\\\\"),
            '\n' => quoted.push_str("\\n"),
            '\t' => quoted.push_str("\\t"),
            '\r' => quoted.push_str("\\r"),
            control if control.is_control() => quoted.push_str(&format!("\\u{:04X}", u32::from(control))),
            other => quoted.push(other),
        }
    }
    quoted.push('"');
    quoted
}

/// `key` bare when TOML allows it, quoted otherwise.
pub(crate) fn toml_key(key: &str) -> String {
    if !key.is_empty() && key.chars().all(is_name_char) { key.to_owned() } else { toml_string(key) }
}
