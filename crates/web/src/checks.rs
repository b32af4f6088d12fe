//! DNS-rebinding protection: `Host` (always) and `Origin` (when present) must be loopback or configured. The rule
//! itself is `toolgate_core::rebinding`, shared with the MCP endpoint; this module reads the headers.

use axum::http::HeaderMap;
use axum::http::header::{HOST, ORIGIN};
use toolgate_core::rebinding::{host_allowed, origin_allowed};

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
