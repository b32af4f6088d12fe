//! The route table: which client request each upstream request in flight was sent for, and which client progress
//! token each of toolgate's progress tokens stands for, so progress, log lines and server requests find their way
//! back, and nowhere else.
//!
//! A route lives exactly as long as its [`RouteGuard`]: registering returns the guard, and dropping it (however the
//! request ends: answer, refusal, timeout, cancellation, the task dropped) removes what it registered. Which request
//! an upstream message belongs to is [`owner`], a pure function of the table.
//!
//! Without an exact association (the HTTP stream a message came on, a progress token), [`owner`] names a request
//! only while every request in flight to that upstream belongs to one session and none of them was ever in flight
//! beside another session's request: a line written late for a call that has ended (after its response, on the
//! same pipe) then cannot land in another caller's call that overlapped it. When a request is registered while
//! another session's is in flight, both are marked shared for the rest of their lives ([`insert_route`]), so the
//! mark survives the other request's end. Among one session's requests the latest is named, passing over a call
//! held for its client's retry (`crate::bridge`): its upstream waits for answers toolgate holds, so what arrives
//! meanwhile is another call's, and a later call of the same client must not wait behind the held one for its
//! retry (up to `limits.held_call_timeout`). Nothing here sends anything.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use serde_json::Value;

use crate::state::session::SessionShared;

/// Where an upstream request came from: which session and which client request.
#[derive(Clone)]
pub(crate) struct CallRoute {
    pub(crate) session: Arc<SessionShared>,
    pub(crate) client_request_id: Value,
    /// The request went to an open-world source: what arrives under this route taints the session.
    pub(crate) open_world: bool,
}

/// A progress token toolgate put on an upstream request, and the client's token it stands for.
#[derive(Clone)]
pub(crate) struct ProgressRoute {
    pub(crate) session: Arc<SessionShared>,
    pub(crate) client_token: Value,
    pub(crate) client_request_id: Value,
    /// The request went to an open-world source: its progress text taints the session.
    pub(crate) open_world: bool,
}

/// The routes of every upstream request in flight.
///
/// Progress tokens are random (not a counter) and looked up with the upstream that sent the notification, so an
/// upstream can reach only its own requests' progress.
#[derive(Default)]
pub(crate) struct RouteTable {
    calls: Mutex<HashMap<(usize, u64), Routed<CallRoute>>>,
    progress: Mutex<HashMap<(usize, String), ProgressRoute>>,
}

impl RouteTable {
    /// A guard for the routes of one request to `upstream`; it registers nothing yet.
    pub(crate) fn guard(&self, upstream: usize) -> RouteGuard<'_> {
        RouteGuard { table: self, upstream, upstream_id: OnceLock::new(), progress_token: None }
    }

    /// The client request an upstream message belongs to, when one can be named for sure (see [`owner`]); by
    /// elimination a call held for its client's retry is passed over while another of its session's is running.
    pub(crate) fn owner(&self, upstream: usize, related: Option<u64>) -> Option<CallRoute> {
        let calls = self.calls.lock().ok()?;
        let held = |route: &CallRoute| route.session.bridge_is_held(&route.client_request_id);
        owner(&calls, upstream, related, held).cloned()
    }

    /// The route of one of toolgate's progress tokens, looked up with the upstream that used it.
    pub(crate) fn progress(&self, upstream: usize, token: &str) -> Option<ProgressRoute> {
        let routes = self.progress.lock().ok()?;
        routes.get(&(upstream, token.to_owned())).cloned()
    }
}

/// A request's route in the table, and whether it was ever in flight beside another session's request to the same
/// upstream (a message nothing associates may then be that session's: it is never attributed to this request by
/// elimination).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Routed<R> {
    pub(crate) route: R,
    pub(crate) shared: bool,
}

/// Adds the route of request `upstream_id` to `upstream`, marking it and every other session's request in flight to
/// that upstream as shared (`same_session` says whether two routes are one session's).
pub(crate) fn insert_route<R>(
    calls: &mut HashMap<(usize, u64), Routed<R>>,
    upstream: usize,
    upstream_id: u64,
    route: R,
    same_session: impl Fn(&R, &R) -> bool,
) {
    let mut shared = false;
    for ((owner, _), entry) in calls.iter_mut() {
        if *owner == upstream && !same_session(&entry.route, &route) {
            entry.shared = true;
            shared = true;
        }
    }
    calls.insert((upstream, upstream_id), Routed { route, shared });
}

/// The request (of `calls`, by upstream and the upstream's request id) that a message from `upstream` belongs to:
/// the one it names (`related`, an exact association), else, by elimination, the latest request in flight to that
/// upstream when none of them is shared (every one is one session's, and none was ever in flight beside another
/// session's), passing over the ones `passed_over` (calls held for their client's retry) unless every one is;
/// otherwise nobody can be named, so `None`.
pub(crate) fn owner<R>(
    calls: &HashMap<(usize, u64), Routed<R>>,
    upstream: usize,
    related: Option<u64>,
    passed_over: impl Fn(&R) -> bool,
) -> Option<&R> {
    if let Some(related) = related {
        return calls.get(&(upstream, related)).map(|entry| &entry.route);
    }
    // The latest of all, and the latest not passed over.
    let mut latest: Option<(u64, &R)> = None;
    let mut latest_running: Option<(u64, &R)> = None;
    for ((owner_upstream, upstream_id), entry) in calls {
        if *owner_upstream != upstream {
            continue;
        }
        if entry.shared {
            return None;
        }
        if latest.is_none_or(|(id, _)| *upstream_id > id) {
            latest = Some((*upstream_id, &entry.route));
        }
        if !passed_over(&entry.route) && latest_running.is_none_or(|(id, _)| *upstream_id > id) {
            latest_running = Some((*upstream_id, &entry.route));
        }
    }
    latest_running.or(latest).map(|(_, route)| route)
}

