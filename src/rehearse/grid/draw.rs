//! The scenario grid's one generator: rehearsal scenarios drawn from the space users have,
//! not the four shipped ones. `recover simulate --grid` measures the estimator on its
//! points and `scripts/bench-rehearse.sh --sample` rehearses a few of them for real, both
//! from this code, so the two cannot describe different grids.
//!
//! Each point draws the cold factor (1.5-4), the overload factor (true k, 1.5-5), the
//! replicas (1-4), the concurrency (4-16), clients with or without attempt headers, and
//! attached at the trigger or 60 s after it. The rest follows from the model
//! (docs/design/arithmetic.md), never from a shipped scenario, with the 1.5x margin of
//! `rehearse::harsher` over each threshold (a timeout plus a retry delay is 2 s):
//!
//! - capacity C = replicas x concurrency / 40 ms;
//! - stuck: the retry loop W / 2 s must be 1.5x the overloaded warm capacity C / k, so
//!   W >= 3 C / k;
//! - trigger: the outage must catch 1.5x what the cold service answers in 2 s,
//!   D x outage >= 3 C / cold, and it catches no more than the workers there are, so also
//!   W >= 3 C / cold: W = 3 C / min(k, cold), rounded up, plus one;
//! - demand D is 80% of C / (cold x k), so the plan's first admit rate lets it through,
//!   and the outage is what that demand needs, 3.75 k s plus one, within 3-15 s. Past
//!   k = 3.7 the 15 s cap would catch too few (no late-attach point with a high k would
//!   ever be stuck before anyone looked): there demand rises to 3 C / (cold x 14 s)
//!   instead, above the first admit rate by up to 7% (the ramp lets the rest through),
//!   still a fifth of the cold capacity.
//!
//! Nothing here checks a point against `rehearse::harsher::not_stuck`: the test
//! `grid_draws::every_drawn_point_gets_stuck_on_paper` does, so the derivation above is
//! checked by the rehearsal's own arithmetic rather than filtered by it.

use crate::rehearse::scenario::Scenario;
use crate::simulate::kernel::rng::SplitMix64;
use std::fmt::Write;
use std::time::Duration;

/// The demo service's healthy time per request: the grid varies the rest.
const SERVICE_TIME_S: f64 = 0.040;

/// One drawn point: the numbers drawn and those derived from them.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Point {
    /// 1-based, in draw order: `grid-<n>`.
    pub n: usize,
    /// Cold factor: a restarted replica's cost multiplier.
    pub cold: f64,
    /// Overload factor: the true k.
    pub k: f64,
    pub replicas: u32,
    pub concurrency: u32,
    /// Clients send an attempt header (`x-attempt`), or none.
    pub header: bool,
    /// Attached 60 s after the trigger ended.
    pub late: bool,
    pub workers: u32,
    /// Time between a worker's polls.
    #[serde(with = "crate::util::duration::serde_human")]
    pub interval: Duration,
    #[serde(with = "crate::util::duration::serde_human")]
    pub outage: Duration,
}

/// A draw rounded to two decimals, as a scenario file writes it.
fn two_decimals(v: f64) -> f64 {
    (v * 100.0).round() / 100.0
}

/// Uniform in `[lo, hi)`.
fn uniform(rng: &mut SplitMix64, lo: f64, hi: f64) -> f64 {
    lo + (hi - lo) * rng.unit()
}

/// Draw `n` points from `seed`; the same seed gives the same points.
pub fn draw(n: usize, seed: u64) -> Vec<Point> {
    let mut rng = SplitMix64::new(seed);
    (1..=n).map(|i| one(&mut rng, i)).collect()
}

fn one(rng: &mut SplitMix64, n: usize) -> Point {
    let cold = two_decimals(uniform(rng, 1.5, 4.0));
    let k = two_decimals(uniform(rng, 1.5, 5.0));
    let replicas = rng.between(1, 4) as u32;
    let concurrency = rng.between(4, 16) as u32;
    let header = rng.below(2) == 0;
    let late = rng.below(2) == 1;
    let cap = f64::from(replicas * concurrency) / SERVICE_TIME_S;
    let workers = (3.0 * cap / k.min(cold)).ceil() as u32 + 1;
    let outage_s = (3.75 * k + 1.0).clamp(3.0, 15.0);
    let demand = (0.8 * cap / (cold * k)).max(3.0 * cap / (cold * (outage_s - 1.0)));
    // Whole milliseconds, as the file writes them (truncated: demand only rises).
    let interval = Duration::from_millis((f64::from(workers) / demand * 1000.0) as u64);
    let outage = Duration::from_millis((outage_s * 1000.0) as u64);
    Point {
        n,
        cold,
        k,
        replicas,
        concurrency,
        header,
        late,
        workers,
        interval,
        outage,
    }
}

impl Point {
    pub fn name(&self) -> String {
        format!("grid-{}", self.n)
    }

    /// The rehearsal scenario file: only what differs from the laptop defaults.
    pub fn yaml(&self) -> String {
        let mut o = String::new();
        let _ = write!(
            o,
            "name: {}\nreplicas: {}\nservice:\n  concurrency: {}\n  cold_factor: {}\n  overload_factor: {}\n\
             workers:\n  count: {}\n  interval: {}ms\n  attempt_header: {}\noutage: {}ms\n",
            self.name(),
            self.replicas,
            self.concurrency,
            self.cold,
            self.k,
            self.workers,
            self.interval.as_millis(),
            if self.header { "x-attempt" } else { "none" },
            self.outage.as_millis(),
        );
        if self.late {
            o.push_str("attach_after: 60s\n");
        }
        o
    }

    /// The scenario the file describes, as the rehearsal loads it.
    pub fn scenario(&self) -> Scenario {
        Scenario::parse(&self.yaml(), &self.name())
            .expect("a drawn point is a valid scenario (tested)")
    }

    /// The drawn numbers in one line: cold / k / replicas / concurrency / header / attached.
    pub fn describe(&self) -> String {
        format!(
            "cold {:.2} k {:.2} replicas {} concurrency {:>2} {:<9} {}",
            self.cold,
            self.k,
            self.replicas,
            self.concurrency,
            if self.header {
                "x-attempt"
            } else {
                "no-header"
            },
            if self.late { "60s-late" } else { "at-trigger" }
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_seed_draws_the_same_points_within_the_ranges() {
        let a = draw(200, 7);
        assert_eq!(a, draw(200, 7));
        assert_ne!(a, draw(200, 8));
        for p in &a {
            assert!((1.5..=4.0).contains(&p.cold), "{p:?}");
            assert!((1.5..=5.0).contains(&p.k), "{p:?}");
            assert!((1..=4).contains(&p.replicas) && (4..=16).contains(&p.concurrency));
            assert!(p.outage >= Duration::from_secs(3) && p.outage <= Duration::from_secs(15));
        }
        for flag in [|p: &Point| p.header, |p: &Point| p.late] {
            let on = a.iter().filter(|p| flag(p)).count();
            assert!((50..150).contains(&on), "{on} of 200");
        }
    }

    #[test]
    fn a_point_is_the_scenario_its_file_says() {
        for p in draw(50, 3) {
            let sc = p.scenario();
            assert_eq!(sc.name, p.name());
            assert_eq!((sc.replicas, sc.workers.count), (p.replicas, p.workers));
            assert_eq!(sc.service.overload_factor, p.k);
            assert_eq!(sc.service.cold_factor, p.cold);
            assert_eq!((sc.workers.interval, sc.outage), (p.interval, p.outage));
            assert_eq!(sc.attach_after.is_some(), p.late);
        }
    }
}
