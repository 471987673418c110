//! The service's decision logic, kept free of I/O so it can be tested exactly: the FIFO
//! queue (no shedding, no priorities), how much a request costs (cold caches, overload)
//! and when the service counts as overloaded.

use std::collections::VecDeque;
use std::time::{Duration, Instant, SystemTime};
use tokio::sync::oneshot;

/// How a queued request ended, as told to the connection still waiting for it (if any).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reply {
    /// Worked to the end.
    Served,
    /// Dropped by `POST /admin/drain`.
    Drained,
    /// Not worked on: its `x-deadline-ms` had passed (`--honour-deadline`).
    Skipped,
}

/// One queued request. The queue owns it, not the connection, so the work is done even
/// when the client has left: that is the waste a metastable failure lives on.
#[derive(Debug)]
pub struct Job {
    pub enqueued: Instant,
    /// Absolute deadline from `x-deadline-ms` (Unix epoch milliseconds), if sent.
    pub deadline: Option<SystemTime>,
    pub reply: oneshot::Sender<Reply>,
}

impl Job {
    /// Has the request's deadline passed at `now`?
    pub fn expired(&self, now: SystemTime) -> bool {
        self.deadline.is_some_and(|d| d <= now)
    }
}

/// An unbounded FIFO queue of jobs.
#[derive(Debug, Default)]
pub struct FifoQueue {
    jobs: VecDeque<Job>,
}

impl FifoQueue {
    pub fn push(&mut self, job: Job) {
        self.jobs.push_back(job);
    }

    pub fn pop(&mut self) -> Option<Job> {
        self.jobs.pop_front()
    }

    pub fn len(&self) -> usize {
        self.jobs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.jobs.is_empty()
    }

    /// Take every queued job out at once (for `POST /admin/drain`).
    pub fn drain_all(&mut self) -> Vec<Job> {
        self.jobs.drain(..).collect()
    }
}

/// The numbers that decide how much a request costs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CostModel {
    pub concurrency: usize,
    pub service_time: Duration,
    pub cold_factor: f64,
    pub overload_factor: f64,
    pub warm_after_requests: u64,
    pub client_timeout: Duration,
}

impl CostModel {
    /// Warmth after `served` requests: rises linearly from 0 to 1 over
    /// `warm_after_requests` (abandoned work warms caches too); `warmed` is set by
    /// `POST /admin/warm`.
    pub fn warm_fraction(&self, served: u64, warmed: bool) -> f64 {
        if warmed || self.warm_after_requests == 0 {
            return 1.0;
        }
        (served as f64 / self.warm_after_requests as f64).min(1.0)
    }

    /// Cost multiplier of cold caches: `cold_factor` when cold, 1 when warm, linear between.
    pub fn cold_multiplier(&self, warm_fraction: f64) -> f64 {
        1.0 + (self.cold_factor - 1.0) * (1.0 - warm_fraction.clamp(0.0, 1.0))
    }

    /// Requests per second the pool serves at this warmth when not overloaded, `slow`
    /// times slower than normal (1: normal; see `POST /admin/slow`).
    pub fn capacity(&self, warm_fraction: f64, slow: f64) -> f64 {
        let per_request =
            self.service_time.as_secs_f64() * self.cold_multiplier(warm_fraction) * slow;
        if per_request <= 0.0 {
            return f64::INFINITY;
        }
        self.concurrency as f64 / per_request
    }

    /// Overloaded while the queue holds more than the service can serve within the
    /// client timeout at its current (un-overloaded) capacity: the requests at the back
    /// are already lost, and the memory and contention they cause make everything slower.
    pub fn overloaded(&self, queue_depth: usize, warm_fraction: f64, slow: f64) -> bool {
        queue_depth as f64 > self.capacity(warm_fraction, slow) * self.client_timeout.as_secs_f64()
    }

    /// Work time of the next request.
    pub fn cost(&self, warm_fraction: f64, overloaded: bool, slow: f64) -> Duration {
        let k = if overloaded {
            self.overload_factor
        } else {
            1.0
        };
        let secs = self.service_time.as_secs_f64() * self.cold_multiplier(warm_fraction) * k * slow;
        Duration::try_from_secs_f64(secs).unwrap_or(Duration::ZERO)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn model() -> CostModel {
        CostModel {
            concurrency: 4,
            service_time: Duration::from_millis(40),
            cold_factor: 1.5,
            overload_factor: 3.0,
            warm_after_requests: 300,
            client_timeout: Duration::from_secs(2),
        }
    }

    #[test]
    fn cost_multiplies_cold_and_overload() {
        let m = model();
        assert_eq!(m.cost(1.0, false, 1.0), Duration::from_millis(40));
        assert_eq!(m.cost(0.0, false, 1.0), Duration::from_millis(60));
        assert_eq!(m.cost(1.0, true, 1.0), Duration::from_millis(120));
        assert_eq!(m.cost(0.0, true, 1.0), Duration::from_millis(180));
        assert_eq!(m.cost(0.5, false, 1.0), Duration::from_millis(50));
        // Five times slower (a bad node, a noisy neighbour): every request costs 5x.
        assert_eq!(m.cost(1.0, false, 5.0), Duration::from_millis(200));
    }

    #[test]
    fn warms_by_serving_or_by_admin() {
        let m = model();
        assert_eq!(m.warm_fraction(0, false), 0.0);
        assert_eq!(m.warm_fraction(150, false), 0.5);
        assert_eq!(m.warm_fraction(10_000, false), 1.0);
        assert_eq!(m.warm_fraction(0, true), 1.0);
    }

    #[test]
    fn overload_threshold_is_what_fits_in_the_client_timeout() {
        let m = model();
        // Warm: 100 req/s * 2 s = 200 requests fit.
        assert!(!m.overloaded(200, 1.0, 1.0));
        assert!(m.overloaded(201, 1.0, 1.0));
        // Cold: 66.7 req/s * 2 s = 133 fit.
        assert!(!m.overloaded(133, 0.0, 1.0));
        assert!(m.overloaded(134, 0.0, 1.0));
        // Five times slower: 20 req/s * 2 s = 40 fit.
        assert!(!m.overloaded(40, 1.0, 5.0));
        assert!(m.overloaded(41, 1.0, 5.0));
    }

    #[test]
    fn queue_is_fifo_and_drains_everything() {
        let mut q = FifoQueue::default();
        let mut receivers = Vec::new();
        for i in 0..3u64 {
            let (tx, rx) = oneshot::channel();
            receivers.push(rx);
            q.push(Job {
                enqueued: Instant::now(),
                deadline: Some(SystemTime::UNIX_EPOCH + Duration::from_millis(i)),
                reply: tx,
            });
        }
        let first = q.pop().expect("a job");
        assert_eq!(first.deadline, Some(SystemTime::UNIX_EPOCH));
        assert_eq!(q.drain_all().len(), 2);
        assert!(q.is_empty());
    }

    #[test]
    fn deadline_expiry() {
        let (tx, _rx) = oneshot::channel();
        let now = SystemTime::now();
        let job = Job {
            enqueued: Instant::now(),
            deadline: Some(now - Duration::from_millis(1)),
            reply: tx,
        };
        assert!(job.expired(now));
        let (tx, _rx) = oneshot::channel();
        let job = Job {
            enqueued: Instant::now(),
            deadline: None,
            reply: tx,
        };
        assert!(!job.expired(now));
    }
}
