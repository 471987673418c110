//! One open client connection as the connection table sees it: whether it may be closed to
//! make room for a new one, and the signal that it was.
//!
//! A connection may be closed only while it waits for a request with none begun: freshly
//! opened and silent, or idle between requests. Closing it then loses nothing (a client
//! must expect a keep-alive connection to close while idle), whereas a connection inside a
//! request is never touched. The state is one atomic, so the connection marks itself idle
//! and busy without a lock on every request; the table claims an idle connection with a
//! compare-and-swap, and whichever side moves first wins.

use futures::task::AtomicWaker;
use std::future::Future;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::task::Poll;
use std::time::Instant;

/// Opened, no byte yet: the first to go when room is needed.
const SILENT: u8 = 0;
/// Waiting for its next request.
const IDLE: u8 = 1;
/// Inside a request: never closed to make room.
const BUSY: u8 = 2;
/// Claimed by the table: the connection must close.
const EVICTED: u8 = 3;

/// Shared between a connection's task and the table.
pub struct Presence {
    state: AtomicU8,
    /// When it last began to wait, in ms since `epoch`: the longest idle yields first.
    since_ms: AtomicU64,
    epoch: Instant,
    waker: AtomicWaker,
}

/// How eligible a connection is to be closed for room: lower goes first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Eligibility {
    /// 0 silent since it opened, 1 idle between requests.
    idle_kind: u8,
    since_ms: u64,
}

impl Presence {
    /// A connection just accepted: silent. `epoch` is shared by every connection of a table.
    pub fn new(epoch: Instant) -> Self {
        Presence {
            state: AtomicU8::new(SILENT),
            since_ms: AtomicU64::new(ms_since(epoch)),
            epoch,
            waker: AtomicWaker::new(),
        }
    }

    /// The connection waits for a request with none begun; false when it was already
    /// claimed (close).
    pub fn idle(&self) -> bool {
        if self.state.load(Ordering::Acquire) == BUSY {
            self.since_ms.store(ms_since(self.epoch), Ordering::Relaxed);
        }
        match self
            .state
            .compare_exchange(BUSY, IDLE, Ordering::SeqCst, Ordering::SeqCst)
        {
            Ok(_) => true,
            Err(now) => now != EVICTED,
        }
    }

    /// Bytes of a request arrived; false when the table claimed the connection first
    /// (close: the request was not begun on the gate's side).
    pub fn busy(&self) -> bool {
        let mut now = self.state.load(Ordering::Acquire);
        loop {
            if now == EVICTED {
                return false;
            }
            if now == BUSY {
                return true;
            }
            match self
                .state
                .compare_exchange(now, BUSY, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => return true,
                Err(seen) => now = seen,
            }
        }
    }

    /// Whether the table may claim it now, and how eagerly.
    pub fn eligibility(&self) -> Option<Eligibility> {
        let idle_kind = match self.state.load(Ordering::Acquire) {
            SILENT => 0,
            IDLE => 1,
            _ => return None,
        };
        Some(Eligibility {
            idle_kind,
            since_ms: self.since_ms.load(Ordering::Relaxed),
        })
    }

    /// Claim the connection if it still waits with no request begun, and wake it to close.
    pub fn evict(&self) -> bool {
        let claimed = [SILENT, IDLE].into_iter().any(|from| {
            self.state
                .compare_exchange(from, EVICTED, Ordering::SeqCst, Ordering::SeqCst)
                .is_ok()
        });
        if claimed {
            self.waker.wake();
        }
        claimed
    }

    pub fn is_evicted(&self) -> bool {
        self.state.load(Ordering::Acquire) == EVICTED
    }

    /// Resolves once the table has claimed the connection.
    pub fn evicted(&self) -> impl Future<Output = ()> + '_ {
        std::future::poll_fn(move |cx| {
            if self.is_evicted() {
                return Poll::Ready(());
            }
            self.waker.register(cx.waker());
            if self.is_evicted() {
                Poll::Ready(())
            } else {
                Poll::Pending
            }
        })
    }
}

fn ms_since(epoch: Instant) -> u64 {
    u64::try_from(epoch.elapsed().as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_connection_waiting_with_no_request_begun_can_be_claimed() {
        let epoch = Instant::now();
        let p = Presence::new(epoch);
        assert_eq!(p.eligibility().map(|e| e.idle_kind), Some(0), "silent");
        assert!(p.busy());
        assert_eq!(p.eligibility(), None);
        assert!(!p.evict(), "inside a request");
        assert!(p.idle());
        assert_eq!(p.eligibility().map(|e| e.idle_kind), Some(1));
        assert!(p.evict());
        assert!(p.is_evicted());
        assert!(
            !p.busy(),
            "claimed first: the bytes that came are not served"
        );
        assert!(!p.idle());
        assert!(!p.evict(), "once");
    }

    #[test]
    fn silent_connections_go_before_idle_ones_then_the_longest_waiting() {
        let silent = Eligibility {
            idle_kind: 0,
            since_ms: 50,
        };
        let idle_old = Eligibility {
            idle_kind: 1,
            since_ms: 10,
        };
        let idle_new = Eligibility {
            idle_kind: 1,
            since_ms: 40,
        };
        let mut v = [idle_new, silent, idle_old];
        v.sort();
        assert_eq!(v, [silent, idle_old, idle_new]);
    }

    #[tokio::test]
    async fn a_claim_wakes_the_waiting_connection() {
        let p = std::sync::Arc::new(Presence::new(Instant::now()));
        assert!(p.idle());
        let waiting = tokio::spawn({
            let p = p.clone();
            async move { p.evicted().await }
        });
        tokio::task::yield_now().await;
        assert!(p.evict());
        tokio::time::timeout(std::time::Duration::from_secs(5), waiting)
            .await
            .expect("woken")
            .unwrap();
    }
}
