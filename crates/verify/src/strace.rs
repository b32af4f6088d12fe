//! Reading `strace -f -ttt` output into the effects `verify` cares about: write opens, creations, renames,
//! removals, directories made, network and local-socket connections and programs started, each with its time, process and result.
//!
//! The trace is written by a traced program's actions, so it is untrusted input: a line that does not parse is
//! skipped, never a panic, and strings are unescaped only as far as needed. Syscalls split across two lines
//! (`<unfinished ...>` then `<... NAME resumed>`) are joined per process. Nothing here runs strace or decides what
//! an effect means for a hint (`observe.rs`, `findings.rs`).

use std::collections::HashMap;

use serde::Serialize;

/// The syscalls `verify` asks strace to record (its `-e trace=` list).
pub const TRACED: &str =
    "open,openat,openat2,creat,rename,renameat,renameat2,unlink,unlinkat,rmdir,mkdir,mkdirat,connect,execve,execveat";

/// Most lines read from one trace.
const MAX_LINES: usize = 2_000_000;

/// How a syscall ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "status", content = "errno")]
pub enum Outcome {
    /// It succeeded (or, for a non-blocking connect, is in progress).
    Done,
    /// It failed with this errno name (`EROFS`, `ECONNREFUSED`).
    Failed(String),
}

impl Outcome {
    /// True when the operating system refused it for lack of permission or a read-only file system.
    pub fn refused(&self) -> bool {
        matches!(self, Outcome::Failed(errno) if matches!(errno.as_str(), "EROFS" | "EACCES" | "EPERM"))
    }
}

/// One effect seen in the trace.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Effect {
    /// A file opened for writing (or created).
    Write {
        /// The path as the program gave it (relative to its working directory unless absolute).
        path: String,
        /// The result.
        outcome: Outcome,
    },
    /// A file or directory removed.
    Remove {
        /// The path.
        path: String,
        /// The result.
        outcome: Outcome,
    },
    /// A rename (which replaces `to` when it exists).
    Rename {
        /// The old path.
        from: String,
        /// The new path.
        to: String,
        /// The result.
        outcome: Outcome,
    },
    /// A directory made.
    MakeDirectory {
        /// The path.
        path: String,
        /// The result.
        outcome: Outcome,
    },
    /// A connection to a local (`AF_UNIX`) socket: a daemon on this machine, reachable through the read-only file
    /// system (a socket needs no write permission on its file) and the network namespace alike.
    LocalConnect {
        /// `unix:/run/docker.sock`, `unix:@abstract-name`; the path escaped (no control characters).
        address: String,
        /// The result.
        outcome: Outcome,
    },
    /// A connection to an internet address.
    Connect {
        /// `127.0.0.1:9`, `[::1]:443`.
        address: String,
        /// The result.
        outcome: Outcome,
    },
    /// A program started.
    Exec {
        /// The program's path.
        program: String,
        /// The result.
        outcome: Outcome,
    },
}

/// An effect with when and where it happened.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Event {
    /// The process id (in strace's view).
    pub pid: u32,
    /// Seconds since the epoch.
    pub time: f64,
    /// What it did.
    pub effect: Effect,
}

/// Every effect in a trace, in the order strace wrote them (a resumed syscall at its resumption).
pub fn parse(trace: &str) -> Vec<Event> {
    let mut unfinished: HashMap<u32, (f64, String)> = HashMap::new();
    let mut events = Vec::new();
    for line in trace.lines().take(MAX_LINES) {
        let Some((pid, rest)) = line.split_once(' ') else { continue };
        let Ok(pid) = pid.trim().parse::<u32>() else { continue };
        let rest = rest.trim_start();
        let Some((time, call)) = rest.split_once(' ') else { continue };
        let Ok(time) = time.parse::<f64>() else { continue };
        let call = call.trim_start();
        if let Some(head) = call.strip_suffix("<unfinished ...>") {
            unfinished.insert(pid, (time, head.trim_end().to_owned()));
            continue;
        }
        let whole = if let Some(tail) = call.strip_prefix("<... ") {
            let Some((_, tail)) = tail.split_once(" resumed>") else { continue };
            let Some((_, head)) = unfinished.remove(&pid) else { continue };
            format!("{head}{tail}")
        } else {
            call.to_owned()
        };
        if let Some(effect) = effect_of(&whole) {
            events.push(Event { pid, time, effect });
        }
    }
    events
}

