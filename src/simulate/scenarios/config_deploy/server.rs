//! The demo config service as a model: a FIFO queue served at a capacity that is lower right
//! after a restart (cold) and warms up, costs `overload_factor` times the work while the
//! queue holds more than it can serve within the client timeout, and either queues
//! everything (no shedding: it serves abandoned work) or rejects fast what it cannot serve in
//! time (shedding). Those three together are what make the failure self-sustaining.
//! Given its slots (`job_ticks`), a request is priced when a slot takes it and answered
//! at the end of its work, as the demo service's pool does: under overload that work is
//! a good part of the client's timeout. Without, it is answered as soon as its work is
//! paid for (a fluid server).

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

/// One queued attempt: whose it is and when it was sent (tick).
#[derive(Debug, Clone, Copy)]
pub struct Req {
    pub client: u32,
    pub seq: u32,
    pub sent: u32,
}

/// What the server did with an arriving attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arrival {
    Queued,
    /// Down (restarting): connection refused, fast.
    Refused,
    /// Shed: it could not be served within the timeout, so it is rejected fast.
    Shed,
}

#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// Warm capacity in requests per tick.
    pub per_tick: f64,
    pub cold_factor: f64,
    pub warmup_ticks: u32,
    /// Warm after this many completions since the restart (the demo service's caches warm
    /// with the work it does, abandoned work included); 0 warms by time (`warmup_ticks`).
    pub warm_after_requests: u64,
    pub overload_factor: f64,
    pub shedding: bool,
    pub honour_deadline: bool,
    pub timeout_ticks: u32,
    /// Ticks one warm, un-overloaded request takes from the moment a slot takes it (slots
    /// / capacity): the answer comes at the end of its work, as the demo service's pool
    /// answers, and its cost is fixed when it is taken off the queue. None answers at
    /// once when its work is paid (a fluid server without slots).
    pub job_ticks: Option<f64>,
}

/// A request being worked on: answered at `done`; `order` keeps equal ticks in the order
/// they were taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct InService {
    done: u32,
    order: u64,
    client: u32,
    seq: u32,
    sent: u32,
}

#[derive(Debug, Clone)]
pub struct Server {
    cfg: ServerConfig,
    queue: VecDeque<Req>,
    /// Taken off the queue and still being worked on (with `job_ticks`), earliest first.
    in_service: BinaryHeap<Reverse<InService>>,
    taken: u64,
    /// Work available this tick, in warm-request units (carried while work is queued).
    budget: f64,
    down_until: Option<u32>,
    restarted_at: Option<u32>,
    /// Completions since the restart, for a server that warms by its work.
    served_since_restart: u64,
    /// Warmed on purpose (a runbook's `cache.warm`): full capacity from now on.
    warmed: bool,
    overloaded: bool,
}

/// Counts of one tick's service.
#[derive(Debug, Clone, Copy, Default)]
pub struct Served {
    /// Skipped at no cost (deadline passed, `honour_deadline`).
    pub skipped: u32,
}

impl Server {
    pub fn new(cfg: ServerConfig) -> Self {
        Server {
            cfg,
            queue: VecDeque::with_capacity(1024),
            in_service: BinaryHeap::new(),
            taken: 0,
            budget: 0.0,
            down_until: None,
            restarted_at: None,
            served_since_restart: 0,
            warmed: false,
            overloaded: false,
        }
    }

    /// New settings mid-run; queue, warmth and downtime carry over.
    pub fn reconfigure(&mut self, cfg: ServerConfig) {
        self.cfg = cfg;
    }

    #[inline]
    pub fn is_down(&self, now: u32) -> bool {
        self.down_until.is_some_and(|u| now < u)
    }

    /// Capacity as a fraction of warm capacity at `now`: cold right after a restart, rising
    /// with the work done (`warm_after_requests`) or linearly over the warm-up; whole once
    /// warmed on purpose.
    pub fn warm_fraction(&self, now: u32) -> f64 {
        if self.warmed {
            return 1.0;
        }
        if self.cfg.warm_after_requests > 0 && self.restarted_at.is_some() {
            // As the demo service: the cost multiplier falls linearly from 1 / cold_factor
            // to 1 over `warm_after_requests`; capacity is its inverse.
            let warmth =
                (self.served_since_restart as f64 / self.cfg.warm_after_requests as f64).min(1.0);
            let cold_multiplier = 1.0 + (1.0 / self.cfg.cold_factor - 1.0) * (1.0 - warmth);
            return 1.0 / cold_multiplier;
        }
        match self.restarted_at {
            Some(r) if now >= r && self.cfg.warmup_ticks > 0 => {
                let progress = (f64::from(now - r) / f64::from(self.cfg.warmup_ticks)).min(1.0);
                self.cfg.cold_factor + (1.0 - self.cfg.cold_factor) * progress
            }
            Some(r) if now < r => self.cfg.cold_factor,
            _ => 1.0,
        }
    }

