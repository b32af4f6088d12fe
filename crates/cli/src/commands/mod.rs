//! One module per `toolgate` command; each turns its arguments into an [`crate::Outcome`].

pub(crate) mod config;
pub(crate) mod infer;
pub(crate) mod inspect;
pub(crate) mod lint;
pub(crate) mod serve;
pub(crate) mod status;
