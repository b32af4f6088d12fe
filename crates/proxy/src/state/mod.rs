//! What the gateway's tasks share, apart from what they do with it: the catalog snapshot and policy, the open
//! sessions, the route table, the upstream runtimes and the quarantine (in each checked listing).
//!
//! - [`shared`]: [`shared::Shared`], the parts one gateway holds (handles read as they are, mutable parts behind
//!   narrow methods).
//! - [`caller_taint`]: the taint of each caller's 2026-07-28 requests, which outlives their one-request sessions
//!   ([`caller_taint::CallerTaints`], bounded by the idle timeout and a count).
//! - [`approvals`]: the approvals calls wait on, and where a person decides them.
//! - [`held`]: the upstream calls held for a 2026-07-28 retry (`crate::bridge`), by id.
//! - [`session`]: one client session's state ([`session::SessionShared`]).
//! - [`listens`]: the open `subscriptions/listen` requests per caller and, per URI, the upstream subscription
//!   they want ([`listens::ListenRegistry`]; it decides nothing: `listen` asks it and talks to the upstream).
//! - [`routes`]: which client request an upstream message belongs to ([`routes::RouteTable`], [`routes::RouteGuard`]).
//!
//! State decides nothing and sends nothing upstream: it must never import a behaviour module (`call`, `methods`,
//! `relay`, `guard`, `lifecycle`, `upstream_events`, `intake`, `gateway`); `cargo xtask tidy` checks it.

pub(crate) mod approvals;
pub(crate) mod caller_taint;
pub(crate) mod held;
pub(crate) mod listens;
pub(crate) mod routes;
pub(crate) mod session;
pub(crate) mod shared;
