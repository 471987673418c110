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
//!   D x outage >= 3 C / cold, and it catches no more than the workers there are;
//! - still stuck once warm ([`caught_for_warming`]): the service comes back cold and
//!   warms with its completions, abandoned work included (`replicas x warm_after` of
//!   them), while its overload threshold rises with it to what it answers warm within the
//!   client timeout T, `C T`. The stuck state holds only if the queue is still past that
//!   when the service is warm. The caught clients, refused while it was down, come back
//!   within a retry delay d; the cold service answers at most `C T / cold` of them in
//!   time, and the rest, `L`, send once a cycle `T + d` (at least `L t / (T + d)`
//!   arrivals by `t`). Overloaded, it completes `C / (k m)` a second with its cold
//!   multiplier `m` falling from `cold` to 1 as it warms, so it is warm after
//!   `t_w = replicas x warm_after x k (1 + cold) / (2 C)`, its queue then at least
//!   `L t_w / (T + d) - replicas x warm_after`: 1.5x `C T` needs the outage to catch
//!   `N_w = C T / cold + (T + d)(1.5 C T + replicas x warm_after) / t_w`. It binds on wide
//!   services: a replica answers `concurrency / 40 ms` requests within the 1 s timeout,
//!   400 at concurrency 16, more than the 300 it warms after, so it is warm before its
//!   queue passes its warm threshold unless the loop is larger. Left out, each making
//!   `N_w` larger than needed: first attempts from clients the outage did not catch
//!   (which fail too and join the loop), and the first wave arriving all at once;
//! - so the outage catches `N = max(3 C / cold, N_w)`, and W = max(3 C / min(k, cold),
//!   N_w), rounded up, plus one;
//! - demand D is 80% of C / (cold x k), so the plan's first admit rate lets it through,
//!   and the outage is what that demand needs to catch N, `N / D` s plus one, within
//!   3-15 s (with `N = 3 C / cold`: 3.75 k s plus one). Where the 15 s cap would catch too
//!   few (no late-attach point with a high k would ever be stuck before anyone looked),
//!   demand rises to N / 14 s instead, above the first admit rate (the ramp lets the rest
//!   through; up to 34% above it on seeds 1, 2, 7 and 30: at most 1.07 C / (cold x k),
//!   under 72% of the cold capacity C / cold since k >= 1.5, as `rehearse::harsher`
//!   asks).
//! - steady phase before the trigger: a real service has been healthy and warm before its
//!   incident, and a late look back (a Prometheus retaining its scrapes) measures its
//!   healthy reference there. The service starts cold and each replica warms over its
//!   own `service.warm_after` requests; balanced, the replicas together warm after
//!   `replicas x warm_after` requests, at demand D that is `replicas x warm_after / D`
//!   seconds. Then one rate window (the built-in signals' 5 s, which the service time is
//!   a mean over and the estimator holds warmth over) until a scrape's service time is
//!   all warm work, and one scrape more, so two such scrapes make a healthy period
//!   (`detect::lookback::MIN_HEALTHY_SNAPSHOTS`). Written as the scenario's `steady`,
//!   the simulator's run waits for it before the outage (`rehearse::predict::lead_in`).
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
    /// Steady state before the trigger: long enough to be seen healthy and warm.
    #[serde(with = "crate::util::duration::serde_human")]
    pub steady: Duration,
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
    let warm = caught_for_warming(cap, cold, k, replicas);
    // Caught by the outage: 1.5x what the cold service answers in a cycle, and what keeps
    // the queue over the warm threshold while the service warms (module doc).
    let caught = (3.0 * cap / cold).max(warm);
    let workers = (3.0 * cap / k.min(cold)).max(warm).ceil() as u32 + 1;
    let first_admit = 0.8 * cap / (cold * k);
    let outage_s = (caught / first_admit + 1.0).clamp(3.0, 15.0);
    let demand = first_admit.max(caught / (outage_s - 1.0));
    // Whole milliseconds, as the file writes them (truncated: demand only rises).
    let interval = Duration::from_millis((f64::from(workers) / demand * 1000.0) as u64);
    let outage = Duration::from_millis((outage_s * 1000.0) as u64);
    // The demand the file's interval gives (the interval was truncated to whole ms).
    let demand = f64::from(workers) / interval.as_secs_f64();
    let steady = steady_phase(replicas, demand);
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
        steady,
    }
}

/// The clients the outage must catch so that the service, restarted cold, is still
/// overloaded when its caches are warm (module doc): the cold service answers at most
/// `C T / cold` of the first wave in time; the rest, `L`, send once a cycle `T + d`; the
/// service warms after `replicas x warm_after` completions (useful or abandoned), done
/// overloaded at `C / (k m)` with the cold multiplier `m` falling from `cold` to 1, so in
/// `t_w = replicas x warm_after x k (1 + cold) / (2 C)`; and then its queue,
/// `L t_w / (T + d) - replicas x warm_after`, must be 1.5x what the warm service answers
/// within the timeout, `C T`.
pub fn caught_for_warming(cap: f64, cold: f64, k: f64, replicas: u32) -> f64 {
    let laptop = Scenario::default();
    let t = laptop.workers.timeout.as_secs_f64();
    let cycle = t + laptop.retry_delay().as_secs_f64();
    let warm_after = (laptop.service.warm_after * u64::from(replicas)) as f64;
    let warm_s = warm_after * k * (1.0 + cold) / (2.0 * cap);
    cap * t / cold + cycle * (1.5 * cap * t + warm_after) / warm_s
}

