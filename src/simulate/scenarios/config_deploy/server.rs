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

    /// A drain that keeps the answerable requests (`keep: answerable`), replica by replica
    /// as each of the `replicas` the pool stands for drains its own queue: the youngest
    /// queued requests it answers before their clients' deadlines stay queued in FIFO
    /// order, by the one rule [`crate::platform::admin::answerable`]; every other one is
    /// taken out, for the caller to answer with an error at once. `live` says whether a
    /// request's client still waits on it; its deadline is its send plus the client
    /// timeout. Returns the requests taken out and how many were kept.
    pub fn drain_keeping(
        &mut self,
        now: u32,
        replicas: u32,
        tick_s: f64,
        live: impl Fn(&Req) -> bool,
    ) -> (Vec<Req>, usize) {
        let replicas = replicas.max(1) as usize;
        let queue = self.take_queue();
        let mut keep = vec![false; queue.len()];
        for r in 0..replicas {
            // A balancer that keeps the replicas level (least outstanding, round robin)
            // sends consecutive requests to different replicas: the pool's i-th queued
            // request and i-th taken one are on replica i mod replicas.
            let mine: Vec<usize> = (r..queue.len())
                .step_by(replicas)
                .filter(|&i| live(&queue[i]))
                .collect();
            let deadlines: Vec<f64> = mine
                .iter()
                .map(|&i| {
                    let deadline = queue[i].sent.saturating_add(self.cfg.timeout_ticks);
                    f64::from(deadline.saturating_sub(now)) * tick_s
                })
                .collect();
            let (cost_s, free_in_s) = self.replica_servers(now, r, replicas, tick_s);
            let n = crate::platform::admin::answerable(&deadlines, cost_s, &free_in_s);
            for &i in &mine[mine.len() - n..] {
                keep[i] = true;
            }
        }
        let mut out = Vec::with_capacity(queue.len());
        for (req, kept) in queue.into_iter().zip(keep) {
            if kept {
                self.queue.push_back(req);
            } else {
                out.push(req);
            }
        }
        let kept = self.queue.len();
        (out, kept)
    }

    /// Replica `r`'s servers as a drain sees them: each one's cost now, not overloaded
    /// (seconds), and when each is free (seconds from now). With slots, the replica's
    /// share of them, busy until its share of the work in service ends (the pool prices
    /// by rate, so it may briefly hold more jobs than slots: the slots free as the latest
    /// of them end); without, one server working at the replica's share of the rate.
    fn replica_servers(&self, now: u32, r: usize, replicas: usize, tick_s: f64) -> (f64, Vec<f64>) {
        let warm = self.warm_fraction(now).max(1e-9);
        let Some(job) = self.cfg.job_ticks else {
            let per_request = replicas as f64 / (self.cfg.per_tick * warm).max(1e-9);
            return (per_request * tick_s, vec![0.0]);
        };
        let slots = ((job * self.cfg.per_tick / replicas as f64).round() as usize).max(1);
        let mut busy: Vec<(u64, u32)> = self
            .in_service
            .iter()
            .map(|Reverse(j)| (j.order, j.done))
            .collect();
        busy.sort_unstable();
        let mut free: Vec<f64> = busy
            .iter()
            .skip(r)
            .step_by(replicas)
            .map(|&(_, done)| f64::from(done.saturating_sub(now)) * tick_s)
            .collect();
        free.sort_unstable_by(f64::total_cmp);
        let free = free.split_off(free.len().saturating_sub(slots));
        let idle = slots - free.len();
        let free = std::iter::repeat_n(0.0, idle).chain(free).collect();
        (job / warm * tick_s, free)
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

    /// The queued requests, oldest first.
    pub fn queued(&self) -> impl Iterator<Item = &Req> {
        self.queue.iter()
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
#[path = "server_tests.rs"]
mod tests;
