//! Least-outstanding-requests balancing over upstream replicas. Round robin gives a slow
//! replica a fixed share of the traffic and so a growing queue; sending each request to
//! the replica with the fewest requests in flight lets a slow one take only what it can
//! finish. A replica that refused a connection is skipped for a moment while others remain.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// How long a replica that refused a connection is passed over (if another is available).
const EJECT_FOR: Duration = Duration::from_secs(1);

/// One upstream replica: where it is and how busy it is.
pub struct Replica {
    pub authority: http::uri::Authority,
    outstanding: AtomicUsize,
    /// Milliseconds since `Replicas::epoch` before which this replica is skipped.
    ejected_until_ms: AtomicU64,
}

pub struct Replicas {
    replicas: Vec<Replica>,
    /// Rotates the scan's starting point so ties do not all land on the first replica.
    next: AtomicUsize,
    epoch: Instant,
}

/// A request's claim on a replica; released when it drops.
pub struct Pick<'a> {
    pub replica: &'a Replica,
    pub index: usize,
}

impl Drop for Pick<'_> {
    fn drop(&mut self) {
        self.replica.outstanding.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Replicas {
    /// `upstreams` must be non-empty (the config checks).
    pub fn new(upstreams: &[http::uri::Authority]) -> Self {
        Replicas {
            replicas: upstreams
                .iter()
                .map(|a| Replica {
                    authority: a.clone(),
                    outstanding: AtomicUsize::new(0),
                    ejected_until_ms: AtomicU64::new(0),
                })
                .collect(),
            next: AtomicUsize::new(0),
            epoch: Instant::now(),
        }
    }

    /// The replica with the fewest outstanding requests, preferring ones not ejected.
    pub fn pick(&self) -> Pick<'_> {
        let n = self.replicas.len();
        let index = if n == 1 {
            0
        } else {
            let start = self.next.fetch_add(1, Ordering::Relaxed);
            let now = self.now_ms();
            let loads = (0..n).map(|k| {
                let i = (start + k) % n;
                let r = &self.replicas[i];
                let ejected = r.ejected_until_ms.load(Ordering::Relaxed) > now;
                (i, ejected, r.outstanding.load(Ordering::Relaxed))
            });
            least_loaded(loads).unwrap_or(0)
        };
        let replica = &self.replicas[index];
        replica.outstanding.fetch_add(1, Ordering::Relaxed);
        Pick { replica, index }
    }

    /// The replica refused or dropped the connection: pass over it for a moment.
    pub fn eject(&self, pick: &Pick<'_>) {
        if self.replicas.len() > 1 {
            let until = self.now_ms() + EJECT_FOR.as_millis() as u64;
            pick.replica
                .ejected_until_ms
                .store(until, Ordering::Relaxed);
        }
    }

    pub fn len(&self) -> usize {
        self.replicas.len()
    }

    pub fn is_empty(&self) -> bool {
        self.replicas.is_empty()
    }

    pub fn outstanding(&self, index: usize) -> usize {
        self.replicas
            .get(index)
            .map_or(0, |r| r.outstanding.load(Ordering::Relaxed))
    }

    fn now_ms(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }
}

/// Pure choice: among `(index, ejected, outstanding)` in scan order, the least loaded
/// replica that is not ejected, or the least loaded of all when every one is ejected.
/// The first of equals wins, so the caller's rotating scan order breaks ties.
pub fn least_loaded(loads: impl Iterator<Item = (usize, bool, usize)>) -> Option<usize> {
    let mut best: Option<(bool, usize, usize)> = None;
    for (i, ejected, load) in loads {
        let better = match best {
            None => true,
            Some((b_ej, b_load, _)) => (ejected, load) < (b_ej, b_load),
        };
        if better {
            best = Some((ejected, load, i));
        }
    }
    best.map(|(_, _, i)| i)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn picks_the_least_loaded_healthy_replica() {
        let loads = [(0, false, 3), (1, false, 1), (2, true, 0)];
        assert_eq!(least_loaded(loads.into_iter()), Some(1));
        let all_ejected = [(0, true, 3), (1, true, 1)];
        assert_eq!(least_loaded(all_ejected.into_iter()), Some(1));
        let tie = [(1, false, 0), (0, false, 0)];
        assert_eq!(least_loaded(tie.into_iter()), Some(1));
    }

    #[test]
    fn a_busy_replica_is_avoided_until_it_frees_up() {
        let ups: Vec<_> = ["127.0.0.1:1", "127.0.0.1:2"]
            .iter()
            .map(|a| a.parse().unwrap())
            .collect();
        let r = Replicas::new(&ups);
        let held = r.pick();
        for _ in 0..10 {
            let p = r.pick();
            assert_ne!(p.index, held.index);
        }
        drop(held);
        assert_eq!(r.outstanding(0) + r.outstanding(1), 0);
    }
}