    /// How warm the caches are, 0 to 1, as the demo service exports it (`warm_fraction`):
    /// the `w` of its cost multiplier `1 + (f - 1)(1 - w)`, read back from the capacity
    /// fraction [`Server::warm_fraction`] gives.
    pub fn cache_warmth(&self, now: u32) -> f64 {
        let f = 1.0 / self.cfg.cold_factor.clamp(1e-9, 1.0);
        if f <= 1.0 {
            return 1.0;
        }
        let m = 1.0 / self.warm_fraction(now).max(1e-9);
        (1.0 - (m - 1.0) / (f - 1.0)).clamp(0.0, 1.0)
    }

    /// How many queued requests can be served within the client timeout at healthy cost.
    fn servable_in_time(&self, now: u32) -> f64 {
        self.cfg.per_tick * self.warm_fraction(now) * f64::from(self.cfg.timeout_ticks)
    }

    /// The process dies (a deploy): its queue is lost, it refuses connections until
    /// `until`, then comes back cold. Returns the number of queued requests lost.
    pub fn go_down(&mut self, until: u32) -> usize {
        self.down_until = Some(until);
        self.cold_from(until);
        let working = self.in_service.len();
        self.in_service.clear();
        self.drain() + working
    }

    /// Restart without downtime (batches behind a gate): cold again from `now`. Returns the
    /// queued work, for the caller to answer with an error (the drain before a restart).
    pub fn restart(&mut self, now: u32) -> Vec<Req> {
        self.cold_from(now);
        let mut out = self.take_queue();
        out.extend(self.in_service.drain().map(|Reverse(j)| Req {
            client: j.client,
            seq: j.seq,
            sent: j.sent,
        }));
        out
    }

    /// A freshly started process: cold from the first tick, warming as after a restart.
    pub fn start_cold(&mut self) {
        self.cold_from(0);
    }

    fn cold_from(&mut self, at: u32) {
        self.restarted_at = Some(at);
        self.served_since_restart = 0;
        self.warmed = false;
    }

    /// Caches warmed on purpose (a runbook's `cache.warm`): full capacity from now on.
    pub fn warm(&mut self) {
        self.warmed = true;
    }

    /// Take the queued work out, to answer it with an error at once (a runbook's
    /// `backlog.drain`).
    pub fn take_queue(&mut self) -> Vec<Req> {
        self.budget = 0.0;
        self.queue.drain(..).collect()
    }

    /// Drop queued work instead of serving it.
    pub fn drain(&mut self) -> usize {
        self.take_queue().len()
    }

    // Inlined into the engine (as is `step`): called per attempt, from another module.
    #[inline]
    pub fn arrive(&mut self, req: Req, now: u32) -> Arrival {
        if self.is_down(now) {
            return Arrival::Refused;
        }
        if self.cfg.shedding && (self.queue.len() + 1) as f64 > self.servable_in_time(now).max(1.0)
        {
            return Arrival::Shed;
        }
        self.queue.push_back(req);
        Arrival::Queued
    }

    /// Serve one tick's worth of work in FIFO order, calling `done` for every completed
    /// request (useful or abandoned: the server cannot tell).
    #[inline]
    pub fn step(&mut self, now: u32, mut done: impl FnMut(Req)) -> Served {
        let mut served = Served::default();
        if self.is_down(now) {
            return served;
        }
        while let Some(Reverse(j)) = self.in_service.peek() {
            if j.done > now {
                break;
            }
            let j = *j;
            self.in_service.pop();
            self.served_since_restart += 1;
            done(Req {
                client: j.client,
                seq: j.seq,
                sent: j.sent,
            });
        }
        let warm = self.warm_fraction(now);
        self.overloaded = self.queue.len() as f64 > self.servable_in_time(now);
        let cost = if self.overloaded {
            self.cfg.overload_factor
        } else {
            1.0
        };
        self.budget += self.cfg.per_tick * warm;
        while let Some(front) = self.queue.front() {
            if self.cfg.honour_deadline && now.saturating_sub(front.sent) >= self.cfg.timeout_ticks
            {
                self.queue.pop_front();
                served.skipped += 1;
                continue;
            }
            if self.budget < cost {
                break;
            }
            self.budget -= cost;
            if let Some(req) = self.queue.pop_front() {
                match self.cfg.job_ticks {
                    // Its cost was fixed as it was taken; it is answered when worked through.
                    Some(job) => {
                        let work = (job * cost / warm).round().max(1.0) as u32;
                        self.taken += 1;
                        self.in_service.push(Reverse(InService {
                            done: now.saturating_add(work),
                            order: self.taken,
                            client: req.client,
                            seq: req.seq,
                            sent: req.sent,
                        }));
                    }
                    None => {
                        self.served_since_restart += 1;
                        done(req);
                    }
                }
            }
        }
        if self.queue.is_empty() {
            // Idle time is not banked: a server cannot serve earlier requests later.
            self.budget = 0.0;
        }
        served
    }

