//! The service's decision logic, kept free of I/O so it can be tested exactly: the FIFO
//! queue (no shedding, no priorities), what a drain that keeps the answerable requests
//! keeps of it, how much a request costs (cold caches, overload) and when the service
//! counts as overloaded.

use crate::platform::admin::answerable;
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
    /// Kept by a drain that keeps the answerable requests ([`FifoQueue::drain_keeping`]):
    /// promised an answer before its client's deadline.
    pub kept: bool,
}

impl Job {
    /// A request queued now (`enqueued`), not kept by any drain yet.
    pub fn new(
        enqueued: Instant,
        deadline: Option<SystemTime>,
        reply: oneshot::Sender<Reply>,
    ) -> Job {
        Job {
            enqueued,
            deadline,
            reply,
            kept: false,
        }
    }

    /// A request a drain kept that is answered only now, when its client no longer waits
    /// (it left, or its deadline passed): the drain's promise broken, and its client
    /// back a retry delay later.
    pub fn kept_late(&self, now: Moment, client_timeout: Duration) -> bool {
        self.kept && self.waits_for(now, client_timeout).is_none()
    }

    /// Has the request's deadline passed at `now`?
    pub fn expired(&self, now: SystemTime) -> bool {
        self.deadline.is_some_and(|d| d <= now)
    }

    /// How long its client still waits: until its `x-deadline-ms`, or `client_timeout`
    /// after it was queued when it sent none; `None` once that has passed or the client
    /// has hung up (its connection's handler, holding the receiver, is dropped with the
    /// connection).
    pub fn waits_for(&self, now: Moment, client_timeout: Duration) -> Option<Duration> {
        if self.reply.is_closed() {
            return None;
        }
        let left = match self.deadline {
            Some(d) => d.duration_since(now.wall).ok()?,
            None => (self.enqueued + client_timeout).checked_duration_since(now.instant)?,
        };
        (!left.is_zero()).then_some(left)
    }
}

/// One moment on both clocks a job's deadline may be on: `x-deadline-ms` is wall-clock
/// time, the fallback (queued + the client timeout) monotonic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Moment {
    pub instant: Instant,
    pub wall: SystemTime,
}

impl Moment {
    pub fn now() -> Moment {
        Moment {
            instant: Instant::now(),
            wall: SystemTime::now(),
        }
    }
}

/// What a drain that keeps the answerable requests needs to know of the service at the
/// drain: the jobs are served in FIFO order on the first server free, each at `cost`.
#[derive(Debug, Clone, PartialEq)]
pub struct Answerable {
    pub now: Moment,
    /// Deadline of a job that came without `x-deadline-ms`, counted from its queueing.
    pub client_timeout: Duration,
    /// The replica's cost of a request now, not overloaded.
    pub cost: Duration,
    /// Per server of the pool, how long until it is free (zero when idle).
    pub free_in: Vec<Duration>,
}

impl Answerable {
    /// The service at `now`: each job holds its server its `cost` and the `overrun`
    /// measured so far, and each busy server (`busy_until`: its job's start plus its cost)
    /// is free that overrun later too.
    pub fn at(
        now: Moment,
        client_timeout: Duration,
        cost: Duration,
        overrun: Overrun,
        busy_until: &[Option<Instant>],
    ) -> Answerable {
        let over = overrun.mean();
        Answerable {
            now,
            client_timeout,
            cost: cost + over,
            free_in: busy_until
                .iter()
                .map(|b| {
                    b.map_or(Duration::ZERO, |end| {
                        (end + over).saturating_duration_since(now.instant)
                    })
                })
                .collect(),
        }
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

    /// Take out every queued job but the youngest ones whose clients still wait and that
    /// the service answers before their deadlines ([`answerable`]); those stay queued in
    /// their order. The jobs whose clients have gone or whose deadlines have passed are
    /// taken out wherever they stand, so they neither hold a place nor count as ahead.
    pub fn drain_keeping(&mut self, at: &Answerable) -> Vec<Job> {
        let waits: Vec<Option<Duration>> = self
            .jobs
            .iter()
            .map(|j| j.waits_for(at.now, at.client_timeout))
            .collect();
        let deadlines: Vec<f64> = waits.iter().flatten().map(Duration::as_secs_f64).collect();
        let free: Vec<f64> = at.free_in.iter().map(Duration::as_secs_f64).collect();
        let mut ahead = deadlines.len() - answerable(&deadlines, at.cost.as_secs_f64(), &free);
        let mut dropped = Vec::new();
        let mut kept = VecDeque::new();
        for (job, waits) in self.jobs.drain(..).zip(waits) {
            match waits {
                Some(_) if ahead == 0 => kept.push_back(Job { kept: true, ..job }),
                Some(_) => {
                    ahead -= 1;
                    dropped.push(job);
                }
                None => dropped.push(job),
            }
        }
        self.jobs = kept;
        dropped
    }
}

/// How much longer than its cost a job holds its server, on average over the jobs served:
/// the runtime's timer and scheduling, which no cost model knows. A drain that keeps the
/// answerable requests counts it in each kept job's cost: a kept queue many jobs deep on
/// each server otherwise has its last ones answered that much per job late, after their
/// clients have given up.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub struct Overrun {
    jobs: u64,
    total_s: f64,
    squares_s2: f64,
}

impl Overrun {
    /// A job held its server `held` for a `cost` (a job done early counts 0 over).
    pub fn record(&mut self, held: Duration, cost: Duration) {
        let over = held.saturating_sub(cost).as_secs_f64();
        self.jobs += 1;
        self.total_s += over;
        self.squares_s2 += over * over;
    }

    /// Jobs recorded.
    pub fn jobs(&self) -> u64 {
        self.jobs
    }

    /// The standard deviation of a job's overrun over the jobs recorded (zero before the
    /// second), seconds: the rehearsal's lower bound needs how far a run of jobs can come
    /// in under the mean, not only the mean.
    pub fn sd_s(&self) -> f64 {
        if self.jobs < 2 {
            return 0.0;
        }
        let n = self.jobs as f64;
        let mean = self.total_s / n;
        ((self.squares_s2 - n * mean * mean) / (n - 1.0))
            .max(0.0)
            .sqrt()
    }

    /// The mean over the jobs recorded (zero before the first).
    pub fn mean(&self) -> Duration {
        if self.jobs == 0 {
            return Duration::ZERO;
        }
        Duration::try_from_secs_f64(self.total_s / self.jobs as f64).unwrap_or(Duration::ZERO)
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
#[path = "queue_tests.rs"]
mod tests;
