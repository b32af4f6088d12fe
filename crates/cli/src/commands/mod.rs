//! One module per `toolgate` command; each turns its arguments into an [`crate::Outcome`].

pub(crate) mod approvals;
pub(crate) mod audit;
pub(crate) mod config;
pub(crate) mod infer;
pub(crate) mod inspect;
pub(crate) mod lint;
pub(crate) mod manifest;
pub(crate) mod pins;
pub(crate) mod prompt;
pub(crate) mod serve;
pub(crate) mod status;
pub(crate) mod verify;
