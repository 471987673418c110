//! The event-driven model of `slow-replica`: calls arrive at a balancer that sends each
//! to one of the replicas (by the gate's own [`choose`] and, when on, the gate's outlier
//! ejection); a replica has a fixed pool of workers and a FIFO queue, and works on every
//! request it got, also those whose caller has given up (timed out, or won by a hedge).
//!
//! Time is in microseconds on the kernel's clock, which hands out equal times in the order
//! they were scheduled, so a run is the same for a seed on every machine.

use super::params::SlowReplicaParams;
use crate::gate::balance::outlier::{self, Event, Health, LatencyStat, WindowStat};
use crate::gate::balance::policy::{admitted_by_weight, choose, Candidate};
use crate::simulate::kernel::arrivals::Stream;
use crate::simulate::kernel::clock::Clock;
use crate::simulate::kernel::record::percentile;
use crate::simulate::kernel::rng::SplitMix64;
use std::collections::VecDeque;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ev {
    Arrival,
    AtReplica(u32),
    Done(u32),
    Response(u32),
    Timeout(u32),
    Hedge(u32),
    Evaluate,
    Sample,
}

/// One call as its caller sees it.
#[derive(Debug, Clone)]
pub struct Call {
    pub arrival_us: u64,
    pub end_us: Option<u64>,
    pub ok: bool,
    pub hedged: bool,
    pub retries: u32,
    attempts: Vec<u32>,
}

#[derive(Debug, Clone, Copy)]
struct Attempt {
    call: u32,
    replica: u32,
    sent_us: u64,
    /// The caller still waits for it (not answered, timed out or lost to a hedge).
    live: bool,
}

#[derive(Debug, Default)]
struct Replica {
    busy: u32,
    queue: VecDeque<u32>,
    /// What the balancer counts: attempts sent that the caller still waits for.
    outstanding: usize,
    /// Latencies (us) seen since the last outlier evaluation.
    window: Vec<u64>,
}

/// A moment in the run at the end of each second.
#[derive(Debug, Clone, Copy, Default)]
pub struct Sample {
    /// Requests at the slow replica, waiting or being worked on.
    pub slow_backlog: u64,
    pub slow_max_backlog: u64,
    pub slow_ejected: bool,
}

/// An ejection by the gate's outlier detection.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Ejection {
    pub at_us: u64,
    pub replica: u32,
    pub for_us: u64,
}

/// Everything the report is computed from.
pub struct Run {
    pub calls: Vec<Call>,
    /// Per second: attempts sent to each replica.
    pub sent: Vec<Vec<u64>>,
    pub samples: Vec<Sample>,
    pub ejections: Vec<Ejection>,
    pub hedges: u64,
    /// Largest backlog each replica had.
    pub max_backlog: Vec<u64>,
}

struct Sim<'a> {
    p: &'a SlowReplicaParams,
    rng: SplitMix64,
    now: u64,
    clock: Clock<Ev>,
    arrivals: Stream,
    calls: Vec<Call>,
    attempts: Vec<Attempt>,
    reps: Vec<Replica>,
    start: usize,
    hedges: u64,
    health: Vec<Health>,
    out: Run,
    end_us: u64,
    slow_max: u64,
}

fn us(d: std::time::Duration) -> u64 {
    d.as_micros() as u64
}

/// What the wheel should cover: the longest a request is usually scheduled ahead (a slow
/// request's work; a timeout, a hedge).
fn horizon(p: &SlowReplicaParams) -> u64 {
    let work = us(p.service_max) as f64 * p.slow_factor;
    let waits = [p.timeout, p.hedge_after, Some(p.network)];
    let longest = waits.iter().flatten().map(|d| us(*d)).max().unwrap_or(0);
    (work as u64).max(longest)
}

pub fn run(p: &SlowReplicaParams, seed: u64) -> Run {
    let n = p.replicas as usize;
    let seconds = p.duration.as_secs_f64().ceil() as usize;
    let mut sim = Sim {
        p,
        rng: SplitMix64::new(seed),
        now: 0,
        clock: Clock::new(horizon(p)),
        arrivals: Stream::new(p.arrivals, p.rate_per_s),
        calls: Vec::new(),
        attempts: Vec::new(),
        reps: (0..n).map(|_| Replica::default()).collect(),
        start: 0,
        hedges: 0,
        health: vec![Health::default(); n],
        out: Run {
            calls: Vec::new(),
            sent: vec![vec![0; n]; seconds],
            samples: Vec::with_capacity(seconds),
            ejections: Vec::new(),
            hedges: 0,
            max_backlog: vec![0; n],
        },
        end_us: us(p.duration),
        slow_max: 0,
    };
    let first = sim.arrivals.next(&mut sim.rng);
    sim.at(first, Ev::Arrival);
    sim.at(1_000_000, Ev::Sample);
    if p.outlier_ejection {
        sim.at(us(p.outlier_interval), Ev::Evaluate);
    }
    while let Some((t, ev)) = sim.clock.pop() {
        sim.now = t;
        sim.handle(ev);
    }
    sim.out.calls = sim.calls;
    sim.out.hedges = sim.hedges;
    sim.out
}

