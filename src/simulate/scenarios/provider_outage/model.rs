//! The tick model of `provider-outage` and what a run reports.

use super::params::ProviderOutageParams;
use super::RetryPolicy;
use crate::simulate::kernel::rng::SplitMix64;
use serde::Serialize;

/// One tick of the run.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct OutageTick {
    pub tick: u64,
    /// New calls sent in this tick.
    pub new: u64,
    pub retries: u64,
    pub served: u64,
    pub failed: u64,
    pub given_up: u64,
    /// Calls that failed and wait for their next try, at the end of the tick.
    pub waiting: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ProviderOutageReport {
    pub scenario: &'static str,
    pub seed: u64,
    pub policy: RetryPolicy,
    pub policy_description: String,
    pub clients: u32,
    pub period_s: f64,
    pub tick_ms: f64,
    pub capacity_per_tick: u32,
    pub down_from_s: f64,
    /// Requests per tick while healthy (before the outage).
    pub healthy_per_tick: f64,
    pub back_at_s: f64,
    /// The most requests in one tick from the provider's return on, and when.
    pub peak_after_back: u64,
    pub peak_after_back_at_s: f64,
    pub peak_during_outage: u64,
    pub calls: u64,
    /// Every request sent: first tries and retries.
    pub requests: u64,
    pub retries: u64,
    pub served: u64,
    pub given_up: u64,
    pub waiting_at_end: u64,
    /// From the provider's return until no call is waiting for a retry and nothing fails;
    /// none if that did not happen within the run.
    pub recovered_after_s: Option<f64>,
    pub series: Vec<OutageTick>,
}

pub fn run(p: &ProviderOutageParams, seed: u64) -> ProviderOutageReport {
    let mut rng = SplitMix64::new(seed);
    let ticks = p.ticks(p.duration);
    let period = p.ticks(p.period).max(1);
    let (down_from, down_to) = (p.ticks(p.down_from), p.ticks(p.down_to));
    let down = |t: u64| t >= down_from && t < down_to;
    // due[t]: tries (of calls that failed before) to send in tick t, as failed-try counts.
    let mut due: Vec<Vec<u32>> = vec![Vec::new(); ticks as usize];
    let mut series = Vec::with_capacity(ticks as usize);
    let mut waiting: u64 = 0;
    let mut batch: Vec<u32> = Vec::new();
    for t in 0..ticks {
        let new = (0..u64::from(p.clients))
            .filter(|i| i % period == t % period)
            .count() as u64;
        batch.clear();
        batch.extend(std::iter::repeat_n(0u32, new as usize));
        let retries = std::mem::take(&mut due[t as usize]);
        waiting -= retries.len() as u64;
        batch.extend(retries.iter().copied());
        let n = batch.len() as u64;
        let served = if down(t) {
            0
        } else if n <= u64::from(p.capacity_per_tick) {
            n
        } else {
            u64::from(p.overload_served)
        };
        // Which requests get through when there are too many: a seeded shuffle.
        for i in (1..batch.len()).rev() {
            let j = rng.below(i as u64 + 1) as usize;
            batch.swap(i, j);
        }
        let mut row = OutageTick {
            tick: t,
            new,
            retries: retries.len() as u64,
            served,
            failed: n - served,
            ..OutageTick::default()
        };
        for &failed_before in &batch[served as usize..] {
            let tries = failed_before + 1;
            if p.max_attempts > 0 && tries >= p.max_attempts {
                row.given_up += 1;
                continue;
            }
            let at = t + p.delay_ticks(tries, &mut rng);
            if let Some(slot) = due.get_mut(at as usize) {
                slot.push(tries);
            }
            waiting += 1;
        }
        row.waiting = waiting;
        series.push(row);
    }
    report(p, seed, series, down_from, down_to)
}

fn report(
    p: &ProviderOutageParams,
    seed: u64,
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
    let healthy: Vec<&OutageTick> = series.iter().take(down_from as usize).collect();
    let recovered = series
        .iter()
        .skip(back as usize)
        .find(|r| r.failed == 0 && r.waiting == 0)
        .map(|r| (r.tick + 1 - back) as f64 * tick_s);
    let sum = |f: fn(&OutageTick) -> u64| series.iter().map(f).sum::<u64>();
    ProviderOutageReport {
        scenario: "provider-outage",
        seed,
        policy: p.policy,
        policy_description: p.policy.describe(p),
        clients: p.clients,
        period_s: p.period.as_secs_f64(),
        tick_ms: tick_s * 1000.0,
        capacity_per_tick: p.capacity_per_tick,
        down_from_s: down_from as f64 * tick_s,
        healthy_per_tick: healthy.iter().map(|r| arriving(r)).sum::<u64>() as f64
            / healthy.len().max(1) as f64,
        back_at_s: back as f64 * tick_s,
        peak_after_back: peak.map_or(0, arriving),
        peak_after_back_at_s: peak.map_or(0.0, |r| r.tick as f64 * tick_s),
        peak_during_outage: series
            .iter()
            .skip(down_from as usize)
            .take((back - down_from) as usize)
            .map(arriving)
            .max()
            .unwrap_or(0),
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