/// The steady phase a point needs before its trigger to be seen healthy and warm (module
/// doc): its replicas' `warm_after` requests at `demand` req/s, one rate window, one
/// scrape; whole milliseconds, rounded up.
pub fn steady_phase(replicas: u32, demand: f64) -> Duration {
    let laptop = Scenario::default();
    let warm_s = (laptop.service.warm_after * u64::from(replicas)) as f64 / demand;
    let rate_window = crate::util::duration::parse(crate::detect::default_signals::RATE_WINDOW)
        .unwrap_or_default();
    let s = warm_s + (rate_window + laptop.scrape_interval).as_secs_f64();
    Duration::from_millis((s * 1000.0).ceil() as u64)
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
             workers:\n  count: {}\n  interval: {}ms\n  attempt_header: {}\noutage: {}ms\nsteady: {}ms\n",
            self.name(),
            self.replicas,
            self.concurrency,
            self.cold,
            self.k,
            self.workers,
            self.interval.as_millis(),
            if self.header { "x-attempt" } else { "none" },
            self.outage.as_millis(),
            self.steady.as_millis(),
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
            assert_eq!(sc.steady, p.steady);
        }
    }

    /// The steady phase covers the replicas' warming at the point's demand, a rate window
    /// and a scrape (module doc), and the simulator's run of the point waits for it: at
    /// the outage the simulated service has been warm for the rate window and a scrape.
    #[test]
    fn the_steady_phase_sees_the_service_healthy_and_warm_before_the_trigger() {
        let laptop = Scenario::default();
        for p in draw(40, 11) {
            let sc = p.scenario();
            let demand = f64::from(p.workers) / p.interval.as_secs_f64();
            let warm_s = (laptop.service.warm_after * u64::from(p.replicas)) as f64 / demand;
            let after_warm = p.steady.as_secs_f64() - warm_s;
            assert!((5.5..5.502).contains(&after_warm), "{p:?}: {after_warm}");
            let params = crate::rehearse::predict::system_params(&sc, Duration::ZERO, true, None);
            assert!(params.cold_start, "the demo service starts cold");
            assert!(params.outage_at >= p.steady, "{p:?}: {params:?}");
            let run = crate::simulate::run_system(
                &crate::simulate::SystemParams {
                    duration: params.outage_at,
                    ..params.clone()
                },
                None,
                1,
            );
            // Cold at first (capacity below the warm one), warm before the outage.
            let warm = sc.capacity_per_s();
            let first = run.series.first().unwrap().capacity;
            assert!(first < 0.9 * warm, "{p:?}: starts at {first} of {warm}");
            let outage_s = params.outage_at.as_secs() as usize;
            let ready = (warm_s.ceil() as usize + 1).min(outage_s);
            for s in &run.series[ready..outage_s] {
                assert!(
                    (s.capacity - warm).abs() < 0.01 * warm,
                    "{p:?} at {}: {s:?}",
                    s.t
                );
            }
        }
    }

    /// Every drawn point's true system gets stuck in the simulator and stays stuck with
    /// no procedure, whatever its width: a point the model leaves recovering by itself
    /// measures no estimator. Seeds 1 and 2 drew wide services (concurrency 13-16) whose
    /// caches warmed, over `warm_after` requests a replica, before their queue passed
    /// what a warm replica answers within the timeout. Every point of concurrency 12-16,
    /// and every fourth of the rest.
    #[test]
    fn every_drawn_point_gets_stuck_in_the_simulator() {
        let mut bad = Vec::new();
        let mut widths = std::collections::BTreeSet::new();
        for seed in [1, 2] {
            for p in draw(300, seed)
                .into_iter()
                .filter(|p| p.concurrency >= 12 || p.n % 4 == 0)
            {
                widths.insert(p.concurrency);
                let sc = p.scenario();
                let params =
                    crate::rehearse::predict::system_params(&sc, Duration::ZERO, true, None);
                let after = sc.attach_after.unwrap_or_default() + Duration::from_secs(30);
                let run = crate::simulate::run_system(
                    &crate::simulate::SystemParams {
                        duration: params.outage_at + params.outage + after,
                        ..params.clone()
                    },
                    None,
                    seed.wrapping_add(p.n as u64),
                );
                if run.recovery.recovered {
                    bad.push(format!(
                        "seed {seed} {}: {} workers, outage {:?}: recovered by itself {:?} s after",
                        p.describe(),
                        p.workers,
                        p.outage,
                        run.recovery.time_to_recover_s
                    ));
                }
            }
        }
        assert_eq!(widths, (4..=16).collect(), "every width drawn");
        assert!(
            bad.is_empty(),
            "{} not stuck:\n{}",
            bad.len(),
            bad.join("\n")
        );
    }
}