fn effect_of(call: &str) -> Option<Effect> {
    let open = call.find('(')?;
    let name = &call[..open];
    if !name.bytes().all(|byte| byte.is_ascii_alphanumeric() || byte == b'_') {
        return None;
    }
    let (arguments, result) = call[open + 1..].rsplit_once(") = ")?;
    let outcome = outcome_of(result)?;
    let strings = quoted_strings(arguments);
    let first = || strings.first().cloned();
    match name {
        "open" | "openat" | "openat2" => {
            writes(arguments).then(|| Effect::Write { path: first().unwrap_or_default(), outcome })
        }
        "creat" => Some(Effect::Write { path: first()?, outcome }),
        "unlink" | "unlinkat" | "rmdir" => Some(Effect::Remove { path: first()?, outcome }),
        "mkdir" | "mkdirat" => Some(Effect::MakeDirectory { path: first()?, outcome }),
        "rename" | "renameat" | "renameat2" => {
            Some(Effect::Rename { from: first()?, to: strings.get(1).cloned()?, outcome })
        }
        "execve" | "execveat" => Some(Effect::Exec { program: first()?, outcome }),
        "connect" => match local_address_of(arguments) {
            Some(address) => Some(Effect::LocalConnect { address, outcome }),
            None => address_of(arguments).map(|address| Effect::Connect { address, outcome }),
        },
        _ => None,
    }
}

/// The outcome from the text after `) = `: `3`, `0`, `-1 EROFS (Read-only file system)`, `? <unavailable>`.
fn outcome_of(result: &str) -> Option<Outcome> {
    let mut words = result.split_whitespace();
    let value = words.next()?;
    if value == "?" {
        return None;
    }
    if value.starts_with('-') {
        let errno = words.next().filter(|errno| errno.starts_with('E'))?;
        // A non-blocking connect that has begun is an attempt under way, not a failure.
        if errno == "EINPROGRESS" {
            return Some(Outcome::Done);
        }
        return Some(Outcome::Failed(errno.to_owned()));
    }
    Some(Outcome::Done)
}

/// True when open flags ask for writing: `O_WRONLY`, `O_RDWR`, `O_CREAT`, `O_TRUNC` or `O_APPEND`.
fn writes(arguments: &str) -> bool {
    ["O_WRONLY", "O_RDWR", "O_CREAT", "O_TRUNC", "O_APPEND"].iter().any(|flag| arguments.contains(flag))
}

/// The strings quoted in an argument list, unescaped (`\"`, `\\`, `\n`, octal and hex bytes).
fn quoted_strings(arguments: &str) -> Vec<String> {
    let mut strings = Vec::new();
    let mut chars = arguments.chars();
    while let Some(c) = chars.next() {
        if c != '"' {
            continue;
        }
        let mut bytes = Vec::new();
        let mut closed = false;
        while let Some(c) = chars.next() {
            match c {
                '"' => {
                    closed = true;
                    break;
                }
                '\\' => match chars.next() {
                    Some('n') => bytes.push(b'\n'),
                    Some('t') => bytes.push(b'\t'),
                    Some('x') => {
                        let hex: String = chars.by_ref().take(2).collect();
                        bytes.push(u8::from_str_radix(&hex, 16).unwrap_or(b'?'));
                    }
                    Some(digit @ '0'..='7') => {
                        let mut value = digit.to_digit(8).unwrap_or(0);
                        for _ in 0..2 {
                            let mut peek = chars.clone();
                            match peek.next().and_then(|next| next.to_digit(8)) {
                                Some(next) => {
                                    value = value * 8 + next;
                                    chars = peek;
                                }
                                None => break,
                            }
                        }
                        bytes.push(u8::try_from(value).unwrap_or(b'?'));
                    }
                    Some(other) => {
                        let mut buffer = [0u8; 4];
                        bytes.extend_from_slice(other.encode_utf8(&mut buffer).as_bytes());
                    }
                    None => break,
                },
                other => {
                    let mut buffer = [0u8; 4];
                    bytes.extend_from_slice(other.encode_utf8(&mut buffer).as_bytes());
                }
            }
        }
        if !closed {
            break;
        }
        strings.push(String::from_utf8_lossy(&bytes).into_owned());
    }
    strings
}

/// `unix:PATH` of an `AF_UNIX` socket address (`unix:@NAME` for an abstract one, `unix:` for an unnamed one), the
/// path escaped so a hostile name cannot write control characters to a terminal; `None` for other families.
fn local_address_of(arguments: &str) -> Option<String> {
    if !arguments.contains("sa_family=AF_UNIX") {
        return None;
    }
    let Some((_, rest)) = arguments.split_once("sun_path=") else { return Some("unix:".to_owned()) };
    let (abstract_name, rest) = match rest.strip_prefix('@') {
        Some(rest) => ("@", rest),
        None => ("", rest),
    };
    let path = quoted_strings(rest).into_iter().next().unwrap_or_default();
    Some(format!("unix:{abstract_name}{}", path.escape_debug()))
}

