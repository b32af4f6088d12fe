//! End-to-end tests of the guardrails through the `toolgate` binary: `toolgate serve --config FILE --state-dir DIR`
//! in front of the bundled demo server, driven by raw HTTP requests and by the MCP Python SDK's client, with
//! `toolgate approvals` and `toolgate audit` run against the same state directory.
//!
//! - [`big_integers`]: integers beyond 64 bits reach `approvals list`, the console, the upstream and the audit row
//!   with the digits the client sent.
//! - [`listener`]: DNS rebinding (foreign `Host` or `Origin`: 403) and callers (no or a wrong token: 401; another
//!   caller's session id: 404).
//! - [`limits`]: sessions per caller (idle ones make room first, then a 503 naming the limit), the header-read
//!   timeout, connections past the open-files limit refused with 503, `/metrics` behind a caller's token, private
//!   state files.
//! - [`inventory`]: after start the store holds every demo tool with hints, sources, risk and lint findings.
//! - [`crash`]: `kill -9` in the middle of a burst of calls leaves an intact audit chain with a `call` row for every
//!   call that was answered.
//! - [`full_disk`]: a state directory on a 2 MiB tmpfs that fills under load refuses calls visibly; when space returns
//!   the audit writer comes back without a restart and every answered call has its row.
//! - [`retention`]: `[audit] max_bytes` prunes the oldest rows in the running gateway; `audit verify` stays green
//!   from the checkpoint and over the exported files.
//! - [`reload`]: SIGHUP reloads the policy (a newly hidden tool leaves the listing) and the console's users (an added
//!   user logs in, a removed user's session ends); a broken file keeps the running policy and users.
//! - [`reload_upstreams`]: SIGHUP applies the upstreams the file adds (tools appear, `list_changed`), removes (tools
//!   unknown, calls in flight answered, waiting approvals lapsed, process gone) and changes (new arguments run), and
//!   names a setting that needs a restart.
//! - [`hostile_text`]: no command prints a raw control character from an upstream or a client; the pin review shows
//!   an appended instruction whole; no log line is forged by a newline in a tool name.
//! - [`start`]: an upstream that never answers `initialize` does not hold up the listener: a client is answered at
//!   once and sees the fast upstream's tools.
//! - [`lapses`]: a client without elicitation is told where its call waits (console and exact command); a call
//!   that timed out, was cancelled or whose session closed leaves the queue, and approving it says nothing waits.
//! - [`onboarding`]: a `pinned` upstream's waiting definitions pinned in two commands, `pins approve --upstream
//!   NAME --agreeing` (naming why each other one is left) and `--all`.
//! - [`one_truth`]: the relay, the console's inventory, `inspect`, `lint` and `prompt` give every tool of the
//!   reference servers the same enforced hints and category.
//! - [`postgres_store`]: `serve` with `[store] url_env` keeps its audit rows (naming its instance) and inventory in
//!   PostgreSQL, not in the state directory.
//! - [`verification`]: records `toolgate verify` stored tighten a trusted liar's hints and let an untrusted server's
//!   quietly verified closed-world claim count, named in `_meta`.
//! - [`url_mode`]: a 2026-07-28 client that declared URL elicitation is sent the console's page of its approval;
//!   a person approves (the retry runs once, on this process or another one sharing the store) or denies it
//!   there, and the page escapes the call; the Python SDK 2.3 client's URL callback approves on that page.
//! - [`python`]: a destructive call confirmed by elicitation, declined by elicitation, and approved through
//!   `toolgate approvals approve` while a client without elicitation waits.
//!
//! Loopback only; every child is killed when its guard drops; waits are hang guards, never timing assertions.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod big_integers;
mod crash;
mod full_disk;
mod hostile_text;
mod inventory;
mod lapses;
mod limits;
mod listener;
mod onboarding;
mod one_truth;
mod postgres_store;
mod python;
mod reload;
mod reload_upstreams;
mod retention;
mod start;
mod support;
mod url_mode;
mod verification;
