//! The per-call context of a `tools/call`, built once by `call::call_tool` and handed to each phase that needs more
//! than the value the previous phase gave it (`call::ask`, and `guard::confirm` under it): who asks, which request,
//! and its cancellation. Data only: it imports nothing of the phases, so the guards below `call` can take it
//! without an import circle, and it holds nothing about how the call went (that is the `Trail`'s).

use std::sync::Arc;

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::state::session::SessionShared;
use crate::state::shared::Shared;

/// The per-call context, built once: who asks, which request, and its cancellation.
#[derive(Clone, Copy)]
pub(crate) struct CallContext<'a> {
    pub(crate) gateway: &'a Arc<Shared>,
    pub(crate) session: &'a Arc<SessionShared>,
    /// The client's id of the request.
    pub(crate) id: &'a Value,
    /// Cancelled when the client cancels the call, its session closes or the gateway stops.
    pub(crate) cancel: &'a CancellationToken,
}
