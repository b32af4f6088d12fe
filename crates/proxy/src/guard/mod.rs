//! The guardrails the call pipeline applies: confirmation by a person (`confirm`), result post-processing
//! (`results`), audit records (`audit`), pin checks on listings (`pins`) and the tool-selection profile
//! (`selection`), the truth about calls waiting in the approval queue (`waiting`), the sealed request state of 2026-07-28 confirmations ([`request_state`]) and
//! the round trip that asks with it (`round_trip`), or in URL mode through the console's page of a detached
//! approval (`console_round`), and the bound on authentication refusals' audit rows (`refusal_rows`).
//!
//! Each module is one concern with one entry point; the pipeline (`crate::call`) decides when each runs.

pub(crate) mod approval_quota;
pub(crate) mod audit;
pub(crate) mod confirm;
pub(crate) mod console_round;
pub(crate) mod pins;
pub(crate) mod refusal_rows;
pub(crate) mod relayed_question;
pub mod request_state;
pub(crate) mod results;
pub(crate) mod round_trip;
pub(crate) mod selection;
pub(crate) mod waiting;
