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
}

impl Overrun {
    /// A job held its server `held` for a `cost` (a job done early counts 0 over).
    pub fn record(&mut self, held: Duration, cost: Duration) {
        self.jobs += 1;
        self.total_s += held.saturating_sub(cost).as_secs_f64();
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
    fn the_overrun_is_the_mean_hold_beyond_the_cost() {
        let mut o = Overrun::default();
        assert_eq!(o.mean(), Duration::ZERO);
        o.record(Duration::from_millis(41), Duration::from_millis(40));
        o.record(Duration::from_millis(43), Duration::from_millis(40));
        // Done early: nothing over, still a job.
        o.record(Duration::from_millis(39), Duration::from_millis(40));
        assert_eq!(o.mean(), Duration::from_millis(4) / 3);
    }

    /// One server at 40 ms a job, 25 live jobs whose clients give up in 1.01 s: all 25
    /// are answered by 1 s as costed, but a job that holds its server 1 ms longer than its
    /// cost leaves the 25th answered at 1.025 s, after its client left: the drain keeps 24. A busy server is free that much later too.
    #[test]
    fn a_drain_counts_the_measured_overrun_in_each_jobs_cost() {
        let now = Moment::now();
        let cost = Duration::from_millis(40);
        let keeps = |overrun: Overrun| {
            let mut q = FifoQueue::default();
            let mut waiting = Vec::new();
            for _ in 0..25 {
                let (tx, rx) = oneshot::channel();
                waiting.push(rx);
                q.push(Job::new(
                    now.instant,
                    Some(now.wall + Duration::from_millis(1010)),
                    tx,
                ));
            }
            let at = Answerable::at(now, Duration::from_secs(1), cost, overrun, &[None]);
            q.drain_keeping(&at);
            q.len()
        };
        assert_eq!(keeps(Overrun::default()), 25);
        let mut late = Overrun::default();
        late.record(Duration::from_millis(41), cost);
        assert_eq!(keeps(late), 24);
        let busy = Answerable::at(
            now,
            Duration::from_secs(1),
            cost,
            late,
            &[Some(now.instant + cost)],
        );
        assert_eq!(busy.cost, Duration::from_millis(41));
        assert_eq!(busy.free_in, [Duration::from_millis(41)]);
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
            q.push(Job::new(
                Instant::now(),
                Some(SystemTime::UNIX_EPOCH + Duration::from_millis(i)),
                tx,
            ));
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
        let job = Job::new(Instant::now(), Some(now - Duration::from_millis(1)), tx);
        assert!(job.expired(now));
        let (tx, _rx) = oneshot::channel();
        let job = Job::new(Instant::now(), None, tx);
        assert!(!job.expired(now));
    }

    /// The queue of the drain tests, oldest first: (deadline from now, or `None` for
    /// queued 0.5 s ago without `x-deadline-ms`; client still there).
    fn queue_at(
        now: Moment,
        jobs: &[(Option<f64>, bool)],
    ) -> (FifoQueue, Vec<oneshot::Receiver<Reply>>) {
        let mut q = FifoQueue::default();
        let mut waiting = Vec::new();
        for &(deadline, there) in jobs {
            let (tx, rx) = oneshot::channel();
            if there {
                waiting.push(rx);
            }
            q.push(Job::new(
                now.instant - Duration::from_millis(500),
                deadline.map(|s| now.wall + Duration::from_secs_f64(s)),
                tx,
            ));
        }
        (q, waiting)
    }

    fn left(q: &mut FifoQueue, now: Moment) -> Vec<Option<f64>> {
        std::iter::from_fn(|| q.pop())
            .map(|j| {
                j.deadline
                    .map(|d| d.duration_since(now.wall).unwrap().as_secs_f64())
            })
            .collect()
    }

    #[test]
    fn a_drain_keeps_the_youngest_live_jobs_answered_in_time() {
        let now = Moment {
            instant: Instant::now(),
            wall: SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000),
        };
        // Oldest first: live (10 s left), gone, deadline passed just now, live without a
        // header (queued 0.5 s ago, 2 s timeout: 1.5 s left), live 1.25 s, gone, live 2 s.
        let jobs = [
            (Some(10.0), true),
            (Some(10.0), false),
            (Some(0.0), true),
            (None, true),
            (Some(1.25), true),
            (Some(5.0), false),
            (Some(2.0), true),
        ];
        let (mut q, _waiting) = queue_at(now, &jobs);
        // One server, free in 0.25 s, 0.5 s a request: the last three live ones are
        // answered at 0.75, 1.25 and 1.75 s, each by its deadline; a fourth would put the
        // 1.25 s one at 1.75 s.
        let at = Answerable {
            now,
            client_timeout: Duration::from_secs(2),
            cost: Duration::from_millis(500),
            free_in: vec![Duration::from_millis(250)],
        };
        let dropped = q.drain_keeping(&at);
        let dropped: Vec<Option<f64>> = dropped
            .iter()
            .map(|j| {
                j.deadline
                    .map(|d| d.duration_since(now.wall).unwrap().as_secs_f64())
            })
            .collect();
        assert_eq!(dropped, [Some(10.0), Some(10.0), Some(0.0), Some(5.0)]);
        assert_eq!(left(&mut q, now), [None, Some(1.25), Some(2.0)]);

        // With a 0.4 s timeout the headerless one's client has given up: it is dropped and
        // no longer stands ahead, so the oldest live one is answered first, at 0.75 s.
        let (mut q, _waiting) = queue_at(now, &jobs);
        let short = Answerable {
            client_timeout: Duration::from_millis(400),
            ..at.clone()
        };
        assert_eq!(q.drain_keeping(&short).len(), 4);
        assert_eq!(left(&mut q, now), [Some(10.0), Some(1.25), Some(2.0)]);

        // Two idle servers answer all four live ones in time; none idle or none at all
        // answers none.
        let (mut q, _waiting) = queue_at(now, &jobs);
        let two = Answerable {
            free_in: vec![Duration::ZERO; 2],
            ..at.clone()
        };
        assert_eq!(q.drain_keeping(&two).len(), 3);
        assert_eq!(q.len(), 4);
        let (mut q, _waiting) = queue_at(now, &jobs);
        let none = Answerable {
            free_in: Vec::new(),
            ..at
        };
        assert_eq!(q.drain_keeping(&none).len(), jobs.len());
        assert!(q.is_empty());
    }