    pub fn queue_len(&self) -> usize {
        self.queue.len()
    }

    pub fn overloaded(&self) -> bool {
        self.overloaded
    }

    /// Effective capacity in useful requests per second right now.
    pub fn capacity_per_s(&self, now: u32, tick_s: f64) -> f64 {
        if self.is_down(now) {
            return 0.0;
        }
        let k = if self.overloaded {
            self.cfg.overload_factor
        } else {
            1.0
        };
        self.cfg.per_tick * self.warm_fraction(now) / k / tick_s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(shedding: bool) -> ServerConfig {
        ServerConfig {
            per_tick: 2.0,
            cold_factor: 0.5,
            warmup_ticks: 100,
            warm_after_requests: 0,
            overload_factor: 4.0,
            shedding,
            honour_deadline: false,
            timeout_ticks: 10,
            job_ticks: None,
        }
    }

    /// Requests served over the ticks `ticks`.
    fn served(s: &mut Server, ticks: std::ops::Range<u32>) -> u32 {
        let mut n = 0;
        for t in ticks {
            s.step(t, |_| n += 1);
        }
        n
    }

    fn req(i: u32) -> Req {
        Req {
            client: i,
            seq: 0,
            sent: 0,
        }
    }

    #[test]
    fn overloaded_queue_costs_k_times_the_work() {
        let mut s = Server::new(cfg(false));
        for i in 0..100 {
            s.arrive(req(i), 0);
        }
        // 100 queued > 2 * 10 servable in time: each costs 4, so 2 per tick serves one per 2 ticks.
        assert_eq!(served(&mut s, 0..10), 5);
        assert!(s.overloaded());
    }

    #[test]
    fn shedding_keeps_the_queue_within_what_is_served_in_time() {
        let mut s = Server::new(cfg(true));
        let shed = (0..100)
            .filter(|i| s.arrive(req(*i), 0) == Arrival::Shed)
            .count();
        assert_eq!(s.queue_len(), 20);
        assert_eq!(shed, 80);
    }

    #[test]
    fn restart_loses_the_queue_and_comes_back_cold() {
        let mut s = Server::new(cfg(false));
        s.arrive(req(1), 0);
        assert_eq!(s.go_down(10), 1);
        assert_eq!(s.arrive(req(2), 5), Arrival::Refused);
        assert_eq!(s.warm_fraction(10), 0.5);
        assert_eq!(s.warm_fraction(60), 0.75);
        assert_eq!(s.warm_fraction(500), 1.0);
    }

    /// As the demo service: warmth comes with the work done since the restart (the cost
    /// multiplier falls linearly from 2 to 1), not with time; a warm step makes it whole.
    #[test]
    fn warms_with_its_work_and_at_once_when_warmed() {
        let mut s = Server::new(ServerConfig {
            warm_after_requests: 10,
            ..cfg(false)
        });
        for i in 0..3 {
            s.arrive(req(i), 0);
        }
        assert_eq!(s.restart(0).len(), 3);
        assert_eq!(s.warm_fraction(1_000), 0.5, "time alone does not warm it");
        for i in 0..5 {
            s.arrive(req(i), 1_000);
        }
        assert_eq!(served(&mut s, 1_000..1_010), 5);
        assert!((s.warm_fraction(1_010) - 1.0 / 1.5).abs() < 1e-9);
        s.warm();
        assert_eq!(s.warm_fraction(1_010), 1.0);
    }

    /// As the demo service's pool: a request is answered at the end of its work, whose
    /// cost is fixed when a slot takes it (cold and overloaded here: 4 x 2 = 8 times 5
    /// ticks), and it warms the service when it is done, not when it starts.
    #[test]
    fn answers_at_the_end_of_its_work_priced_when_taken() {
        let mut s = Server::new(ServerConfig {
            warm_after_requests: 10,
            job_ticks: Some(5.0),
            ..cfg(false)
        });
        s.restart(0);
        for i in 0..30 {
            s.arrive(req(i), 0);
        }
        let mut done = Vec::new();
        for t in 0..44 {
            s.step(t, |r| done.push((t, r.client)));
            if t == 42 {
                assert!(done.is_empty(), "{done:?}");
                assert_eq!(s.warm_fraction(t), 0.5, "nothing done yet: still cold");
            }
        }
        // 30 queued > 1 x 10 servable in time: overloaded, each costs 4 of the 1 a tick
        // a cold server has; the first is taken at tick 3 and answered 40 ticks later.
        assert_eq!(done, vec![(43, 0)]);
        assert_eq!(s.queue_len(), 30 - 11);
    }
}
