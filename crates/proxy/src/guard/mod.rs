//! The guardrails the call pipeline applies: confirmation by a person ([`confirm`]), result post-processing
//! ([`results`]), audit records ([`audit`]), pin checks on listings ([`pins`]) and the tool-selection profile
//! ([`selection`]).
//!
//! Each module is one concern with one entry point; the pipeline (`crate::pipeline`) decides when each runs.

pub(crate) mod audit;
pub(crate) mod confirm;
pub(crate) mod pins;
pub(crate) mod results;
pub(crate) mod selection;
