//! Upstream lifecycles: one task per upstream ([`run`]) that owns its connection and its listing, and the checks a
//! listing passes before any catalog is built from it ([`listing`]), and the catalog rebuilt from the listings
//! ([`catalog`]), and a config reload's upstream changes applied ([`reload`]).
//!
//! Only an upstream's run task writes that upstream's connection and listing; everyone else asks it through
//! `UpstreamRuntime::requests` (re-list after `list_changed`, re-check pins after a person's decision). That is
//! what keeps a listing from being written back from a stale copy, and a catalog from being built from a listing
//! nobody checked. Nothing here handles client requests or decides calls.

pub(crate) mod catalog;
pub(crate) mod listing;
pub(crate) mod reload;
pub(crate) mod run;
