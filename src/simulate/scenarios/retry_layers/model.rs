//! The calls of `retry-layers`: requests arrive at the app (the kernel's arrivals) and
//! each is followed down through the layers at once, every layer retrying under its own
//! retry budget (the crate's one [`RetryBudget`]); and the deadline arithmetic. The store
//! fails a call with a fixed probability, or, overloaded, when its queue makes the answer
//! later than the caller's timeout, so a storm of retries can keep it failing after its
//! first cause is gone. Following a request down at once puts its retries at the moment
//! it arrived rather than a timeout later: the loads are rates, which that does not
//! change, and a queue's length is the work offered minus the work done, whenever a call
//! came.

use super::params::{Failures, RetryLayersParams};
use crate::retry::RetryBudget;
use crate::simulate::kernel::arrivals::Stream;
use crate::simulate::kernel::record::Series;
use crate::simulate::kernel::rng::SplitMix64;
use serde::Serialize;
use std::time::Duration;

/// One second of the run.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct LayerSecond {
    pub t: u32,
    /// Calls received by app, API, downstream, store.
    pub received: [u64; 4],
    pub store_failed: u64,
    pub requests: u64,
    pub succeeded: u64,
}

/// The overloaded store: one queue worked through in order, a call at a time, each
/// taking `1 / capacity` of a second; stalled (accepting, answering nothing) during the
/// trigger. A call fails when its answer comes later than its caller's timeout, and its
/// work is done all the same: that is what keeps a queue of retries growing.
struct Store {
    /// When the store has finished every call it has accepted.
    free_at_us: f64,
    work_us: f64,
    stall_us: (f64, f64),
    timeout_us: f64,
}

impl Store {
    fn new(p: &RetryLayersParams) -> Self {
        let us = |d: Duration| d.as_secs_f64() * 1e6;
        Store {
            free_at_us: 0.0,
            work_us: 1e6 / p.store_capacity_per_s,
            stall_us: (us(p.trigger_from), us(p.trigger_to)),
            timeout_us: us(p.attempt_timeout),
        }
    }

    /// A call made at `now`; true if it is answered within the timeout.
    fn call(&mut self, now: f64) -> bool {
        let mut start = self.free_at_us.max(now);
        if start >= self.stall_us.0 && start < self.stall_us.1 {
            start = self.stall_us.1;
        }
        self.free_at_us = start + self.work_us;
        self.free_at_us - now <= self.timeout_us
    }
}

struct Sim<'a> {
    p: &'a RetryLayersParams,
    rng: SplitMix64,
    budgets: Option<[RetryBudget; 3]>,
    store: Store,
    /// When the current request entered the app, in microseconds.
    now: f64,
    row: LayerSecond,
}

impl Sim<'_> {
    /// The store's answer to one call of the current request.
    fn store_answers(&mut self) -> bool {
        match self.p.failures {
            Failures::Fixed => self.rng.unit() >= self.p.failure_rate,
            Failures::Load => self.store.call(self.now),
        }
    }

    /// One call received by `layer`; true if it succeeded.
    fn call(&mut self, layer: usize) -> bool {
        self.row.received[layer] += 1;
        if layer == 3 {
            let ok = self.store_answers();
            self.row.store_failed += u64::from(!ok);
            return ok;
        }
        let retries = [
            self.p.app_retries,
            self.p.api_retries,
            self.p.downstream_retries,
        ][layer];
        for attempt in 0..=retries {
            if attempt > 0 {
                if let Some(b) = &mut self.budgets {
                    if !b[layer].try_spend() {
                        return false;
                    }
                }
            }
            if self.call(layer + 1) {
                if let Some(b) = &mut self.budgets {
                    b[layer].on_success();
                }
                return true;
            }
        }
        false
    }
}

/// Per second of the run.
pub fn seconds(p: &RetryLayersParams, seed: u64) -> Vec<LayerSecond> {
    let budget = p
        .retry_budget
        .map(|ratio| RetryBudget::new(ratio, p.budget_tokens));
    let mut sim = Sim {
        p,
        rng: SplitMix64::new(seed),
        budgets: budget.map(|b| [b.clone(), b.clone(), b]),
        store: Store::new(p),
        now: 0.0,
        row: LayerSecond::default(),
    };
    let end = u64::from(p.seconds) * 1_000_000;
    let mut series: Series<LayerSecond> = Series::new(1_000_000, p.seconds as usize);
    let mut arrivals = Stream::new(p.arrivals, p.rate_per_s);
    let mut second = 0;
    loop {
        let now = arrivals.next(&mut sim.rng);
        if now >= end {
            break;
        }
        if now / 1_000_000 != second {
            *series.at(second * 1_000_000) = std::mem::take(&mut sim.row);
            second = now / 1_000_000;
        }
        sim.now = now as f64;
        let ok = sim.call(0);
        sim.row.requests += 1;
        sim.row.succeeded += u64::from(ok);
    }
    *series.at(second * 1_000_000) = std::mem::take(&mut sim.row);
    let mut rows = series.into_rows();
    for (t, r) in rows.iter_mut().enumerate() {
        r.t = t as u32;
    }
    rows
}

/// The load on each layer and what got through.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Loads {
    /// Calls per second received by app, API, downstream, store.
    pub per_s: [f64; 4],
    /// Store calls per request entering the app.
    pub amplification: f64,
    /// Share of the app's requests that succeeded.
    pub success: f64,
}

pub fn loads_of(p: &RetryLayersParams, series: &[LayerSecond]) -> Loads {
    let sum = |f: &dyn Fn(&LayerSecond) -> u64| series.iter().map(f).sum::<u64>();
    let received: [u64; 4] = std::array::from_fn(|i| sum(&|s| s.received[i]));
    let n = sum(&|s| s.requests).max(1);
    let secs = f64::from(p.seconds);
    Loads {
        per_s: received.map(|r| r as f64 / secs),
        amplification: received[3] as f64 / n as f64,
        success: sum(&|s| s.succeeded) as f64 / n as f64,
    }
}

pub fn loads(p: &RetryLayersParams, seed: u64) -> Loads {
    loads_of(p, &seconds(p, seed))
}

/// One attempt of the top caller against its deadline.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AttemptTiming {
    pub attempt: u32,
    pub starts_ms: f64,
    /// Time left before the deadline when it starts (negative: after it).
    pub left_ms: f64,
    /// It can be answered before the deadline.
    pub fits: bool,
}

/// The top caller's attempts against its deadline, when every attempt before the last
/// times out: attempt k starts at (k-1) x (timeout + wait).
pub fn deadline(p: &RetryLayersParams) -> Vec<AttemptTiming> {
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    let step = ms(p.attempt_timeout) + ms(p.retry_wait);
    (0..=p.app_retries)
        .map(|k| {
            let starts = f64::from(k) * step;
            let left = ms(p.deadline) - starts;
            AttemptTiming {
                attempt: k + 1,
                starts_ms: starts,
                left_ms: left,
                fits: left >= ms(p.answer_latency),
            }
        })
        .collect()
}
