//! The port guard: a Landlock rule that refuses TCP connections to toolgate's own listening ports, for a sandbox that
//! has the host's network (bubblewrap can give a server the network or none, but not "all but these ports").
//!
//! It runs as the first link of the sandbox's chain, inside toolgate's own binary (`toolgate __sandbox-port-guard
//! PORTS -- CMD ...`, dispatched before anything else starts): it restricts itself and `exec`s the rest, so the
//! rule binds every process of the sandbox and cannot be lifted. Landlock's network rules are allow-lists, so every
//! other port is allowed one by one. Only `connect` is ruled; binding and UDP are left alone.

use std::ffi::OsString;
use std::os::unix::process::CommandExt;

use landlock::{AccessNet, CompatLevel, Compatible, NetPort, Ruleset, RulesetAttr, RulesetCreatedAttr};

use crate::SandboxError;

/// The first argument that makes toolgate's binary run the port guard instead of a command.
pub const PORT_GUARD_ARG: &str = "__sandbox-port-guard";

/// The arguments after the guard program: `__sandbox-port-guard 8765,9000 --` (the command follows).
pub(crate) fn guard_args(deny_ports: &[u16]) -> Vec<String> {
    let ports: Vec<String> = deny_ports.iter().map(u16::to_string).collect();
    vec![PORT_GUARD_ARG.to_owned(), ports.join(","), "--".to_owned()]
}

/// Whether this kernel can refuse TCP connections by port (Landlock ABI 4 or later).
pub(crate) fn probe_landlock() -> Result<u32, String> {
    Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(AccessNet::ConnectTcp)
        .and_then(Ruleset::create)
        .map(|_| 4)
        .map_err(|error| format!("no Landlock TCP rules: {error}"))
}

/// Runs the port guard with the arguments after [`PORT_GUARD_ARG`] (`PORTS -- PROGRAM ARGS...`): restricts this
/// process and `exec`s the program. Returns only on failure, with the reason.
pub fn run_port_guard(mut args: impl Iterator<Item = OsString>) -> SandboxError {
    let fail = |reason: String| SandboxError::Unavailable { mechanism: "a Landlock port guard", reason };
    let Some(ports) = args.next().and_then(|ports| ports.into_string().ok()) else {
        return fail("no port list".to_owned());
    };
    let mut deny = Vec::new();
    for port in ports.split(',').filter(|port| !port.is_empty()) {
        match port.parse::<u16>() {
            Ok(port) => deny.push(port),
            Err(_) => return fail(format!("not a port: {port:?}")),
        }
    }
    if args.next().is_none_or(|separator| separator != "--") {
        return fail("expected `--` before the command".to_owned());
    }
    let Some(program) = args.next() else { return fail("no command".to_owned()) };
    if let Err(error) = restrict(&deny) {
        return fail(error.to_string());
    }
    let error = std::process::Command::new(&program).args(args).exec();
    fail(format!("cannot run {}: {error}", program.to_string_lossy()))
}

fn restrict(deny: &[u16]) -> Result<(), landlock::RulesetError> {
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(AccessNet::ConnectTcp)?
        .create()?;
    for port in 0..=u16::MAX {
        if !deny.contains(&port) {
            ruleset = ruleset.add_rule(NetPort::new(port, AccessNet::ConnectTcp))?;
        }
    }
    ruleset.restrict_self()?;
    Ok(())
}