    /// A request a drain kept is late once its client stops waiting before it is
    /// answered (deadline passed or hung up); one no drain kept is never counted.
    #[test]
    fn a_kept_request_answered_after_its_client_stopped_waiting_is_late() {
        let now = Moment::now();
        let (mut q, mut waiting) = queue_at(now, &[(Some(2.0), true), (Some(2.0), true)]);
        let at = Answerable {
            now,
            client_timeout: Duration::from_secs(1),
            cost: Duration::from_millis(500),
            free_in: vec![Duration::ZERO],
        };
        assert!(q.drain_keeping(&at).is_empty());
        let timeout = at.client_timeout;
        let (first, second) = (q.pop().unwrap(), q.pop().unwrap());
        assert!(first.kept && second.kept);
        let later = Moment {
            instant: now.instant + Duration::from_secs(2),
            wall: now.wall + Duration::from_secs(2),
        };
        assert!(!first.kept_late(now, timeout));
        assert!(first.kept_late(later, timeout), "deadline passed");
        drop(waiting.remove(1));
        assert!(second.kept_late(now, timeout), "client gone");
        let (tx, _rx) = oneshot::channel();
        let never_kept = Job::new(now.instant, Some(now.wall), tx);
        assert!(!never_kept.kept_late(later, timeout));
    }

    #[test]
    fn a_client_waits_until_its_deadline_and_while_connected() {
        let now = Moment::now();
        let (tx, rx) = oneshot::channel();
        let job = Job::new(now.instant, Some(now.wall + Duration::from_secs(3)), tx);
        let timeout = Duration::from_secs(1);
        assert_eq!(job.waits_for(now, timeout), Some(Duration::from_secs(3)));
        let later = Moment {
            instant: now.instant + Duration::from_secs(3),
            wall: now.wall + Duration::from_secs(3),
        };
        assert_eq!(job.waits_for(later, timeout), None, "deadline reached");
        drop(rx);
        assert_eq!(job.waits_for(now, timeout), None, "client gone");
        let (tx, _rx) = oneshot::channel();
        let job = Job::new(now.instant, None, tx);
        assert_eq!(job.waits_for(now, timeout), Some(timeout));
        assert_eq!(job.waits_for(later, timeout), None);
    }
}