/// `host:port` of an `AF_INET` or `AF_INET6` socket address; `None` for local (`AF_UNIX`) and other families.
fn address_of(arguments: &str) -> Option<String> {
    let port = arguments
        .split_once("_port=htons(")
        .and_then(|(_, rest)| rest.split_once(')'))
        .and_then(|(port, _)| port.parse::<u16>().ok())?;
    if arguments.contains("sa_family=AF_INET6") {
        let host = quoted_strings(arguments.split_once("inet_pton(AF_INET6,")?.1).into_iter().next()?;
        Some(format!("[{host}]:{port}"))
    } else if arguments.contains("sa_family=AF_INET") {
        let host = quoted_strings(arguments.split_once("inet_addr(")?.1).into_iter().next()?;
        Some(format!("{host}:{port}"))
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_effects_verify_needs_are_read_with_their_results() {
        let trace = r#"3934  1764160000.100000 openat(AT_FDCWD, "b.txt", O_WRONLY|O_CREAT|O_TRUNC|O_CLOEXEC, 0666) = 3
3934  1764160000.200000 openat(AT_FDCWD, "/etc/zz", O_WRONLY|O_CREAT|O_TRUNC|O_CLOEXEC, 0666) = -1 EROFS (Read-only file system)
3934  1764160000.250000 openat(AT_FDCWD, "/etc/passwd", O_RDONLY|O_CLOEXEC) = 3
3934  1764160000.300000 connect(3, {sa_family=AF_INET, sin_port=htons(9), sin_addr=inet_addr("127.0.0.1")}, 16) = -1 EINPROGRESS (Operation now in progress)
3935  1764160000.310000 connect(4, {sa_family=AF_INET6, sin6_port=htons(443), sin6_flowinfo=htonl(0), inet_pton(AF_INET6, "::1", &sin6_addr), sin6_scope_id=0}, 28) = -1 ECONNREFUSED (Connection refused)
3935  1764160000.320000 connect(5, {sa_family=AF_UNIX, sun_path="/run/x"}, 110) = -1 ENOENT (No such file or directory)
3935  1764160000.330000 connect(6, {sa_family=AF_UNIX, sun_path=@"bus\nX"}, 110) = 0
3934  1764160000.400000 unlink("a \"quoted\" name") = 0
3936  1764160000.500000 execve("/usr/bin/git", ["git", "status"], 0x5556 /* 39 vars */ <unfinished ...>
3934  1764160000.550000 renameat2(AT_FDCWD, "x.tmp", AT_FDCWD, "x", RENAME_NOREPLACE) = 0
3936  1764160000.600000 <... execve resumed>) = 0
3934  1764160000.700000 mkdir("/ro/dir", 0777) = -1 EACCES (Permission denied)
garbage line
4000 nan openat(
4001  1.0 openat(AT_FDCWD, "unterminated
4002  1.0 connect(3, {sa_family=AF_INET, sin_port=htons(99999)}, 16) = 0
4003  1.0 exit_group(0) = ?
"#;
        let effects: Vec<Effect> = parse(trace).into_iter().map(|event| event.effect).collect();
        let failed = |errno: &str| Outcome::Failed(errno.to_owned());
        assert_eq!(
            effects,
            vec![
                Effect::Write { path: "b.txt".into(), outcome: Outcome::Done },
                Effect::Write { path: "/etc/zz".into(), outcome: failed("EROFS") },
                Effect::Connect { address: "127.0.0.1:9".into(), outcome: Outcome::Done },
                Effect::Connect { address: "[::1]:443".into(), outcome: failed("ECONNREFUSED") },
                Effect::LocalConnect { address: "unix:/run/x".into(), outcome: failed("ENOENT") },
                Effect::LocalConnect { address: "unix:@bus\\nX".into(), outcome: Outcome::Done },
                Effect::Remove { path: "a \"quoted\" name".into(), outcome: Outcome::Done },
                Effect::Rename { from: "x.tmp".into(), to: "x".into(), outcome: Outcome::Done },
                Effect::Exec { program: "/usr/bin/git".into(), outcome: Outcome::Done },
                Effect::MakeDirectory { path: "/ro/dir".into(), outcome: failed("EACCES") },
            ]
        );
        assert!(failed("EROFS").refused() && !Outcome::Done.refused());
    }

    #[test]
    fn any_text_parses_without_panicking() {
        for text in ["", "\0\0", "1 2 3", "1 1.0 (", "1 1.0 openat(\"\\", "1 1.0 x() = ", "1 1.0 <... a resumed>) = 0"]
        {
            let _ = parse(text);
        }
        let octal = parse("1 1.0 unlink(\"caf\\303\\251\\x41\") = 0\n");
        assert_eq!(octal[0].effect, Effect::Remove { path: "caféA".into(), outcome: Outcome::Done });
    }
}
