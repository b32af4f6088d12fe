//! The one rewrite of the shipped `deploy/haproxy.cfg` that the fleet tests (test-support's `toolgate::fleet`) and
//! the fleet benchmark (`toolgate-bench run --only fleet`) both run: the frontend bound to another address and one
//! `server` line per backend, everything else as shipped, so both measure and test the configuration operators get.
//!
//! Both crates compile this file as a module of their own (`#[path]`): the benchmark may depend on no toolgate
//! crate (tidy), and a shared text rewrite is no reason to add one. It must stay dependency-free and must not
//! panic: it answers `None` when the shipped file has no `server` line to replace.

/// The HAProxy configuration toolgate ships.
pub(crate) const SHIPPED_CONFIG: &str = include_str!("haproxy.cfg");

/// The shipped configuration with its frontend bound to `listen` and one `server` line per backend authority
/// (`toolgate-1 127.0.0.1:PORT`, ...); `None` when the shipped file has no `server` line.
pub(crate) fn haproxy_config(listen: &str, backends: &[String]) -> Option<String> {
    let mut text = String::new();
    let mut servers_written = false;
    for line in SHIPPED_CONFIG.lines() {
        let trimmed = line.trim_start();
        if trimmed.starts_with("bind ") {
            text.push_str(&format!("    bind {listen}\n"));
        } else if trimmed.starts_with("server ") {
            if !servers_written {
                for (index, backend) in backends.iter().enumerate() {
                    text.push_str(&format!("    server toolgate-{} {backend}\n", index + 1));
                }
                servers_written = true;
            }
        } else {
            text.push_str(line);
            text.push('\n');
        }
    }
    servers_written.then_some(text)
}