/// The routes of one upstream request; removes them when dropped.
pub(crate) struct RouteGuard<'a> {
    table: &'a RouteTable,
    upstream: usize,
    /// Set once the request is sent (and its call route registered).
    upstream_id: OnceLock<u64>,
    progress_token: Option<String>,
}

impl RouteGuard<'_> {
    /// Registers a fresh, unguessable progress token for this request standing for `route`; returns it.
    pub(crate) fn map_progress(&mut self, route: ProgressRoute) -> String {
        let token = format!("toolgate-{}", uuid::Uuid::new_v4().simple());
        if let Ok(mut routes) = self.table.progress.lock() {
            routes.insert((self.upstream, token.clone()), route);
        }
        self.progress_token = Some(token.clone());
        token
    }

    /// Registers the request under the id its upstream knows it by (once; a second id is ignored).
    pub(crate) fn register_call(&self, upstream_id: u64, route: CallRoute) {
        if self.upstream_id.set(upstream_id).is_err() {
            return;
        }
        if let Ok(mut calls) = self.table.calls.lock() {
            let same_session = |one: &CallRoute, other: &CallRoute| Arc::ptr_eq(&one.session, &other.session);
            insert_route(&mut calls, self.upstream, upstream_id, route, same_session);
        }
    }
}

impl Drop for RouteGuard<'_> {
    fn drop(&mut self) {
        if let (Some(upstream_id), Ok(mut calls)) = (self.upstream_id.get(), self.table.calls.lock()) {
            calls.remove(&(self.upstream, *upstream_id));
        }
        if let (Some(token), Ok(mut routes)) = (self.progress_token.take(), self.table.progress.lock()) {
            routes.remove(&(self.upstream, token));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    type Table = HashMap<(usize, u64), Routed<&'static str>>;

    /// Registers, in order, requests `(upstream, id, session)`.
    fn table(requests: &[(usize, u64, &'static str)]) -> Table {
        let mut calls = Table::new();
        for (upstream, id, session) in requests {
            insert_route(&mut calls, *upstream, *id, *session, |one, other| one == other);
        }
        calls
    }

    #[test]
    fn a_message_belongs_to_the_request_it_names_or_to_the_only_session_in_flight() {
        // Requests to upstream 0: 1 and 3 from session a; to upstream 1: 2 from b.
        let calls = table(&[(0, 1, "a"), (1, 2, "b"), (0, 3, "a")]);
        assert_eq!(owner(&calls, 0, Some(1), |_| false), Some(&"a"), "a related id names its request");
        assert_eq!(owner(&calls, 0, Some(2), |_| false), None, "another upstream's request id names nothing here");
        assert_eq!(owner(&calls, 1, Some(2), |_| false), Some(&"b"));
        assert_eq!(owner(&calls, 0, None, |_| false), Some(&"a"), "one session in flight: its request");
        assert_eq!(owner(&calls, 2, None, |_| false), None, "nothing in flight: nobody");
        let latest = owner(&calls, 0, None, |_| false).map(|route| std::ptr::eq(route, &calls[&(0, 3)].route));
        assert_eq!(latest, Some(true), "the latest of that session's requests");

        let mut two = calls.clone();
        insert_route(&mut two, 0, 4, "b", |one, other| one == other);
        assert_eq!(owner(&two, 0, None, |_| false), None, "two sessions in flight: nobody can be named");
        assert_eq!(owner(&two, 0, Some(4), |_| false), Some(&"b"), "but a related id still names its request");
    }

    #[test]
    fn a_held_call_is_passed_over_while_another_of_its_sessions_calls_runs() {
        // Session a's requests to upstream 0, as (session, client request): 1 running, then 2 held for its retry.
        let mut calls = HashMap::new();
        for (id, route) in [(1, ("a", "running")), (2, ("a", "held"))] {
            insert_route(&mut calls, 0, id, route, |one: &(&str, &str), other| one.0 == other.0);
        }
        let held = |route: &(&str, &str)| route.1 == "held";
        assert_eq!(owner(&calls, 0, None, held), Some(&("a", "running")), "not the later, held one");
        assert_eq!(owner(&calls, 0, None, |_| false), Some(&("a", "held")), "none held: the latest");
        assert_eq!(owner(&calls, 0, None, |_| true), Some(&("a", "held")), "all held: the latest");
        assert_eq!(owner(&calls, 0, Some(2), held), Some(&("a", "held")), "an exact association names it");
    }

    #[test]
    fn a_request_that_was_ever_in_flight_beside_another_sessions_is_never_named_by_elimination() {
        let mut calls = table(&[(0, 1, "a"), (0, 2, "b")]);
        assert!(calls.values().all(|entry| entry.shared), "both are marked");
        calls.remove(&(0, 2));
        assert_eq!(owner(&calls, 0, None, |_| false), None, "b's call ended, but a late line may still be b's");
        assert_eq!(owner(&calls, 0, Some(1), |_| false), Some(&"a"), "an exact association still holds");
        let calls = table(&[(0, 1, "a"), (1, 2, "b")]);
        assert!(calls.values().all(|entry| !entry.shared), "requests to other upstreams never share");
    }
}
