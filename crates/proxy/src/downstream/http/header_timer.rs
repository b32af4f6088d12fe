//! The timer hyper runs a connection's header-read timeout on: one tokio timer per connection, moved forward for
//! each request, instead of a new timer per request.
//!
//! hyper arms the header-read timeout each time it starts reading a request head and drops it once the head is in.
//! With hyper-util's `TokioTimer` every request therefore registered a fresh tokio timer and cancelled it again, and
//! both take the runtime's one timer-wheel lock: two acquisitions of a process-wide mutex per HTTP request, on
//! whichever worker serves it. Here every timer hyper asks a connection for shares that connection's one tokio
//! `Sleep`: a later deadline only moves the registered timer's expiry forward (an atomic store; the wheel re-files
//! it when the old expiry comes), so a busy keep-alive connection touches the wheel about once per timeout period.
//! The timeout means exactly what it meant: a head not complete by its deadline ends the connection. Nothing here
//! knows HTTP; it only keeps time for hyper.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use tokio::time::Sleep;

/// One connection's timer: every sleep it hands out is served by one shared tokio timer.
#[derive(Clone, Default)]
pub(super) struct ConnectionTimer {
    /// Created at the first poll (inside the runtime), then only moved; dropped with the connection.
    shared: Arc<Mutex<Option<Pin<Box<Sleep>>>>>,
}

impl ConnectionTimer {
    pub(super) fn new() -> ConnectionTimer {
        ConnectionTimer::default()
    }
}

impl hyper::rt::Timer for ConnectionTimer {
    fn sleep(&self, duration: Duration) -> Pin<Box<dyn hyper::rt::Sleep>> {
        self.sleep_until(self.now() + duration)
    }

    fn sleep_until(&self, deadline: Instant) -> Pin<Box<dyn hyper::rt::Sleep>> {
        Box::pin(SharedSleep { shared: Arc::clone(&self.shared), deadline: deadline.into() })
    }

    fn now(&self) -> Instant {
        // tokio's clock, as hyper-util's timer reads it, so a test runtime with paused time stays consistent.
        tokio::time::Instant::now().into_std()
    }
}

/// One deadline on the connection's shared timer.
struct SharedSleep {
    shared: Arc<Mutex<Option<Pin<Box<Sleep>>>>>,
    deadline: tokio::time::Instant,
}

impl Future for SharedSleep {
    type Output = ();

    fn poll(self: Pin<&mut Self>, context: &mut Context<'_>) -> Poll<()> {
        let deadline = self.deadline;
        // One connection polls one head at a time: this lock is never contended.
        let mut shared = self.shared.lock().unwrap_or_else(PoisonError::into_inner);
        let sleep = shared.get_or_insert_with(|| Box::pin(tokio::time::sleep_until(deadline)));
        if sleep.deadline() != deadline {
            // Later than before (the usual case): tokio moves the registered expiry without its wheel lock.
            sleep.as_mut().reset(deadline);
        }
        sleep.as_mut().poll(context)
    }
}

impl hyper::rt::Sleep for SharedSleep {}

#[cfg(test)]
mod tests {
    use super::*;
    use hyper::rt::Timer;

    /// Bounds only from below (a timer never fires before its deadline) or generously from above.
    #[tokio::test]
    async fn each_deadline_holds_on_the_shared_timer() {
        let timer = ConnectionTimer::new();
        let mut first = timer.sleep(Duration::from_millis(200));
        assert!(tokio::time::timeout(Duration::from_millis(1), first.as_mut()).await.is_err(), "registered");
        drop(first);
        tokio::time::sleep(Duration::from_millis(100)).await;
        // A later head's deadline moves the shared timer forward: it does not end at the first one's deadline.
        let started = Instant::now();
        let second = timer.sleep(Duration::from_millis(300));
        assert!(tokio::time::timeout(Duration::from_secs(10), second).await.is_ok());
        assert!(started.elapsed() >= Duration::from_millis(300), "ended after {:?}", started.elapsed());
        // A deadline earlier than the one the shared timer holds is honoured too.
        let mut third = timer.sleep(Duration::from_secs(600));
        assert!(tokio::time::timeout(Duration::from_millis(1), third.as_mut()).await.is_err());
        drop(third);
        let fourth = timer.sleep(Duration::from_millis(50));
        assert!(tokio::time::timeout(Duration::from_secs(10), fourth).await.is_ok());
    }
}
