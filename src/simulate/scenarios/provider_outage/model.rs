//! The tick model of `provider-outage`, on the kernel's clock (one unit a tick), and what
//! a run reports. Each tick the calls that arrive go to the provider ([`super::provider`]):
//! refused while it is down; otherwise taken in and worked on until they are answered or
//! their callers' timeout runs out. A failed call is tried again after its client's retry
//! policy, rounded up to whole ticks.

use super::params::ProviderOutageParams;
use super::provider::{Provider, TickEnd};
use crate::simulate::kernel::clock::{Clock, Stepped};
use crate::simulate::kernel::rng::SplitMix64;
use serde::Serialize;

/// One tick of the run.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct OutageTick {
    pub tick: u64,
    /// First tries of calls sent in this tick.
    pub new: u64,
    pub retries: u64,
    pub served: u64,
    pub failed: u64,
    pub given_up: u64,
    /// Clients whose call has failed and not yet gone through, at the end of the tick.
    pub waiting: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ProviderOutageReport {
    /// What it ran with.
    pub params: ProviderOutageParams,
    /// When the provider went down and came back, on the tick.
    pub down_from_s: f64,
    pub back_at_s: f64,
    pub duration_s: f64,
    /// The most requests in one tick from the provider's return on, and when.
    pub peak_after_back: u64,
    pub peak_after_back_at_s: f64,
    pub calls: u64,
    /// Every request sent: first tries and retries.
    pub requests: u64,
    pub retries: u64,
    pub served: u64,
    pub given_up: u64,
    pub waiting_at_end: u64,
    /// From the provider's return until every client's call has gone through and nothing
    /// fails any more; none if that did not happen within the run.
    pub recovered_after_s: Option<f64>,
    pub series: Vec<OutageTick>,
}

/// The tick in milliseconds.
pub fn tick_ms(p: &ProviderOutageParams) -> f64 {
    p.tick.as_secs_f64() * 1000.0
}

pub fn run(p: &ProviderOutageParams, seed: u64) -> ProviderOutageReport {
    let mut rng = SplitMix64::new(seed);
    let ticks = p.ticks(p.duration);
    let period = p.ticks(p.period).max(1);
    let (down_from, back) = (p.ticks(p.down_from), p.ticks(p.down_to));
    let policy = p.retry_policy();
    let mut clock: Clock<u32, Stepped> = Clock::new(p.ticks(p.cap).max(period));
    for c in 0..p.clients {
        clock.schedule(p.ticks(p.first_call), c);
    }
    let mut provider = Provider::new(p.capacity_per_tick, p.ticks(p.timeout), p.shed);
    // Failed tries of each client's current call.
    let mut tries = vec![0u32; p.clients as usize];
    let mut waiting = 0u64;
    let mut series = Vec::with_capacity(ticks as usize);
    let mut out = TickEnd::default();
    for t in 0..ticks {
        let mut batch = clock.take(t);
        let mut row = OutageTick {
            tick: t,
            ..OutageTick::default()
        };
        for &c in &batch {
            if tries[c as usize] == 0 {
                row.new += 1;
            } else {
                row.retries += 1;
            }
        }
        if t >= down_from && t < back {
            provider.down(&batch, &mut out);
        } else {
            let room = provider.room();
            if p.shed && batch.len() > room && room > 0 {
                rng.shuffle(&mut batch);
            }
            provider.tick(t, &batch, &mut out);
        }
        clock.give_back(batch);
        for &c in &out.served {
            let tried = &mut tries[c as usize];
            row.served += 1;
            waiting -= u64::from(*tried > 0);
            *tried = 0;
            clock.schedule(t + period, c);
        }
        for &c in &out.failed {
            let tried = &mut tries[c as usize];
            row.failed += 1;
            waiting += u64::from(*tried == 0);
            *tried += 1;
            let next = if p.max_attempts > 0 && *tried >= p.max_attempts {
                row.given_up += 1;
                waiting -= 1;
                *tried = 0;
                t + period
            } else {
                t + policy.delay_units(*tried, p.tick, || rng.unit())
            };
            clock.schedule(next, c);
        }
        out.served.clear();
        out.failed.clear();
        row.waiting = waiting;
        series.push(row);
    }
    report(p, series, down_from, back)
}

fn report(
    p: &ProviderOutageParams,
    series: Vec<OutageTick>,
    down_from: u64,
    back: u64,
) -> ProviderOutageReport {
    let tick_s = p.tick.as_secs_f64();
    let arriving = |r: &OutageTick| r.new + r.retries;
    let peak = series
        .iter()
        .skip(back as usize)
        .max_by_key(|r| (arriving(r), std::cmp::Reverse(r.tick)));
    let last_bad = series
        .iter()
        .rposition(|r| r.failed > 0 || r.waiting > 0)
        .map_or(0, |i| i as u64 + 1);
    let recovered_at = last_bad.max(back);
    let recovered =
        (recovered_at < series.len() as u64).then(|| (recovered_at - back) as f64 * tick_s);
    let sum = |f: fn(&OutageTick) -> u64| series.iter().map(f).sum::<u64>();
    ProviderOutageReport {
        params: p.clone(),
        down_from_s: down_from as f64 * tick_s,
        back_at_s: back as f64 * tick_s,
        duration_s: series.len() as f64 * tick_s,
        peak_after_back: peak.map_or(0, arriving),
        peak_after_back_at_s: peak.map_or(0.0, |r| r.tick as f64 * tick_s),
        calls: sum(|r| r.new),
        requests: sum(|r| r.new + r.retries),
        retries: sum(|r| r.retries),
        served: sum(|r| r.served),
        given_up: sum(|r| r.given_up),
        waiting_at_end: series.last().map_or(0, |r| r.waiting),
        recovered_after_s: recovered,
        series,
    }
}