impl Sim<'_> {
    fn at(&mut self, t: u64, ev: Ev) {
        self.clock.schedule(t, ev);
    }

    fn handle(&mut self, ev: Ev) {
        match ev {
            Ev::Arrival => self.arrival(),
            Ev::AtReplica(a) => self.at_replica(a),
            Ev::Done(a) => self.done(a),
            Ev::Response(a) => self.response(a),
            Ev::Timeout(a) => self.timeout(a),
            Ev::Hedge(c) => self.hedge(c),
            Ev::Evaluate => self.evaluate(),
            Ev::Sample => self.sample(),
        }
    }

    fn arrival(&mut self) {
        let c = self.calls.len() as u32;
        self.calls.push(Call {
            arrival_us: self.now,
            end_us: None,
            ok: false,
            hedged: false,
            retries: 0,
            attempts: Vec::new(),
        });
        self.send(c, None);
        if let Some(h) = self.p.hedge_after {
            self.at(self.now + us(h), Ev::Hedge(c));
        }
        let next = self.arrivals.next(&mut self.rng);
        if next < self.end_us {
            self.at(next, Ev::Arrival);
        }
    }

    /// Send one attempt of call `c` to a replica the balancer picks (never `exclude`).
    fn send(&mut self, c: u32, exclude: Option<u32>) {
        let r = self.pick(exclude);
        let a = self.attempts.len() as u32;
        self.attempts.push(Attempt {
            call: c,
            replica: r,
            sent_us: self.now,
            live: true,
        });
        self.calls[c as usize].attempts.push(a);
        self.reps[r as usize].outstanding += 1;
        let sec = (self.now / 1_000_000) as usize;
        if let Some(row) = self.out.sent.get_mut(sec) {
            row[r as usize] += 1;
        }
        self.at(self.now + us(self.p.network) / 2, Ev::AtReplica(a));
        if let Some(t) = self.p.timeout {
            self.at(self.now + us(t), Ev::Timeout(a));
        }
    }

    fn pick(&mut self, exclude: Option<u32>) -> u32 {
        let now_ms = self.now / 1000;
        let ramp_ms = self.p.outlier_ramp.as_millis() as u64;
        let mut cands = Vec::with_capacity(self.reps.len());
        for (i, r) in self.reps.iter().enumerate() {
            let w = outlier::weight(&self.health[i], now_ms, ramp_ms);
            let by_weight = w >= 1.0 || (w > 0.0 && admitted_by_weight(w, self.rng.next_u64()));
            cands.push(Candidate {
                outstanding: r.outstanding,
                available: by_weight && exclude != Some(i as u32),
            });
        }
        self.start += 1;
        let random = self.rng.next_u64();
        choose(self.p.balancer, &cands, self.start, random).unwrap_or(0) as u32
    }

    fn at_replica(&mut self, a: u32) {
        let r = self.attempts[a as usize].replica as usize;
        if self.reps[r].busy < self.p.concurrency {
            self.start_work(a);
        } else {
            self.reps[r].queue.push_back(a);
        }
        self.note_backlog(r);
    }

    fn start_work(&mut self, a: u32) {
        let r = self.attempts[a as usize].replica;
        self.reps[r as usize].busy += 1;
        let (lo, hi) = (us(self.p.service_min), us(self.p.service_max));
        let mut work = self.rng.between(lo, hi) as f64;
        if r == self.p.slow_replica && self.now >= us(self.p.slow_at) {
            work *= self.p.slow_factor;
        }
        self.at(self.now + work as u64, Ev::Done(a));
    }

    fn done(&mut self, a: u32) {
        let r = self.attempts[a as usize].replica as usize;
        self.reps[r].busy -= 1;
        self.at(self.now + us(self.p.network) / 2, Ev::Response(a));
        if let Some(next) = self.reps[r].queue.pop_front() {
            self.start_work(next);
        }
    }

    fn backlog(&self, r: usize) -> u64 {
        (self.reps[r].queue.len() + self.reps[r].busy as usize) as u64
    }

    fn note_backlog(&mut self, r: usize) {
        let b = self.backlog(r);
        let m = &mut self.out.max_backlog[r];
        *m = (*m).max(b);
        if r == self.p.slow_replica as usize {
            self.slow_max = self.slow_max.max(b);
        }
    }

    /// The caller stops waiting for attempt `a`: the balancer no longer counts it.
    fn release(&mut self, a: u32) {
        let at = &mut self.attempts[a as usize];
        at.live = false;
        self.reps[at.replica as usize].outstanding -= 1;
    }

    /// The caller stops waiting for attempt `a`, answered or timed out: its latency so far
    /// counts toward its replica's outlier window (a timeout is a latency of at least the
    /// timeout). None if the caller had stopped waiting already.
    fn settle(&mut self, a: u32) -> Option<Attempt> {
        let at = self.attempts[a as usize];
        if !at.live {
            return None;
        }
        self.release(a);
        self.reps[at.replica as usize]
            .window
            .push(self.now - at.sent_us);
        Some(at)
    }

    fn response(&mut self, a: u32) {
        let Some(at) = self.settle(a) else { return };
        let c = at.call as usize;
        if self.calls[c].end_us.is_none() {
            self.calls[c].end_us = Some(self.now);
            self.calls[c].ok = true;
            // The other copy, if any, is no longer waited for.
            let siblings = self.calls[c].attempts.clone();
            for s in siblings {
                if self.attempts[s as usize].live {
                    self.release(s);
                }
            }
        }
    }

    fn timeout(&mut self, a: u32) {
        let Some(at) = self.settle(a) else { return };
        let c = at.call as usize;
        let waiting = self.calls[c]
            .attempts
            .iter()
            .any(|&s| self.attempts[s as usize].live);
        if waiting || self.calls[c].end_us.is_some() {
            return;
        }
        if self.calls[c].retries < self.p.timeout_retries {
            self.calls[c].retries += 1;
            self.send(at.call, Some(at.replica));
        } else {
            self.calls[c].end_us = Some(self.now);
        }
    }

    fn hedge(&mut self, c: u32) {
        let call = &self.calls[c as usize];
        if call.end_us.is_some() || call.hedged {
            return;
        }
        let allowed = self.p.hedge_max_fraction * self.calls.len() as f64;
        if (self.hedges + 1) as f64 > allowed {
            return;
        }
        let first = call
            .attempts
            .iter()
            .rev()
            .find(|&&s| self.attempts[s as usize].live)
            .map(|&s| self.attempts[s as usize].replica);
        self.hedges += 1;
        self.calls[c as usize].hedged = true;
        self.send(c, first);
    }

    fn evaluate(&mut self) {
        let Some(cfg) = self.p.outlier() else { return };
        let windows: Vec<WindowStat> = self
            .reps
            .iter_mut()
            .map(|r| window_stat(std::mem::take(&mut r.window), cfg.stat))
            .collect();
        let now_ms = self.now / 1000;
        for ev in outlier::evaluate(&cfg, now_ms, &windows, &mut self.health) {
            if let Event::Ejected {
                replica, for_ms, ..
            } = ev
            {
                self.out.ejections.push(Ejection {
                    at_us: self.now,
                    replica: replica as u32,
                    for_us: for_ms * 1000,
                });
            }
        }
        let next = self.now + us(cfg.interval);
        if next <= self.end_us {
            self.at(next, Ev::Evaluate);
        }
    }

    fn sample(&mut self) {
        let s = self.p.slow_replica as usize;
        self.out.samples.push(Sample {
            slow_backlog: self.backlog(s),
            slow_max_backlog: self.slow_max,
            slow_ejected: outlier::weight(&self.health[s], self.now / 1000, 0) == 0.0,
        });
        self.slow_max = self.backlog(s);
        let next = self.now + 1_000_000;
        if next <= self.end_us {
            self.at(next, Ev::Sample);
        }
    }
}

/// The gate's statistic over one replica's window, computed exactly.
fn window_stat(mut v: Vec<u64>, stat: LatencyStat) -> WindowStat {
    if v.is_empty() {
        return WindowStat::default();
    }
    let latency_us = match stat {
        LatencyStat::Mean => v.iter().sum::<u64>() as f64 / v.len() as f64,
        LatencyStat::P99 => {
            v.sort_unstable();
            percentile(&v, 0.99) as f64
        }
    };
    WindowStat {
        requests: v.len() as u64,
        latency_ms: latency_us / 1000.0,
    }
}
