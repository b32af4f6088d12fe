//! What the relay carries between clients and upstreams, under attack from an upstream (`misbehave.py
//! --mode hostile-relay`): notifications reach only the session and request they belong to, from the upstream that
//! request went to; a later upstream cannot shadow an earlier one's resources; and an upstream's words cannot pass
//! for toolgate's (`toolgate/` `_meta` keys, hint spellings that contradict the rewritten hints, instructions that
//! imitate another upstream, a sampling request asking for every server's context).
//!
//! Every case asserts what the client received. Waits are hang guards only; no test asserts how long anything
//! took.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "../support/mod.rs"]
mod support;

mod floods;
mod leaks;
mod metadata;
mod shadowing;

pub(crate) use support::message_of;
