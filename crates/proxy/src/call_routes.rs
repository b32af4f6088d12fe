//! The requests toolgate has in flight to each upstream on behalf of a client, and which of them a message the
//! wire does not associate (a stdio log line, a server request) may be attributed to.
//!
//! An exact association (the HTTP stream a message came on, a progress token) is looked up with [`CallRoutes::get`].
//! Without one, [`CallRoutes::sole_owner`] names a request only while every request in flight to that upstream
//! belongs to one session and none of them was ever in flight beside another session's request: a line written
//! late for a call that has ended (after its response, on the same pipe) then cannot land in another caller's call
//! that overlapped it. When a request is registered while another session's is in flight, both are marked shared
//! for the rest of their lives, so the mark survives the other request's end. It must not route anything itself
//! (that is `routing`'s) and holds no session state beyond the route.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::gateway::CallRoute;

/// Routes of the requests in flight, by (upstream, toolgate's id of the request upstream).
#[derive(Default)]
pub(crate) struct CallRoutes {
    routes: Mutex<HashMap<(usize, u64), Entry>>,
}

struct Entry {
    route: CallRoute,
    /// Another session had a request in flight to the same upstream at some moment of this one's life: a message
    /// nothing associates may be that session's, so it is never attributed to this request by elimination.
    shared: bool,
}

impl CallRoutes {
    /// Registers the route of a request as it leaves for `upstream`.
    pub(crate) fn register(&self, upstream: usize, upstream_id: u64, route: CallRoute) {
        let Ok(mut routes) = self.routes.lock() else { return };
        let mut shared = false;
        for ((owner, _), entry) in routes.iter_mut() {
            if *owner == upstream && !Arc::ptr_eq(&entry.route.session, &route.session) {
                entry.shared = true;
                shared = true;
            }
        }
        routes.insert((upstream, upstream_id), Entry { route, shared });
    }

    /// Forgets a request when it is over.
    pub(crate) fn remove(&self, upstream: usize, upstream_id: u64) {
        if let Ok(mut routes) = self.routes.lock() {
            routes.remove(&(upstream, upstream_id));
        }
    }

    /// The route of the request `upstream_id` to `upstream` (an exact association), while it is in flight.
    pub(crate) fn get(&self, upstream: usize, upstream_id: u64) -> Option<CallRoute> {
        let routes = self.routes.lock().ok()?;
        routes.get(&(upstream, upstream_id)).map(|entry| entry.route.clone())
    }

    /// The request a message from `upstream` that nothing associates belongs to, when elimination names one for
    /// sure: every request in flight to it is one session's, and none was ever in flight beside another
    /// session's. Among several of that session's, the latest (the message reaches the right client either way).
    pub(crate) fn sole_owner(&self, upstream: usize) -> Option<CallRoute> {
        let routes = self.routes.lock().ok()?;
        let mut latest: Option<(u64, &Entry)> = None;
        for ((owner, upstream_id), entry) in routes.iter() {
            if *owner != upstream {
                continue;
            }
            if entry.shared {
                return None;
            }
            if latest.is_none_or(|(id, _)| *upstream_id > id) {
                latest = Some((*upstream_id, entry));
            }
        }
        latest.map(|(_, entry)| entry.route.clone())
    }
}
