//! The breaker drill's moving parts: the two breakers as one state machine, the
//! dependency (random errors, a fixed half of callers failing, or overload with room to
//! recover), and the run: one call every 1/rate seconds, each from the next caller in a
//! fixed seeded order, so the same callers call at the same moments every second.

use super::params::{BreakerKind, BreakerParams, ErrorMode};
use crate::simulate::kernel::rng::SplitMix64;
use std::collections::VecDeque;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    Closed,
    Open {
        until_us: u64,
    },
    /// Letting probe calls through: how many went, how many succeeded.
    HalfOpen {
        sent: u32,
        ok: u32,
    },
}

/// A circuit breaker: "open after N consecutive failures" or "open when errors exceed a
/// share of the calls over a window with enough calls"; either stays open a fixed time,
/// then lets probe calls through and closes only if every probe succeeds.
pub struct Breaker {
    kind: BreakerKind,
    p: BreakerParams,
    pub state: State,
    consecutive: u32,
    /// (time, failed) of the calls through the closed breaker within the window.
    window: VecDeque<(u64, bool)>,
    window_failed: u32,
    pub trips: u32,
    pub reopens: u32,
    pub closes: u32,
}

impl Breaker {
    pub fn new(kind: BreakerKind, p: &BreakerParams) -> Self {
        Breaker {
            kind,
            p: p.clone(),
            state: State::Closed,
            consecutive: 0,
            window: VecDeque::new(),
            window_failed: 0,
            trips: 0,
            reopens: 0,
            closes: 0,
        }
    }

    fn probes(&self) -> u32 {
        match self.kind {
            BreakerKind::Consecutive => self.p.consecutive_probes,
            BreakerKind::Rate => self.p.rate_probes,
            BreakerKind::None => 0,
        }
    }

    /// May a call go to the dependency at `now`?
    pub fn allow(&mut self, now: u64) -> bool {
        if let State::Open { until_us } = self.state {
            if now < until_us {
                return false;
            }
            self.state = State::HalfOpen { sent: 0, ok: 0 };
        }
        let probes = self.probes();
        match &mut self.state {
            State::HalfOpen { sent, .. } => {
                if *sent < probes {
                    *sent += 1;
                    true
                } else {
                    false
                }
            }
            _ => true,
        }
    }

    fn open(&mut self, now: u64) {
        self.state = State::Open {
            until_us: now + self.p.open_for.as_micros() as u64,
        };
        self.consecutive = 0;
        self.window.clear();
        self.window_failed = 0;
    }

    /// The outcome of a call `allow` let through.
    pub fn record(&mut self, now: u64, failed: bool) {
        match self.state {
            State::HalfOpen { sent, ok } => {
                if failed {
                    self.reopens += 1;
                    self.open(now);
                } else if ok + 1 >= self.probes() {
                    self.closes += 1;
                    self.state = State::Closed;
                } else {
                    self.state = State::HalfOpen { sent, ok: ok + 1 };
                }
            }
            State::Open { .. } => {}
            State::Closed => {
                let trip = match self.kind {
                    BreakerKind::None => false,
                    BreakerKind::Consecutive => {
                        self.consecutive = if failed { self.consecutive + 1 } else { 0 };
                        self.consecutive >= self.p.consecutive_failures
                    }
                    BreakerKind::Rate => self.rate_trips(now, failed),
                };
                if trip {
                    self.trips += 1;
                    self.open(now);
                }
            }
        }
    }

    fn rate_trips(&mut self, now: u64, failed: bool) -> bool {
        let span = self.p.window.as_micros() as u64;
        self.window.push_back((now, failed));
        self.window_failed += u32::from(failed);
        while let Some(&(t, f)) = self.window.front() {
            if t + span > now {
                break;
            }
            self.window.pop_front();
            self.window_failed -= u32::from(f);
        }
        let n = self.window.len() as u32;
        n >= self.p.min_calls
            && f64::from(self.window_failed) > self.p.rate_threshold * f64::from(n)
    }
}

/// The dependency. In overload mode it starts degraded (the drill's 50% errors): it serves
/// at most `degraded_capacity` calls in any second and fails the rest; after
/// `heal_after` with no more than that offered, it is healthy again and serves up to
/// `healthy_capacity`; offered more than that, it degrades again.
pub struct Dependency {
    mode: ErrorMode,
    error_rate: f64,
    failing: Vec<bool>,
    degraded: bool,
    /// Calls offered and calls served in the last second.
    offered: VecDeque<u64>,
    served: VecDeque<u64>,
    calm_since_us: Option<u64>,
    p: BreakerParams,
}

impl Dependency {
    pub fn new(p: &BreakerParams, rng: &mut SplitMix64) -> Self {
        let n = p.callers as usize;
        // The failing half: the first error_rate x callers of a seeded shuffle.
        let mut order: Vec<usize> = (0..n).collect();
        rng.shuffle(&mut order);
        let bad = (p.error_rate * n as f64).round() as usize;
        let mut failing = vec![false; n];
        for &c in order.iter().take(bad) {
            failing[c] = true;
        }
        Dependency {
            mode: p.errors,
            error_rate: p.error_rate,
            failing,
            degraded: true,
            offered: VecDeque::new(),
            served: VecDeque::new(),
            calm_since_us: Some(0),
            p: p.clone(),
        }
    }

    pub fn caller_fails(&self, caller: usize) -> bool {
        self.failing.get(caller).copied().unwrap_or(false)
    }

    pub fn degraded(&self) -> bool {
        self.mode == ErrorMode::Overload && self.degraded
    }

    /// Advance the overload state to `now` (also when no call arrives).
    pub fn tick(&mut self, now: u64) {
        let second = 1_000_000;
        while self.offered.front().is_some_and(|&t| t + second <= now) {
            self.offered.pop_front();
        }
        while self.served.front().is_some_and(|&t| t + second <= now) {
            self.served.pop_front();
        }
        let offered = self.offered.len() as f64;
        if offered <= self.p.degraded_capacity {
            let since = *self.calm_since_us.get_or_insert(now);
            if self.degraded && now >= since + self.p.heal_after.as_micros() as u64 {
                self.degraded = false;
            }
        } else {
            self.calm_since_us = None;
        }
        if offered > self.p.healthy_capacity {
            self.degraded = true;
        }
    }

    /// One call from `caller` at `now`: true if it fails.
    pub fn call(&mut self, now: u64, caller: usize, rng: &mut SplitMix64) -> bool {
        match self.mode {
            ErrorMode::Random => rng.unit() < self.error_rate,
            ErrorMode::DeterministicHalf => self.caller_fails(caller),
            ErrorMode::Overload => {
                self.tick(now);
                self.offered.push_back(now);
                self.tick(now);
                let cap = if self.degraded {
                    self.p.degraded_capacity
                } else {
                    self.p.healthy_capacity
                };
                if (self.served.len() as f64) < cap {
                    self.served.push_back(now);
                    false
                } else {
                    true
                }
            }
        }
    }
}
